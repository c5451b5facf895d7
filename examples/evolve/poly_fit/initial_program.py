# f(x) = A*x*x + B*x + C; the tunable coefficients are the upper-case names.
A = 0
B = 0
C = 0


def f(x):
    return A * x * x + B * x + C

# f(x) = A*x + B; the tunable coefficients are the upper-case names.
A = 0
B = 0


def f(x):
    return A * x + B

"""Search beyond best-of-n, budgeted in generated tokens: ``vpo eval --search bon|beam|tree --budget-tokens B``.

Every search spends at most about ``B`` generated tokens per prompt and records, for every complete
answer it produced, the number of tokens generated (by every call of the search so far, in call
order) when that answer was finished. best@b is then the best true ``w*ᵀr`` among the answers found
within ``b`` tokens, the same definition for every search, so curves compare at matched tokens.

* ``bon``: whole rollouts (m answers each), independently sampled, until the budget is spent.
* ``beam``: the completion is written in steps (``answer``: up to the next closing answer tag;
  ``tokens:N``: N tokens; ``delim:TEXT``: up to TEXT). Each of the ``beam_width`` partial candidates
  is expanded by ``expand`` samples of its next step; the children are scored by the step scorer
  (:mod:`vpo.search.step.score`), aggregated over their steps, and the best ``beam_width`` unfinished
  ones are kept. A finished child (its m-th answer closed, EOS, or the rollout's
  ``max_new_tokens``) leaves the beam; when no candidate is left the beam restarts from the prompt.
* ``tree``: treequest's AB-MCTS-A (``tree_algo='abmcts'``) or best-first search (``'best_first'``)
  over the same steps. A node is the completion so far; a child adds one step to it, or, when the
  node is finished, revises it: the answer whose removal costs the step score least is dropped,
  the rest renumbered, and a new last answer written. A node's score is its aggregated step score,
  clipped to [0, 1] (treequest's scale). ``tree_batch`` > 1 asks treequest for that many expansions
  at once and writes them in one backend call (faster; the search sees their scores only after the
  batch). ``pip install -e ".[tree]"`` in the clone.

Token accounting: each generation call's tokens (``Generation.num_tokens``, through the first EOS
or stop string) are added once, in call order, whether its candidate is later kept or pruned. An
answer finished past ``B`` is never counted at ``B``; ``tokens_generated`` reports every call.

The budget in beam and tree: every call is fitted to what is left (:meth:`Stepper.fit`: rows x
per-row token limit <= the budget left; the best parents keep their samples when not all fit), so
they spend exactly ``B`` (a backend that counts each completion's tokens; an endpoint's choice
average may round). Over ``tokens:N`` and ``delim:TEXT`` steps they step while the budget left holds
the next call and the tokens their best candidates (the beam; the tree's ``beam_width`` best open
nodes) need to close the answer each is writing, then spend the rest closing those answers
(:meth:`Stepper.finish`), so a small budget still ends in finished answers. An answer's expected
length is measured as the search goes (:meth:`Ledger.answer_tokens`); before any answer has closed
it is guessed as ``max_new_tokens / m`` and the first finishing call closes one candidate only.
bon sizes its calls from the rollouts so far and its last call may run past ``B``.

Simplifications: a continuation is the chat-formatted prompt plus the completion so far, re-encoded
by the backend (exact for a tokenizer that encodes a decoded text back to the same tokens, such as
the demo's character-level one); a revised node's text is rebuilt as
``<answer_1>..</answer_1><answer_2>..`` with nothing between the tags; an EOS exactly at a step's
token limit is taken for a step limit (the next step then continues the text).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from vpo._util import positive_int
from vpo.errors import UserError
from vpo.search.step.score import AGGREGATES, StepScorer, aggregate

__all__ = [
    "SEARCHES",
    "TREE_ALGOS",
    "Answer",
    "Candidate",
    "Ledger",
    "SearchConfig",
    "parse_step",
    "search_prompt",
    "require_treequest",
]

SEARCHES = ("bon", "beam", "tree")
SLACK = 1.5
"""A row closing an answer is given this many times the tokens the answer is expected to need (:meth:`Stepper.need`),
and the budget kept for closing answers holds as much."""
CALL_SEED_STRIDE = 104_729
"""A generation call's seed is the prompt's seed + this prime x the calls made for the prompt before it."""
TREE_ALGOS = ("abmcts", "best_first")
TREEQUEST_INSTALL = (
    'tree search needs treequest: pip install -e ".[tree]" in the clone (or pip install treequest==0.3.3)'
)


def require_treequest():
    """The ``treequest`` module, or a one-line :class:`UserError` naming the install."""
    try:
        import treequest
    except ImportError:
        raise UserError(TREEQUEST_INSTALL) from None
    return treequest


@dataclass
class SearchConfig:
    """How ``vpo eval --search`` searches (saved with the run)."""

    search: str = "bon"
    """bon: independent rollouts (vpo eval: today's pool unless --budget-tokens is given); beam: step-wise
    beam search by a step scorer; tree: treequest's AB-MCTS or best-first over the same steps
    (pip install -e ".[tree]")."""
    budget_tokens: int | None = None
    """Generated tokens per prompt the search may spend (required; with bon it runs the budgeted
    best-of-n that beam and tree are compared to)."""
    step: str = "answer"
    """What a search step writes: answer (up to the next closing answer tag: every step finishes an answer), tokens:N
    or delim:TEXT (beam and tree then close their best candidates' answers before the budget ends)."""
    beam_width: int = 4
    """Beam: partial candidates kept; tree over token or delimiter steps: the best open nodes whose answers the
    end of the budget closes."""
    expand: int = 4
    """Beam: samples of the next step per candidate (and of each answer closed at the end of the budget);
    best_first tree: children per expansion."""
    step_scorer: str | None = None
    """task (the task's step_score; the default when it has one), verifier (the task's verifier on
    complete answers; the default otherwise) or module:function taking (example, partial_text) ->
    vector or number."""
    step_aggregate: str = "last"
    """A candidate's score from its steps' scores: last, min or prod."""
    tree_algo: str = "abmcts"
    """Tree: treequest's AB-MCTS-A (abmcts) or best-first search (best_first)."""
    tree_batch: int = 1
    """Tree: expansions chosen together and generated in one backend call (1: one at a time)."""
    max_new_tokens: int = 256
    """Tokens of one whole rollout (all m answers), as for best-of-n."""
    num_answers: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.search not in SEARCHES:
            raise UserError(f"--search {self.search!r}: choose one of {', '.join(SEARCHES)}")
        if self.budget_tokens is None:
            raise UserError(
                f"--search {self.search} needs --budget-tokens B: the generated tokens per prompt it may spend"
            )
        if self.step_aggregate not in AGGREGATES:
            raise UserError(f"--step-aggregate {self.step_aggregate!r}: choose one of {', '.join(AGGREGATES)}")
        if self.tree_algo not in TREE_ALGOS:
            raise UserError(f"--tree-algo {self.tree_algo!r}: choose one of {', '.join(TREE_ALGOS)}")
        for name in ("budget_tokens", "beam_width", "expand", "max_new_tokens", "num_answers", "tree_batch"):
            positive_int(getattr(self, name), f"--{name.replace('_', '-')}", error=UserError)
        parse_step(self.step)

    def public(self) -> dict:
        return asdict(self)


def parse_step(step: str) -> tuple[str, int | str | None]:
    """``('answer', None)``, ``('tokens', N)`` or ``('delim', TEXT)`` of a ``--step`` value."""
    if step == "answer":
        return "answer", None
    kind, sep, arg = str(step).partition(":")
    if kind == "tokens" and sep:
        try:
            n = int(arg)
        except ValueError:
            n = 0
        if n < 1:
            raise UserError(f"--step {step!r}: tokens:N takes an integer N >= 1, e.g. tokens:8")
        return "tokens", n
    if kind == "delim" and sep and arg:
        return "delim", arg.encode("utf-8").decode("unicode_escape")
    raise UserError(f"--step {step!r}: use answer, tokens:N (e.g. tokens:8) or delim:TEXT (e.g. 'delim:\\n')")


# ---------------------------------------------------------------------------------------------
# bookkeeping
# ---------------------------------------------------------------------------------------------


@dataclass
class Answer:
    """A complete answer the search produced: its text, true reward, and the tokens generated (by the
    whole search) when it was finished."""

    text: str
    reward: list[float]
    valid: bool
    tokens_at: int
    tokens_per_answer: float | None = None
    """Tokens of the completion that closed it, over the answers that completion holds: what one answer
    costs a rollout written on its own (the report's yardstick for how many answers best-of-n would
    finish in the budget)."""


@dataclass
class Candidate:
    """A partial (or finished) completion: its text, its tokens, its per-step scores."""

    text: str = ""
    tokens: int = 0
    scores: list[float] = field(default_factory=list)
    done: bool = False
    answers_registered: int = 0
    """Complete answers in ``text`` already handed to the ledger (not m, ``SearchConfig.num_answers``)."""


class Ledger:
    """Tokens spent (in call order) and the answers found, for one prompt."""

    def __init__(self, task, example, m: int) -> None:
        self.task, self.example, self.m = task, example, m
        self.spent = 0
        self.calls = 0
        self.answers: list[Answer] = []
        self._per_answer: list[float] = []
        self.score_errors = 0
        """Answers found whose scorer raised (kept as invalid zeros; :func:`run_search` warns)."""
        self.first_error: BaseException | None = None

    def charge(self, num_tokens: float) -> None:
        if num_tokens != num_tokens:  # NaN: an endpoint that reports no token counts
            raise UserError(
                "the backend reported no token count for a completion, so a token budget cannot be kept; give the "
                "endpoint's tokenizer or use a server that returns usage.completion_tokens"
            )
        self.spent += int(round(num_tokens))

    def register(self, cand: Candidate) -> None:
        """Hand the answers ``cand.text`` completed since the last call to the ledger, at ``self.spent``."""
        answers = self.task.parse(cand.text, self.m)
        new = answers[cand.answers_registered :]
        cand.answers_registered = len(answers)
        if not new:
            return
        rows = self.task.score_answers([self.example], [new])[0]
        d = self.task.d
        per = cand.tokens / len(answers)
        self._per_answer.append(per)
        for text, r in zip(new, rows):
            if isinstance(r, BaseException) or r is None:
                self.score_errors += 1
                self.first_error = self.first_error or (r if isinstance(r, BaseException) else None)
            ok = isinstance(r, np.ndarray) and r.shape == (d,)
            vec = [float(x) for x in r] if ok else [0.0] * d
            self.answers.append(Answer(text, vec, bool(ok), self.spent, per))

    @property
    def measured(self) -> bool:
        """Whether an answer has closed, so :meth:`answer_tokens` is a measurement."""
        return bool(self._per_answer)

    def answer_tokens(self, fallback: float) -> float:
        """Tokens one answer takes, as measured on the completions that closed answers so far (their tokens
        over their answers, mean); ``fallback`` before any did."""
        return float(np.mean(self._per_answer)) if self._per_answer else float(fallback)


# ---------------------------------------------------------------------------------------------
# stepping
# ---------------------------------------------------------------------------------------------


class Stepper:
    """Writes one step of many candidates of one prompt with a backend, charging the ledger.

    Every call of beam and tree is fitted to the budget left (:meth:`fit`): its rows times its per-row
    token limit never exceed it, so those searches spend at most ``budget_tokens``."""

    def __init__(self, gen, prompt, cfg: SearchConfig, task, ledger: Ledger, scorer: StepScorer, seed: int) -> None:
        self.gen, self.prompt, self.cfg, self.ledger, self.scorer = gen, prompt, cfg, ledger, scorer
        self.task = task
        self.example = ledger.example
        self.seed = seed
        self.kind, self.arg = parse_step(cfg.step)
        m = cfg.num_answers
        self.final_tags = ["</answer>"] if m == 1 else [f"</answer_{m}>"]
        tags = task.answer_format == "tags"
        self.answer_stop = (["</answer>"] if m == 1 else [f"</answer_{i}>" for i in range(1, m + 1)]) if tags else []
        """Where a finishing call stops: the end of the answer being written (EOS without answer tags)."""
        self.stop: list[str] = []
        if cfg.search == "bon":
            return
        if self.kind == "answer":
            if not tags:
                raise UserError(
                    f"--step answer needs the tags answer format; task {task.name!r} uses {task.answer_format!r}: "
                    "use --step tokens:N or delim:TEXT"
                )
            self.stop = list(self.answer_stop)
        else:  # a step also ends at the m-th answer's closing tag: nothing is written after it
            self.stop = ([self.arg] if self.kind == "delim" else []) + (self.final_tags if tags else [])
        if isinstance(prompt, list):
            raise UserError(
                "beam and tree search continue a partial completion, which the chat API cannot do: use --api "
                "completions with the endpoint"
            )

    # -- the budget ---------------------------------------------------------------------------------

    def _room(self, c: Candidate) -> int:
        return max(1, self.cfg.max_new_tokens - c.tokens)

    def need(self, c: Candidate) -> int:
        """Tokens ``c`` is expected to need to close the answer it is writing: the answers' measured length
        (:meth:`Ledger.answer_tokens`; before any answer closed, the rollout limit's share of one answer,
        ``max_new_tokens / m``) times the answers it will then hold, less what it has written; at least a
        quarter of an answer (it is running long), at most its room."""
        per = self.ledger.answer_tokens(self.cfg.max_new_tokens / self.cfg.num_answers)
        done = len(self.task.parse(c.text, self.cfg.num_answers)) if c.text else 0
        return int(min(self._room(c), max(math.ceil(per * (done + 1) - c.tokens), math.ceil(per / 4), 1)))

    def _after(self, c: Candidate) -> int:
        """Tokens ``c``'s answer is expected to need after its next step (0 once a ``tokens:N`` step closes it)."""
        return max(self.need(c) - self.arg, 0) if self.kind == "tokens" else self.need(c)

    def step_cost(self, parents: list[Candidate], n: int) -> int:
        """Tokens ``n`` next steps of each parent are expected to take: for ``tokens:N`` N each, or less where
        the answer is expected to close sooner (a step ends at its closing tag); else what closing the answer
        is expected to take."""
        if self.kind == "tokens":
            return n * sum(min(self.arg, self.need(c)) for c in parents)
        return n * sum(self.need(c) for c in parents)

    def must_finish(self, cands: list[Candidate], left: int, step: int) -> bool:
        """Whether the budget ``left`` no longer holds the next call (``step`` tokens, :meth:`step_cost`) and
        then what the answers of ``cands`` are expected to need after it to close (with :data:`SLACK`): the
        search then spends it closing them. Never for ``--step answer``, whose every step closes an answer."""
        if self.kind == "answer" or not cands:
            return False
        return left < step + SLACK * sum(self._after(c) for c in cands)

    def fit(self, parents: list[Candidate], n: int, left: int, finish: bool = False, keep_rows: bool = False):
        """``(parents, n, cap)`` of a call that spends at most ``left`` tokens: rows (parents x n) x cap <= left.

        A row is to be given what its step is expected to take with some slack: :data:`SLACK` x the tokens
        its answer is expected to need to close (:meth:`need`), at most N for ``tokens:N``. When the rows do not fit,
        the best parents (listed first) keep their ``n`` samples and the others wait, down to one row; every
        row's limit is then the budget left over the rows, where that is below its room (or N).
        ``keep_rows``: keep every row (the caller has at most ``left`` of them), only the limit shrinks."""
        full = max(1, min(self._room(c) for c in parents))
        if self.kind == "tokens" and not finish:
            full = min(full, self.arg)
        want = min(full, max(math.ceil(SLACK * self.need(c)) for c in parents))
        allowed = max(1, left // max(want, 1))
        if len(parents) * n > allowed and not keep_rows:
            parents, n = (parents[: allowed // n], n) if allowed >= n else (parents[:1], allowed)
        cap = max(1, min(full, left // (len(parents) * n)))
        return parents, n, cap

    # -- writing ------------------------------------------------------------------------------------

    def expand(self, parents: list[Candidate], n: int, cap: int | None = None, finish: bool = False):
        """``n`` sampled next steps of each parent (all unfinished), scored; in call order. ``cap``: the
        per-row token limit (:meth:`fit`; by default the step's, within the rollout's limit); ``finish``:
        write each parent's answer to its end (its closing tag) instead of one step."""
        full = max(1, min(self._room(c) for c in parents))
        if not finish and self.kind == "tokens":
            full = min(full, self.arg)
        cap = full if cap is None else min(cap, full)
        stop = self.answer_stop if finish else self.stop
        prompts = [self.prompt + p.text for p in parents]
        seed = self.seed + CALL_SEED_STRIDE * self.ledger.calls
        self.ledger.calls += 1
        kw = {"stop": stop} if stop else {}
        outs = self.gen.generate(prompts, n, seed=seed, max_new_tokens=cap, **kw)
        children = []
        for parent, row in zip(parents, outs):
            for g in row:
                self.ledger.charge(g.num_tokens)
                child = self._child(parent, g, cap, stop)
                self.ledger.register(child)
                children.append(child)
        return children

    def finish(self, cands: list[Candidate], left: int, n: int = 1) -> tuple[list[Candidate], int]:
        """Close the answer each of the best ``cands`` (listed best first) is writing, within ``left`` tokens:
        as many of them as their expected needs (with :data:`SLACK`) fit (at least one), with up to ``n``
        samples each where the
        budget holds them. Before any answer has closed (the need is then a guess from the rollout limit)
        only the best one is closed, once, which measures what an answer takes. ``(children, k)``: the
        first ``k`` of ``cands`` were closed, the caller keeps the others."""
        take, total = [], 0
        for c in cands if self.ledger.measured else cands[:1]:
            if take and SLACK * (total + self.need(c)) > left:
                break
            take.append(c)
            total += self.need(c)
        n = max(1, min(n, int(left // max(SLACK * total, 1)))) if self.ledger.measured else 1
        parents, n, cap = self.fit(take, n, left, finish=True)
        return self.expand(parents, n, cap, finish=True), len(parents)

    def _child(self, parent: Candidate, g, cap: int, stop: list[str]) -> Candidate:
        text = parent.text + g.text
        tokens = parent.tokens + int(round(g.num_tokens))
        hit_stop = any(g.text.endswith(s) for s in stop)
        eos = not hit_stop and int(round(g.num_tokens)) < cap
        done = eos or tokens >= self.cfg.max_new_tokens or any(t in text for t in self.final_tags)
        child = Candidate(text, tokens, list(parent.scores), done, parent.answers_registered)
        child.scores.append(self.scorer(self.example, text))
        return child

    def score(self, cand: Candidate) -> float:
        return aggregate(cand.scores, self.cfg.step_aggregate)


# ---------------------------------------------------------------------------------------------
# the searches
# ---------------------------------------------------------------------------------------------


def _bon(stepper: Stepper, budget: int) -> None:
    """Whole rollouts (ending at the m-th answer's closing tag) until the budget is spent, a few per call:
    at most what the budget left can hold."""
    cfg, ledger = stepper.cfg, stepper.ledger
    stop = stepper.final_tags if stepper.task.answer_format == "tags" else []
    rollouts = 0
    while ledger.spent < budget:
        per = ledger.spent / rollouts if rollouts else cfg.max_new_tokens  # tokens a rollout takes, so far
        n = max(1, min(64, math.ceil((budget - ledger.spent) / max(per, 1.0))))
        rollouts += n
        seed = stepper.seed + CALL_SEED_STRIDE * ledger.calls
        ledger.calls += 1
        kw = {"stop": stop} if stop else {}
        outs = stepper.gen.generate([stepper.prompt], n, seed=seed, max_new_tokens=cfg.max_new_tokens, **kw)
        for g in outs[0]:
            ledger.charge(g.num_tokens)
            ledger.register(Candidate(g.text, int(round(g.num_tokens)), [], True))


def _beam(stepper: Stepper, budget: int) -> None:
    """Step the beam while the budget holds a step and closing its answers; then close them (:meth:`Stepper.finish`)."""
    cfg, ledger = stepper.cfg, stepper.ledger
    beam = [Candidate()]
    while ledger.spent < budget:
        left, before = budget - ledger.spent, ledger.spent
        waiting: list[Candidate] = []  # beam members a finishing call left for later
        if stepper.must_finish(beam, left, stepper.step_cost(beam, cfg.expand)):
            children, closed = stepper.finish(beam, left, cfg.expand)
            waiting = beam[closed:]
        else:
            children = stepper.expand(*stepper.fit(beam, cfg.expand, left))
        if ledger.spent == before:  # a backend that counted no token: nothing would ever end the loop
            break
        alive = waiting + [c for c in children if not c.done]
        order = sorted(range(len(alive)), key=lambda i: (-stepper.score(alive[i]), i))
        beam = [alive[i] for i in order[: cfg.beam_width]] or [Candidate()]


def _drop_weakest(stepper: Stepper, cand: Candidate) -> Candidate:
    """A finished candidate's revision start: its answers but the one whose removal the step scorer misses least."""
    task, m = stepper.ledger.task, stepper.cfg.num_answers
    answers = task.parse(cand.text, m)
    if len(answers) <= 1:
        return Candidate()

    def text_of(xs):
        if m == 1:
            return "".join(f"<answer>{a}</answer>" for a in xs)
        return "".join(f"<answer_{i}>{a}</answer_{i}>" for i, a in enumerate(xs, start=1))

    rests = [answers[:i] + answers[i + 1 :] for i in range(len(answers))]
    kept = max(range(len(rests)), key=lambda i: (stepper.scorer(stepper.example, text_of(rests[i])), i))
    text = text_of(rests[kept])
    tokens = min(round(cand.tokens * len(text) / max(len(cand.text), 1)), stepper.cfg.max_new_tokens - 1)
    return Candidate(text, tokens, list(cand.scores), False, len(rests[kept]))


def _tree_algo(cfg: SearchConfig):
    require_treequest()
    import treequest

    if cfg.tree_algo == "abmcts":
        return treequest.ABMCTSA()
    from treequest.algos.best_first_search import BestFirstSearchAlgo

    return BestFirstSearchAlgo(num_samples=cfg.expand)


def _tree(stepper: Stepper, budget: int) -> None:
    """Expand the tree while the budget holds a step and closing its best open nodes' answers (the
    ``beam_width`` best unfinished nodes by score); then close those (:meth:`Stepper.finish`)."""
    cfg, ledger = stepper.cfg, stepper.ledger
    algo = _tree_algo(cfg)
    open_nodes: list[Candidate] = []  # unfinished nodes not yet closed by a finishing call

    def start_of(parent: Candidate | None) -> Candidate:
        return Candidate() if parent is None else (_drop_weakest(stepper, parent) if parent.done else parent)

    def scored(child: Candidate) -> tuple[Candidate, float]:
        if not child.done:
            open_nodes.append(child)
        return child, min(1.0, max(0.0, stepper.score(child)))

    def write(starts: list[Candidate]) -> list[Candidate]:
        left = budget - ledger.spent
        return stepper.expand(starts, 1, stepper.fit(starts, 1, left, keep_rows=True)[2])

    def step(parent: Candidate | None):
        return scored(write([start_of(parent)])[0])

    state = algo.init_tree()
    rng_state = np.random.get_state()  # AB-MCTS samples with numpy's global RNG: seed it, then put it back
    np.random.seed(stepper.seed % 2**32)
    try:
        while ledger.spent < budget:
            left, before = budget - ledger.spent, ledger.spent
            batch = max(1, min(cfg.tree_batch, left))
            # the W best open nodes, looked up only where the budget left could be too small for them
            near_end = left < batch * cfg.max_new_tokens + SLACK * cfg.beam_width * cfg.max_new_tokens
            best = heapq.nsmallest(cfg.beam_width, open_nodes, key=lambda c: -stepper.score(c)) if near_end else []
            if stepper.must_finish(best, left, stepper.step_cost(best[:1], batch)):
                for c in best[: stepper.finish(best, left)[1]]:
                    open_nodes.remove(c)
            elif batch == 1:
                state = algo.step(state, {"step": step}, inplace=True)
            else:  # `batch` expansions chosen at once and generated in one call (each told back in order)
                state, trials = algo.ask_batch(state, batch, ["step"])
                children = write([start_of(t.parent_state) for t in trials])
                for t, child in zip(trials, children):
                    state = algo.tell(state, t.trial_id, scored(child))
            if ledger.spent == before:  # a backend that counted no token: nothing would ever end the loop
                break
    finally:
        np.random.set_state(rng_state)


_SEARCH_FNS: dict[str, Callable[[Stepper, int], None]] = {"bon": _bon, "beam": _beam, "tree": _tree}


def search_prompt(gen, task, example, prompt, cfg: SearchConfig, scorer: StepScorer, seed: int) -> Ledger:
    """Run ``cfg.search`` on one prompt (``prompt``: formatted for ``gen``); the ledger holds what it found."""
    ledger = Ledger(task, example, cfg.num_answers)
    stepper = Stepper(gen, prompt, cfg, task, ledger, scorer, seed)
    _SEARCH_FNS[cfg.search](stepper, cfg.budget_tokens)
    return ledger

"""The demo's settings (:class:`DemoConfig`) and its method table.

Every knob lives in one dataclass so that a run is described by one JSON object, each stage can hash
the settings it depends on (resume safety, :mod:`vpo.demo.jobs`), and every setting is validated at
construction, before the warm start, instead of failing minutes later. The settings only one domain
reads (``maze_size``, ``prog_tests``, ...) are declared, with their defaults, by that domain's object
in :mod:`vpo.demo.domains`, and added here as fields.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from vpo._util import positive_int
from vpo.demo.domains import DEFAULT_DOMAIN, DOMAINS, domain_named
from vpo.errors import UserError

# name: (label, estimator, num_answers (answers per rollout), rollouts-per-prompt multiplier)
METHODS: dict[str, tuple[str, str, int, int]] = {
    "grpo": ("GRPO", "grpo", 1, 1),
    "grpo_3x": ("GRPO 3x rollouts", "grpo", 1, 3),
    "gdpo": ("GDPO", "gdpo", 1, 1),
    "max_at_k": ("Max@k", "max_at_k", 1, 1),
    "max_at_k_3x": ("Max@k 3x rollouts", "max_at_k", 1, 3),
    "multi_rlvr": ("Multi-RLVR (m=3)", "multi_rlvr", 3, 1),
    "vpo": ("VPO (m=3)", "vpo", 3, 1),
    "maxrl": ("MaxRL", "maxrl", 1, 1),
    "random_weight": ("Random-weighting GRPO", "random_weight", 1, 1),
    "goal_conditioned": ("Goal-conditioned GRPO", "goal_conditioned", 1, 1),
    "vpo_at_k": ("VPO@k (m=3, ours)", "vpo_at_k", 3, 1),
    "pareto_niche": ("Pareto/niche (ours)", "pareto_niche", 1, 1),
}
DEFAULT_METHODS = ("grpo", "grpo_3x", "gdpo", "max_at_k", "multi_rlvr", "vpo")
"""The paper's comparison (GRPO, Max@k, Multi-RLVR, VPO) plus the compute control and GDPO."""
ALL_METHODS = DEFAULT_METHODS + ("maxrl", "random_weight", "goal_conditioned", "vpo_at_k", "pareto_niche")
"""``--methods all``."""
MULTI_ANSWER_NUM_ANSWERS = 3
"""num_answers of a registered set estimator run as a demo method."""
WARM_STARTS = ("per_replicate", "shared")
INTERVALS = ("replicate_t", "two_level_bootstrap")
RECORDED_BEFORE = {
    "warm_start": "shared",
    "interval": "two_level_bootstrap",
    "start_temperature": 0.0,
    "random_answerer": False,
}
"""What a recorded config without these settings was run with (every run before they existed)."""


def as_recorded(record: dict) -> dict:
    """A recorded config under today's names (:func:`current_names`) with what it ran without recording
    (:data:`RECORDED_BEFORE`): the first two settings ahead of the record's own, as reports have always
    named them, and the ones added since after them (a report's reproduce line keeps its order)."""
    own = current_names(record)
    lead = {k: v for k, v in list(RECORDED_BEFORE.items())[:2] if k not in own}
    return {**lead, **own, **{k: v for k, v in RECORDED_BEFORE.items() if k not in own and k not in lead}}


RECORD_NAMES = {
    "train_problems": "train_mazes",
    "eval_problems": "eval_mazes",
    "warm_answers_per_problem": "warm_routes_per_maze",
}
"""Settings renamed after runs had recorded them, and their names in those records. The warm start's
and the evaluations' settings records (:meth:`DemoConfig.warm_settings`, whose hashes decide what a
resumed run redoes) keep the old names, so a directory made before the rename resumes instead of
training again; :meth:`DemoConfig.from_dict` reads recorded configs (the shipped ``demo.json`` files)
that use them. Not accepted as settings: ``--set`` takes the current names only."""


def method_spec(name: str) -> tuple[str, str, int, int]:
    """``(label, estimator, num_answers, rollout multiplier)`` of a demo method: a row of
    :data:`METHODS`, or any registered estimator by name (num_answers = 3 for set estimators, else 1)."""
    if name in METHODS:
        return METHODS[name]
    from vpo.core.estimators import ESTIMATORS

    if name in ESTIMATORS:
        n = MULTI_ANSWER_NUM_ANSWERS if ESTIMATORS[name].multi_answer else 1
        return (name if n == 1 else f"{name} (m={n})", name, n, 1)
    raise UserError(
        f"unknown demo method {name!r}; choose from {', '.join(METHODS)} or any estimator that `vpo estimators` lists"
    )


def parse_methods(text: str) -> tuple[str, ...]:
    """``--methods``: a comma-separated list, ``default`` or ``all``."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    out: list[str] = []
    for n in names:
        for m in {"all": ALL_METHODS, "default": DEFAULT_METHODS}.get(n, (n,)):
            if m not in out:
                out.append(m)
    return tuple(out)


def _with_domain_settings(cls):
    """Add every domain's own settings (:attr:`vpo.demo.domains.Domain.settings`) to ``cls`` as
    fields with their defaults, after the shared ones (applied before ``@dataclass``)."""
    for spec in DOMAINS.values():
        for name, setting in spec.settings.items():
            if name in cls.__annotations__:
                raise TypeError(f"domain {spec.name!r} declares setting {name!r}, which DemoConfig already has")
            cls.__annotations__[name] = type(setting.default).__name__
            setattr(cls, name, setting.default)
    return cls


@dataclass
@_with_domain_settings
class DemoConfig:
    """Every knob of the demo; ``--quick`` shrinks them for CI. Fields marked *regime* were chosen on
    the validation split (docs/demo.md, "How the defaults were chosen"). Besides the fields below,
    each domain's own settings (``maze_size``, ``prog_tests``, ...: :mod:`vpo.demo.domains`)."""

    out: str = "runs/demo"
    """Output directory (models, pools, report)."""
    domain: str = DEFAULT_DOMAIN
    """The task, a name in :data:`vpo.demo.domains.DOMAINS`: 'maze' (designed-conflict mazes, the
    default) or 'prog' (programs in a tiny language, one reward component per test; docs/prog_task.md).
    Settings of the other domains must stay at their defaults."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """Replicate seeds; every method is trained once per seed (from that seed's own warm start with
    ``warm_start='per_replicate'``)."""
    warm_start: str = "per_replicate"
    """'per_replicate': each seed trains its own warm start (model initialisation, random answers and
    batch order drawn from the seed), so a replicate is independent end to end and the intervals see
    the warm start's spread; 'shared': one warm start (seed 0) for every seed, as every run made before
    this setting existed (the shipped reports)."""
    interval: str = "replicate_t"
    """Intervals: 'replicate_t' (:func:`vpo.search.intervals.replicate_interval`: replicates and
    problems, coverage checked by simulation) or 'two_level_bootstrap' (seeds, then problems, the
    shipped reports' interval; it undercovers with 3 seeds)."""
    test_seed: int | None = None
    """Seed of the task's test split (None: the task's own): a split never evaluated before, for a new
    claim. Only the evaluations depend on it (warm starts and trained models are reused)."""
    methods: tuple[str, ...] = DEFAULT_METHODS
    """Methods to train: names of :data:`METHODS` or any registered estimator."""
    split: str = "test"
    """Split evaluated: 'validation' for choosing settings, 'test' once for the report."""
    eval_problems: int = 100
    """Problems (mazes, programs) of that split evaluated."""
    instruction: str = "short"
    """Answer instruction style in the prompt ('short' one line, or 'tags' alone)."""
    train_problems: int = 1000
    """Training problems (warm start and RL prompts)."""
    hidden_size: int = 128
    """Tiny Qwen2 hidden size."""
    num_layers: int = 4
    """Tiny Qwen2 layers."""
    warm_steps: int = 600
    """Supervised warm-start steps."""
    warm_batch: int = 32
    """Warm-start batch size (prompt, completion pairs)."""
    warm_lr: float = 3e-3
    """Warm-start peak learning rate (cosine decay)."""
    warm_threads: int = 0
    """Torch threads of a warm start. 0 (default): automatic, :attr:`warm_thread_count`: one thread
    when the run trains at least two warm starts and runs at least two jobs at a time (the warm starts
    are then jobs, ``jobs`` at a time beside the others; on two cores that comes out even with two
    threads one after the other, with more cores ``--jobs 8`` trains eight at a time), else 2.
    1: always as jobs; more than 1: each warm start alone, in the demo's process, before the jobs
    (docs/demo.md, "Where the time goes"). On this machine one and two threads train the same
    weights bit for bit (checked on 22 warm starts); the thread count is recorded with the warm start
    because another CPU or library may reduce in another order."""
    shared_warm_seed: int = 0
    """With ``warm_start='shared'``: the seed of the one warm start every replicate trains from (0:
    the shipped runs' warm start; another seed s: the warm start replicate s trains with
    ``per_replicate``). For measuring how much a shared warm start moves results
    (``scripts/variance_decomposition.py``)."""
    warm_answers_per_problem: int = 1
    """Random answers (routes, programs) drawn per training problem and format for the warm start."""
    rl_steps: int = 60
    """RL optimizer steps per run."""
    prompts_per_step: int = 8
    """Problems per RL step."""
    num_generations: int = 8
    """Rollouts per problem per step (G); grpo_3x uses 3G."""
    rl_lr: float = 3e-4
    """RL learning rate (AdamW, constant)."""
    beta: float = 1e-3
    """KL coefficient to the warm start (paper: 1e-3)."""
    train_temperature: float = 1.0
    """Sampling temperature during RL (paper: 1.0)."""
    train_noise_sigma: float = 0.0
    """Noisy objectives: standard deviation of the Gaussian noise added to each non-binary component
    of the reward the trainer sees (``vpo.tasks.noisy``); evaluation always scores clean."""
    train_noise_flip: float = 0.0
    """Noisy objectives: probability that a binary component (the domain's
    :meth:`~vpo.demo.domains.Domain.binary_objectives`, e.g. maze completion, a program's test) of
    the training reward is flipped."""
    num_weightings: int = 100
    """K for VPO."""
    weight_alpha: float = 1.0
    """Dirichlet concentration of VPO's weightings (paper: 1)."""
    weight_sampler: str = "iid"
    """VPO's weight sampler: 'iid' Dirichlet (paper default) or 'sobol'."""
    max_tokens_single: int = 24
    """Completion length limit of a single-answer rollout (training and eval)."""
    max_tokens_multi: int = 64
    """Completion length limit of a multi-answer rollout (training and eval). Do not cut it to what a
    valid answer needs: at 48 VPO learned far less on the validation split (docs/demo.md)."""
    eval_temperature: float = 0.7
    """Sampling temperature of the evaluation pools."""
    eval_budget: int = 30
    """Answers per problem in each evaluation pool (k counts answers)."""
    ks: tuple[int, ...] = (1, 3, 5, 10, 30)
    """Answer budgets reported."""
    eval_seeds: int = 5
    """Draws of the matched-budget subsample per pool."""
    bootstrap: int = 2000
    """Resamples of the two-level bootstrap (``interval='two_level_bootstrap'``)."""
    jobs: int = 2
    """Jobs at a time (each in its own single-threaded worker process)."""
    warm_only: bool = False
    """Stop after evaluating the warm start (a cheap probe of the task regime's headroom)."""
    start_temperature: float = 0.0
    """Evaluate each warm start a second time, sampled at this temperature (rows 'Warm start (m=1,
    T=...)' and m = 3): the start at the temperature that maximises its best@k on the validation
    split, the control for "would a hotter start do what RL does?". 0 (default): no such rows."""
    random_answerer: bool = False
    """Add a uniform random answerer's row: per replicate, ``eval_budget`` answers per problem drawn
    uniformly from what the problem lists, no model (:mod:`vpo.demo.baselines`). Only for the domains
    that define such an answerer (shop, animals)."""

    def __post_init__(self) -> None:  # noqa: C901 (a flat list of independent setting checks)
        """Fail before the warm start, not after it, on a setting a later stage would refuse."""
        from vpo.core.answers import INSTRUCTION_STYLES, style_choices
        from vpo.core.weights import SAMPLERS

        self._check_domain()
        if not self.methods:
            raise UserError("give at least one demo method")
        for m in self.methods:
            method_spec(m)
        if len(set(self.methods)) != len(self.methods):
            raise UserError(f"demo methods repeat: {self.methods}")
        if not self.seeds:
            raise UserError("give at least one seed")
        if self.split not in ("validation", "test"):
            raise UserError(f"split must be 'validation' or 'test', got {self.split!r}")
        if self.instruction not in INSTRUCTION_STYLES:
            raise UserError(f"instruction must be {style_choices()}, got {self.instruction!r}")
        if self.weight_sampler not in SAMPLERS:
            raise UserError(f"weight_sampler must be one of {', '.join(SAMPLERS)}, got {self.weight_sampler!r}")
        for name in (
            "train_problems",
            "eval_problems",
            "warm_steps",
            "warm_batch",
            "warm_answers_per_problem",
            "rl_steps",
            "prompts_per_step",
            "num_weightings",
            "eval_budget",
            "eval_seeds",
            "jobs",
            "max_tokens_single",
            "max_tokens_multi",
        ):
            positive_int(getattr(self, name), f"demo setting {name}", error=UserError)
        positive_int(self.warm_threads, "demo setting warm_threads", minimum=0, hint=" (0: automatic)", error=UserError)
        if self.num_generations < 2:
            raise UserError(
                f"num_generations must be >= 2 (a group z-score needs two rollouts), got {self.num_generations}"
            )
        if max(self.ks) > self.eval_budget:
            raise UserError(f"ks {self.ks} exceed eval_budget={self.eval_budget} answers per problem")
        if self.weight_alpha <= 0:
            raise UserError(f"weight_alpha must be > 0, got {self.weight_alpha}")
        if self.bootstrap < 0:
            raise UserError(f"bootstrap must be >= 0, got {self.bootstrap}")
        if not (0 <= self.train_noise_sigma) or not (0 <= self.train_noise_flip <= 1):
            raise UserError(
                f"train_noise_sigma must be >= 0 and train_noise_flip in [0, 1], got "
                f"{self.train_noise_sigma!r} and {self.train_noise_flip!r}"
            )
        if self.warm_start not in WARM_STARTS:
            raise UserError(f"warm_start must be one of {', '.join(WARM_STARTS)}, got {self.warm_start!r}")
        if self.interval not in INTERVALS:
            raise UserError(f"interval must be one of {', '.join(INTERVALS)}, got {self.interval!r}")
        if isinstance(self.shared_warm_seed, bool) or not isinstance(self.shared_warm_seed, int):
            raise UserError(f"shared_warm_seed must be an integer, got {self.shared_warm_seed!r}")
        if self.shared_warm_seed and self.warm_start != "shared":
            raise UserError(
                f"shared_warm_seed={self.shared_warm_seed} applies to warm_start=shared only; with "
                f"warm_start={self.warm_start!r} each replicate trains from its own warm start"
            )
        if (
            isinstance(self.start_temperature, bool)
            or not isinstance(self.start_temperature, (int, float))
            or not (0 <= self.start_temperature <= 5)
        ):
            raise UserError(
                f"start_temperature must be a number in [0, 5] (0: no hotter start's rows), got {self.start_temperature!r}"
            )
        if self.random_answerer and self.domain_spec.random_answer(self) is None:
            raise UserError(
                f"random_answerer: the {self.domain} domain defines no uniform random answerer (shop and animals do)"
            )
        if self.test_seed is not None and (isinstance(self.test_seed, bool) or not isinstance(self.test_seed, int)):
            raise UserError(f"test_seed must be an integer (or unset), got {self.test_seed!r}")
        self.domain_spec.check(self)

    @property
    def domain_spec(self):
        """The :class:`~vpo.demo.domains.Domain` object that :attr:`domain` names."""
        return domain_named(self.domain)

    def _check_domain(self) -> None:
        """A known domain, and the other domains' settings left at their defaults (a prog run with
        ``maze_size=7`` would otherwise silently ignore it)."""
        spec = self.domain_spec
        for other in DOMAINS.values():
            if other is spec:
                continue
            shared = set(spec.shared_settings)  # another domain's settings this one reads too
            changed = [
                n
                for n, s in other.settings.items()
                if n not in shared and not _same_setting(getattr(self, n), s.default)
            ]
            if changed:
                raise UserError(
                    f"demo setting(s) {', '.join(changed)} apply to --domain {other.name} only, but the domain is "
                    f"{self.domain!r}; drop them or use --domain {other.name}"
                )

    @classmethod
    def for_domain(cls, domain: str = DEFAULT_DOMAIN, quick: bool = False, **kw) -> "DemoConfig":
        """A domain's defaults (:attr:`vpo.demo.domains.Domain.defaults`: the shop domain's model
        and RL sizes differ from the tiny model's), shrunk for CI with ``quick``, then ``kw``."""
        spec = domain_named(domain)
        base = {"domain": domain, **spec.defaults}
        if quick:
            base.update(
                {
                    "seeds": (0,),
                    "methods": ("grpo", "vpo"),
                    "eval_problems": 24,
                    "eval_budget": 12,
                    "ks": (1, 3, 6, 12),
                    "eval_seeds": 2,
                    "bootstrap": 200,
                    **spec.quick,
                }
            )
        return cls(**{**base, **kw})

    @classmethod
    def quick(cls, **kw) -> "DemoConfig":
        """The CI setting: the default task, model, warm start and RL, then GRPO and VPO only,
        1 seed, evaluated on 24 problems with 12 answers each."""
        return cls.for_domain(kw.pop("domain", DEFAULT_DOMAIN), quick=True, **kw)

    def as_dict(self) -> dict:
        d = asdict(self)
        for f in fields(self):
            if isinstance(d[f.name], tuple):
                d[f.name] = list(d[f.name])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "DemoConfig":
        """The inverse of :meth:`as_dict` (JSON lists back to tuples); a config recorded before a
        setting was renamed (:data:`RECORD_NAMES`) reads as the same settings under today's names."""
        d = as_recorded(d)
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})

    @classmethod
    def load(cls, out) -> "DemoConfig":
        """The config a finished or interrupted run recorded in ``out/demo_config.json``."""
        import json
        from pathlib import Path

        return cls.from_dict(json.loads((Path(out) / "demo_config.json").read_text()))

    # -- what each stage depends on (resume safety) ------------------------------------------
    def task_options(self) -> dict:
        """The task's options for the warm start and training (the test split's seed is not one:
        it changes no training problem)."""
        return self.domain_spec.task_options(self)

    def eval_task_options(self) -> dict:
        """The task's options for the evaluations: :meth:`task_options` and ``test_seed`` when set."""
        opts = self.task_options()
        return opts if self.test_seed is None else {**opts, "test_seed": self.test_seed}

    @property
    def warm_thread_count(self) -> int:
        """The torch threads each warm start trains with: :attr:`warm_threads`, or with 0 one thread
        when at least two warm starts share at least two job slots, else 2 (the default before the
        automatic setting, so one-seed runs such as ``--quick`` keep their warm start's record)."""
        if self.warm_threads:
            return self.warm_threads
        return 1 if len(self.warm_seeds()) >= 2 and self.jobs >= 2 else 2

    @classmethod
    def automatic_warm_threads(cls, record: dict) -> int:
        """The count ``warm_threads=0`` resolves to for the run a recorded config (:meth:`as_dict`,
        any age) describes: what a rerun of it with today's default trains with."""
        return cls.from_dict({**record, "warm_threads": 0}).warm_thread_count

    @property
    def warm_starts_as_jobs(self) -> bool:
        """One thread per warm start: they run as jobs beside the others; more: each alone, in the
        demo's process, before the jobs (:attr:`warm_thread_count`)."""
        return self.warm_thread_count == 1

    def warm_seeds(self) -> tuple[int | None, ...]:
        """The warm starts a run trains: one per seed (``per_replicate``), or one shared (``None``
        for seed 0, the shipped runs' warm start, else ``shared_warm_seed``)."""
        return tuple(self.seeds) if self.warm_start == "per_replicate" else (self.shared_warm_seed or None,)

    def warm_seed_of(self, seed: int) -> int | None:
        """The warm start a replicate trains from (``None``: the shared seed-0 one)."""
        return seed if self.warm_start == "per_replicate" else (self.shared_warm_seed or None)

    def _record(self, names: tuple[str, ...]) -> dict:
        """These settings under the names the resume records have always used (:data:`RECORD_NAMES`)."""
        return {RECORD_NAMES.get(k, k): getattr(self, k) for k in names}

    def warm_settings(self, warm_seed: int | None = None) -> dict:
        """What a warm start depends on; ``warm_seed``: a replicate's own warm start (absent from the
        record of the shared one, whose hash is unchanged since before per-replicate warm starts)."""
        keys = (
            "train_problems",
            "hidden_size",
            "num_layers",
            "warm_steps",
            "warm_batch",
            "warm_lr",
            "warm_answers_per_problem",
        )
        spec = self.domain_spec
        rec = {**spec.record(), "task": self.task_options(), **self._record(keys), **spec.warm_settings(self)}
        rec["warm_threads"] = self.warm_thread_count  # the resolved count: "automatic" trains no other weights
        return rec if warm_seed is None else {**rec, "replicate_seed": int(warm_seed)}

    def eval_settings(self) -> dict:
        keys = (
            "split",
            "eval_problems",
            "eval_temperature",
            "eval_budget",
            "ks",
            "eval_seeds",
            "max_tokens_single",
            "max_tokens_multi",
        )
        return {**self.domain_spec.record(), "task": self.eval_task_options(), **self._record(keys)}


def current_names(record: dict) -> dict:
    """A recorded config (``demo.json``'s ``config``, ``demo_config.json``) with the settings renamed
    since it was written under their current names (:data:`RECORD_NAMES`)."""
    old = {v: k for k, v in RECORD_NAMES.items()}
    return {old.get(k, k): v for k, v in record.items()}


def _same_setting(a, b) -> bool:
    """Whether two setting values are equal, a tuple and a list with the same items counting as equal."""
    return (list(a) if isinstance(a, (tuple, list)) else a) == (list(b) if isinstance(b, (tuple, list)) else b)

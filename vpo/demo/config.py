"""The demo's settings (:class:`DemoConfig`) and its method table.

Every knob lives in one dataclass so that a run is described by one JSON object, each stage can hash
the settings it depends on (resume safety, :mod:`vpo.demo.jobs`), and every setting is validated at
construction, before the warm start, instead of failing minutes later.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from vpo.errors import UserError

# name: (label, estimator, m answers per rollout, rollouts-per-prompt multiplier)
METHODS: dict[str, tuple[str, str, int, int]] = {
    "grpo": ("GRPO", "grpo", 1, 1),
    "grpo_3x": ("GRPO 3x rollouts", "grpo", 1, 3),
    "gdpo": ("GDPO", "gdpo", 1, 1),
    "max_at_k": ("Max@k", "max_at_k", 1, 1),
    "multi_rlvr": ("Multi-RLVR (m=3)", "multi_rlvr", 3, 1),
    "vpo": ("VPO (m=3)", "vpo", 3, 1),
    "maxrl": ("MaxRL", "maxrl", 1, 1),
    "random_weight": ("Random-weighting GRPO", "random_weight", 1, 1),
    "goal_conditioned": ("Goal-conditioned GRPO", "goal_conditioned", 1, 1),
}
DEFAULT_METHODS = ("grpo", "grpo_3x", "gdpo", "max_at_k", "multi_rlvr", "vpo")
"""The paper's comparison (GRPO, Max@k, Multi-RLVR, VPO) plus the compute control and GDPO."""
ALL_METHODS = DEFAULT_METHODS + ("maxrl", "random_weight", "goal_conditioned")
"""``--methods all``."""
MULTI_ANSWER_M = 3
DOMAIN_SETTINGS: dict[str, tuple[str, ...]] = {
    "maze": (
        "maze_size",
        "budget_slack",
        "items_per_zone",
        "zone_radius",
        "lava",
        "zones",
        "warm_waypoints",
        "warm_wander",
    ),
    "prog": ("prog_tests", "prog_pieces", "prog_cases", "prog_min_piece", "prog_slope", "prog_intercept"),
}
"""``--domain`` choices and the settings that only that domain reads."""


def method_spec(name: str) -> tuple[str, str, int, int]:
    """``(label, estimator, m, rollout multiplier)`` of a demo method: a row of :data:`METHODS`, or
    any registered estimator by name (m = 3 for set estimators, else 1)."""
    if name in METHODS:
        return METHODS[name]
    from vpo.core.estimators import ESTIMATORS

    if name in ESTIMATORS:
        m = MULTI_ANSWER_M if ESTIMATORS[name].multi_answer else 1
        return (name if m == 1 else f"{name} (m={m})", name, m, 1)
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


@dataclass
class DemoConfig:
    """Every knob of the demo; ``--quick`` shrinks them for CI. Fields marked *regime* were chosen on
    the validation split (docs/demo.md, "How the defaults were chosen")."""

    out: str = "runs/demo"
    """Output directory (models, pools, report)."""
    domain: str = "maze"
    """The task: 'maze' (designed-conflict mazes, the default) or 'prog' (programs in a tiny language,
    one reward component per test; docs/prog_task.md). Settings of the other domain must stay at their
    defaults. 'mazes' in the names below count the domain's problems."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """RL/eval seeds; every method is trained once per seed from the same warm start."""
    methods: tuple[str, ...] = DEFAULT_METHODS
    """Methods to train: names of :data:`METHODS` or any registered estimator."""
    split: str = "test"
    """Maze split evaluated: 'validation' for choosing settings, 'test' once for the report."""
    eval_mazes: int = 100
    """Mazes of that split evaluated."""
    maze_size: int = 5
    """Maze side in tiles (odd)."""
    budget_slack: int = 2
    """*regime*: moves allowed beyond the longest single-zone route (0: only shortest routes finish; 2: a
    route can detour for more items of its zone, and many routes share one reward vector)."""
    items_per_zone: tuple[int, int] = (3, 5)
    """*regime*: items in each zone (inclusive range)."""
    zone_radius: int = 2
    """*regime*: items lie within this Manhattan distance of their zone's corner."""
    lava: tuple[int, int] = (1, 1)
    """*regime*: lava tiles (inclusive range)."""
    zones: str = "split"
    """'split' (designed conflict: gold and diamond zones at opposite corners, never both in budget) or
    'shared' (both in one zone: the objectives move together, the control where VPO should not help)."""
    instruction: str = "short"
    """Answer instruction style in the prompt ('short' one line, or 'tags' alone)."""
    train_mazes: int = 1000
    """Training mazes (warm start and RL prompts)."""
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
    warm_threads: int = 2
    """Torch threads of the warm start (it runs alone, before the jobs)."""
    warm_routes_per_maze: int = 1
    """Random routes drawn per training maze and format for the warm start."""
    warm_waypoints: int = 2
    """*regime* (warm-start breadth): random intermediate tiles a warm-start route may visit."""
    warm_wander: float = 0.3
    """*regime* (warm-start breadth): probability of a random (budget-keeping) move instead of a
    shortest-path move in a warm-start route."""
    rl_steps: int = 60
    """RL optimizer steps per run."""
    prompts_per_step: int = 8
    """Mazes per RL step."""
    num_generations: int = 8
    """Rollouts per maze per step (G); grpo_3x uses 3G."""
    rl_lr: float = 3e-4
    """RL learning rate (AdamW, constant)."""
    beta: float = 1e-3
    """KL coefficient to the warm start (paper: 1e-3)."""
    train_temperature: float = 1.0
    """Sampling temperature during RL (paper: 1.0)."""
    num_weightings: int = 100
    """K for VPO."""
    weight_alpha: float = 1.0
    """Dirichlet concentration of VPO's weightings (paper: 1)."""
    weight_sampler: str = "iid"
    """VPO's weight sampler: 'iid' Dirichlet (paper default) or 'sobol'."""
    max_tokens_single: int = 24
    """Completion length limit of a single-answer rollout (training and eval)."""
    max_tokens_multi: int = 64
    """Completion length limit of an m-answer rollout (training and eval). Do not cut it to what a
    valid answer needs: at 48 VPO learned far less on the validation split (docs/demo.md)."""
    eval_temperature: float = 0.7
    """Sampling temperature of the evaluation pools."""
    eval_budget: int = 30
    """Answers per maze in each evaluation pool (k counts answers)."""
    ks: tuple[int, ...] = (1, 3, 5, 10, 30)
    """Answer budgets reported."""
    eval_seeds: int = 5
    """Draws of the matched-budget subsample per pool."""
    bootstrap: int = 2000
    """Resamples of the two-level (seeds, then mazes) bootstrap behind every interval."""
    jobs: int = 2
    """Jobs at a time (each in its own single-threaded worker process)."""
    warm_only: bool = False
    """Stop after evaluating the warm start (a cheap probe of the task regime's headroom)."""
    prog_tests: int = 8
    """prog only: test cases per problem (= reward components d)."""
    prog_pieces: int = 2
    """prog only: lines per target function (2 or 3)."""
    prog_cases: str = "threshold"
    """prog only: how the target splits its inputs: 'threshold', 'parity' or 'mixed'."""
    prog_min_piece: int = 3
    """prog only: fewest tests per piece."""
    prog_slope: tuple[int, int] = (0, 0)
    """prog only, *regime*: slopes of the target lines (inclusive range; the warm start's lines use it
    too). 0: piecewise-constant targets (step functions), the only regime in which the 0.7 M model
    learned to read the examples within the demo's budget; the task's own default is (0, 3)
    (docs/demo.md, "Second domain")."""
    prog_intercept: tuple[int, int] = (0, 9)
    """prog only: intercepts of the target lines (inclusive range)."""

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
            "train_mazes",
            "eval_mazes",
            "warm_steps",
            "warm_batch",
            "warm_routes_per_maze",
            "warm_threads",
            "rl_steps",
            "prompts_per_step",
            "num_weightings",
            "eval_budget",
            "eval_seeds",
            "jobs",
            "max_tokens_single",
            "max_tokens_multi",
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UserError(f"demo setting {name} must be an integer >= 1, got {v!r}")
        if self.num_generations < 2:
            raise UserError(
                f"num_generations must be >= 2 (a group z-score needs two rollouts), got {self.num_generations}"
            )
        if max(self.ks) > self.eval_budget:
            raise UserError(f"ks {self.ks} exceed eval_budget={self.eval_budget} answers per maze")
        if not 0.0 <= self.warm_wander <= 1.0:
            raise UserError(f"warm_wander must be in [0, 1], got {self.warm_wander}")
        if self.weight_alpha <= 0:
            raise UserError(f"weight_alpha must be > 0, got {self.weight_alpha}")
        if self.bootstrap < 0:
            raise UserError(f"bootstrap must be >= 0, got {self.bootstrap}")
        for name in ("items_per_zone", "lava"):
            v = getattr(self, name)
            if len(v) != 2 or v[0] > v[1] or v[0] < (1 if name == "items_per_zone" else 0):
                raise UserError(f"{name} must be an inclusive range 'lo,hi' with lo <= hi, got {v}")
        try:
            from vpo.tasks.maze import MazeConfig

            MazeConfig(
                self.maze_size,
                None,
                tuple(self.items_per_zone),
                self.zone_radius,
                tuple(self.lava),
                self.budget_slack,
                zones=self.zones,
            ).resolved()
        except ValueError as e:
            raise UserError(f"maze settings: {e}") from None

    def _check_domain(self) -> None:
        """A known domain, and the other domain's settings left at their defaults (a prog run with
        ``maze_size=7`` would otherwise silently ignore it)."""
        if self.domain not in DOMAIN_SETTINGS:
            raise UserError(f"domain must be one of {', '.join(DOMAIN_SETTINGS)}, got {self.domain!r}")
        default = {f.name: f.default for f in fields(self)}
        for other, names in DOMAIN_SETTINGS.items():
            if other == self.domain:
                continue
            changed = [n for n in names if not _same_setting(getattr(self, n), default[n])]
            if changed:
                raise UserError(
                    f"demo setting(s) {', '.join(changed)} apply to --domain {other} only, but the domain is "
                    f"{self.domain!r}; drop them or use --domain {other}"
                )
        if self.domain == "prog":
            from vpo.tasks.prog import ProgTask

            try:
                ProgTask(**self.task_options())
            except ValueError as e:
                raise UserError(f"prog settings: {e}") from None

    @classmethod
    def quick(cls, **kw) -> "DemoConfig":
        """The CI setting: the default task, model, warm start and RL, then GRPO and VPO only,
        1 seed, evaluated on 24 mazes with 12 answers each."""
        base = cls(
            seeds=(0,),
            methods=("grpo", "vpo"),
            eval_mazes=24,
            eval_budget=12,
            ks=(1, 3, 6, 12),
            eval_seeds=2,
            bootstrap=200,
        )
        return replace(base, **kw)

    def as_dict(self) -> dict:
        d = asdict(self)
        for f in fields(self):
            if isinstance(d[f.name], tuple):
                d[f.name] = list(d[f.name])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "DemoConfig":
        """The inverse of :meth:`as_dict` (JSON lists back to tuples)."""
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})

    @classmethod
    def load(cls, out) -> "DemoConfig":
        """The config a finished or interrupted run recorded in ``out/demo_config.json``."""
        import json
        from pathlib import Path

        return cls.from_dict(json.loads((Path(out) / "demo_config.json").read_text()))

    # -- what each stage depends on (resume safety) ------------------------------------------
    def task_options(self) -> dict:
        if self.domain == "prog":
            return {
                "tests": self.prog_tests,
                "pieces": self.prog_pieces,
                "cases": self.prog_cases,
                "min_piece": self.prog_min_piece,
                "slope": list(self.prog_slope),
                "intercept": list(self.prog_intercept),
                "compact": True,
                "instruction": self.instruction,
            }
        return {
            "size": self.maze_size,
            "budget_slack": self.budget_slack,
            "items_per_zone": list(self.items_per_zone),
            "zone_radius": self.zone_radius,
            "lava": list(self.lava),
            "zones": self.zones,
            "compact": True,
            "instruction": self.instruction,
        }

    def warm_settings(self) -> dict:
        keys = (
            "train_mazes",
            "hidden_size",
            "num_layers",
            "warm_steps",
            "warm_batch",
            "warm_lr",
            "warm_routes_per_maze",
            "warm_waypoints",
            "warm_wander",
            "warm_threads",
        )
        if self.domain != "maze":  # the maze's records (and their hashes) stay as they were
            keys = tuple(k for k in keys if k not in DOMAIN_SETTINGS["maze"])
            return {"domain": self.domain, "task": self.task_options(), **{k: getattr(self, k) for k in keys}}
        return {"task": self.task_options(), **{k: getattr(self, k) for k in keys}}

    def eval_settings(self) -> dict:
        keys = (
            "split",
            "eval_mazes",
            "eval_temperature",
            "eval_budget",
            "ks",
            "eval_seeds",
            "max_tokens_single",
            "max_tokens_multi",
        )
        head = {} if self.domain == "maze" else {"domain": self.domain}
        return {**head, "task": self.task_options(), **{k: getattr(self, k) for k in keys}}


def _same_setting(a, b) -> bool:
    """Whether two setting values are equal, a tuple and a list with the same items counting as equal."""
    return (list(a) if isinstance(a, (tuple, list)) else a) == (list(b) if isinstance(b, (tuple, list)) else b)

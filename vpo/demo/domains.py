"""The demo's domains: one object per task the demo can run, holding everything that differs
between them, so that the rest of the demo asks its domain and never tests the domain's name.

A :class:`Domain` says which vpo task it runs and with which options; its own settings and their
defaults (:class:`Setting`; :class:`~vpo.demo.config.DemoConfig` gains them as fields, and a run
of another domain refuses them when changed); how the warm start draws its random answers; when
two completed answers are the same; each problem's exact Pareto front (the report's ceilings follow
from it); the statistics only it reports (prog: pass@k); the words of its plots; and its report
and README table.

**Adding a domain** is writing one more :class:`Domain` subclass here and entering it in
:data:`DOMAINS`: ``--domain`` offers it, ``DemoConfig`` gains its settings, and the stages, the
analysis and the report ask it for the rest.

``DemoConfig.domain`` stays the domain's name (a string in every JSON record); :func:`domain_named`
turns it into the object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from vpo.errors import UserError

if TYPE_CHECKING:  # the config imports this module (for the domains' settings), not the other way round
    from vpo.demo.config import DemoConfig

DEFAULT_DOMAIN = "maze"
"""The domain of ``DemoConfig()`` and of records written before the demo had a second one."""


_PLOT_TITLES = {
    "best_at_k": "best@k",
    "pareto_coverage": "Pareto coverage",
    "preferences": "preferences",
    "pass_at_k": "pass@k",
    "diversity": "diversity",
}


def report_tail(agg: dict, plots: list[str]) -> list[str]:
    """The end of every domain's report: where the time went, its plots, the training curves' link
    and the command that reproduces it."""
    from vpo.demo.report import _timing_lines, _training_link, reproduce_command

    lines = list(_timing_lines(agg))
    for name in plots:
        lines += [f"![{_PLOT_TITLES[name]}]({name}.png)", ""]
    return lines + [*_training_link(agg), f"Reproduce: `{reproduce_command(agg['config'])}`."]


def interval_name(agg: dict, unit: str, form: str = "colon") -> str:
    """How a report's intervals were computed, in its words (a report from before the ``interval``
    setting used the two-level bootstrap, and renders as it always did). ``form``: where the words go
    ('colon', 'short', 'over', 'band')."""
    if agg["config"].get("interval", "two_level_bootstrap") == "two_level_bootstrap":
        return {
            "colon": f"95 % two-level bootstrap: seeds, then {unit}",
            "short": "95 % two-level bootstrap",
            "over": f"95 % two-level bootstrap over seeds, then {unit}",
            "band": f"95 % two-level bootstrap (seeds, then {unit})",
        }[form]
    return f"95 % t interval over independent replicates and {unit}"


def interval_note(agg: dict, unit: str) -> str:
    """The report's sentence on its intervals."""
    if agg["config"].get("interval", "two_level_bootstrap") == "two_level_bootstrap":
        return (
            f"Intervals: [{interval_name(agg, unit)}]. They include seed-to-seed variance; "
            "with few seeds the seed level is coarse, so every seed's own value is listed below too."
        )
    shared = agg["config"].get("warm_start", "shared") == "shared"
    return (
        f"Intervals: [{interval_name(agg, unit)}]: the half-width combines the spread of the replicate means "
        f"(t with S - 1 degrees of freedom) and of the {unit}' means (t with P - 1); coverage checked by "
        "simulation (tests/search/test_intervals.py). "
        + (
            "All seeds share one warm start, so the replicates are not independent end to end and the "
            "interval misses the warm start's spread."
            if shared
            else "Each seed is a replicate independent end to end: its own warm start, RL runs and evaluation draws."
        )
    )


@dataclass(frozen=True)
class Setting:
    """A setting only one domain reads: its default and what it means (a field of DemoConfig)."""

    default: object
    doc: str


class Domain:
    """What one demo domain contributes. Subclasses set the class attributes and implement the
    methods that raise ``NotImplementedError``; the others have defaults that fit most domains."""

    name: str = ""
    """``--domain`` value and the name recorded in ``DemoConfig.domain``."""
    task: str = ""
    """The registered vpo task the jobs run (``vpo train``'s ``task``, ``vpo eval --task``)."""
    summary: str = ""
    """One line for ``vpo demo --help``."""
    settings: dict[str, Setting] = {}
    """Settings only this domain reads, in the order error messages name them."""
    unit: str = "problems"
    """What the report counts (plural)."""
    ceiling_label: str = "ceiling"
    """The legend of the best@k plot's ceiling line."""
    coverage_plot: tuple[str, str, str] = ("pareto_coverage", "fraction of the exact Pareto front hit", "")
    """``(metric, y label, title)`` of the report's second plot, saved as ``<metric>.png``."""
    done_label: str = "completed answers"
    """The answers the completed-diversity plot counts."""
    completion_label: str = "completion rate"
    """The title of the completion-rate bar plot."""
    extra_curves: tuple[str, ...] = ()
    """Curves ``[P, len(ks)]`` that :meth:`extra_stats` adds to every run's statistics."""
    readme_begin: str = ""
    readme_end: str = ""
    """The README markers around this domain's table (:meth:`readme_table`)."""

    # -- the task and its settings ------------------------------------------------------------
    def task_options(self, cfg: DemoConfig) -> dict:
        """The task's options (``vpo train``'s ``task_options``, ``vpo eval --task-options``)."""
        raise NotImplementedError

    def make_task(self, cfg: DemoConfig, evaluation: bool = False):
        """The task with the config's options; ``evaluation``: as the evaluations build it (with
        ``test_seed``, :meth:`DemoConfig.eval_task_options`), which the report must read its problems from."""
        from vpo.tasks import get

        return get(self.task, **self.options(cfg, evaluation))

    def options(self, cfg: DemoConfig, evaluation: bool = False) -> dict:
        """:meth:`task_options`, or with ``evaluation`` the evaluations' (``test_seed`` added)."""
        return cfg.eval_task_options() if evaluation else self.task_options(cfg)

    def check(self, cfg: DemoConfig) -> None:
        """Raise :class:`~vpo.errors.UserError` on a setting of this domain that a later stage would refuse."""

    def record(self) -> dict:
        """What the warm start's and the evaluations' settings records (their resume hashes) say about
        the domain: its name."""
        return {"domain": self.name}

    def warm_settings(self, cfg: DemoConfig) -> dict:
        """This domain's settings that the warm start reads besides the task options."""
        return {}

    def binary_objectives(self, cfg: DemoConfig) -> tuple[str, ...]:
        """The objectives whose rewards are 0 or 1: training-reward noise flips them
        (``train_noise_flip``) instead of adding Gaussian noise (``train_noise_sigma``)."""
        return ()

    # -- the warm start -----------------------------------------------------------------------
    def warm_answer_sampler(self, cfg: DemoConfig, rng: np.random.Generator) -> Callable[[dict], str]:
        """``sample(example) -> answer text``: the warm start's random (valid, mediocre) answers."""
        raise NotImplementedError

    # -- statistics ---------------------------------------------------------------------------
    def answer_key(self, examples: list[dict]) -> Callable[[int, str], object]:
        """``key(problem index, answer text)``: what makes two completed answers the same (distinct
        answers count distinct keys). Default: the text itself."""
        return lambda p, text: text

    def fronts(self, examples: list[dict]) -> list[np.ndarray]:
        """Each problem's exact Pareto-front reward vectors ``[F, d]`` (coverage and ceilings use them)."""
        raise NotImplementedError

    def extra_stats(self, g, ks: list[int], seeds: list[int]) -> dict[str, np.ndarray]:
        """Statistics only this domain reports, per problem (``g``: the grouped pool of
        :func:`vpo.search.metrics.group_by_prompt`); the keys are :attr:`extra_curves`."""
        return {}

    # -- the report ---------------------------------------------------------------------------
    def markdown(self, agg: dict) -> str:
        """``report.md`` of a finished run (``agg``: what :func:`vpo.demo.runner.aggregate` returns).
        The formatting helpers are :mod:`vpo.demo.report`'s (imported inside the methods: the config
        imports this module, and the report pulls in the plotting stack)."""
        raise NotImplementedError

    def readme_table(self, agg: dict) -> str:
        """The README's table of this domain, between :attr:`readme_begin` and :attr:`readme_end`."""
        raise NotImplementedError


class MazeDomain(Domain):
    """Designed-conflict mazes (:mod:`vpo.tasks.maze`): the demo's default and first domain."""

    name = "maze"
    task = "maze"
    summary = "maze (default): designed-conflict mazes"
    settings = {
        "maze_size": Setting(5, "Maze side in tiles (odd)."),
        "budget_slack": Setting(
            2,
            "*regime*: moves allowed beyond the longest single-zone route (0: only shortest routes finish; 2: a "
            "route can detour for more items of its zone, and many routes share one reward vector).",
        ),
        "items_per_zone": Setting((3, 5), "*regime*: items in each zone (inclusive range)."),
        "zone_radius": Setting(2, "*regime*: items lie within this Manhattan distance of their zone's corner."),
        "lava": Setting((1, 1), "*regime*: lava tiles (inclusive range)."),
        "zones": Setting(
            "split",
            "'split' (designed conflict: gold and diamond zones at opposite corners, never both in budget) or "
            "'shared' (both in one zone: the objectives move together, the control where VPO should not help).",
        ),
        "warm_waypoints": Setting(
            2, "*regime* (warm-start breadth): random intermediate tiles a warm-start route may visit."
        ),
        "warm_wander": Setting(
            0.3,
            "*regime* (warm-start breadth): probability of a random (budget-keeping) move instead of a "
            "shortest-path move in a warm-start route.",
        ),
    }
    unit = "mazes"
    ceiling_label = "ceiling: best single route (exact search)"
    coverage_plot = (
        "pareto_coverage",
        "fraction of the exact Pareto front hit",
        "Pareto coverage vs answer budget",
    )
    readme_begin = "<!-- demo-table: generated by vpo.demo.report.readme_table from docs/demo/maze10/demo.json -->"
    readme_end = "<!-- /demo-table -->"

    def task_options(self, cfg: DemoConfig) -> dict:
        return {
            "size": cfg.maze_size,
            "budget_slack": cfg.budget_slack,
            "items_per_zone": list(cfg.items_per_zone),
            "zone_radius": cfg.zone_radius,
            "lava": list(cfg.lava),
            "zones": cfg.zones,
            "compact": True,
            "instruction": cfg.instruction,
        }

    def make_task(self, cfg: DemoConfig, evaluation: bool = False):
        from vpo.tasks.maze import MazeTask

        return MazeTask(**self.options(cfg, evaluation))

    def binary_objectives(self, cfg: DemoConfig) -> tuple[str, ...]:
        return ("completion", "avoid_lava")

    def check(self, cfg: DemoConfig) -> None:
        if not 0.0 <= cfg.warm_wander <= 1.0:
            raise UserError(f"warm_wander must be in [0, 1], got {cfg.warm_wander}")
        for name in ("items_per_zone", "lava"):
            v = getattr(cfg, name)
            if len(v) != 2 or v[0] > v[1] or v[0] < (1 if name == "items_per_zone" else 0):
                raise UserError(f"{name} must be an inclusive range 'lo,hi' with lo <= hi, got {v}")
        try:
            from vpo.tasks.maze import MazeConfig

            MazeConfig(
                cfg.maze_size,
                None,
                tuple(cfg.items_per_zone),
                cfg.zone_radius,
                tuple(cfg.lava),
                cfg.budget_slack,
                zones=cfg.zones,
            ).resolved()
        except ValueError as e:
            raise UserError(f"maze settings: {e}") from None

    def record(self) -> dict:
        # the maze's records predate the domain setting: without the name, their hashes (and the
        # resume of maze runs made before it) stay as they were
        return {}

    def warm_settings(self, cfg: DemoConfig) -> dict:
        return {"warm_waypoints": cfg.warm_waypoints, "warm_wander": cfg.warm_wander}

    def warm_answer_sampler(self, cfg: DemoConfig, rng: np.random.Generator) -> Callable[[dict], str]:
        """Random valid routes (:func:`vpo.tasks.maze.random_route`) with detours as wide as the config says."""
        from vpo.tasks.maze import Maze, random_route

        def route(ex):
            return random_route(Maze.from_example(ex), rng, waypoints=cfg.warm_waypoints, wander=cfg.warm_wander).moves

        return route

    def answer_key(self, examples: list[dict]) -> Callable[[int, str], object]:
        """A route's executed moves: two texts that walk the same route count once."""
        from vpo.tasks.maze import Maze, parse_route, run_route

        mazes = [Maze.from_example(ex) for ex in examples]

        def key_of(p, text):
            mv = parse_route(text)
            return run_route(mazes[p], mv).moves if mv is not None else None

        return key_of

    def fronts(self, examples: list[dict]) -> list[np.ndarray]:
        """Each maze's exact Pareto-front reward vectors ``[F, 4]`` (:func:`vpo.tasks.maze.pareto_routes`)."""
        from vpo.tasks.maze import Maze, pareto_routes

        return [np.stack([r.reward for r in pareto_routes(Maze.from_example(ex))]) for ex in examples]

    def markdown(self, agg: dict) -> str:
        """The maze report: best@k, Pareto coverage, diversity among completed answers, other preferences."""
        from vpo.demo.report import _ci, _fmt, _k

        cfg = agg["config"]
        ks = cfg["ks"]
        kmax = max(ks)
        top = [k for k in (10, 30) if k in ks] or [kmax]
        rows = agg["methods"]
        L = [
            f"# vpo demo: VPO vs GRPO and the baselines on designed-conflict mazes (CPU, {cfg['split']} split)",
            "",
            f"{cfg['maze_size']}x{cfg['maze_size']} mazes, budget slack {cfg['budget_slack']}, items per zone "
            f"{cfg['items_per_zone']}, lava {cfg['lava']}; tiny Qwen2 ({cfg['num_layers']} layers, hidden "
            f"{cfg['hidden_size']}, one token per character); warm start {cfg['warm_steps']} steps on random routes "
            f"(waypoints {cfg['warm_waypoints']}, wander {cfg['warm_wander']}); RL {cfg['rl_steps']} steps x "
            f"{cfg['prompts_per_step']} mazes x {cfg['num_generations']} rollouts at lr {cfg['rl_lr']}; seeds "
            f"{cfg['seeds']}; evaluation on {agg['num_mazes']} {cfg['split']} mazes at T = {cfg['eval_temperature']}, "
            f"{cfg['eval_budget']} answers per maze, best@k at a matched answer budget (multi-answer policies: "
            f"ceil(k/m) rollouts, first k answers), {cfg['eval_seeds']} draws.",
            "",
            interval_note(agg, "mazes"),
            "",
            "## Search on w* and what the pools contain",
            "",
            "| method | " + " | ".join(f"best@{k}" for k in ks) + " | reward@1 | pass@1 | completion | "
            "diversity (all) | diversity (completed) | Pareto cov.@"
            + str(kmax)
            + " | distinct routes | union cov. | ρ̄ | tokens/rollout |",
            "|---|" + "---|" * (len(ks) + 10),
        ]
        for r in rows.values():
            L.append(
                f"| {r['label']} | "
                + " | ".join(_fmt(_k(r["best_at_k"], k)["mean"]) for k in ks)
                + f" | {_fmt(r['reward_at_1']['mean'])} | {_fmt(r['pass_at_1']['mean'])} | {_fmt(r['completion_rate']['mean'])}"
                f" | {_fmt(r['diversity']['mean'])} | {_fmt(r['completed_diversity']['mean'])}"
                f" | {_fmt(_k(r['pareto_coverage'], kmax)['mean'])} | {_fmt(r['distinct_routes']['mean'], 2)}"
                f" | {_fmt(r['union_coverage']['mean'])} | {_fmt(r.get('collinearity', {}).get('mean'), 2)} | {_fmt(r['tokens_per_rollout']['mean'], 1)} |"
            )
        L += [
            "",
            f"Ceiling (best single route per maze by exact search, under w*): {agg['ceilings']['w*']:.3f}; the exact "
            f"Pareto front has {agg['front_size']:.2f} trade-offs per maze on average. Completion: fraction of answers "
            "that reach E. Diversity (all): mean pairwise L1 of reward vectors over every answer (the paper's "
            "definition; a failed route is the all-zero vector, so failing raises it). Diversity (completed): the "
            "same over completed answers only (0 for a maze with fewer than two). Pareto cov.: fraction of the "
            "maze's exact Pareto-front vectors that some answer hits. Distinct routes: distinct executed routes "
            "among completed answers in the pool. Union cov.: Σ_j max_i r_ij over the pool. ρ̄: mean pairwise "
            "correlation of the objectives over a pool's valid answers (near 1: the objectives move together and "
            "VPO should not help). pass@1 (all four objectives at 1) is impossible by design with split zones.",
            "",
            "## With intervals",
            "",
            "| method | "
            + " | ".join(f"best@{k}" for k in top)
            + f" | Pareto cov.@{kmax} | diversity (completed) | completion |",
            "|---|" + "---|" * (len(top) + 3),
        ]
        for r in rows.values():
            L.append(
                f"| {r['label']} | "
                + " | ".join(_ci(_k(r["best_at_k"], k)) for k in top)
                + f" | {_ci(_k(r['pareto_coverage'], kmax))} | {_ci(r['completed_diversity'])} | {_ci(r['completion_rate'])} |"
            )
        L += [
            "",
            "## Per seed",
            "",
            "| method | "
            + " | ".join(f"best@{k} per seed" for k in top)
            + f" | Pareto cov.@{kmax} per seed | diversity (completed) per seed |",
            "|---|" + "---|" * (len(top) + 2),
        ]
        per = lambda s: " / ".join(_fmt(x) for x in s["per_seed"])  # noqa: E731
        for r in rows.values():
            L.append(
                f"| {r['label']} | "
                + " | ".join(per(_k(r["best_at_k"], k)) for k in top)
                + f" | {per(_k(r['pareto_coverage'], kmax))} | {per(r['completed_diversity'])} |"
            )
        if agg["paired_vs_vpo"]:
            L += [
                "",
                "## VPO minus each method (paired: same seed index, same mazes)",
                "",
                f"mean [{interval_name(agg, 'mazes', 'short')}]; in brackets after the slash, the SE over seeds of the per-seed "
                "differences; the last column is the maze-level SE of best@"
                + str(top[-1])
                + " given the trained models.",
                "",
                "| vs | "
                + " | ".join(f"Δbest@{k}" for k in top)
                + f" | ΔPareto cov.@{kmax} | Δdiversity (completed) | maze-level SE (given models) |",
                "|---|" + "---|" * (len(top) + 3),
            ]
            for other, d in agg["paired_vs_vpo"].items():
                cells = [
                    f"{_ci(_k(d['best_at_k'], k), signed=True)} / {_fmt(_k(d['best_at_k'], k)['se_seeds'])}"
                    for k in top
                ]
                L.append(
                    f"| {rows[other]['label']} | "
                    + " | ".join(cells)
                    + f" | {_ci(_k(d['pareto_coverage'], kmax), signed=True)} | {_ci(d['completed_diversity'], signed=True)}"
                    + f" | {_fmt(_k(d['best_at_k'], top[-1])['se_mazes_given_models'])} |"
                )
        prefs = [p for p in agg["preferences"] if p != "w*"]
        L += [
            "",
            f"## Search under other preferences (best@{kmax})",
            "",
            "Each column scores the same pools under another deployment weighting of (completion, gold, diamond, "
            "avoid_lava); E_w is the mean over fixed Dir(1) weightings.",
            "",
            "| method | w* | " + " | ".join(prefs) + f" | E_w[best@{kmax}] |",
            "|---|" + "---|" * (len(prefs) + 2),
        ]
        L.append("| ceiling | " + " | ".join(_fmt(agg["ceilings"][p]) for p in ["w*"] + prefs) + " | |")
        for r in rows.values():
            L.append(
                f"| {r['label']} | "
                + " | ".join(_ci(_k(r[f"pref_{p}"], kmax)) for p in ["w*"] + prefs)
                + f" | {_ci(_k(r['ew_best_at_k'], kmax))} |"
            )
        L += ["", "weightings: " + "; ".join(f"{p} = {agg['preferences'][p]}" for p in prefs), ""]
        L += report_tail(agg, ["best_at_k", "pareto_coverage", "preferences", "diversity"])
        return "\n".join(L) + "\n"

    def readme_table(self, agg: dict) -> str:
        """The README's demo table: every number is the shipped report's (tests compare the two)."""
        from vpo.demo.report import _ci, _fmt, _k

        cfg = agg["config"]
        kmax = max(cfg["ks"])
        top = [k for k in (1, 10, 30) if k in cfg["ks"]]
        L = [
            self.readme_begin,
            "",
            "| method | " + " | ".join(f"best@{k}" for k in top) + f" | completion | diversity (completed) | "
            f"Pareto cov.@{kmax} | diversity (all, paper) | reward@1 | tokens/rollout |",
            "|---|" + "---|" * (len(top) + 6),
        ]
        for key, r in agg["methods"].items():
            name = f"**{r['label']}**" if key == "vpo" else r["label"]
            L.append(
                f"| {name} | "
                + " | ".join(_fmt(_k(r["best_at_k"], k)["mean"]) for k in top)
                + f" | {_fmt(r['completion_rate']['mean'])} | {_fmt(r['completed_diversity']['mean'])}"
                f" | {_fmt(_k(r['pareto_coverage'], kmax)['mean'])} | {_fmt(r['diversity']['mean'])}"
                f" | {_fmt(r['reward_at_1']['mean'])} | {_fmt(r['tokens_per_rollout']['mean'], 1)} |"
            )
        if agg["paired_vs_vpo"]:
            L += [
                "",
                f"VPO minus each method, paired by seed and maze: mean [{interval_name(agg, 'mazes', 'over')}]",
                "",
                "| vs | "
                + " | ".join(f"Δbest@{k}" for k in top[1:])
                + f" | ΔPareto cov.@{kmax} | Δdiversity (completed) |",
                "|---|" + "---|" * (len(top) + 1),
            ]
            for other, d in agg["paired_vs_vpo"].items():
                if other.startswith("warmstart_m3"):
                    continue
                L.append(
                    f"| {agg['methods'][other]['label']} | "
                    + " | ".join(_ci(_k(d["best_at_k"], k), signed=True) for k in top[1:])
                    + f" | {_ci(_k(d['pareto_coverage'], kmax), signed=True)} | {_ci(d['completed_diversity'], signed=True)} |"
                )
        L += ["", self.readme_end]
        return "\n".join(L)


class ProgDomain(Domain):
    """Programs in a tiny language (:mod:`vpo.tasks.prog`), one reward component per test case. Each
    problem's front is the all-pass vector, so Pareto coverage is pass@k, "completed" means passing
    at least one test and distinct answers are distinct programs (same AST)."""

    name = "prog"
    task = "prog"
    summary = "prog: tiny-language programs, one reward component per test case"
    settings = {
        "prog_tests": Setting(8, "prog only: test cases per problem (= reward components d)."),
        "prog_pieces": Setting(2, "prog only: lines per target function (2 or 3)."),
        "prog_cases": Setting(
            "threshold", "prog only: how the target splits its inputs: 'threshold', 'parity' or 'mixed'."
        ),
        "prog_min_piece": Setting(3, "prog only: fewest tests per piece."),
        "prog_slope": Setting(
            (0, 0),
            "prog only, *regime*: slopes of the target lines (inclusive range; the warm start's lines use it "
            "too). 0: piecewise-constant targets (step functions), the only regime in which the 0.7 M model "
            "learned to read the examples within the demo's budget; the task's own default is (0, 3) "
            '(docs/demo.md, "Second domain").',
        ),
        "prog_intercept": Setting((0, 9), "prog only: intercepts of the target lines (inclusive range)."),
    }
    unit = "problems"
    ceiling_label = "ceiling: the reference program"
    coverage_plot = ("pass_at_k", "fraction of problems with an all-pass answer", "pass@k vs answer budget")
    done_label = "answers passing >= 1 test"
    completion_label = "passing >= 1 test"
    extra_curves = ("pass_at_k",)
    readme_begin = "<!-- prog-demo-table: generated by vpo.demo.report.readme_table from docs/demo/prog10/demo.json -->"
    readme_end = "<!-- /prog-demo-table -->"

    def task_options(self, cfg: DemoConfig) -> dict:
        return {
            "tests": cfg.prog_tests,
            "pieces": cfg.prog_pieces,
            "cases": cfg.prog_cases,
            "min_piece": cfg.prog_min_piece,
            "slope": list(cfg.prog_slope),
            "intercept": list(cfg.prog_intercept),
            "compact": True,
            "instruction": cfg.instruction,
        }

    def binary_objectives(self, cfg: DemoConfig) -> tuple[str, ...]:
        return tuple(f"test_{i}" for i in range(1, cfg.prog_tests + 1))  # a test passes or fails

    def make_task(self, cfg: DemoConfig, evaluation: bool = False):
        from vpo.tasks.prog import ProgTask

        return ProgTask(**self.options(cfg, evaluation))

    def check(self, cfg: DemoConfig) -> None:
        try:
            self.make_task(cfg)
        except ValueError as e:
            raise UserError(f"prog settings: {e}") from None

    def warm_answer_sampler(self, cfg: DemoConfig, rng: np.random.Generator) -> Callable[[dict], str]:
        """Valid programs built from the shown pairs (:func:`vpo.tasks.prog.random_program`), mostly
        passing one piece."""
        from vpo.tasks.prog import random_program

        return lambda ex: random_program(ex, rng, slopes=tuple(cfg.prog_slope)).program

    def answer_key(self, examples: list[dict]) -> Callable[[int, str], object]:
        """A program's canonical AST text."""
        from vpo.tasks.prog import canonical_program

        return lambda p, text: canonical_program(text)

    def fronts(self, examples: list[dict]) -> list[np.ndarray]:
        """Each problem's Pareto front ``[1, d]``: the all-pass vector, which the reference program
        reaches and which dominates every other reward vector."""
        return [np.ones((1, len(ex["inputs"]))) for ex in examples]

    def extra_stats(self, g, ks: list[int], seeds: list[int]) -> dict[str, np.ndarray]:
        """``pass_at_k``: some answer of the matched-budget sub-pool passes every test, with the same
        draws as best@k (so pass@k <= best@k at every k)."""
        from vpo.search.metrics import matched_best_at_k

        passes = np.where(g.present[..., None], (g.valid & (g.rewards >= 1.0).all(-1)).astype(float), -np.inf)
        return {"pass_at_k": np.mean([matched_best_at_k(passes, g.present, ks, rng=seed) for seed in seeds], axis=0)}

    def markdown(self, agg: dict) -> str:
        """The prog domain's report: pass@1, pass@k and best@k, ρ̄ of the test components, diversity among
        answers passing at least one test, distinct programs; the ceiling is 1 (the reference passes all)."""
        from vpo.demo.report import _ci, _fmt, _k

        cfg = agg["config"]
        ks = cfg["ks"]
        kmax = max(ks)
        top = [k for k in (10, 30) if k in ks] or [kmax]
        rows = agg["methods"]
        L = [
            f"# vpo demo --domain prog: VPO vs GRPO and the baselines on piecewise program synthesis (CPU, {cfg['split']} split)",
            "",
            f"Programs in a tiny language checked on {cfg['prog_tests']} tests each (one reward component per test), "
            f"targets of {cfg['prog_pieces']} {_prog_lines(cfg)} split by {cfg['prog_cases']}, at least {cfg['prog_min_piece']} tests "
            f"per piece (docs/prog_task.md); tiny Qwen2 ({cfg['num_layers']} layers, hidden {cfg['hidden_size']}, one "
            f"token per character); warm start {cfg['warm_steps']} steps on random programs; RL {cfg['rl_steps']} steps x "
            f"{cfg['prompts_per_step']} problems x {cfg['num_generations']} rollouts at lr {cfg['rl_lr']}; seeds "
            f"{cfg['seeds']}; evaluation on {agg['num_mazes']} {cfg['split']} problems at T = {cfg['eval_temperature']}, "
            f"{cfg['eval_budget']} answers per problem, best@k and pass@k at a matched answer budget (multi-answer "
            f"policies: ceil(k/m) rollouts, first k answers), {cfg['eval_seeds']} draws.",
            "",
            interval_note(agg, "problems"),
            "",
            "## Search on w* (pass rate) and what the pools contain",
            "",
            "| method | "
            + " | ".join(f"best@{k}" for k in ks)
            + " | pass@1 | "
            + " | ".join(f"pass@{k}" for k in ks[1:])
            + " | reward@1 | ≥1 test | diversity (all) | diversity (≥1 test) | distinct programs | union cov. | ρ̄ | tokens/rollout |",
            "|---|" + "---|" * (2 * len(ks) + 8),
        ]
        for r in rows.values():
            L.append(
                f"| {r['label']} | "
                + " | ".join(_fmt(_k(r["best_at_k"], k)["mean"]) for k in ks)
                + f" | {_fmt(r['pass_at_1']['mean'])} | "
                + " | ".join(_fmt(_k(r["pass_at_k"], k)["mean"]) for k in ks[1:])
                + f" | {_fmt(r['reward_at_1']['mean'])} | {_fmt(r['completion_rate']['mean'])}"
                f" | {_fmt(r['diversity']['mean'])} | {_fmt(r['completed_diversity']['mean'])} | {_fmt(r['distinct_routes']['mean'], 2)}"
                f" | {_fmt(r['union_coverage']['mean'])} | {_fmt(r['collinearity']['mean'], 2)} | {_fmt(r['tokens_per_rollout']['mean'], 1)} |"
            )
        L += [
            "",
            f"Ceiling: {agg['ceilings']['w*']:.3f} (the reference program passes every test of every problem). best@k: "
            "the best pass rate among k answers. pass@1: the first answer of a rollout passes every test; pass@k: "
            "some answer of the matched-budget sub-pool passes every test (the all-pass vector is each problem's "
            "whole Pareto front, so this is also its Pareto coverage). ≥1 test: fraction of answers passing at least "
            "one test (the prog counterpart of the maze's completion). Diversity (all): mean pairwise L1 of the "
            "reward vectors over every answer (the paper's definition); diversity (≥1 test): the same over answers "
            "passing at least one test. Distinct programs: distinct canonical programs (same AST) among those. "
            "Union cov.: Σ_j max_i r_ij, tests passed by some answer. ρ̄: mean pairwise correlation of the test "
            "components over a pool's valid answers.",
            "",
            "## With intervals",
            "",
            "| method | "
            + " | ".join(f"best@{k}" for k in top)
            + " | "
            + " | ".join(f"pass@{k}" for k in top)
            + " | diversity (≥1 test) | ≥1 test |",
            "|---|" + "---|" * (2 * len(top) + 2),
        ]
        for r in rows.values():
            L.append(
                f"| {r['label']} | "
                + " | ".join(_ci(_k(r["best_at_k"], k)) for k in top)
                + " | "
                + " | ".join(_ci(_k(r["pass_at_k"], k)) for k in top)
                + f" | {_ci(r['completed_diversity'])} | {_ci(r['completion_rate'])} |"
            )
        per = lambda s: " / ".join(_fmt(x) for x in s["per_seed"])  # noqa: E731
        L += [
            "",
            "## Per seed",
            "",
            "| method | "
            + " | ".join(f"best@{k} per seed" for k in top)
            + f" | pass@{kmax} per seed | diversity (≥1 test) per seed |",
            "|---|" + "---|" * (len(top) + 2),
        ]
        for r in rows.values():
            L.append(
                f"| {r['label']} | "
                + " | ".join(per(_k(r["best_at_k"], k)) for k in top)
                + f" | {per(_k(r['pass_at_k'], kmax))} | {per(r['completed_diversity'])} |"
            )
        if agg["paired_vs_vpo"]:
            L += [
                "",
                "## VPO minus each method (paired: same seed index, same problems)",
                "",
                f"mean [{interval_name(agg, 'problems', 'short')}] / SE over seeds of the per-seed differences.",
                "",
                "| vs | "
                + " | ".join(f"Δbest@{k}" for k in top)
                + " | "
                + " | ".join(f"Δpass@{k}" for k in top)
                + " | Δdiversity (≥1 test) |",
                "|---|" + "---|" * (2 * len(top) + 1),
            ]
            for other, d in agg["paired_vs_vpo"].items():
                cells = [
                    f"{_ci(_k(d[c], k), signed=True)} / {_fmt(_k(d[c], k)['se_seeds'])}"
                    for c in ("best_at_k", "pass_at_k")
                    for k in top
                ]
                L.append(
                    f"| {rows[other]['label']} | "
                    + " | ".join(cells)
                    + f" | {_ci(d['completed_diversity'], signed=True)} |"
                )
        L += [
            "",
            f"E_w[best@{kmax}] over fixed Dir(1) weightings of the tests: "
            + "; ".join(f"{r['label']} {_ci(_k(r['ew_best_at_k'], kmax))}" for r in rows.values())
            + ".",
            "",
        ]
        L += report_tail(agg, ["best_at_k", "pass_at_k", "diversity"])
        return "\n".join(L) + "\n"

    def readme_table(self, agg: dict) -> str:
        """The README's table of the prog domain: every number is the shipped prog report's."""
        from vpo.demo.report import _ci, _fmt, _k

        cfg = agg["config"]
        ks = cfg["ks"]
        top = [k for k in (10, 30) if k in ks] or [max(ks)]
        L = [
            self.readme_begin,
            "",
            "| method | "
            + " | ".join(f"best@{k}" for k in top)
            + " | pass@1 | "
            + " | ".join(f"pass@{k}" for k in top)
            + " | ≥1 test | diversity (≥1 test) | distinct programs | ρ̄ |",
            "|---|" + "---|" * (2 * len(top) + 5),
        ]
        for key, r in agg["methods"].items():
            name = f"**{r['label']}**" if key == "vpo" else r["label"]
            L.append(
                f"| {name} | "
                + " | ".join(_fmt(_k(r["best_at_k"], k)["mean"]) for k in top)
                + f" | {_fmt(r['pass_at_1']['mean'])} | "
                + " | ".join(_fmt(_k(r["pass_at_k"], k)["mean"]) for k in top)
                + f" | {_fmt(r['completion_rate']['mean'])} | {_fmt(r['completed_diversity']['mean'])}"
                f" | {_fmt(r['distinct_routes']['mean'], 2)} | {_fmt(r['collinearity']['mean'], 2)} |"
            )
        if agg["paired_vs_vpo"]:
            L += [
                "",
                f"VPO minus each method, paired by seed and problem: mean [{interval_name(agg, 'problems', 'over')}]",
                "",
                "| vs | "
                + " | ".join(f"Δbest@{k}" for k in top)
                + " | "
                + " | ".join(f"Δpass@{k}" for k in top)
                + " | Δdiversity (≥1 test) |",
                "|---|" + "---|" * (2 * len(top) + 1),
            ]
            for other, d in agg["paired_vs_vpo"].items():
                if other.startswith("warmstart_m3"):
                    continue
                L.append(
                    f"| {agg['methods'][other]['label']} | "
                    + " | ".join(_ci(_k(d[c], k), signed=True) for c in ("best_at_k", "pass_at_k") for k in top)
                    + f" | {_ci(d['completed_diversity'], signed=True)} |"
                )
        L += ["", self.readme_end]
        return "\n".join(L)


def _prog_lines(cfg: dict) -> str:
    """The target pieces in words: 'constants 0-9' for slope 0, else 'lines (slopes a-b, intercepts c-d)'."""
    s = list(cfg.get("prog_slope", (0, 3)))
    b = list(cfg.get("prog_intercept", (0, 9)))
    if s == [0, 0]:
        return f"constants ({b[0]}-{b[1]})"
    return f"lines (slopes {s[0]}-{s[1]}, intercepts {b[0]}-{b[1]})"


DOMAINS: dict[str, Domain] = {d.name: d for d in (MazeDomain(), ProgDomain())}
"""The demo's domains by name (``--domain`` choices, in this order)."""


def domain_named(name: str) -> Domain:
    """The domain object of a ``DemoConfig.domain`` value."""
    try:
        return DOMAINS[name]
    except KeyError:
        raise UserError(f"domain must be one of {', '.join(DOMAINS)}, got {name!r}") from None


def domain_of(record: dict) -> Domain:
    """The domain of a recorded config (a ``demo.json``'s ``config``); records from before the
    domain setting are mazes."""
    return domain_named(record.get("domain", DEFAULT_DOMAIN))

"""What a demo domain is (:class:`Domain`, :class:`Setting`) and the report helpers every domain
uses. The domains themselves are in :mod:`vpo.demo.domains` (maze, prog) and :mod:`vpo.demo.shop`
(a pretrained chat model); this module sits below them, so none imports another's module back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from vpo.demo.fmt import at_k, ci, fmt


if TYPE_CHECKING:  # the config imports this module (for the domains' settings), not the other way round
    from vpo.demo.config import DemoConfig

DEFAULT_DOMAIN = "maze"
"""The domain of ``DemoConfig()`` and of records written before the demo had a second one."""


def num_problems(agg: dict) -> int:
    """The problems the evaluations scored (mazes, programs, requests): demo.json's ``num_mazes``, a
    name from when the maze was the only domain, kept so that every shipped demo.json still reads."""
    return agg["num_mazes"]


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
class Metric:
    """A summary a report's interval, per-seed and paired tables show: ``row[key]``, taken at ``k``
    for a curve (best@k, pass@k), under ``label``. ``seed_se``: the paired cell also gives the SE over
    seeds of the per-seed differences (:func:`diff_cell`). ``digits``: the decimals of its mean in the
    README's table (:meth:`Domain.readme_table`)."""

    label: str
    key: str
    k: int | None = None
    seed_se: bool = False
    digits: int = 3

    def of(self, row: dict) -> dict:
        return row[self.key] if self.k is None else at_k(row[self.key], self.k)


def curve_metrics(key: str, name: str, ks, seed_se: bool = True) -> list[Metric]:
    """``name@k`` of the curve ``key`` at each of ``ks``."""
    return [Metric(f"{name}@{k}", key, k, seed_se) for k in ks]


@dataclass(frozen=True)
class Report:
    """A domain's report as data (:meth:`Domain.report`); :meth:`lines` writes it."""

    title: str
    setup: str
    """The paragraph on what was run (task, model, training, evaluation)."""
    means_heading: str
    means: list[tuple[str, Callable[[dict], str]]]
    """The first table's columns: ``(heading, cell(method's row))``."""
    glossary: str
    """What the first table's columns mean."""
    intervals: list[Metric]
    per_seed: list[Metric]
    paired: list[Metric]
    paired_heading: str
    paired_note: str
    paired_extra: list[tuple[str, Callable[[dict], str]]] = ()
    """Columns of the paired table after :attr:`paired`'s: ``(heading, cell(differences))``."""
    closing: list[str] = ()
    """The domain's own lines after the tables (other preferences, E_w)."""

    def lines(self, agg: dict, unit: str) -> list[str]:
        rows = agg["methods"]
        L = [f"# {self.title}", "", self.setup, "", interval_note(agg, unit), "", f"## {self.means_heading}", ""]
        L += method_table(rows, self.means)
        L += ["", self.glossary, "", "## With intervals", ""]
        L += method_table(rows, [(m.label, lambda r, m=m: ci(m.of(r))) for m in self.intervals])
        L += ["", "## Per seed", ""]
        L += method_table(rows, [(f"{m.label} per seed", lambda r, m=m: per_seed(m.of(r))) for m in self.per_seed])
        if agg["paired_vs_vpo"]:
            L += ["", f"## {self.paired_heading}", "", self.paired_note, ""]
            cells = [
                (f"Δ{m.label}", lambda d, m=m: diff_cell(m.of(d)) if m.seed_se else ci(m.of(d), signed=True))
                for m in self.paired
            ]
            L += paired_table(agg, cells + list(self.paired_extra))
        return L + list(self.closing)


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
    shared_settings: tuple[str, ...] = ()
    """Another domain's settings this domain reads too (the animals domain reads the shop domain's model,
    LoRA rank and device): setting them is no mistake when this domain runs."""
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
    report_plots: tuple[str, ...] = ("best_at_k", "pareto_coverage", "preferences", "diversity")
    """The plots the report shows after its tables (PNG names :func:`vpo.demo.report.plot_demo` writes)."""
    readme_begin: str = ""
    readme_end: str = ""
    """The README markers around this domain's table (:meth:`readme_table`)."""
    job_costs_s: dict[str, float] = {}
    """One-core seconds of this domain's jobs, measured on the idle 2-core machine, for ``vpo demo``'s
    time estimate (:func:`vpo.demo.cli.estimate_minutes`): ``warm`` (a warm start of 600 steps, one
    thread, two side by side), ``eval`` (one evaluation of 100 problems x 30 answers) and each method's
    60-step RL job; methods not listed cost like VPO (multi-answer) or GRPO. Empty: the default domain's."""
    job_memory_gib: dict[str, float] = {}
    """Peak resident memory (GiB) of one job's process, measured on the idle machine, for ``vpo demo``'s
    memory estimate (:func:`vpo.demo.cli.memory_note`): ``warm``, ``train`` and ``eval``. A long-lived
    worker keeps the largest job it ran, so the estimate takes the largest for every job slot. Empty:
    not measured (the estimate line then says nothing of memory)."""

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

    defaults: dict[str, object] = {}
    """Shared settings whose default differs for this domain (``vpo demo --domain NAME`` starts from
    them; :meth:`vpo.demo.config.DemoConfig.for_domain`)."""
    quick: dict[str, object] = {}
    """What ``--quick`` changes for this domain besides the shared quick settings."""

    # -- the model ----------------------------------------------------------------------------
    def prepare(self, cfg: DemoConfig) -> None:
        """Once per invocation, before any job: fetch what the stages need (a pretrained model)."""

    def init_model(self, cfg: DemoConfig, out, warm_seed: int | None):
        """The checkpoint a warm start fine-tunes: by default the tiny Qwen2 built from the seed."""
        from vpo.train.tiny import build_tiny_model

        return build_tiny_model(
            out / ("init" if warm_seed is None else f"init_s{warm_seed}"),
            hidden_size=cfg.hidden_size,
            num_layers=cfg.num_layers,
            num_heads=4,
            seed=warm_seed or 0,
        )

    def warm_kwargs(self, cfg: DemoConfig) -> dict:
        """Extra keywords of :func:`vpo.train.warmstart.supervised_warm_start` (default: none)."""
        return {}

    def train_overrides(self, cfg: DemoConfig) -> dict:
        """Changes to every ``vpo train`` config of the domain (a key set to None is dropped). The tiny
        model's domains keep transformers' generate, with which their shipped reports were made (vpo's
        CPU sampler draws the same distribution from other random numbers)."""
        return {"fast_generation": False}

    def eval_args(self, cfg: DemoConfig) -> list[str]:
        """Arguments added to every ``vpo eval`` job of the domain (the tiny model's domains: generate,
        as in their shipped reports)."""
        return ["--plain-generate"]

    # -- the warm start -----------------------------------------------------------------------
    def warm_answer_sampler(self, cfg: DemoConfig, rng: np.random.Generator) -> Callable[[dict], str]:
        """``sample(example) -> answer text``: the warm start's random (valid, mediocre) answers."""
        raise NotImplementedError

    def random_answer(self, cfg: DemoConfig) -> Callable[[dict, np.random.Generator], str] | None:
        """``draw(example, rng) -> answer text``: the uniform random answerer of ``random_answerer``
        (uniform over what the problem lists), or None where the domain has none (the default)."""
        return None

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
    def report(self, agg: dict) -> Report:
        """What this domain's ``report.md`` says of a finished run (``agg``: what
        :func:`vpo.demo.runner.aggregate` returns), as data: :meth:`markdown` lays it out."""
        raise NotImplementedError

    def markdown(self, agg: dict) -> str:
        """The domain's part of ``report.md``: :meth:`report` laid out as every domain's report is
        (set-up, a table of means, what its columns mean, the same with intervals, every seed's value,
        VPO minus each method, then the domain's own closing lines). :func:`vpo.demo.report.markdown`
        adds the tail every report shares."""
        return "\n".join(self.report(agg).lines(agg, self.unit))

    readme_unit: tuple[str, str] = ("problem", "problems")
    """How the README's paired table names one problem and many (maze/mazes, request/requests)."""

    def readme_columns(self, agg: dict) -> list[Metric | tuple[str, Callable[[dict], str]]]:
        """The README table's columns: a :class:`Metric` (its mean, ``digits`` decimals, under its
        label), or ``(heading, cell(method's summary))`` for another cell."""
        raise NotImplementedError

    def readme_paired_columns(self, agg: dict) -> list[Metric]:
        """The README's paired table's columns: VPO minus the method in each metric, with its interval,
        under "Δ" and the metric's label."""
        raise NotImplementedError

    readme_skip_pairs: tuple[str, ...] = ()
    """Methods the README's paired table leaves out (e.g. the m = 3 warm start, said in the report)."""

    def readme_table(self, agg: dict) -> str:
        """The README's table of this domain, between :attr:`readme_begin` and :attr:`readme_end`: one
        row per method (VPO's in bold), then VPO minus each method with its interval. Every number is
        the shipped report's (tests compare the two)."""
        cols = [
            (c.label, lambda r, c=c: fmt(c.of(r)["mean"], c.digits)) if isinstance(c, Metric) else c
            for c in self.readme_columns(agg)
        ]
        rows = (
            (f"**{r['label']}**" if key == "vpo" else r["label"], [cell(r) for _, cell in cols])
            for key, r in agg["methods"].items()
        )
        lines = [self.readme_begin, "", *table("method", [c for c, _ in cols], rows)]
        if agg["paired_vs_vpo"]:
            one, many = self.readme_unit
            paired = [(f"Δ{m.label}", lambda d, m=m: ci(m.of(d), signed=True)) for m in self.readme_paired_columns(agg)]
            pairs = (
                (agg["methods"][other]["label"], [cell(d) for _, cell in paired])
                for other, d in agg["paired_vs_vpo"].items()
                if not other.startswith(self.readme_skip_pairs or ("\0",))
            )
            lines += [
                "",
                f"VPO minus each method, paired by seed and {one}: mean [{interval_name(agg, many, 'over')}]",
                "",
                *table("vs", [c for c, _ in paired], pairs),
            ]
        return "\n".join([*lines, "", self.readme_end])


def rho_cell(row: dict) -> str:
    """A report's ρ̄ cell: the mean, and when some problems leave it undefined (fewer than two valid
    answers that vary: a collapsed pool) over how many (seed, problem) values it is, e.g. "0.41 (87/100)"."""
    c = row.get("collinearity") or {}
    cell = fmt(c.get("mean"), 2)
    if "defined" in c:
        cell += f" ({c['defined'][0]}/{c['defined'][1]})"
    return cell


def table(head: str, columns: list[str], rows) -> list[str]:
    """A markdown table's lines: ``| head | columns... |``, its separator, and one line per
    ``(label, cells)`` of ``rows``."""
    lines = [f"| {head} | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    return lines + [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows]


def method_table(rows: dict, columns: list[tuple[str, Callable[[dict], str]]]) -> list[str]:
    """One line per method of a report (``agg["methods"]``): ``columns`` are ``(heading, cell(row))``."""
    return table("method", [c for c, _ in columns], ((r["label"], [f(r) for _, f in columns]) for r in rows.values()))


def paired_table(agg: dict, columns: list[tuple[str, Callable[[dict], str]]]) -> list[str]:
    """One line per method VPO is paired with (``agg["paired_vs_vpo"]``): ``columns`` are
    ``(heading, cell(differences))``."""
    rows = agg["methods"]
    pairs = agg["paired_vs_vpo"].items()
    return table("vs", [c for c, _ in columns], ((rows[o]["label"], [f(d) for _, f in columns]) for o, d in pairs))


def per_seed(summary: dict) -> str:
    """Every replicate's own value of a summary, "0.412 / 0.398 / 0.431"."""
    return " / ".join(fmt(x) for x in summary["per_seed"])


def diff_cell(summary: dict) -> str:
    """A paired difference with its interval, then the SE over seeds of the per-seed differences:
    "+0.107 [+0.057, +0.158] / 0.019"."""
    return f"{ci(summary, signed=True)} / {fmt(summary['se_seeds'])}"


def mean_of(name: str, k=None, digits: int = 3) -> Callable[[dict], str]:
    """A cell of a method table: the mean of ``row[name]`` (at ``k`` for a curve), ``digits`` decimals."""
    return lambda r: fmt((r[name] if k is None else at_k(r[name], k))["mean"], digits)

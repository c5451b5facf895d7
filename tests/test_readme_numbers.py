"""Every demo number in the README is the shipped report's: the README's demo table is what
``vpo.demo.report.readme_table`` makes of docs/demo/demo.json, and docs/demo/report.md is what
``markdown`` makes of it; the same for the prog domain (docs/demo/prog/).
Rerunning a demo and forgetting to update one of them fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from vpo.demo.domains import DOMAINS
from vpo.demo.report import markdown, readme_table

ROOT = Path(__file__).resolve().parents[1]


MAZE10 = ROOT / "docs" / "demo" / "maze10"
PROG10 = ROOT / "docs" / "demo" / "prog10"
"""The README's runs: ten independent replicates per domain on a fresh test split."""


@pytest.fixture(scope="module")
def shipped():
    """The maze run of three seeds sharing one warm start (the README's until the ten-replicate run)."""
    return json.loads((ROOT / "docs" / "demo" / "demo.json").read_text())


@pytest.fixture(scope="module")
def shipped_prog():
    return json.loads((ROOT / "docs" / "demo" / "prog" / "demo.json").read_text())


@pytest.fixture(scope="module")
def maze10():
    return json.loads((MAZE10 / "demo.json").read_text())


@pytest.fixture(scope="module")
def prog10():
    return json.loads((PROG10 / "demo.json").read_text())


SHOP = ROOT / "docs" / "demo" / "shop"
"""The pretrained-model study (docs/pretrained.md): SmolLM2 on the shop lists, three replicates."""


@pytest.fixture(scope="module")
def shop():
    return json.loads((SHOP / "demo.json").read_text())


ANIMALS = ROOT / "docs" / "demo" / "animals"
"""The second pretrained-model study (docs/pretrained.md, #49): SmolLM2 learns the animals task, five replicates."""


@pytest.fixture(scope="module")
def animals():
    return json.loads((ANIMALS / "demo.json").read_text())


REPLICATES = ROOT / "docs" / "demo" / "replicates"
"""Every maze replicate run so far (scripts/maze_replicates.py): the claims restated from all of them."""


@pytest.fixture(scope="module")
def replicates():
    return json.loads((REPLICATES / "replicates.json").read_text())


def _script(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"vpo_script_{name}", ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def reports(shipped, shipped_prog, maze10, prog10, shop, animals, replicates):
    """The README prose's namespaces: ``maze``/``prog`` the ten-replicate runs, ``maze3``/``prog3`` the
    three-seed runs they replaced, ``maze10val``/``prog10val`` the ten-replicate reruns with today's
    defaults on the validation split (their wall times)."""
    val = {
        f"{d}10val": json.loads((ROOT / "docs" / "demo" / f"{d}10_validation" / "demo.json").read_text())
        for d in ("maze", "prog")
    }
    return {
        "maze": maze10,
        "prog": prog10,
        "maze3": shipped,
        "prog3": shipped_prog,
        "shop": shop,
        "animals": animals,
        "mazeall": replicates,
        **val,
    }


def _comparable(shipped_cfg: dict, default: dict) -> tuple[dict, dict]:
    """Both configs without ``out`` and without the other domains' settings, which a run of one
    domain never reads (and which the config refuses to change), so adding a setting to one domain
    does not make the other's shipped report stale. The shipped config is read under today's
    setting names (it was recorded before some were renamed), with what it ran without recording
    (:data:`~vpo.demo.config.RECORDED_BEFORE`: settings added since). The default's automatic warm_threads
    (0) is compared as the count it resolves to for the shipped run's seeds and warm start."""
    from vpo.demo.config import DemoConfig, as_recorded

    own = DOMAINS[default["domain"]]
    drop = {"out"} | {k for d in DOMAINS.values() if d is not own for k in d.settings}
    if default.get("warm_threads") == 0:
        default = {**default, "warm_threads": DemoConfig.automatic_warm_threads(shipped_cfg)}
    return (
        {k: v for k, v in as_recorded(shipped_cfg).items() if k not in drop},
        {k: v for k, v in default.items() if k not in drop},
    )


def _block(text: str, begin: str, end: str) -> str:
    assert begin in text and end in text, f"markers {begin!r} / {end!r} missing"
    return text[text.index(begin) : text.index(end) + len(end)]


def test_readme_demo_tables_are_the_shipped_runs(maze10, prog10, shop, animals):
    readme = (ROOT / "README.md").read_text()
    for dom, agg in (("maze", maze10), ("prog", prog10), ("shop", shop), ("animals", animals)):
        spec = DOMAINS[dom]
        assert _block(readme, spec.readme_begin, spec.readme_end) == readme_table(agg), dom


def test_shipped_reports_md_are_rendered_from_demo_json(shipped, shipped_prog, maze10, prog10, shop, animals):
    assert (SHOP / "report.md").read_text() == markdown(shop)
    assert (ANIMALS / "report.md").read_text() == markdown(animals)
    assert (ROOT / "docs" / "demo" / "report.md").read_text() == markdown(shipped)
    assert (ROOT / "docs" / "demo" / "prog" / "report.md").read_text() == markdown(shipped_prog)
    assert (MAZE10 / "report.md").read_text() == markdown(maze10)
    assert (PROG10 / "report.md").read_text() == markdown(prog10)


def test_every_shipped_report_md_is_rendered_from_its_demo_json():
    """Every report under docs/demo, validation probes and replicates included, is what today's
    renderer makes of the demo.json beside it: a change to the report code that alters any shipped
    report shows up here (re-render them with the change, or keep the output unchanged)."""
    pairs = sorted((p, p.parent / "report.md") for p in (ROOT / "docs" / "demo").rglob("demo.json"))
    assert len(pairs) >= 30
    stale = [str(r.relative_to(ROOT)) for p, r in pairs if r.read_text() != markdown(json.loads(p.read_text()))]
    assert stale == []


@pytest.mark.parametrize("domain", ["maze", "prog"])
def test_the_ten_replicate_runs_are_the_default_on_a_fresh_test_split(domain, maze10, prog10):
    """Today's defaults (a warm start per replicate, replicate t intervals) with ten seeds, on a test
    split that no other run has evaluated (docs/demo/splits.json)."""
    from vpo.demo.config import DemoConfig

    agg = {"maze": maze10, "prog": prog10}[domain]
    cfg, default = _comparable(agg["config"], DemoConfig(domain=domain).as_dict())
    # the one setting whose default changed since: warm_threads 2 (then the default) is now 0
    # (automatic: one thread for ten seeds), which on this machine trains the same weights bit for bit
    # (docs/demo.md, "Where the time goes": the ten warm starts' hashes, retrained with one thread)
    assert cfg["warm_threads"] == 2 and default["warm_threads"] == 1 and DemoConfig().warm_threads == 0
    assert {k: v for k, v in cfg.items() if k not in ("seeds", "test_seed", "warm_threads")} == {
        k: v for k, v in default.items() if k not in ("seeds", "test_seed", "warm_threads")
    }
    assert cfg["split"] == "test" and len(cfg["seeds"]) >= 10 and cfg["test_seed"] is not None
    assert cfg["warm_start"] == "per_replicate" and cfg["interval"] == "replicate_t"
    splits = json.loads((ROOT / "docs" / "demo" / "splits.json").read_text())["splits"]
    entry = [e for e in splits if e["domain"] == domain and e["test_seed"] == cfg["test_seed"]]
    assert len(entry) == 1 and entry[0]["shipped"] == [f"docs/demo/{domain}10"]
    # after the report, only the evolve study searched that split, with the run's own models
    assert all(o.startswith(f"the evolve study (docs/demo/{domain}10/evolve)") for o in entry[0]["other"])
    # each replicate trained its own warm start, and the run records which
    ws = agg["warm_start"]["replicates"]
    assert len(ws) == len(cfg["seeds"]) and len({w["weights_sha256"] for w in ws}) == len(ws)
    assert agg["environment"]["versions"]["torch"]


def test_every_shipped_test_split_report_is_in_the_split_log():
    """A shipped report on a test split is listed under its split, so the count of evaluations the
    README gives is the log's."""
    splits = json.loads((ROOT / "docs" / "demo" / "splits.json").read_text())["splits"]
    listed = {(e["domain"], e["test_seed"], p) for e in splits for p in e["shipped"]}
    for f in (ROOT / "docs" / "demo").rglob("demo.json"):
        c = json.loads(f.read_text())["config"]
        if c["split"] != "test":
            continue
        rel = str(f.parent.relative_to(ROOT))
        assert (c.get("domain", "maze"), c.get("test_seed"), rel) in listed, rel


def test_the_three_seed_report_is_the_former_default_on_the_test_split(shipped):
    """The three-seed report (the README's before the ten-replicate run) is the default configuration
    as it was before per-replicate warm starts and replicate t intervals (one shared warm start, the
    two-level bootstrap), on the test mazes, and docs/demo.md says how to reproduce it."""
    from vpo.demo.config import RECORDED_BEFORE, DemoConfig

    cfg, default = _comparable(shipped["config"], DemoConfig(**RECORDED_BEFORE).as_dict())
    assert {k: v for k, v in cfg.items() if k in default} == {k: default[k] for k in cfg}
    assert set(default) - set(cfg) <= {
        "warm_start",
        "interval",
        "test_seed",
        "shared_warm_seed",
        "train_noise_sigma",
        "train_noise_flip",
    }
    assert cfg["split"] == "test" and len(cfg["seeds"]) >= 3
    demo_md = (ROOT / "docs" / "demo.md").read_text()
    assert "vpo demo --out runs/demo --set warm_start=shared --set interval=two_level_bootstrap" in demo_md


def test_the_three_seed_prog_run_is_the_former_prog_default(shipped_prog):
    from vpo.demo.config import RECORDED_BEFORE, DemoConfig

    cfg, default = _comparable(shipped_prog["config"], DemoConfig(domain="prog", **RECORDED_BEFORE).as_dict())
    assert {k: v for k, v in cfg.items() if k in default} == {k: default[k] for k in cfg}, (
        "the shipped prog report is not the prog default (as it was before per-replicate warm starts)"
    )
    assert cfg["split"] == "test" and len(cfg["seeds"]) >= 3


def test_the_shop_study_is_the_shop_default_on_its_test_split_once(shop):
    """`vpo demo --model smollm2 --domain shop` as docs/pretrained.md says: the domain's defaults, at
    least three replicates each with its own warm start, the test split evaluated by this run only
    (besides the first requests that the --quick runs evaluate)."""
    from vpo.demo.config import DemoConfig

    cfg, default = _comparable(shop["config"], DemoConfig.for_domain("shop").as_dict())
    assert cfg["warm_threads"] == 0  # the automatic default, recorded as such (one thread here)
    assert {k: v for k, v in cfg.items() if k != "warm_threads"} == {
        k: v for k, v in default.items() if k != "warm_threads"
    }
    assert cfg["split"] == "test" and len(cfg["seeds"]) >= 3 and cfg["warm_start"] == "per_replicate"
    splits = json.loads((ROOT / "docs" / "demo" / "splits.json").read_text())["splits"]
    entry = [e for e in splits if e["domain"] == "shop" and e["test_seed"] == cfg["test_seed"]]
    assert len(entry) == 1 and entry[0]["shipped"] == ["docs/demo/shop"]
    assert all("--quick" in o for o in entry[0]["other"])
    ws = shop["warm_start"]["replicates"]
    assert len(ws) == len(cfg["seeds"]) and len({w["weights_sha256"] for w in ws}) == len(ws)
    # the predictions were committed before the run: docs/pretrained.md says which held
    text = (ROOT / "docs" / "pretrained.md").read_text()
    assert "Written before the test split was evaluated" in text and "## Results (test split, evaluated once)" in text


def test_the_animals_study_is_the_animals_default_on_its_test_split_once(animals):
    """`vpo demo --model smollm2 --domain animals --seeds 11 12 13 14 15 --set test_seed=20261206` as
    docs/pretrained.md says: the domain's defaults (the design fixed on validation), five replicates
    with seeds disjoint from validation's (0), each with its own warm start, the test split drawn fresh
    and evaluated by this run only, its predictions committed before it (docs/demo/animals/predictions.md)."""
    from vpo.demo.config import DemoConfig

    cfg, default = _comparable(animals["config"], DemoConfig.for_domain("animals").as_dict())
    assert {k: v for k, v in cfg.items() if k not in ("warm_threads", "seeds", "test_seed")} == {
        k: v for k, v in default.items() if k not in ("warm_threads", "seeds", "test_seed")
    }
    assert cfg["split"] == "test" and cfg["warm_start"] == "per_replicate"
    assert len(cfg["seeds"]) >= 5 and 0 not in cfg["seeds"]
    assert set(cfg["methods"]) == {"grpo_3x", "max_at_k_3x", "vpo"} and cfg["random_answerer"]
    assert cfg["rl_steps"] >= 100
    splits = json.loads((ROOT / "docs" / "demo" / "splits.json").read_text())["splits"]
    entry = [e for e in splits if e["domain"] == "animals" and e["test_seed"] == cfg["test_seed"]]
    assert len(entry) == 1 and entry[0]["shipped"] == ["docs/demo/animals"]
    # the one other evaluation: the secondary search study, after the report (docs/pretrained.md says so)
    assert len(entry[0]["other"]) == 1 and "docs/demo/animals/search" in entry[0]["other"][0]
    ws = animals["warm_start"]["replicates"]
    assert len(ws) == len(cfg["seeds"]) and len({w["weights_sha256"] for w in ws}) == len(ws)
    text = (ROOT / "docs" / "pretrained.md").read_text()
    assert "docs/demo/animals/predictions.md" in text or "demo/animals/predictions.md" in text
    assert "## The animals study: results (test split, evaluated once)" in text


def test_the_animals_search_study_is_quoted_as_shipped():
    """docs/pretrained.md's best-of-n vs beam table is docs/demo/animals/search/study.md's, and the
    figures it restates in prose are study.json's."""
    study = ANIMALS / "search"
    rows = [line for line in (study / "study.md").read_text().splitlines() if line.startswith("| ")]
    text = (ROOT / "docs" / "pretrained.md").read_text()
    assert len(rows) == 3 and all(row in text for row in rows)  # the header, bon, beam
    js = json.loads((study / "study.json").read_text())
    assert js["demo"] == {"split": "test", "seeds": [11, 12, 13, 14, 15], "domain": "animals"}
    ch = js["lead_change_vs_bon"]["beam"]
    fmt = lambda x: f"{x:+.3f}".replace("-", "−")  # noqa: E731
    assert f"{fmt(ch['mean'])} [{fmt(ch['ci_low'])}, {fmt(ch['ci_high'])}]" in text
    groups = {s: js["searches"][s]["paired_replicates"]["groups"] for s in ("bon", "beam")}
    for m in ("vpo", "grpo_3x"):
        assert f"{groups['bon'][m]['mean']:.3f} → {groups['beam'][m]['mean']:.3f}" in text


ANNOTATION = re.compile(r"<!-- (maze3|prog3|maze10val|prog10val|mazeall|maze|prog|shop|animals):([^:]+):(\w+) -->")
FORMATS = {
    "ci": lambda x: f"{x['mean']:+.3f} [{x['ci_low']:+.3f}, {x['ci_high']:+.3f}]",
    "mean": lambda x: f"{x['mean']:.3f}",
    "signed": lambda x: f"{x['mean']:+.3f}",
    "f2": lambda x: f"{x['mean']:.2f}",
    "value": lambda x: f"{x:.3f}",
    "svalue": lambda x: f"{x:+.3f}",
    "minutes": lambda x: f"{x / 60:.1f}",
    "count": lambda x: f"{len(x)}",
    "int": lambda x: f"{int(x)}",
    # the standard deviation of one replicate's value (the spread a rerun of one replicate has)
    "sd": lambda x: f"{float(np.std(x['per_seed'], ddof=1)):.3f}",
    # how many replicates' own values are above 0
    "above0": lambda x: f"{sum(v > 0 for v in x['per_seed'])}",
    # where the mean of a user's own ten replicates should land (docs/demo/replicates)
    "pi": lambda x: f"[{x['pi_low']:+.3f}, {x['pi_high']:+.3f}]",
}
NUMBER = re.compile(r"(?<![\w.@=])[+-]?\d+\.\d+(?![\w.])")


def _lookup(report: dict, path: str):
    node = report
    for key in path.split("/"):
        node = node[int(key)] if isinstance(node, list) else node[key]  # per_seed/1: the second replicate
    return node


def readme_prose_problems(readme: str, reports: dict) -> list[str]:
    """What is wrong with the numbers of the README's demo prose: each statistic is followed by a
    comment naming it (``<!-- maze:paired_vs_vpo/max_at_k/best_at_k/30:ci -->``); the text before
    the comment must be exactly that statistic of the shipped report, formatted as the comment says,
    and every decimal number of the prose (outside the generated tables) must be such a statistic."""
    start = readme.index("## The demo")
    section = readme[start : readme.index("\n## ", start + 5)]
    blocks = [(dom.readme_begin, dom.readme_end) for dom in DOMAINS.values()]
    rep = _script("maze_replicates")
    blocks.append((rep.README_BEGIN, rep.README_END))
    for begin, end in blocks:  # the generated tables have their own tests
        if begin in section:
            section = section[: section.index(begin)] + section[section.index(end) :]
    section = re.sub(r"\s*\n\s*", " ", section)  # a statistic may break over a line
    problems, covered = [], []
    for m in ANNOTATION.finditer(section):
        ns, path, fmt = m.groups()
        try:
            want = FORMATS[fmt](_lookup(reports[ns], path))
        except (KeyError, TypeError) as e:
            problems.append(f"{m.group(0)}: no such statistic ({e!r})")
            continue
        before = section[: m.start()]
        if not before.endswith(want):
            problems.append(f"{m.group(0)}: the README says {before[-len(want) - 8 :]!r}, the report {want!r}")
        covered.append((m.start() - len(want), m.start()))
    prose = ANNOTATION.sub(lambda m: " " * len(m.group(0)), section)
    for n in NUMBER.finditer(prose):
        if not any(a <= n.start() and n.end() <= b for a, b in covered):
            problems.append(f"{n.group(0)!r} (…{prose[max(0, n.start() - 40) : n.end()]!r}) names no statistic")
    return problems


def test_every_number_of_the_readme_demo_prose_is_its_statistic(reports):
    readme = (ROOT / "README.md").read_text()
    assert len(ANNOTATION.findall(readme)) >= 40
    assert readme_prose_problems(readme, reports) == []


def _annotated(readme: str, fmt: str) -> list[tuple[str, str]]:
    """``(text, comment)`` of every prose statistic with this format, in README order."""
    section = readme[readme.index("## The demo") :]
    out = []
    for m in ANNOTATION.finditer(section):
        if m.group(3) == fmt:
            before = section[: m.start()]
            # the statistic's text: the longest tail of the prose before the comment that reads as one
            # (one that breaks over a line is left out: the mutants replace exact text)
            text = next(
                (
                    before[-n:]
                    for n in range(40, 0, -1)
                    if re.fullmatch(r"[+-]?\d+\.\d+( \[[+-]?\d+\.\d+, [+-]?\d+\.\d+\])?|\d+", before[-n:])
                ),
                None,
            )
            if text is not None:
                out.append((text, m.group(0)))
    return out


def test_a_mutated_readme_number_fails(reports):
    """A flipped sign, two numbers swapped, a changed last digit, a changed integer, an unannotated
    number: each fails."""
    readme = (ROOT / "README.md").read_text()
    cis = _annotated(readme, "ci")
    means = [(t, c) for t, c in _annotated(readme, "mean")]
    ints = _annotated(readme, "count") + _annotated(readme, "int") + _annotated(readme, "above0")
    assert cis and len(means) >= 2 and ints
    text, comment = cis[0]
    flipped = text.translate(str.maketrans("+-", "-+"))
    last = text[:-2] + str((int(text[-2]) + 1) % 10) + text[-1]  # "... +0.098]" -> "... +0.099]"
    (a, ca), (b, cb) = next(((x, y) for x, y in zip(means, means[1:]) if x[0] != y[0]))
    it, ic = ints[0]
    mutants = [
        readme.replace(text + comment, flipped + comment, 1),
        readme.replace(text + comment, last + comment, 1),
        readme.replace(a + ca, b + ca, 1).replace(b + cb, a + cb, 1),
        readme.replace(it + ic, str(int(it) + 1) + ic, 1),
        readme.replace(text + comment, text + comment + " (2.5 s a step)", 1),
    ]
    for i, m in enumerate(mutants):
        assert m != readme, i
        assert readme_prose_problems(m, reports), f"mutant {i} passed"


def test_readme_evolve_figures_are_the_shipped_study():
    """The README's evolve sentence quotes docs/demo/prog10/evolve/study.json (scripts/prog_evolve_study.py),
    and docs/demo.md's evolve table its per-seed counts."""
    import re

    study = json.loads((ROOT / "docs" / "demo" / "prog10" / "evolve" / "study.json").read_text())
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"VPO solves\s+(\d+) of the (\d+) on average, GRPO (\d+), Max@k (\d+) and Multi-RLVR (\d+)", readme)
    assert m, "the README's evolve sentence changed shape; update this test with it"
    vpo, n, grpo, maxk, multi = map(int, m.groups())
    assert n == study["problems"]
    assert (vpo, grpo, maxk, multi) == tuple(
        round(study[f"solved_at_calls_{k}"]) for k in ("vpo", "grpo", "max_at_k", "multi_rlvr")
    )
    demo_md = (ROOT / "docs" / "demo.md").read_text()
    for key, label in (
        ("grpo", "GRPO"),
        ("grpo_3x", "GRPO 3x rollouts"),
        ("max_at_k", "Max@k"),
        ("multi_rlvr", "Multi-RLVR (m=3)"),
        ("vpo", "**VPO (m=3)**"),
    ):
        assert f"| {label} | " in demo_md and f"| {study[f'solved_at_calls_{key}']:.2f} |" in demo_md, key
    for key in ("grpo", "grpo_3x", "max_at_k", "multi_rlvr"):
        assert f"{study[f'vpo_minus_{key}_solved_share_calls']:+.3f} [" in demo_md.replace("−", "-"), key


def test_the_readme_replicates_table_is_the_shipped_analysis(replicates):
    readme = (ROOT / "README.md").read_text()
    mod = _script("maze_replicates")
    assert _block(readme, mod.README_BEGIN, mod.README_END) == mod.readme_table(replicates)


def test_the_claims_from_all_replicates_recompute_from_the_shipped_runs(replicates):
    """replicates.json's claims are those of the shipped runs' per-replicate results (their demo.json),
    intervals and coverage simulation included (seeded), and every replicate is counted once."""
    mod = _script("maze_replicates")
    runs = sorted({r["run"] for r in replicates["replicates"]})
    assert all((ROOT / r / "demo.json").exists() for r in runs), runs
    reps = mod.load_runs([str(ROOT / r) for r in runs])
    assert sorted(r["seed"] for r in reps) == sorted(r["seed"] for r in replicates["replicates"])
    order = [r["seed"] for r in replicates["replicates"]]
    reps.sort(key=lambda r: order.index(r["seed"]))
    fresh = mod.claims(reps)
    for name, c in replicates["claims"].items():
        for key in ("mean", "ci_low", "ci_high", "pi_low", "pi_high", "sd"):
            assert fresh[name][key] == pytest.approx(c[key], abs=1e-12), (name, key)
        assert fresh[name]["above0"] == c["above0"] and fresh[name]["n"] == len(reps)
        cov = c["calibration"]["coverage"]
        assert min(cov["pi_boot"], cov["pi_t3"], cov["ci_boot"], cov["ci_t3"]) >= 0.945, (name, cov)


def test_docs_demo_carries_the_per_replicate_table_the_script_wrote():
    text = (ROOT / "docs" / "demo.md").read_text()
    md = (REPLICATES / "replicates.md").read_text()
    rows = [line for line in md[: md.index("## The claims")].splitlines() if line.startswith("| ") and "**" in line]
    assert len(rows) == 21 and all(r in text for r in rows)  # the header and the 20 replicates

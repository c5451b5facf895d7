"""One evolve run: one model on one problem, m candidate programs per LLM call.

OpenEvolve asks its LLM for one program per iteration, so its process-pool loop cannot take m
programs per call. :class:`_EvolveRun` drives OpenEvolve's own ``ProgramDatabase`` (islands,
archive, migration, checkpoints), ``PromptSampler`` (full-rewrite prompts), ``LLMEnsemble`` and
``Evaluator`` with its own loop: per call it samples a parent from the call's island, asks once
with vpo's m-answer instruction, splits the completion, adds every new program to the database as
its own ``Program`` (same parent, its slot in the metadata), and spends budget (docs/evolve.md,
"How m answers enter OpenEvolve"). Failed LLM calls cost nothing; too many in a row stop the run
with a checkpoint that ``resume`` continues from. A call's candidates are evaluated at once by a
pool of evaluation workers. With ``selection='vpo'`` each island ranks by its own weighting and a
Pareto archive feeds parents and inspirations (:mod:`.selection`); the archive and its coverage are
recorded in both modes.

Simplifications: full rewrites only (m diffs against one parent would not
be m programs); ``asyncio.run`` per call (so not from inside a running event loop). openevolve,
tqdm and torch are imported only when a run starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import random
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vpo._util import read_jsonl
from vpo.integrations.evolve.clients import _ClientFactory, check_endpoint
from vpo.integrations.evolve.config import (
    SOLVED_AT,
    EvolveError,
    EvolveModel,
    EvolveProblem,
    EvolveSettings,
)
from vpo.integrations.evolve.problems import code_key, split_programs
from vpo.integrations.evolve.selection import (
    ParetoArchive,
    VPOSelector,
    coverage,
    island_weights,
    population_strategy,
)
from vpo.integrations.evolve.worker import WORKERS, write_eval_files, WorkerPool

logger = logging.getLogger("vpo.evolve")


def evolve_problem(
    problem: EvolveProblem,
    model: EvolveModel,
    settings: EvolveSettings,
    out_dir: str | os.PathLike,
    *,
    resume: bool = False,
    progress: bool = True,
) -> dict:
    """Evolve ``problem`` with ``model`` for ``settings.budget``; returns the run summary.

    Writes to ``out_dir``: ``history.jsonl`` (one row per call, appended as it goes),
    ``checkpoints/checkpoint_<call>/`` (OpenEvolve's database layout + ``best_program.py``,
    ``best_program_info.json`` and ``vpo_state.json``), ``best/``, ``summary.json`` and
    ``evolve.log``. ``resume=True`` continues from the latest checkpoint.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if model.api_base is not None:
        check_endpoint(model)
    with _log_to_file(out / "evolve.log"):
        run = _EvolveRun(problem, model, settings, out)
        try:
            run.setup()
            run.seed_population(resume)
            run.search(progress)
            return run.finish()
        finally:
            run.close()


class _EvolveRun:
    """The state of one run and its steps: :meth:`setup`, :meth:`seed_population`, :meth:`search`
    (repeats :meth:`step`), :meth:`finish`, :meth:`close`.

    ``state`` is the part a checkpoint saves and the summary reports: last call, budget used, best
    score, solved (and at which budget), LLM calls and errors, candidates evaluated.
    """

    def __init__(self, problem: EvolveProblem, model: EvolveModel, settings: EvolveSettings, out: Path) -> None:
        self.problem, self.model, self.settings, self.out = problem, model, settings, out
        self.hist_path = out / "history.jsonl"
        self.state: dict[str, Any] = {
            "call": 0,
            "budget_used": 0,
            "best_score": float("-inf"),
            "solved": False,
            "solved_at": None,
            "llm_calls": 0,
            "llm_errors": 0,
            "candidates": 0,
        }
        self.failures = 0  # failed LLM calls in a row
        self.last_checkpoint: Path | None = None
        self.worker: WorkerPool | None = None
        self.objectives: list[str] = []
        self.archive = ParetoArchive()
        self.selector: VPOSelector | None = None
        self.weights: list[list[float]] | None = None

    # -- setup -----------------------------------------------------------------------------------

    def setup(self) -> None:
        """Start the evaluation worker, fix the reward vector and build OpenEvolve's components."""
        from openevolve.database import ProgramDatabase
        from openevolve.evaluator import Evaluator
        from openevolve.llm.ensemble import LLMEnsemble
        from openevolve.prompt.sampler import PromptSampler

        from vpo.core.answers import answer_instruction

        s = self.settings
        self.spec_path = write_eval_files(self.problem, self.out)
        self.n_workers = s.eval_workers or max(1, min(self.model.num_answers, _usable_cores()))
        self.worker = WorkerPool(self.spec_path, s.eval_timeout, self.out / "evaluator_stderr.log", self.n_workers)
        WORKERS[str(self.spec_path)] = self.worker
        ready = self.worker.start()
        self.objectives = list(self.problem.objectives or ready.get("objectives") or [])
        self.worker.objectives = self.objectives or None
        if not self.objectives:
            self.objectives = self._infer_objectives()
        self.worker.objectives = self.objectives
        self.worker.target = self._target_weights()
        self.cfg = _oe_config(s, self.model, _system_message(self.problem), self.n_workers)
        strategy = None
        if s.selection == "vpo":
            self.weights = island_weights(s.num_islands, len(self.objectives), s.weight_alpha, s.seed)
            pc, dc = self.cfg.prompt, self.cfg.database
            self.selector = VPOSelector(
                self.weights,
                self._program_rewards,
                exploration_ratio=dc.exploration_ratio,
                exploitation_ratio=dc.exploitation_ratio,
                elite_count=pc.num_top_programs,
                archive_parent_ratio=s.archive_parent_ratio,
                archive_inspirations=s.archive_inspirations,
            )
            strategy = population_strategy(self.selector, dc.migration_rate)
        _seed_rngs(s.seed)
        self.db = ProgramDatabase(self.cfg.database, population_strategy=strategy)
        self.sampler = PromptSampler(self.cfg.prompt)
        self.ensemble = LLMEnsemble(self.cfg.llm.models)
        self.evaluator = Evaluator(
            self.cfg.evaluator, str(self.out / "vpo_evaluator.py"), database=self.db, suffix=".py"
        )
        self.instruction = answer_instruction(self.model.num_answers, "code", "program")

    def _infer_objectives(self) -> list[str]:
        """An evaluator file's reward vector: the numeric metrics of the initial program, sorted."""
        m0, _, err0 = self.worker.evaluate(_tmp_program(self.out, self.problem.initial_program))
        if err0 is not None:
            raise EvolveError(f"problem {self.problem.name!r}: the initial program could not be evaluated: {err0}")
        objectives = sorted(k for k in m0 if k not in ("combined_score", "error"))
        if not objectives:
            raise EvolveError(
                f"problem {self.problem.name!r}: the evaluator returned no numeric metrics for the initial "
                "program; list the reward vector's metric names under objectives in problem.yaml"
            )
        return objectives

    def _target_weights(self) -> list[float]:
        d = len(self.objectives)
        target = self.problem.target_weights or [1.0 / d] * d
        if len(target) != d or any(w < 0 for w in target) or abs(sum(target) - 1) > 1e-6:
            raise EvolveError(
                f"problem {self.problem.name!r}: target_weights must be {d} non-negative numbers summing to 1 "
                f"(one per objective {self.objectives}), got {target}"
            )
        return [float(w) for w in target]

    def _rewards(self, metrics: Mapping) -> list[float]:
        return [float(metrics.get(o, 0.0)) for o in self.objectives]

    def _program_id(self, call: int, slot: int) -> str:
        """A candidate's id, fixed by (model, problem, seed, call, slot), so that a rerun with the
        same seed has the same ids (selection breaks ties by them; ``uuid4`` made runs differ)."""
        key = f"vpo-evolve/{self.model.name}/{self.problem.name}/{self.settings.seed}/{call}/{slot}"
        return str(uuid.uuid5(uuid.NAMESPACE_URL, key))

    def _program_rewards(self, program) -> list[float]:
        """A Program's (or ProgramState's) reward vector: its ``vpo_rewards``, else from its metrics."""
        r = program.metadata.get("vpo_rewards")
        return list(r) if r is not None else self._rewards(program.metrics)

    def _note_archive(self, program) -> None:
        self.archive.add(program.id, self._program_rewards(program), program.to_dict())

    def _solved(self, metrics: Mapping) -> bool:
        return "vpo_eval_error" not in metrics and all(v >= SOLVED_AT for v in self._rewards(metrics))

    def _cand_row(self, cid: str, slot: int, metrics: Mapping, arts: Mapping | None) -> dict:
        row = {
            "id": cid,
            "slot": slot,
            "score": float(metrics.get("combined_score", 0.0)),
            "rewards": self._rewards(metrics),
            "solved": bool(self._solved(metrics)),
        }
        if "vpo_eval_error" in metrics:
            row["error"] = (arts or {}).get("vpo_error", "evaluation failed")
        return row

    # -- call 0 ----------------------------------------------------------------------------------

    def seed_population(self, resume: bool) -> None:
        """Continue from the latest checkpoint (``resume``), or start the history with the initial
        program evaluated as call 0."""
        ck = _latest_checkpoint(self.out) if resume else None
        if ck is not None:
            self._resume_from(ck)
            return
        if resume:
            logger.info("no checkpoint in %s: starting fresh", self.out)
        self._add_initial_program()

    def _resume_from(self, ck: Path) -> None:
        self.db.load(str(ck))
        saved = json.loads((ck / "vpo_state.json").read_text())
        self.state.update(saved["state"])
        rs = saved["random_state"]
        random.setstate((rs[0], tuple(rs[1]), rs[2]))
        if saved.get("archive") is not None:
            self.archive = ParetoArchive.from_state(saved["archive"])
        rows = [r for r in _read_history(self.hist_path) if r["call"] <= self.state["call"]]
        self.hist_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        logger.info("resumed %s/%s from %s (call %d)", self.model.name, self.problem.name, ck, self.state["call"])

    def _add_initial_program(self) -> None:
        from openevolve.database import Program

        self.hist_path.write_text("")
        pid, code = self._program_id(0, 0), self.problem.initial_program
        metrics = asyncio.run(self.evaluator.evaluate_program(code, pid))
        arts = self.evaluator.get_pending_artifacts(pid)
        p0 = Program(
            id=pid,
            code=code,
            language=self.settings.language,
            metrics=metrics,
            iteration_found=0,
            metadata={
                "vpo_call": 0,
                "vpo_slot": 0,
                "vpo_model": self.model.name,
                "vpo_rewards": self._rewards(metrics),
            },
        )
        self.db.add(p0)
        self._note_archive(p0)
        if arts:
            self.db.store_artifacts(pid, arts)
        st = self.state
        st["best_score"] = float(metrics.get("combined_score", 0.0))
        st["solved"] = self._solved(metrics)
        st["solved_at"] = 0 if st["solved"] else None
        _append(
            self.hist_path,
            {
                "call": 0,
                "budget_used": 0,
                "initial": True,
                "best_score": st["best_score"],
                "solved": st["solved"],
                "candidates": [self._cand_row(pid, 0, metrics, arts)],
                **self._archive_fields(),
            },
        )

    def _archive_fields(self) -> dict:
        """The Pareto archive's size, its member ids and its coverage (history row fields)."""
        return {
            "archive_size": len(self.archive),
            "archive_ids": self.archive.ids(),
            "component_best": list(self.archive.best),
            "coverage": coverage(self.archive.best),
        }

    # -- the calls -------------------------------------------------------------------------------

    def search(self, progress: bool) -> None:
        """Call the model until the budget is spent (or, with ``stop_when_solved``, until solved);
        Ctrl-C writes a checkpoint first."""
        from tqdm.auto import tqdm

        s = self.settings
        self.bar = tqdm(
            total=s.budget,
            initial=self.state["budget_used"],
            desc=f"{self.model.name} | {self.problem.name}",
            unit=" cand" if s.budget_unit == "candidates" else " call",
            disable=not progress,
            leave=False,
        )
        try:
            while not self._done():
                self.step()
        except KeyboardInterrupt:
            self.save_checkpoint(self.state["call"])
            raise
        finally:
            self.bar.close()

    def _done(self) -> bool:
        s = self.settings
        return self.state["budget_used"] >= s.budget or (s.stop_when_solved and self.state["solved"])

    def step(self) -> None:
        """One call: sample a parent, ask the model once, evaluate its programs, record the call.
        A failed LLM call changes nothing but the error count; the same call is tried again."""
        call = self.state["call"] + 1
        island = (call - 1) % self.settings.num_islands
        parent, system, user, how = self._prompt(call, island)
        row: dict[str, Any] = {
            "call": call,
            "island": island,
            "parent_id": parent.id,
            "parent_from": how,
            "candidates": [],
        }
        completion = self._ask(system, user, row)
        if completion is None:
            return
        self.state["call"] = call
        self.state["llm_calls"] += 1
        programs = self._take_programs(completion, row)
        counts = self.evaluate_candidates(programs, parent, call, island, row)
        self.db.increment_island_generation(island_idx=island)
        if self.db.should_migrate():
            self.db.migrate_programs()
        self.record(row, counts)
        if call % self.settings.checkpoint_interval == 0:
            self.last_checkpoint = self.save_checkpoint(call)

    def _prompt(self, call: int, island: int):
        """``(parent, system, user, how the parent was chosen)``: OpenEvolve's full-rewrite prompt plus
        vpo's m-answer instruction (and, with ``selection='vpo'``, the island's weighting)."""
        pc, db = self.cfg.prompt, self.db
        focus = ""
        if self.selector is not None:
            parent, inspirations, how = self.selector.sample(
                db, island, self.archive, pc.num_diverse_programs, _program_from_dict
            )
            island_programs = self.selector.ranked(self.selector.island_programs(db, island), island)
            w = ", ".join(f"{o}: {x:.2f}" for o, x in zip(self.objectives, self.weights[island]))
            focus = (
                f"\n\n# Island focus\nThis island ranks programs by a weighted sum of the metrics ({w}); "
                "programs that trade one metric for another are welcome."
            )
        else:
            parent, inspirations = db.sample_from_island(island, num_inspirations=pc.num_diverse_programs)
            how = "openevolve"
            island_programs = sorted(
                (db.programs[i] for i in db.islands[island] if i in db.programs),
                key=lambda p: p.metrics.get("combined_score", 0.0),
                reverse=True,
            )
        n_top = pc.num_top_programs
        prompt = self.sampler.build_prompt(
            current_program=parent.code,
            parent_program=parent.code,
            program_metrics=parent.metrics,
            previous_programs=[p.to_dict() for p in island_programs[:n_top]],
            top_programs=[p.to_dict() for p in island_programs[: n_top + pc.num_diverse_programs]],
            inspirations=[p.to_dict() for p in inspirations],
            language=self.settings.language,
            evolution_round=call,
            diff_based_evolution=False,
            program_artifacts=db.get_artifacts(parent.id) or None,
            feature_dimensions=db.config.feature_dimensions,
        )
        user = prompt["user"].rstrip() + focus + "\n\n# Answer format\n" + self.instruction
        return parent, prompt["system"], user, how

    def _ask(self, system: str, user: str, row: dict) -> str | None:
        """The model's completion, or None after recording a failed call."""
        try:
            completion = asyncio.run(
                self.ensemble.generate_with_context(system_message=system, messages=[{"role": "user", "content": user}])
            )
            if not isinstance(completion, str):
                raise TypeError(f"the model returned {type(completion).__name__}, not text")
        except Exception as e:  # noqa: BLE001 - endpoint/client failure: recorded, limited
            self._llm_failed(e, row)
            return None
        self.failures = 0
        return completion

    def _llm_failed(self, err: Exception, row: dict) -> None:
        """Count a failed call; the last one allowed in a row stops the run with a checkpoint."""
        self.failures += 1
        self.state["llm_errors"] += 1
        row.update(llm_error=f"{type(err).__name__}: {err}", units=0)
        logger.warning("call %d: LLM failed (%d in a row): %s", row["call"], self.failures, err)
        if self.failures < self.settings.max_llm_failures:
            return
        st, s = self.state, self.settings
        path = self.save_checkpoint(st["call"])
        _append(
            self.hist_path,
            {
                **row,
                "budget_used": st["budget_used"],
                "best_score": st["best_score"],
                "solved": st["solved"],
                "aborted": True,
                "call": st["call"],
            },
        )
        raise EvolveError(
            f"model {self.model.name!r} on {self.problem.name!r}: {self.failures} LLM calls failed in a row "
            f"(last: {type(err).__name__}: {err}). Stopped after call {st['call']} with "
            f"{st['budget_used']}/{s.budget} {s.budget_unit} used; checkpoint kept at "
            f"{path}. Fix the endpoint and rerun with --resume to continue."
        ) from err

    def _take_programs(self, completion: str, row: dict) -> list[str]:
        """The completion's programs that fit the budget; sets the row's parsed, units, malformed."""
        s = self.settings
        programs = split_programs(completion, self.model.num_answers)
        row["parsed"] = len(programs)
        if s.budget_unit == "candidates":  # duplicates count: they are answers; no code costs 1
            programs = programs[: s.budget - self.state["budget_used"]]
            units = max(1, len(programs))
        else:
            units = 1
        row["units"] = units
        row["malformed"] = not programs
        return programs

    def evaluate_candidates(self, programs: list[str], parent, call: int, island: int, row: dict) -> dict:
        """Evaluate the new programs at once (up to ``eval_workers`` in parallel), then add each one
        in slot order; returns the counts of those skipped: duplicates within the call, copies of
        the parent, programs over ``max_code_length``."""
        counts = {"duplicates": 0, "identical_to_parent": 0, "too_long": 0}
        seen: set[str] = set()
        parent_key = code_key(parent.code)
        todo = []
        for slot, code in enumerate(programs):
            skip = self._skip_reason(code, seen, parent_key)
            if skip is not None:
                counts[skip] += 1
                continue
            todo.append((slot, code, self._program_id(call, slot)))
        results = self.evaluate_codes([(code, cid) for _, code, cid in todo])
        for (slot, code, cid), metrics in zip(todo, results):
            self._add_candidate(code, cid, metrics, slot, parent, call, island, row)
        return counts

    def evaluate_codes(self, items: list[tuple[str, str]]) -> list[dict]:
        """OpenEvolve's evaluator on ``(code, id)`` pairs, all at once; metrics in input order."""
        if not items:
            return []

        async def all_of():
            return await asyncio.gather(*(self.evaluator.evaluate_program(code, cid) for code, cid in items))

        return list(asyncio.run(all_of()))

    def _skip_reason(self, code: str, seen: set[str], parent_key: str) -> str | None:
        key = code_key(code)
        if key in seen:
            return "duplicates"
        seen.add(key)
        if key == parent_key:
            return "identical_to_parent"
        if len(code) > self.settings.max_code_length:
            return "too_long"
        return None

    def _add_candidate(
        self, code: str, cid: str, metrics: dict, slot: int, parent, call: int, island: int, row: dict
    ) -> None:
        from openevolve.database import Program

        arts = self.evaluator.get_pending_artifacts(cid)
        child = Program(
            id=cid,
            code=code,
            language=self.settings.language,
            parent_id=parent.id,
            generation=parent.generation + 1,
            metrics=metrics,
            iteration_found=call,
            metadata={
                "changes": "Full rewrite",
                "parent_metrics": parent.metrics,
                "island": island,
                "vpo_call": call,
                "vpo_slot": slot,
                "vpo_model": self.model.name,
                "vpo_rewards": self._rewards(metrics),
            },
        )
        self.db.add(child, iteration=call, target_island=island)
        self._note_archive(child)
        if arts:
            self.db.store_artifacts(cid, arts)
        self.state["candidates"] += 1
        c_row = self._cand_row(cid, slot, metrics, arts)
        row["candidates"].append(c_row)
        self._note_result(c_row, slot)

    def _note_result(self, c_row: dict, slot: int) -> None:
        """Best score so far; the first solving candidate fixes ``solved_at`` (budget units)."""
        st = self.state
        st["best_score"] = max(st["best_score"], c_row["score"])
        if c_row["solved"] and not st["solved"]:
            st["solved"] = True
            per_candidate = self.settings.budget_unit == "candidates"
            st["solved_at"] = st["budget_used"] + (slot + 1 if per_candidate else 1)

    def record(self, row: dict, counts: Mapping[str, int]) -> None:
        """Spend the call's budget units and append its row to the history."""
        st = self.state
        st["budget_used"] += row["units"]
        self.bar.update(row["units"])
        row.update(
            **counts,
            budget_used=st["budget_used"],
            best_score=st["best_score"],
            solved=st["solved"],
            **self._archive_fields(),
        )
        _append(self.hist_path, row)

    # -- checkpoints and the end -----------------------------------------------------------------

    def save_checkpoint(self, call: int) -> Path:
        """OpenEvolve's database layout plus the best program and ``vpo_state.json`` (for resume)."""
        path = self.out / "checkpoints" / f"checkpoint_{call}"
        path.mkdir(parents=True, exist_ok=True)
        self.db.save(str(path), call)
        best = self.db.get_best_program()
        if best is not None:
            (path / "best_program.py").write_text(best.code)
            (path / "best_program_info.json").write_text(
                json.dumps(
                    {
                        "id": best.id,
                        "generation": best.generation,
                        "iteration": best.iteration_found,
                        "current_iteration": call,
                        "metrics": best.metrics,
                        "language": best.language,
                    },
                    indent=2,
                    default=str,
                )
            )
        rs = random.getstate()
        (path / "vpo_state.json").write_text(
            json.dumps(
                {
                    "state": self.state,
                    "random_state": [rs[0], list(rs[1]), rs[2]],
                    "model": self.model.name,
                    "problem": self.problem.name,
                    "archive": self.archive.state(),
                },
                default=str,
            )
        )
        return path

    def finish(self) -> dict:
        """Final checkpoint (unless the last call wrote one), ``best/`` and ``summary.json``."""
        if self.last_checkpoint is None or self.last_checkpoint.name != f"checkpoint_{self.state['call']}":
            self.save_checkpoint(self.state["call"])
        best = self.db.get_best_program()
        best_dir = self.out / "best"
        best_dir.mkdir(exist_ok=True)
        if best is not None:
            (best_dir / "best_program.py").write_text(best.code)
            (best_dir / "best_program_info.json").write_text(
                json.dumps(
                    {
                        "id": best.id,
                        "generation": best.generation,
                        "iteration": best.iteration_found,
                        "parent_id": best.parent_id,
                        "metrics": best.metrics,
                    },
                    indent=2,
                    default=str,
                )
            )
        summary = self._summary()
        (self.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        return summary

    def _summary(self) -> dict:
        rows = _read_history(self.hist_path)
        s = self.settings
        return {
            "model": self.model.name,
            "problem": self.problem.name,
            "answers_per_call": self.model.num_answers,
            "objectives": self.objectives,
            "target_weights": self.worker.target,
            "budget": s.budget,
            "budget_unit": s.budget_unit,
            **self.state,
            "malformed_calls": sum(1 for r in rows if r.get("malformed")),
            "eval_errors": sum(1 for r in rows for c in r.get("candidates", []) if c.get("error")),
            "evaluator_restarts": self.worker.restarts,
            "curve": [
                [r["budget_used"], r["best_score"], bool(r["solved"])]
                for r in rows
                if "budget_used" in r and not r.get("aborted")
            ],
            "curve_archive": [
                [r["budget_used"], r["coverage"], r["archive_size"]]
                for r in rows
                if "coverage" in r and not r.get("aborted")
            ],
            "eval_workers": self.n_workers,
            "selection": {
                "mode": s.selection,
                "weight_alpha": s.weight_alpha,
                "seed": s.seed,
                "island_weights": self.weights,
                "archive_parent_ratio": s.archive_parent_ratio if s.selection == "vpo" else None,
                "archive_inspirations": s.archive_inspirations if s.selection == "vpo" else None,
            },
            "pareto_archive": self.archive.state(with_programs=False)["members"],
            "component_best": list(self.archive.best),
            "coverage": coverage(self.archive.best),
        }

    def close(self) -> None:
        """Stop the evaluation worker (also after a failure)."""
        if self.worker is not None:
            self.worker.close()
            WORKERS.pop(str(self.spec_path), None)


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _log_to_file(path: Path):
    """While a run lasts, OpenEvolve's INFO chatter (and this module's) goes to ``path``, not the console."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    loggers = [logging.getLogger("openevolve"), logger]
    saved = [(lg.level, lg.propagate) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        if lg.level == logging.NOTSET or lg.level > logging.INFO:
            lg.setLevel(logging.INFO)
        lg.propagate = False
    try:
        yield
    finally:
        for lg, (level, propagate) in zip(loggers, saved):
            lg.removeHandler(handler)
            lg.setLevel(level)
            lg.propagate = propagate
        handler.close()


def _system_message(problem: EvolveProblem) -> str:
    """OpenEvolve's default system message, after the problem statement when there is one."""
    from openevolve.prompt.templates import TemplateManager

    default_system = TemplateManager(None).get_template("system_message")
    desc = problem.description.strip()
    return (f"# Problem\n{desc}\n\n" if desc else "") + default_system


def _seed_rngs(seed: int) -> None:
    """Seed the RNGs OpenEvolve samples with (``random``, numpy's global one)."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:  # pragma: no cover
        pass


def _usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover
        return max(1, os.cpu_count() or 1)


def _program_from_dict(d: Mapping):
    from openevolve.database import Program

    return Program.from_dict(dict(d))


def _oe_config(settings: EvolveSettings, model: EvolveModel, system_message: str, parallel: int = 1):
    """OpenEvolve's ``Config`` for one run: the settings, full rewrites, one model (endpoint or
    ``init_client``), and an evaluator timeout that leaves the worker's own timeout to fire first."""
    from openevolve.config import Config, LLMModelConfig

    cfg = Config()
    cfg.random_seed = settings.seed
    cfg.language = settings.language
    cfg.diff_based_evolution = False
    cfg.max_code_length = settings.max_code_length
    cfg.checkpoint_interval = settings.checkpoint_interval
    cfg.database.num_islands = settings.num_islands
    cfg.database.population_size = settings.population_size
    cfg.database.archive_size = settings.archive_size
    cfg.database.migration_interval = settings.migration_interval
    cfg.database.random_seed = settings.seed
    cfg.database.log_prompts = False
    cfg.evaluator.timeout = int(math.ceil(settings.eval_timeout)) + 30  # ours fires first
    cfg.evaluator.max_retries = 0
    cfg.evaluator.cascade_evaluation = False
    cfg.evaluator.parallel_evaluations = max(1, int(parallel))
    cfg.prompt.system_message = system_message
    mc = LLMModelConfig(
        name=model.model or model.name,
        api_base=model.api_base,
        api_key=model.api_key,
        temperature=model.temperature,
        max_tokens=model.max_tokens,
        timeout=int(math.ceil(model.timeout)),
        retries=model.retries,
        retry_delay=1,
        random_seed=settings.seed,
        system_message=system_message,
        init_client=_ClientFactory(model.client, model.client_options) if model.client is not None else None,
    )
    cfg.llm.models = [mc]
    cfg.llm.evaluator_models = [mc]
    return cfg


def _latest_checkpoint(out: Path) -> Path | None:
    cks = sorted((out / "checkpoints").glob("checkpoint_*"), key=lambda p: int(p.name.split("_")[-1]))
    cks = [c for c in cks if (c / "vpo_state.json").is_file()]
    return cks[-1] if cks else None


def _tmp_program(out: Path, code: str) -> str:
    p = out / "initial_program_probe.py"
    p.write_text(code)
    return str(p)


def _append(path: Path, row: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(row, default=str) + "\n")
        f.flush()


def _read_history(path: Path) -> list[dict]:
    """The history's rows; a last row cut short by a crash is dropped (and cut from the file, so the
    resumed run appends cleanly), as every JSON-lines log of vpo is read (:func:`vpo._util.read_jsonl`)."""
    if not path.exists():
        return []
    return read_jsonl(path, torn_tail=True, repair=True)

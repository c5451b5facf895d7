"""Candidate pools: the scored generations of a model on a task's prompts, on disk and in memory.

A :class:`Pool` is the shared shape of docs/design.md plus what produced it: ``rewards [N, m, d]``,
``valid [N, m]``, ``prompt_index [N]`` (into ``prompt_ids [P]``), ``num_tokens [N]`` (NaN when
unknown), the completions and parsed answers (optional) and ``meta`` (task, objectives, w*, m, model,
sampling settings). On disk a pool is a directory: ``meta.json`` (written first; resuming checks it
matches), ``rollouts.jsonl`` (one line per finished prompt, appended and flushed as generation goes:
the source of truth, so a crash keeps every finished prompt and a torn last line is dropped on
reopen) and ``pool.npz`` (the arrays, so metrics reload without parsing text). docs/eval.md lists
the fields. Simplification: a prompt is the unit of saving; an interrupted batch loses only its
unfinished prompts, which a resumed run regenerates.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from vpo.errors import UserError
from vpo._util import JsonlRun, positive_int, read_jsonl

__all__ = ["Pool", "PoolError", "PoolWriter", "load_pool", "evaluate_pool", "POOL_FORMAT"]

POOL_FORMAT = "vpo-pool/1"
META_FILE = "meta.json"
ROLLOUTS_FILE = "rollouts.jsonl"
ARRAYS_FILE = "pool.npz"


class PoolError(UserError, ValueError):
    """A pool that cannot be read, written or resumed as asked; the message says what to do."""


@dataclass
class Pool:
    """Scored candidates of one model on P prompts (see the module docstring for the fields)."""

    rewards: np.ndarray
    valid: np.ndarray
    prompt_index: np.ndarray
    prompt_ids: list[str]
    objectives: tuple[str, ...]
    target_weights: np.ndarray
    num_tokens: np.ndarray | None = None
    completions: list[str] | None = None
    answers: list[list[str]] | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rewards = np.asarray(self.rewards, dtype=np.float64)
        if self.rewards.ndim != 3:
            raise PoolError(f"pool rewards must have shape [N, m, d]; got {self.rewards.shape}")
        N, m, d = self.rewards.shape
        self.valid = np.asarray(self.valid, dtype=bool)
        if self.valid.shape != (N, m):
            raise PoolError(f"pool valid must have shape [N, m] = {(N, m)}; got {self.valid.shape}")
        self.prompt_index = np.asarray(self.prompt_index, dtype=np.int64).reshape(-1)
        if self.prompt_index.shape != (N,):
            raise PoolError(f"prompt_index must have {N} entries; got {self.prompt_index.shape[0]}")
        self.prompt_ids = [str(p) for p in self.prompt_ids]
        if N and (self.prompt_index.min() < 0 or self.prompt_index.max() >= len(self.prompt_ids)):
            raise PoolError(f"prompt_index must be in 0..{len(self.prompt_ids) - 1}")
        self.objectives = tuple(self.objectives)
        if len(self.objectives) != d:
            raise PoolError(
                f"the pool has d={d} reward components but {len(self.objectives)} objective names "
                f"({', '.join(self.objectives)})"
            )
        self.target_weights = np.asarray(self.target_weights, dtype=np.float64).reshape(-1)
        if self.target_weights.shape != (d,):
            raise PoolError(f"target_weights w* must have d={d} entries; got {self.target_weights.shape[0]}")
        if self.num_tokens is not None:
            self.num_tokens = np.asarray(self.num_tokens, dtype=np.float64).reshape(-1)
            if self.num_tokens.shape != (N,):
                raise PoolError(f"num_tokens must have {N} entries; got {self.num_tokens.shape[0]}")
        for name in ("completions", "answers"):
            v = getattr(self, name)
            if v is not None and len(v) != N:
                raise PoolError(f"{name} must have one entry per rollout ({N}); got {len(v)}")

    # -- shape ------------------------------------------------------------------------------
    @property
    def num_rollouts(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def m(self) -> int:
        return int(self.rewards.shape[1])

    @property
    def d(self) -> int:
        return int(self.rewards.shape[2])

    @property
    def num_prompts(self) -> int:
        return len(self.prompt_ids)

    def __repr__(self) -> str:
        return (
            f"Pool(prompts={self.num_prompts}, rollouts={self.num_rollouts}, m={self.m}, d={self.d}, "
            f"objectives={list(self.objectives)})"
        )

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_arrays(
        cls,
        rewards,
        valid=None,
        *,
        group_size: int | None = None,
        prompt_index=None,
        prompt_ids: Sequence[str] | None = None,
        objectives: Sequence[str] | None = None,
        target_weights=None,
        num_tokens=None,
        meta: dict | None = None,
    ) -> "Pool":
        """A pool from arrays: ``rewards [N, m, d]`` (or ``[N, d]`` for m = 1), ``valid [N, m]``
        (default all), and either ``group_size`` (G consecutive rollouts per prompt) or
        ``prompt_index [N]``; objective names default to ``obj0..``, w* to uniform."""
        r = np.asarray(rewards, dtype=np.float64)
        if r.ndim == 2:
            r = r[:, None, :]
        if r.ndim != 3:
            raise PoolError(f"rewards must have shape [N, m, d] (or [N, d]); got {r.shape}")
        N, m, d = r.shape
        v = np.ones((N, m), dtype=bool) if valid is None else np.asarray(valid, dtype=bool).reshape(N, -1)
        if group_size is not None and prompt_index is not None:
            raise PoolError("give group_size or prompt_index, not both")
        if group_size is not None:
            if N % positive_int(group_size, "group_size", error=PoolError):
                raise PoolError(f"N={N} rollouts is not a multiple of group_size={group_size}")
            idx = np.arange(N) // group_size
        elif prompt_index is not None:
            idx = np.asarray(prompt_index, dtype=np.int64)
        else:
            idx = np.zeros(N, dtype=np.int64)
        P = int(idx.max()) + 1 if N else 0
        ids = [str(i) for i in range(P)] if prompt_ids is None else list(prompt_ids)
        names = tuple(objectives) if objectives is not None else tuple(f"obj{i}" for i in range(d))
        w = np.full(d, 1.0 / d) if target_weights is None else target_weights
        return cls(r, v, idx, ids, names, w, num_tokens, meta=dict(meta or {}))

    # -- metrics ----------------------------------------------------------------------------
    def evaluate(self, **kwargs) -> dict:
        """Shorthand for :func:`evaluate_pool` (``ks=..., seeds=..., embed_diversity=...``)."""
        return evaluate_pool(self, **kwargs)

    # -- disk -------------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``meta.json``, ``rollouts.jsonl`` (when texts are known) and ``pool.npz``."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        meta = {
            **self.meta,
            "format": POOL_FORMAT,
            "objectives": list(self.objectives),
            "target_weights": self.target_weights.tolist(),
            "m": self.m,
        }
        write_json(out / META_FILE, meta)
        if self.completions is not None:
            tmp = out / (ROLLOUTS_FILE + ".tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                for rec in self.records():
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            os.replace(tmp, out / ROLLOUTS_FILE)
        self._save_arrays(out)
        return out

    def _save_arrays(self, out: Path) -> None:
        tok = self.num_tokens if self.num_tokens is not None else np.full(self.num_rollouts, np.nan)
        tmp = out / "pool.tmp.npz"
        np.savez_compressed(
            tmp,
            rewards=self.rewards,
            valid=self.valid,
            prompt_index=self.prompt_index,
            num_tokens=tok,
            prompt_ids=np.asarray(self.prompt_ids, dtype=str),
        )
        os.replace(tmp, out / ARRAYS_FILE)

    def records(self) -> Iterable[dict]:
        """One JSON-ready record per prompt (the ``rollouts.jsonl`` lines)."""
        order = np.argsort(self.prompt_index, kind="stable")
        by_prompt: dict[int, list[int]] = {}
        for i in order:
            by_prompt.setdefault(int(self.prompt_index[i]), []).append(int(i))
        for p, rows in sorted(by_prompt.items()):
            yield {
                "prompt_id": self.prompt_ids[p],
                "completions": [self.completions[i] for i in rows] if self.completions is not None else None,
                "answers": [list(self.answers[i]) for i in rows] if self.answers is not None else None,
                "rewards": self.rewards[rows].tolist(),
                "valid": self.valid[rows].tolist(),
                "num_tokens": [_num(self.num_tokens[i]) for i in rows] if self.num_tokens is not None else None,
            }

    @classmethod
    def load(cls, directory: str | os.PathLike, texts: bool = True) -> "Pool":
        """Read a pool directory. ``texts=False`` reads only ``pool.npz`` when it is there (fast)."""
        src = Path(directory)
        if not src.exists():
            raise PoolError(f"no pool at {src}: the directory does not exist")
        if src.is_dir() and not (src / META_FILE).exists() and (src / "pool" / META_FILE).exists():
            src = src / "pool"  # an eval run directory: its pool lives in pool/
        meta_path = src / META_FILE
        if not meta_path.exists():
            raise PoolError(f"{src} is not a pool directory: it has no {META_FILE} (run `vpo eval` to make one)")
        meta = read_json(meta_path)
        if meta.get("format") != POOL_FORMAT:
            raise PoolError(f"{meta_path} has format {meta.get('format')!r}; this vpo reads {POOL_FORMAT!r}")
        objectives = tuple(meta["objectives"])
        w = np.asarray(meta["target_weights"], dtype=np.float64)
        m = int(meta["m"])
        jsonl, npz = src / ROLLOUTS_FILE, src / ARRAYS_FILE
        if jsonl.exists() and (texts or not npz.exists()):
            records = _read_pool_records(jsonl)
            return cls.from_records(records, objectives, w, m, meta, where=str(jsonl))
        if npz.exists():
            with np.load(npz, allow_pickle=False) as z:
                return cls(
                    z["rewards"],
                    z["valid"],
                    z["prompt_index"],
                    [str(x) for x in z["prompt_ids"]],
                    objectives,
                    w,
                    z["num_tokens"],
                    meta=meta,
                )
        raise PoolError(f"{src} has no {ROLLOUTS_FILE} or {ARRAYS_FILE}: the pool holds no rollouts yet")

    @classmethod
    def from_records(
        cls, records: Sequence[dict], objectives, target_weights, m: int, meta: dict, where: str = "records"
    ) -> "Pool":
        """Build a pool from ``rollouts.jsonl`` records (one per prompt)."""
        d = len(objectives)
        if not records:
            raise PoolError(f"{where} holds no finished prompt: the pool is empty (generate first, or resume)")
        rewards, valid, idx, tok, comps, answers, ids = [], [], [], [], [], [], []
        for p, rec in enumerate(records):
            r = np.asarray(rec["rewards"], dtype=np.float64)
            if r.ndim != 3 or r.shape[1:] != (m, d):
                raise PoolError(
                    f"{where}: prompt {rec.get('prompt_id')!r} has reward rows of shape {r.shape[1:]}, "
                    f"expected (m, d) = {(m, d)} from meta.json; the file mixes pools of different tasks/m"
                )
            R = r.shape[0]
            rewards.append(r)
            valid.append(np.asarray(rec["valid"], dtype=bool).reshape(R, m))
            idx.append(np.full(R, p))
            nt = rec.get("num_tokens")
            tok.append(
                np.asarray([np.nan if x is None else x for x in nt], dtype=np.float64)
                if nt is not None
                else np.full(R, np.nan)
            )
            comps.extend(rec.get("completions") or [""] * R)
            answers.extend(rec.get("answers") or [[] for _ in range(R)])
            ids.append(str(rec["prompt_id"]))
        if len(set(ids)) != len(ids):
            raise PoolError(f"{where} lists a prompt twice; the pool is corrupt (regenerate it)")
        has_text = any(rec.get("completions") is not None for rec in records)
        return cls(
            np.concatenate(rewards),
            np.concatenate(valid),
            np.concatenate(idx),
            ids,
            tuple(objectives),
            target_weights,
            np.concatenate(tok),
            comps if has_text else None,
            answers if has_text else None,
            meta=meta,
        )


def load_pool(directory: str | os.PathLike, texts: bool = True) -> Pool:
    """Load a pool directory written by :func:`vpo.search.generate_pool` or :meth:`Pool.save`."""
    return Pool.load(directory, texts=texts)


# ---------------------------------------------------------------------------------------------
# incremental writer (generation appends one prompt at a time)
# ---------------------------------------------------------------------------------------------


class PoolWriter:
    """Append-only pool directory (a :class:`vpo._util.JsonlRun`): opening checks/creates
    ``meta.json``, ``write`` appends one prompt's record and fsyncs it, ``finish`` writes ``pool.npz``.

    ``resume=True`` keeps the finished prompts of an existing pool whose meta matches
    (``match_keys``), ``resume=False`` starts it over.
    """

    def __init__(
        self, directory: str | os.PathLike, meta: dict, *, resume: bool = True, match_keys: Sequence[str] = ()
    ) -> None:
        self.dir = Path(directory)
        self.meta = {**meta, "format": POOL_FORMAT}
        if self.dir.exists() and not self.dir.is_dir():
            raise PoolError(f"pool output {self.dir} exists and is not a directory")
        self.dir.mkdir(parents=True, exist_ok=True)

        def mismatch(keys, old):
            diffs = "; ".join(f"{k}: saved {old.get(k)!r}, asked {self.meta.get(k)!r}" for k in keys)
            return PoolError(
                f"the pool in {self.dir} was generated with different settings ({diffs}). "
                "Use another output directory, or resume=False (--no-resume) to start it over"
            )

        self._run = JsonlRun(
            self.dir / META_FILE,
            self.dir / ROLLOUTS_FILE,
            self.meta,
            resume=resume,
            match_keys=match_keys,
            mismatch=mismatch,
            read=lambda path: _read_pool_records(path, repair=True),
            load_meta=read_json,
            stale=[self.dir / ARRAYS_FILE],  # out of date once we append; finish() rewrites it
            meta_json={"indent": 2, "ensure_ascii": False},
            record_json={"ensure_ascii": False, "allow_nan": True},
        )
        self.records = self._run.records

    @property
    def done_ids(self) -> set[str]:
        return {str(r["prompt_id"]) for r in self.records}

    def write(self, record: dict) -> None:
        self._run.write(record)

    def close(self) -> None:
        self._run.close()

    def finish(self, order: Sequence[str] | None = None) -> Pool:
        """Close the file, write ``pool.npz`` (every prompt in the directory) and return the pool of
        the prompts in ``order`` (all, in file order, when None)."""
        self.close()
        args = (self.meta["objectives"], np.asarray(self.meta["target_weights"]), int(self.meta["m"]), self.meta)
        full = Pool.from_records(self.records, *args, where=str(self.dir))
        full._save_arrays(self.dir)
        if order is None:
            return full
        by_id = {str(r["prompt_id"]): r for r in self.records}
        return Pool.from_records([by_id[pid] for pid in order if pid in by_id], *args, where=str(self.dir))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _read_pool_records(path: Path, repair: bool = False) -> list[dict]:
    """Read ``rollouts.jsonl``. A torn last line (a crash mid-write) is dropped, and with
    ``repair=True`` cut from the file so appends continue cleanly; a bad line elsewhere is an error."""
    try:
        records = read_jsonl(path, torn_tail=True, repair=repair)
    except ValueError as e:
        raise PoolError(f"{e}; the pool file is corrupt") from None
    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or "prompt_id" not in rec or "rewards" not in rec:
            raise PoolError(f"{path}: record {i + 1} is not a pool record (no prompt_id/rewards)")
    return records


# ---------------------------------------------------------------------------------------------
# evaluation of a pool
# ---------------------------------------------------------------------------------------------


def evaluate_pool(
    pool: Pool,
    *,
    ks: Sequence[int] | None = None,
    seeds: Sequence[int] | None = None,
    embed_diversity: bool = False,
    config=None,
    **overrides,
) -> dict:
    """All metrics of :mod:`vpo.search.metrics` for a pool, plus what produced it.

    ``ks`` answer budgets (default (1, 3, 5, 10, 30) cut to the pool), ``seeds`` eval seeds of the
    matched-budget draw, ``embed_diversity`` adds the sentence-embedding diversity of the answer
    texts (needs ``pip install -e ".[embed]"`` in the clone); other :class:`~vpo.search.metrics.EvalConfig`
    fields as keywords. Returns the dict of :func:`vpo.search.metrics.evaluate` with ``"pool"``
    (meta: task, model, sampling) and ``"objectives"`` added.
    """
    from vpo.search.metrics import EvalConfig, evaluate

    if not isinstance(pool, Pool):
        raise PoolError(f"evaluate_pool needs a Pool (load one with vpo.search.load_pool); got {type(pool).__name__}")
    if pool.num_rollouts == 0:
        raise PoolError("the pool is empty: no rollouts to evaluate")
    if ks is not None:
        overrides["ks"] = tuple(ks)
    if seeds is not None:
        overrides["seeds"] = tuple(seeds)
    cfg = config or EvalConfig()
    if overrides:
        from dataclasses import asdict

        cfg = EvalConfig(**{**asdict(cfg), **overrides})
    out = evaluate(
        pool.rewards,
        pool.valid,
        pool.prompt_index,
        target_weights=pool.target_weights,
        num_tokens=pool.num_tokens,
        prompt_ids=pool.prompt_ids,
        config=cfg,
    )
    out["objectives"] = list(pool.objectives)
    out["pool"] = {k: v for k, v in pool.meta.items() if k not in ("objectives", "target_weights")}
    from vpo.search.failures import failure_types

    failures = failure_types(pool)
    if failures is not None:
        out["failures"] = failures
    if embed_diversity:
        from vpo.search.embed import embedding_diversity

        if pool.answers is None:
            raise PoolError("embedding diversity needs the answer texts; this pool was saved without them")
        per_prompt = embedding_diversity(_answers_by_prompt(pool))
        from vpo.search.metrics import jsonable, ci_summary, bootstrap_ci

        lo, hi = bootstrap_ci(per_prompt[None], cfg.bootstrap, cfg.ci_level, cfg.bootstrap_seed)
        out["metrics"]["embedding_diversity"] = jsonable(ci_summary(per_prompt, lo[0], hi[0]))
        if "per_prompt" in out:
            out["per_prompt"]["embedding_diversity"] = jsonable(per_prompt.tolist())
    return out


def _answers_by_prompt(pool: Pool) -> list[list[str]]:
    """The valid answer texts of each prompt's pool (slot order), ``[P][*]``."""
    out: list[list[str]] = [[] for _ in range(pool.num_prompts)]
    for i in range(pool.num_rollouts):
        texts = pool.answers[i]
        for j in range(pool.m):
            if pool.valid[i, j] and j < len(texts):
                out[int(pool.prompt_index[i])].append(texts[j])
    return out


# ---------------------------------------------------------------------------------------------


def _num(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def write_json(path: Path, obj) -> None:
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise PoolError(f"{path} is not valid JSON ({e}); the file is corrupt") from None

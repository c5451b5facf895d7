"""VPO-native selection for ``vpo evolve --selection vpo``: per-island weightings and a Pareto archive.

OpenEvolve ranks every program by one number (``combined_score``). Here each island i draws its own
weighting ``w_i ~ Dir(alpha)`` of the reward vector once, from the run's seed (:func:`island_weights`),
and ranks its programs by ``w_i^T r``: parent choice, the prompt's top programs, MAP-Elites cell
replacement in that island and which of its programs migrate (:class:`VPOSelector`,
:func:`population_strategy`). :class:`ParetoArchive` keeps the non-dominated reward vectors seen so
far (one program per distinct vector, the first to reach it); it feeds parents and inspirations
to every island, and its coverage (:func:`coverage`) is reported in both selection modes.
docs/evolve.md says exactly how parents and inspirations are drawn. Pure Python + numpy for the draw.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

SELECTIONS = ("default", "vpo")
"""``default``: OpenEvolve's own selection on ``w*^T r``; ``vpo``: per-island ``w_i`` + Pareto archive."""


def island_weights(num_islands: int, dim: int, alpha: float, seed: int) -> list[list[float]]:
    """One weighting ``w_i ~ Dir(alpha * 1_dim)`` per island, drawn from a generator seeded by
    ``seed`` alone (so the same seed gives the same weightings, whatever else the run draws)."""
    import numpy as np

    if dim < 1 or num_islands < 1 or not alpha > 0:
        raise ValueError(
            f"island_weights needs dim >= 1, num_islands >= 1 and alpha > 0 (got {dim}, {num_islands}, {alpha})"
        )
    rng = np.random.default_rng([int(seed) % 2**32, 0x1E5])
    w = rng.dirichlet([float(alpha)] * dim, size=num_islands)
    return [[float(x) for x in row] for row in w]


def weighted(rewards: Sequence[float], w: Sequence[float]) -> float:
    return float(sum(a * b for a, b in zip(rewards, w)))


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """``a`` Pareto-dominates ``b``: at least as good in every component and better in one."""
    return all(x >= y for x, y in zip(a, b)) and any(x > y for x, y in zip(a, b))


def coverage(best: Sequence[float], ceiling: float = 1.0) -> float:
    """Mean over components of ``min(best_j, ceiling) / ceiling``: the fraction of the union of the
    per-component maxima reached (1 when every component's best is at the ceiling; components are
    rewards in [0, 1], where 1 means the test passes)."""
    if not best:
        return 0.0
    return float(sum(max(0.0, min(b, ceiling)) for b in best) / (ceiling * len(best)))


class ParetoArchive:
    """The non-dominated set of the reward vectors added so far, with one program per vector.

    ``add(pid, r, program)`` keeps ``r`` when no kept vector dominates it or equals it (a later
    program with an equal vector is a duplicate: the first one stays), and drops the kept vectors
    ``r`` dominates. ``program`` (a dict, e.g. ``Program.to_dict()``) is stored so that a member stays
    usable as a parent after OpenEvolve's database has dropped it. Insertion order is kept.
    """

    def __init__(self) -> None:
        self.members: list[dict[str, Any]] = []
        self.best: list[float] = []

    def __len__(self) -> int:
        return len(self.members)

    def add(self, pid: str, rewards: Sequence[float], program: Mapping | None = None) -> bool:
        """Add one program; returns whether it entered the archive."""
        r = [float(x) for x in rewards]
        self.best = [max(a, b) for a, b in zip(self.best, r)] if self.best else list(r)
        for m in self.members:
            if m["rewards"] == r or dominates(m["rewards"], r):
                return False
        self.members = [m for m in self.members if not dominates(r, m["rewards"])]
        self.members.append({"id": pid, "rewards": r, "program": dict(program) if program else None})
        return True

    def ids(self) -> list[str]:
        return [m["id"] for m in self.members]

    def state(self, with_programs: bool = True) -> dict:
        """JSON-able: members (id, rewards, and the program when ``with_programs``) and per-component best."""
        keep = ("id", "rewards", "program") if with_programs else ("id", "rewards")
        return {"members": [{k: m[k] for k in keep} for m in self.members], "best": list(self.best)}

    @classmethod
    def from_state(cls, state: Mapping) -> ParetoArchive:
        a = cls()
        a.members = [dict(m) for m in state.get("members", [])]
        a.best = list(state.get("best", []))
        return a


class VPOSelector:
    """Parents and inspirations for a call on island ``i``, ranked by that island's ``w_i``.

    Parent: with probability ``archive_parent_ratio`` a uniformly drawn Pareto archive member;
    otherwise OpenEvolve's three modes inside the island, scored by ``w_i^T r``: exploration
    (``exploration_ratio``: uniform over the island), exploitation (``exploitation_ratio``: uniform
    over the island's top ``elite_count``), else fitness-proportional. Inspirations: the island's
    best under ``w_i`` (unless it is the parent), then ``archive_inspirations`` archive members drawn
    uniformly (not the parent, not already chosen), then uniform island programs up to
    ``num_inspirations`` + ``archive_inspirations`` in all. Uses the ``random`` module (seeded by the run).
    """

    def __init__(
        self,
        weights: Sequence[Sequence[float]],
        rewards_of,
        *,
        exploration_ratio: float = 0.2,
        exploitation_ratio: float = 0.7,
        elite_count: int = 3,
        archive_parent_ratio: float = 0.25,
        archive_inspirations: int = 2,
    ) -> None:
        self.weights = [list(w) for w in weights]
        self.rewards_of = rewards_of  # Program -> reward vector
        self.exploration_ratio, self.exploitation_ratio = exploration_ratio, exploitation_ratio
        self.elite_count = max(1, int(elite_count))
        self.archive_parent_ratio = archive_parent_ratio
        self.archive_inspirations = max(0, int(archive_inspirations))

    def score(self, program, island: int) -> float:
        return weighted(self.rewards_of(program), self.weights[island])

    def ranked(self, programs: Sequence, island: int) -> list:
        """``programs`` best first under ``w_island`` (stable: ties keep their order)."""
        return sorted(programs, key=lambda p: self.score(p, island), reverse=True)

    def island_programs(self, db, island: int) -> list:
        """The island's programs in a fixed order (call, slot, migrant copy last, id): set order
        would follow string hashing, which differs between processes."""
        progs = [db.programs[i] for i in db.islands[island] if i in db.programs]
        return sorted(progs, key=_creation_key)

    def sample(
        self, db, island: int, archive: ParetoArchive, num_inspirations: int, to_program
    ) -> tuple[Any, list, str]:
        """``(parent, inspirations, how the parent was chosen)``; ``to_program`` turns an archive
        member's stored dict back into a Program."""
        pool = self.island_programs(db, island) or sorted(db.programs.values(), key=_creation_key)
        ranked = self.ranked(pool, island)
        u = random.random()
        if archive.members and u < self.archive_parent_ratio:
            parent, how = self._from_archive(db, random.choice(archive.members), to_program), "archive"
        elif u < self.archive_parent_ratio + (1 - self.archive_parent_ratio) * self.exploration_ratio:
            parent, how = random.choice(pool), "exploration"
        elif u < self.archive_parent_ratio + (1 - self.archive_parent_ratio) * (
            self.exploration_ratio + self.exploitation_ratio
        ):
            parent, how = random.choice(ranked[: self.elite_count]), "exploitation"
        else:
            fit = [max(self.score(p, island), 0.001) for p in pool]
            parent, how = random.choices(pool, weights=fit, k=1)[0], "weighted"
        insp = [ranked[0]] if ranked[0].id != parent.id else []
        taken = {parent.id, *(p.id for p in insp)}
        others = [m for m in archive.members if m["id"] not in taken]
        for m in random.sample(others, min(self.archive_inspirations, len(others))):
            insp.append(self._from_archive(db, m, to_program))
            taken.add(m["id"])
        rest = [p for p in pool if p.id not in taken]
        want = num_inspirations + self.archive_inspirations - len(insp)
        insp += random.sample(rest, min(max(0, want), len(rest)))
        return parent, insp, how

    @staticmethod
    def _from_archive(db, member: Mapping, to_program):
        p = db.programs.get(member["id"])
        return p if p is not None else to_program(member["program"])


def _creation_key(p) -> tuple:
    md = p.metadata
    return (md.get("vpo_call", 1 << 30), md.get("vpo_slot", 0), bool(md.get("migrant", False)), p.id)


def population_strategy(selector: VPOSelector, migration_rate: float):
    """OpenEvolve ``PopulationStrategy`` hooks that rank by the island's own ``w_i``: a candidate
    replaces the incumbent of its MAP-Elites cell in island i when its ``w_i^T r`` is higher, and each
    island sends its top ``max(1, rate * size)`` programs under ``w_i`` to its two ring neighbours."""
    from openevolve.population import MigrationMove, PopulationStrategy

    def replace_cell(snapshot, candidate, incumbent, island: int) -> bool:
        return selector.score(candidate, island) > selector.score(incumbent, island)

    def migrate(snapshot) -> list:
        moves, n = [], len(snapshot.islands)
        for i, members in enumerate(snapshot.islands):
            progs = sorted(
                (
                    snapshot.programs[p]
                    for p in members
                    if p in snapshot.programs and not snapshot.programs[p].metadata.get("migrant", False)
                ),
                key=_creation_key,
            )
            if not progs:
                continue
            top = selector.ranked(progs, i)[: max(1, int(len(progs) * migration_rate))]
            for p in top:
                for t in sorted({(i + 1) % n, (i - 1) % n} - {i}):
                    if p.id not in snapshot.islands[t]:
                        moves.append(MigrationMove(program_id=p.id, target_island=t))
        return moves

    return PopulationStrategy(replace_cell=replace_cell, migrate=migrate)

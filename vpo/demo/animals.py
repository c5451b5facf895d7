"""The demo's second pretrained-model domain: SmolLM2 picks small, fast, long-lived animals from lists.

``vpo demo --model smollm2 --domain animals`` runs the shop domain's pipeline (a pretrained chat
model, a format warm start of all weights, LoRA RL, the same evaluation) on :mod:`vpo.tasks.animals`:
lists of well-known animals, answered by name, scored on facts the model half-knows (body mass, top
speed, lifespan). Two things differ from the shop domain, both chosen so that the start leaves room
for RL (issue #49):

* the format warm start can train on **the base model's own answers** (``animals_warm="self"``, the
  default): for every training list the base model answers the plain question a few times, and the
  first listed animal each reply names becomes a warm-start answer in the tag formats. The warm start
  then teaches the tags but keeps the model's own preferences (a uniform random answerer would sample
  every animal of the list, and its best@30 would sit at the ceiling). ``"random"`` trains on uniformly
  random listed animals, as the shop domain does;
* the lists are longer (``animals_list_size``), so that 30 answers cannot cover one by chance.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from vpo._util import positive_int
from vpo.demo.domain_base import Setting
from vpo.demo.shop import ShopDomain, model_dir
from vpo.errors import UserError

if TYPE_CHECKING:
    from vpo.demo.config import DemoConfig

WARM_SOURCES = ("self", "random")


class BaseModelAnswers:
    """The base model's own answers to the plain question, drawn lazily per list and kept: ``sample(ex)``
    returns one of them (the first listed animal a reply names), drawn with the warm start's generator.

    Each list is asked ``replies`` times at ``temperature`` (no top-k or top-p) with vpo's CPU sampler
    (:class:`vpo.search.fast_decode.FastDecoder`, seeded per batch of lists from the warm start's seed); replies that name no listed animal are dropped, and a list whose
    replies name none falls back to a uniformly random listed animal (counted in :attr:`fallbacks`)."""

    def __init__(self, model_path: Path, task, seed: int, replies: int = 8, temperature: float = 0.7,
                 max_new_tokens: int = 24, threads: int = 1) -> None:  # fmt: skip
        self.model_path = Path(model_path)
        self.task = task
        self.seed = seed
        self.replies = replies
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self.threads = threads
        self._model = None
        self._tok = None
        self._cache: dict[str, list[str]] = {}
        self.named: dict[str, list[str | None]] = {}
        """Per list, what each reply named first (None: no listed animal), in reply order."""
        self.fallbacks = 0

    def _load(self) -> None:
        if self._model is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            self._tok = AutoTokenizer.from_pretrained(self.model_path)
            self._model = AutoModelForCausalLM.from_pretrained(self.model_path)
            self._model.eval()
            from vpo.search.fast_decode import FastDecoder, unsupported_reason

            why = unsupported_reason(self._model)
            if why is not None:
                raise UserError(
                    f"the animals domain's 'self' warm start samples with vpo's CPU sampler, which cannot run {self.model_path}: {why}; use --set animals_warm=random"
                )
            self._decoder = FastDecoder(self._model)
            self._eos = sorted(
                {
                    i
                    for i in (self._tok.eos_token_id, self._tok.convert_tokens_to_ids("<|im_end|>"))
                    if isinstance(i, int) and i >= 0
                }
            )

    def prefetch(self, examples: list[dict], batch_lists: int = 16) -> None:
        """Ask the base model about every list of ``examples`` not asked yet, ``batch_lists`` lists per
        ``generate`` call (left-padded; seeded per call from the seed and the call's first list)."""
        import torch

        from vpo.search.fast_decode import Sampling
        from vpo.tasks.animals import first_listed_mention

        todo = [ex for ex in examples if str(ex["id"]) not in self._cache]
        if not todo:
            return
        self._load()
        torch.set_num_threads(self.threads)
        tok = self._tok
        tok.padding_side = "left"
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        import time

        from vpo.demo.jobs import status

        t0 = time.time()
        if len(todo) > batch_lists:
            status(f"warm start: asking the base model about {len(todo)} lists ({self.replies} replies each)")
        for b in range(0, len(todo), batch_lists):
            chunk = todo[b : b + batch_lists]
            if b and (b // batch_lists) % 8 == 0:
                left = (time.time() - t0) / b * (len(todo) - b)
                status(f"warm start: {b}/{len(todo)} lists asked, about {left / 60:.0f} min left")
            texts = [
                tok.apply_chat_template([{"role": "user", "content": self.task.question(ex)}], add_generation_prompt=True,
                                        tokenize=False)
                for ex in chunk
            ]  # fmt: skip
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            first = str(chunk[0]["id"])
            gen = torch.Generator().manual_seed(
                self.seed * 1_000_003 + int(np.frombuffer(first.encode(), np.uint8).sum()) + b
            )
            ids = enc["input_ids"].repeat_interleave(self.replies, dim=0)
            mask = enc["attention_mask"].repeat_interleave(self.replies, dim=0)
            sampling = Sampling(max_new_tokens=self.max_new_tokens, temperature=self.temperature)
            out = self._decoder.generate(ids, mask, sampling, self._eos, tok.pad_token_id, generator=gen)
            n = enc["input_ids"].shape[1]
            for i, ex in enumerate(chunk):
                rows = out[i * self.replies : (i + 1) * self.replies, n:]
                replies = [tok.decode(r, skip_special_tokens=True) for r in rows]
                named = [first_listed_mention(ex, t) for t in replies]
                self.named[str(ex["id"])] = named
                self._cache[str(ex["id"])] = [a for a in named if a is not None]

    def answers(self, ex: dict) -> list[str]:
        """The listed animals the base model's replies to ``ex`` name first (cached per list)."""
        self.prefetch([ex])
        return self._cache[str(ex["id"])]

    def sampler(self, rng: np.random.Generator) -> Callable[[dict], str]:
        """``sample(ex)``: one of the base model's own answers to ``ex``; ``sample.prefetch(examples)``
        asks about many lists at once (what :func:`vpo.demo.stages.warm_pairs` calls first)."""
        from vpo.tasks.animals import random_answer

        def sample(ex: dict) -> str:
            own = self.answers(ex)
            if not own:
                self.fallbacks += 1
                return random_answer(ex, rng)
            return own[int(rng.integers(len(own)))]

        sample.prefetch = self.prefetch
        return sample


COLLAPSED_BELOW = 0.05
"""A replicate whose diversity among useful answers is below this names one animal per list: collapsed."""
FORMAT_LOST_BELOW = 0.5
"""A replicate whose useful share is below this has lost the answer format (or the list) half the time."""
LEARNED_BY = 0.05
"""A replicate learned the task when its reward@1 is at least this much above its own start's (m = 1)."""


def breakage_lines(agg: dict) -> list[str]:
    """The report's per-replicate count of how often each trained method collapsed, lost the format or
    learned the task (issue #49: "say how often each method breaks"), against its own replicate's start."""
    from vpo.demo.domain_base import table

    rows = agg["methods"]
    start = rows.get("warmstart_m1")
    trained = [(k, r) for k, r in rows.items() if not k.startswith("warmstart") and k != "random"]
    if start is None or not trained:
        return []
    base = start["reward_at_1"]["per_seed"]

    def count(values, hit) -> str:
        return f"{sum(1 for v in values if hit(v))} of {len(values)}"

    body = []
    for _, r in trained:
        r1 = r["reward_at_1"]["per_seed"]
        gains = [a - (base[i] if len(base) == len(r1) else base[0]) for i, a in enumerate(r1)]
        body.append(
            (
                r["label"],
                [
                    count(r["completed_diversity"]["per_seed"], lambda v: v < COLLAPSED_BELOW),
                    count(r["completion_rate"]["per_seed"], lambda v: v < FORMAT_LOST_BELOW),
                    count(gains, lambda v: v >= LEARNED_BY),
                ],
            )
        )
    heads = [
        f"collapsed (diversity (useful) < {COLLAPSED_BELOW})",
        f"lost the format (useful < {FORMAT_LOST_BELOW})",
        f"learned (reward@1 ≥ its start's + {LEARNED_BY})",
    ]
    return ["## How often each method breaks (replicates)", "", *table("method", heads, body), ""]


CURVE_WINDOW = 20
"""Steps per window of the report's training-reward line (where the curves flatten)."""


def curve_lines(agg: dict, window: int = CURVE_WINDOW) -> list[str]:
    """The training reward per method in windows of ``window`` steps, averaged over replicates: where
    the curves flatten (issue #49). A set method's reward is its set score, so compare windows within a
    method, not across methods."""
    curves = agg.get("training_curves") or {}
    parts = []
    for key, c in curves.items():
        runs = [np.asarray(r, dtype=float) for r in c.get("reward", []) if len(r)]
        if not runs or key not in agg["methods"]:
            continue
        n = min(len(r) for r in runs)
        means = [float(np.nanmean([r[i : i + window] for r in runs])) for i in range(0, n - window + 1, window)]
        if means:
            parts.append(f"{agg['methods'][key]['label']} " + " → ".join(f"{m:.2f}" for m in means))
    if not parts:
        return []
    return [
        f"Training reward per {window}-step window, mean over replicates (a set method's is its set score: "
        "compare windows within a method): " + "; ".join(parts) + ".",
        "",
    ]


class AnimalsDomain(ShopDomain):
    """Animal lists (:mod:`vpo.tasks.animals`) on a pretrained chat model, LoRA RL."""

    name = "animals"
    task = "animals"
    summary = "animals: a pretrained chat model (SmolLM2-135M-Instruct, LoRA RL) picks small, fast, long-lived animals"
    settings = {
        "animals_list_size": Setting(20, "animals only: animals per list (2-60)."),
        "animals_warm": Setting(
            "self",
            "animals only: the warm start's answers: 'self' (the base model's own answers to the plain "
            "question: the tags without new preferences) or 'random' (uniformly random listed animals).",
        ),
    }
    shared_settings = tuple(ShopDomain.settings)
    """The shop domain's settings this domain reads too (the model, LoRA rank, device); ``shop_answer``
    stays unused."""
    defaults = {
        **ShopDomain.defaults,
        # chosen on the validation split (docs/demo/animals/validation.md): lists of 20 leave the start 0.1
        # below the ceiling; 100 steps learn the task; Max@k at GRPO 3x's rollouts (matched compute); the
        # start also at T = 1.0, the temperature that maximised its best@30 (0.7, 1.0, 1.3, 1.6 tried)
        "methods": ("grpo_3x", "max_at_k_3x", "vpo"),
        "rl_steps": 100,
        "random_answerer": True,
        "start_temperature": 1.0,
    }
    ceiling_label = "ceiling: the best listed animal under w*"
    coverage_plot = ("pareto_coverage", "fraction of the list's Pareto front named", "Pareto coverage vs answer budget")
    done_label = "answers naming a listed animal"
    completion_label = "useful answers (a listed animal)"
    readme_begin = (
        "<!-- animals-demo-table: generated by vpo.demo.report.readme_table from docs/demo/animals/demo.json -->"
    )
    readme_end = "<!-- /animals-demo-table -->"
    # one-core seconds from the validation runs of lists of 20 (two jobs sharing the cores; the warm start
    # with asking the base model about 512 lists), scaled to 600 warm steps, 60 RL steps, 3000 answers
    job_costs_s = {"warm": 20000.0, "eval": 190.0, "grpo": 238, "grpo_3x": 415, "max_at_k": 238, "max_at_k_3x": 424, "vpo": 498}  # fmt: skip
    job_memory_gib = dict(ShopDomain.job_memory_gib)

    top_ks = (1, 3, 10, 30)  # best@3 too: where the trained models and the uniform random answerer trade places
    readme_skip_pairs = ("warmstart_m3", "warmstart_hot_m3")
    item = "animal"
    objective_noun = "objectives (small, fast, long-lived)"
    useful_definition = "fraction of answers that name a listed animal"

    def report(self, agg: dict):
        """The shop report, with the share of each pool that is a fixed menu (issue #49: a set that
        does not depend on the request is not search)."""
        import dataclasses

        from vpo.demo.fmt import fmt

        rep = super().report(agg)
        means = [*rep.means, ("fixed menu", lambda r: fmt(r["menu_share"]["mean"]) if "menu_share" in r else "n/a")]
        glossary = (
            rep.glossary + " Fixed menu: the share of rollouts whose answer set is the run's most common set across "
            "requests (the same animals whatever the list; 1: the pool ignores the request)."
        )
        return dataclasses.replace(
            rep, means=means, glossary=glossary, closing=[*rep.closing, *breakage_lines(agg), *curve_lines(agg)]
        )

    def warm_answers_label(self, cfg: dict) -> str:
        return "of the base model's own answers" if cfg["animals_warm"] == "self" else "random answers"

    def answers_label(self, cfg: dict) -> str:
        return f"Answers: the animal's name; lists of {cfg['animals_list_size']} animals."

    def task_options(self, cfg: DemoConfig) -> dict:
        return {"list_size": cfg.animals_list_size}

    def make_task(self, cfg: DemoConfig, evaluation: bool = False):
        from vpo.tasks.animals import AnimalsTask

        return AnimalsTask(**self.options(cfg, evaluation))

    def check(self, cfg: DemoConfig) -> None:
        from vpo.tasks.animals import ANIMALS

        if cfg.animals_warm not in WARM_SOURCES:
            raise UserError(f"animals_warm must be one of {', '.join(WARM_SOURCES)}, got {cfg.animals_warm!r}")
        positive_int(cfg.animals_list_size, "animals_list_size", minimum=2, error=UserError)
        if cfg.animals_list_size > len(ANIMALS):
            raise UserError(
                f"animals_list_size must be at most {len(ANIMALS)} (the table's animals), got {cfg.animals_list_size}"
            )
        super().check(cfg)  # the shop domain's settings it shares (device, LoRA rank)

    def warm_settings(self, cfg: DemoConfig) -> dict:
        return {**super().warm_settings(cfg), "animals_warm": cfg.animals_warm}

    def warm_answer_sampler(self, cfg: DemoConfig, rng: np.random.Generator) -> Callable[[dict], str]:
        from vpo.tasks.animals import AnimalsTask

        if cfg.animals_warm == "random":
            draw = self.random_answer(cfg)
            return lambda ex: draw(ex, rng)
        seed = int(rng.integers(2**31))
        own = BaseModelAnswers(model_dir(cfg.shop_model), AnimalsTask(**self.task_options(cfg)), seed=seed,
                               threads=1)  # fmt: skip
        return own.sampler(rng)

    def random_answer(self, cfg: DemoConfig) -> Callable[[dict, np.random.Generator], str]:
        """A uniformly random listed animal."""
        from vpo.tasks.animals import random_answer

        return random_answer

    def answer_key(self, examples: list[dict]) -> Callable[[int, str], object]:
        from vpo.tasks.animals import find_item

        return lambda p, text: find_item(examples[p], text)

    def fronts(self, examples: list[dict]) -> list[np.ndarray]:
        from vpo.tasks.animals import pareto_items

        return [pareto_items(ex) for ex in examples]

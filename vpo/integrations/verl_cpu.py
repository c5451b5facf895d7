"""veRL 0.9.1 on CPU: a ``cpu`` platform, FSDP2 engines on gloo, and a rollout replica that samples
from an HF copy of the policy, so ``python -m verl.trainer.main_ppo`` trains end to end without a GPU.

veRL has no CPU path (verl#3266); this module fills it through veRL's own extension points only:

* a platform registered with ``PlatformRegistry`` as ``cpu`` (select it with ``VERL_PLATFORM=cpu``):
  device ``cpu``, backend ``gloo``, ``current_device()`` a ``torch.device('cpu')`` (veRL passes it to
  ``.to()``, where an integer would mean a CUDA index), Ray resource ``GPU`` (veRL's resource pools
  count only GPU/NPU resources, so the run declares logical GPUs: ``+ray_kwargs.ray_init.num_gpus=2``);
* veRL's FSDP engines registered for device ``cpu`` (use ``strategy=fsdp2``: FSDP1 passes an integer
  device id), their forward-only engines' ``CPUOffloadPolicy`` unpinned (pinning needs an
  accelerator); ``initialize_global_process_group_ray`` wrapped so that its default backend string
  (``cpu:gloo,<device>:<backend>``, invalid when the device is cpu) becomes ``gloo``;
* rollout ``vpo_hf`` (``actor_rollout_ref.rollout.name=vpo_hf``): a :class:`HFRolloutReplica` in
  ``RolloutReplicaRegistry`` whose server is a Ray actor (:class:`HFRolloutServer`) holding an HF
  ``AutoModelForCausalLM`` copy of the policy. Its ``generate`` samples one completion per request
  (veRL sends ``rollout.n`` requests per prompt) with the request's temperature / top-k / top-p,
  stops at the tokenizer's EOS or at a stop string (``rollout.custom.stop``, e.g. the last answer
  tag ``</answer_3>``), caps the length at ``rollout.response_length`` itself (veRL passes no max
  tokens) and returns ``TokenOutput(token_ids, log_probs)`` with the log-probs of the sampling
  distribution. :class:`HFServerAdapter` (veRL's ``BaseRollout``, in the trainer processes) is what
  the default ``naive`` weight sync calls at step 0 and after every actor update: every rank
  consumes the full tensors it is handed (gathering them is a collective), and only the first rank
  of each replica sends them to its server, which loads them. Every step's rollouts therefore come
  from the current policy.

Only active in a process where ``VERL_PLATFORM=cpu``: vpo's ``verl.plugins`` entry point imports
this module in every veRL process (``VERL_USE_EXTERNAL_MODULES=vpo.integrations.verl_cpu`` does the
same explicitly); elsewhere importing it registers nothing, so GPU runs are untouched.

Evidence for the tests (``VPO_VERL_DUMP_DIR``): the adapter writes the hash of the weights it was
handed, the server the hash of the weights it loaded, and the server one record per request (its
tokens and log-probs). Simplifications: one request at a time per server (no batching; fine for the
tiny models it is meant for); top-k/top-p/temperature only (no repetition penalty); no prefix cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from contextlib import contextmanager
from types import ModuleType
from typing import Any

logger = logging.getLogger(__name__)

ROLLOUT_NAME = "vpo_hf"
"""``actor_rollout_ref.rollout.name`` of the HF rollout registered here."""

DUMP_ENV = "VPO_VERL_DUMP_DIR"
"""Directory for the evidence files (weight hashes, rollout records); unset: nothing is written."""
REPLICA_SEED_STRIDE = 1000
"""A rollout replica's sampling seed is ``seed`` x this + its rank (distinct per seed and rank while ranks stay below it)."""


def active() -> bool:
    """True in a process that runs veRL on the CPU platform (``VERL_PLATFORM=cpu``)."""
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu"


def state_hash(named_tensors) -> str:
    """A hash of ``(name, tensor)`` pairs: sorted by name, each tensor as float32 bytes (the trainer and
    the server hash the same values even when one of them keeps another dtype)."""
    import torch

    h = hashlib.blake2b(digest_size=16)
    for name, t in sorted(named_tensors, key=lambda kv: kv[0]):
        h.update(name.encode())
        h.update(t.detach().to(torch.float32).contiguous().cpu().numpy().tobytes())
    return h.hexdigest()


def _dump(kind: str, record: dict) -> None:
    """Append ``record`` as one JSON line to ``$VPO_VERL_DUMP_DIR/<kind>.<pid>.jsonl``."""
    d = os.environ.get(DUMP_ENV)
    if not d:
        return
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"{kind}.{os.getpid()}.jsonl"), "a") as f:
        f.write(json.dumps(record) + "\n")


def _limit_threads() -> None:
    """Ray actors inherit no thread limit; the machine is small and shared: one torch thread per
    process unless the environment says otherwise (``VPO_VERL_THREADS``)."""
    import torch

    torch.set_num_threads(int(os.environ.get("VPO_VERL_THREADS", "1")))


# ---------------------------------------------------------------------------------------------
# the platform
# ---------------------------------------------------------------------------------------------


class _CpuDevice(ModuleType):
    """What veRL calls on ``get_torch_device()`` (normally ``torch.cuda``), for the CPU: memory
    queries report the host, RNG calls go to torch's CPU generator, cache and stream calls are no-ops
    or ``torch.cpu``'s. A name veRL needs that is not here falls back to ``torch.cpu`` or, logged
    once, to a no-op returning 0."""

    def __init__(self) -> None:
        super().__init__("vpo_cpu_device")
        self._warned: set[str] = set()

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device():
        import torch

        return torch.device("cpu")

    @staticmethod
    def set_device(*args, **kwargs) -> None:
        return None

    @staticmethod
    def synchronize(*args, **kwargs) -> None:
        return None

    @staticmethod
    def empty_cache() -> None:
        return None

    @staticmethod
    def ipc_collect() -> None:
        return None

    @staticmethod
    def set_per_process_memory_fraction(*args, **kwargs) -> None:
        return None

    @staticmethod
    def mem_get_info(device=None) -> tuple[int, int]:
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page

    @staticmethod
    def _rss() -> int:
        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            return 0

    def memory_allocated(self, device=None) -> int:
        return self._rss()

    memory_reserved = max_memory_allocated = max_memory_reserved = memory_allocated

    @staticmethod
    def get_device_name(device=None) -> str:
        return "CPU"

    @staticmethod
    def get_rng_state(device=None):
        import torch

        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state, device=None) -> None:
        import torch

        torch.set_rng_state(state)

    @staticmethod
    def manual_seed(seed: int) -> None:
        import torch

        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        import torch

        if hasattr(torch.cpu, name):
            return getattr(torch.cpu, name)
        if name not in self._warned:
            self._warned.add(name)
            logger.warning("vpo cpu platform: veRL called device.%s, which the CPU has not; a no-op returning 0", name)
        return lambda *args, **kwargs: 0


class _CPUPlatformMethods:
    """veRL platform ``cpu``: gloo, host memory, Ray's logical ``GPU`` resource for scheduling."""

    _device = _CpuDevice()

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return self._device

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return False  # never auto-detected: only VERL_PLATFORM=cpu selects it

    def current_device(self):
        import torch

        return torch.device("cpu")

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index=None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        import torch

        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        self.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0):
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "VPO_VERL_VISIBLE_CPUS"  # a name nothing else reads: Ray's logical GPUs are not devices

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


def _register_platform():
    from verl.plugin.platform.platform_base import PlatformBase
    from verl.plugin.platform.platform_manager import PlatformRegistry

    @PlatformRegistry.register(platform="cpu")
    class CPUPlatform(_CPUPlatformMethods, PlatformBase):
        """veRL platform ``cpu`` (the methods are :class:`_CPUPlatformMethods`')."""

    return CPUPlatform


def _patch_process_group() -> None:
    """``initialize_global_process_group_ray`` builds ``cpu:gloo,cpu:gloo`` on this platform; make
    its default backend plain ``gloo`` (patched before ``verl.workers.engine_workers`` imports the
    function by name, and in that module too when it already did)."""
    import sys

    from verl.utils import distributed

    original = distributed.initialize_global_process_group_ray
    if getattr(original, "_vpo_cpu", False):
        return

    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        _limit_threads()
        return original(timeout_second=timeout_second, backend=backend or "gloo")

    initialize_global_process_group_ray._vpo_cpu = True  # type: ignore[attr-defined]
    distributed.initialize_global_process_group_ray = initialize_global_process_group_ray
    ew = sys.modules.get("verl.workers.engine_workers")
    if ew is not None:
        ew.initialize_global_process_group_ray = initialize_global_process_group_ray


def _register_engines() -> None:
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp import transformer_impl
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead

    # the forward-only engines (the reference policy) get FSDP2's CPUOffloadPolicy(pin_memory=True);
    # pinning needs an accelerator. On the CPU the "offload" is a no-op anyway: keep it, unpinned.
    policy_cls = transformer_impl.CPUOffloadPolicy
    if policy_cls is not None and not getattr(policy_cls, "_vpo_cpu", False):

        def unpinned_offload_policy(*args, pin_memory: bool = True, **kwargs):
            return policy_cls(*args, pin_memory=False, **kwargs)

        unpinned_offload_policy._vpo_cpu = True  # type: ignore[attr-defined]
        transformer_impl.CPUOffloadPolicy = unpinned_offload_policy

    EngineRegistry.register(model_type="language_model", backend=["fsdp", "fsdp2"], device="cpu")(FSDPEngineWithLMHead)
    EngineRegistry.register(model_type="value_model", backend=["fsdp", "fsdp2"], device="cpu")(FSDPEngineWithValueHead)


# ---------------------------------------------------------------------------------------------
# the rollout: an HF model in a Ray actor
# ---------------------------------------------------------------------------------------------


def _server_name(replica_rank: int, suffix: str = "") -> str:
    return f"vpo_hf_rollout_{replica_rank}{suffix}"


def _stop_strings(rollout_config) -> list[str]:
    custom = getattr(rollout_config, "custom", None) or {}
    stop = custom.get("stop") if hasattr(custom, "get") else None
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    return [str(s) for s in stop]


class HFRolloutServer:
    """The replica's server (a Ray actor; the class is wrapped with ``ray.remote`` on registration):
    an HF causal LM sampled one request at a time."""

    def __init__(
        self,
        model_path: str,
        replica_rank: int,
        response_length: int,
        stop: list[str],
        seed: int = 0,
        trust_remote_code: bool = False,
    ) -> None:
        _limit_threads()
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.replica_rank = replica_rank
        self.tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=trust_remote_code)
        self.model = AutoModelForCausalLM.from_pretrained(
            model_path, dtype=torch.float32, trust_remote_code=trust_remote_code
        )
        self.model.eval()
        self.response_length = int(response_length)
        self.eos_ids = {int(i) for i in _as_list(self.tokenizer.eos_token_id)}
        gen_eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        self.eos_ids |= {int(i) for i in _as_list(gen_eos)}
        self.stop = list(stop)
        self.stop_ids: list[list[int]] = []
        for s in self.stop:
            ids = self.tokenizer.encode(s, add_special_tokens=False)
            if not ids:
                raise ValueError(f"vpo_hf rollout: stop string {s!r} tokenizes to nothing")
            self.stop_ids.append([int(i) for i in ids])
        self.generator = torch.Generator().manual_seed(int(seed) * REPLICA_SEED_STRIDE + replica_rank)
        self.global_steps = None
        self.weights_hash = state_hash(self.model.state_dict().items())
        self.requests = 0

    # -- weights --------------------------------------------------------------------------------

    def load_weights(self, named: dict, global_steps=None) -> str:
        """Load ``{name: tensor}`` (the trainer's full HF-keyed weights) into the model; return the hash
        of the model's state afterwards. Every parameter must be covered, except tied ones."""
        import torch

        own = self.model.state_dict()
        unknown = sorted(set(named) - set(own))
        if unknown:
            raise ValueError(f"vpo_hf rollout: weights for names the model lacks: {unknown[:5]}")
        tied = {"lm_head.weight"} if getattr(self.model.config, "tie_word_embeddings", False) else set()
        missing = sorted(set(own) - set(named) - tied)
        if missing:
            raise ValueError(f"vpo_hf rollout: the trainer sent no weights for {missing[:5]}")
        with torch.no_grad():
            for name, t in named.items():
                own[name].copy_(t.to(own[name].dtype))
        self.global_steps = global_steps
        self.weights_hash = state_hash(
            (n, t) for n, t in self.model.state_dict().items() if n in named or n not in tied
        )
        _dump(
            "server_weights",
            {
                "replica": self.replica_rank,
                "global_steps": global_steps,
                "hash": self.weights_hash,
                "time": time.time(),
            },
        )
        return self.weights_hash

    def get_weights_hash(self) -> str:
        return self.weights_hash

    # -- generation -----------------------------------------------------------------------------

    def _sample(self, logits, temperature: float, top_k: int, top_p: float):
        """One token from ``logits [V]`` and its log-prob under the distribution it was drawn from."""
        import torch

        logits = logits.to(torch.float32)
        if temperature <= 0:  # greedy (veRL's validation default)
            logp = torch.log_softmax(logits, -1)
            tok = int(torch.argmax(logits))
            return tok, float(logp[tok])
        logits = logits / temperature
        if top_k is not None and 0 < top_k < logits.shape[-1]:
            kth = torch.topk(logits, top_k).values[-1]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if top_p is not None and top_p < 1.0:
            sorted_logits, order = torch.sort(logits, descending=True)
            probs = torch.softmax(sorted_logits, -1)
            drop = torch.cumsum(probs, -1) - probs > top_p  # keep the smallest prefix reaching top_p
            logits = logits.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
        logp = torch.log_softmax(logits, -1)
        tok = int(torch.multinomial(logp.exp(), 1, generator=self.generator))
        return tok, float(logp[tok])

    def _stopped(self, ids: list[int]) -> bool:
        return any(len(ids) >= len(s) and ids[-len(s) :] == s for s in self.stop_ids)

    async def generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict, **kwargs):
        """veRL's token-in, token-out call: sample a response to ``prompt_ids``."""
        import torch
        from verl.workers.rollout.replica import TokenOutput

        sp = dict(sampling_params or {})
        temperature = float(sp.get("temperature", 1.0))
        top_k = int(sp.get("top_k", -1) if sp.get("top_k") is not None else -1)
        top_p = float(sp.get("top_p", 1.0) if sp.get("top_p") is not None else 1.0)
        limit = self.response_length
        for key in ("max_tokens", "max_new_tokens"):
            if sp.get(key):
                limit = min(limit, int(sp[key]))
        max_pos = getattr(self.model.config, "max_position_embeddings", None)
        if max_pos is not None:
            limit = max(0, min(limit, int(max_pos) - len(prompt_ids)))
        out_ids: list[int] = []
        out_logp: list[float] = []
        stop_reason = "length"
        with torch.no_grad():
            ids = torch.tensor([list(prompt_ids)], dtype=torch.long)
            past = None
            for _ in range(limit):
                res = self.model(input_ids=ids, past_key_values=past, use_cache=True)
                past = res.past_key_values
                tok, lp = self._sample(res.logits[0, -1], temperature, top_k, top_p)
                out_ids.append(tok)
                out_logp.append(lp)
                if tok in self.eos_ids:
                    stop_reason = "eos"
                    break
                if self._stopped(out_ids):
                    stop_reason = "stop"
                    break
                ids = torch.tensor([[tok]], dtype=torch.long)
        self.requests += 1
        _dump(
            "rollout",
            {
                "replica": self.replica_rank,
                "global_steps": self.global_steps,
                "weights_hash": self.weights_hash,
                "prompt_ids": list(map(int, prompt_ids)),
                "token_ids": out_ids,
                "log_probs": out_logp,
                "temperature": temperature,
                "top_p": top_p,
                "top_k": top_k,
                "stop": stop_reason,
            },
        )
        return TokenOutput(
            token_ids=out_ids,
            log_probs=out_logp,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    # -- lifecycle calls veRL makes on every server; nothing to free on the CPU ----------------

    async def wake_up(self):
        return None

    async def sleep(self):
        return None

    async def abort_all_requests(self, reject_request: bool = False):
        return None

    async def resume_generation(self):
        return None

    async def clear_kv_cache(self):
        return None

    async def release_kv_cache(self):
        return None

    async def resume_kv_cache(self):
        return None

    async def start_profile(self, **kwargs):
        return None

    async def stop_profile(self):
        return None


def _as_list(x) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple, set)) else [x]


def _model_path(model_config) -> str:
    """The policy's path from the replica's model settings (a plain config object: ``.path``)."""
    for key in ("path", "local_path"):
        value = getattr(model_config, key, None)
        if value is None and hasattr(model_config, "get"):
            value = model_config.get(key)
        if value:
            return str(value)
    raise ValueError("vpo_hf rollout: the model settings have no path (actor_rollout_ref.model.path)")


def _register_rollout() -> None:
    """Register the ``vpo_hf`` rollout with veRL: its replica (server side) and its adapter (trainer side)."""
    import ray
    from verl.workers.rollout import base as rollout_base
    from verl.workers.rollout.base import BaseRollout
    from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry

    HFRolloutReplica = _replica_class(RolloutReplica, ray.remote(num_cpus=0)(HFRolloutServer))
    HFServerAdapter = _adapter_class(BaseRollout, ray)
    HFRolloutReplica.__module__ = HFServerAdapter.__module__ = __name__
    globals()["HFRolloutReplica"] = HFRolloutReplica
    globals()["HFServerAdapter"] = HFServerAdapter
    rollout_base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = f"{__name__}.HFServerAdapter"
    RolloutReplicaRegistry.register(ROLLOUT_NAME, lambda: HFRolloutReplica)


def _replica_class(RolloutReplica, server_cls):
    """The ``vpo_hf`` subclass of veRL's ``RolloutReplica`` (built at registration: veRL is imported only then)."""

    class HFRolloutReplica(RolloutReplica):
        """A replica whose server is an :class:`HFRolloutServer` actor holding the policy."""

        async def launch_servers(self):
            mc = self.model_config
            server = server_cls.options(
                name=_server_name(self.replica_rank, self.name_suffix),
                max_concurrency=self.max_concurrency,
            ).remote(
                _model_path(mc),
                self.replica_rank,
                self.config.response_length,
                _stop_strings(self.config),
                int(getattr(self.config, "seed", 0) or 0),
                bool(getattr(mc, "trust_remote_code", False)),
            )
            await server.get_weights_hash.remote()  # wait until the model is loaded
            self.servers = [server]
            self._server_handle = server
            self._server_address = f"vpo-hf-rollout-{self.replica_rank}{self.name_suffix}"

        def rollout_worker_use_gpu(self) -> bool:
            return False

    return HFRolloutReplica


def _adapter_class(BaseRollout, ray):
    """The ``vpo_hf`` subclass of veRL's ``BaseRollout`` (built at registration: veRL is imported only then)."""

    class HFServerAdapter(BaseRollout):
        """The rollout side of each trainer rank: takes the actor's weights after every update and
        (first rank of a replica only) loads them into the replica's server."""

        def __init__(self, config, model_config, device_mesh, *args, replica_rank: int = -1, **kwargs):
            super().__init__(config, model_config, device_mesh)
            rank = int(os.environ.get("RANK", "0"))
            per_replica = (
                self.config.tensor_model_parallel_size
                * self.config.data_parallel_size
                * self.config.pipeline_model_parallel_size
            )
            self.replica_rank = rank // per_replica if replica_rank == -1 else replica_rank
            self.is_sender = rank % per_replica == 0
            self.rank = rank
            self._server = None

        def _server_handle(self):
            if self._server is None:
                self._server = ray.get_actor(_server_name(self.replica_rank))
            return self._server

        async def resume(self, tags: list[str]):
            return None

        async def release(self):
            return None

        async def update_weights(self, weights, wire_format: str = "named_tensors", global_steps=None, **kwargs):
            if wire_format != "named_tensors":
                raise NotImplementedError(
                    f"vpo_hf rollout: weight format {wire_format!r}; use the default naive sync "
                    "(actor_rollout_ref.rollout.checkpoint_engine.backend=naive)"
                )
            if kwargs.get("peft_config") is not None:
                raise NotImplementedError("vpo_hf rollout: LoRA adapters are not supported; merge them (lora.merge)")
            # every rank drains the generator: producing each full tensor is a collective
            named = {name: t.detach().to("cpu").clone() for name, t in weights}
            if not self.is_sender:
                return
            sent = state_hash(named.items())
            _dump(
                "actor_weights",
                {"replica": self.replica_rank, "rank": self.rank, "global_steps": global_steps, "hash": sent},
            )
            loaded = await self._server_handle().load_weights.remote(named, global_steps)
            if loaded != sent:
                raise RuntimeError(
                    f"vpo_hf rollout: replica {self.replica_rank} holds weights {loaded} after loading {sent}"
                )

    return HFServerAdapter


_REGISTERED = False


def register(force: bool = False) -> bool:
    """Register the CPU platform, engines and the ``vpo_hf`` rollout with veRL; True when done.

    Does nothing unless ``VERL_PLATFORM=cpu`` (or ``force``): vpo's ``verl.plugins`` entry point
    imports this module in every veRL process, and a GPU run must stay as veRL made it."""
    global _REGISTERED
    if _REGISTERED:
        return True
    if not (force or active()):
        return False
    _register_platform()
    _patch_process_group()
    _register_engines()
    _register_rollout()
    _REGISTERED = True
    return True


try:
    register()
except ImportError as e:  # without verl there is nothing to register into; with VERL_PLATFORM=cpu say so
    if active():
        logger.error("vpo.integrations.verl_cpu: VERL_PLATFORM=cpu but the CPU path cannot register: %s", e)
        raise

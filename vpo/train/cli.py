"""``vpo train [CONFIG.yaml] [--field value ...]``: TRL's YAML/CLI conventions for VPOTrainer.

The YAML holds fields of :class:`vpo.train.VPOConfig` (TRL's GRPOConfig + vpo's) and of TRL's
``ModelConfig`` (``model_name_or_path``, ``dtype``, ``use_peft``, ``lora_r`` ...); command-line
``--field value`` pairs override it, exactly as with ``trl grpo --config``, and a run may be given by
flags alone (``vpo train --task maze --model_name_or_path X``). ``CONFIG`` may also be the name of a
shipped config, with or without ``.yaml`` (``vpo train maze_qwen3_4b``; see ``vpo/configs/``).

``task`` is a registered name, ``module:factory`` or ``path/to/file.py:factory``; ``--import MODULE``
(repeatable; a dotted name or a .py path) imports user code first so its ``register_task`` calls run.
``--smoke`` runs any config for one step on CPU with a tiny locally built model (no download, no GPU,
no vLLM, no tensorboard): a check that a config starts, not a training run.

Resume: ``--resume`` (or ``resume_from_checkpoint: true`` / ``--resume_from_checkpoint true``) picks
the last complete checkpoint in output_dir; rerunning a command whose output_dir has checkpoints
stops and says how to resume (it never starts over on top of them). Ctrl-C (SIGINT) or SIGTERM saves
a checkpoint at the end of the current step and prints the command that resumes; a second one aborts.

Multi-GPU: ``accelerate launch --config_file vpo/configs/accelerate/multi_gpu.yaml -m vpo.cli train
CONFIG.yaml`` (or a DeepSpeed config from the same folder); see docs/training.md.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from vpo.errors import UserError

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


def shipped_configs() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def resolve_config(name: str) -> Path:
    """A config path: an existing file, or a shipped config named with or without ``.yaml``."""
    p = Path(name)
    if p.is_file():
        return p
    stem = name[: -len(".yaml")] if name.endswith(".yaml") else name
    cand = CONFIG_DIR / f"{stem}.yaml"
    if "/" not in stem and cand.exists():
        return cand
    raise UserError(
        f"config {name!r} not found: not a file, and not a shipped config ({', '.join(shipped_configs())}); "
        "or give the run by flags alone: vpo train --task NAME --model_name_or_path MODEL ..."
    )


def check_yaml(path: Path) -> None:
    """Raise a one-line UserError naming the file and line when ``path`` is not a YAML mapping."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}, line {mark.line + 1} column {mark.column + 1}" if mark is not None else str(path)
        what = getattr(e, "problem", None) or type(e).__name__
        raise UserError(f"{where}: not valid YAML ({what}); fix the file (one `field: value` per line)") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: must be a YAML mapping of `field: value` lines, got {type(data).__name__}")


def help_header() -> str:
    """What ``vpo train --help`` says before TRL's fields: the config positional, the shipped
    configs, ``--smoke``, ``--import``, ``--resume`` and the path rule."""
    return f"""usage: vpo train [CONFIG] [--smoke] [--import MODULE ...] [--resume] [--field value ...]

CONFIG        a YAML file of the fields below, or a shipped config by name (with or without .yaml):
              {", ".join(shipped_configs())}
              (vpo/configs/); without CONFIG the run is given by flags alone:
              vpo train --task maze --model_name_or_path MODEL --output_dir runs/maze
--smoke       run any config for one step on CPU with a tiny local model (no download, no GPU): a check
              that the config starts, not a training run
--import M    import a module (dotted name, found from the working directory too) or a .py file first, so
              its register_task / register_set_objective calls run; repeatable
--resume      continue from the last complete checkpoint in output_dir (same as --resume_from_checkpoint true)
--field value any field below; it overrides the YAML's value
Paths: relative paths in a YAML (output_dir, a task's data files) resolve from the working directory the
command runs in, not from the YAML's folder, as on the command line and in TRL.
Docs: docs/training.md. The fields (TRL's GRPOConfig, vpo's VPOConfig and TRL's ModelConfig) follow.
"""


def _path_values(data, key=""):
    """``(key, value)`` of the strings in a YAML mapping that look like relative file paths."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _path_values(v, f"{key}.{k}" if key else str(k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _path_values(v, f"{key}[{i}]")
    elif isinstance(data, str) and data and not Path(data).is_absolute() and ("/" in data or Path(data).suffix):
        yield key, data


def _exists(p: Path) -> bool:
    """``p.exists()``, False for a string no file system takes as a name (too long, a NUL byte): a
    JSON value such as ``task_options`` is no path, however many dots it has."""
    try:
        return p.exists()
    except (OSError, ValueError):
        return False


def note_yaml_relative_paths(path: Path) -> None:
    """The rule: relative paths in a YAML resolve from the working directory. When one does not exist
    there but does next to the YAML, say so on stderr (the run may still fail on it)."""
    import yaml

    here, beside = Path.cwd(), path.resolve().parent
    if beside == here.resolve():
        return
    for key, value in _path_values(yaml.safe_load(path.read_text()) or {}):
        if key == "output_dir" or _exists(Path(value)) or not _exists(beside / value):
            continue
        print(
            f"vpo train: note: {path}: {key}: {value} is resolved from the working directory ({here}), where it "
            f"does not exist; {beside / value} does: relative paths in a YAML are relative to the working "
            "directory, not to the YAML's folder; run from that folder or write the path from here",
            file=sys.stderr,
        )


def _parser_error(message: str):
    raise UserError(f"{message}; `vpo train --help` lists every field")


def parse_train_args(argv: list[str]):
    """(VPOConfig, ModelConfig) from ``[--config CONFIG] [--field value ...]`` the way TRL's CLI does it."""
    from trl import ModelConfig, TrlParser

    from vpo.train.config import VPOConfig, silence_checkpointing_renames

    silence_checkpointing_renames()
    parser = TrlParser((VPOConfig, ModelConfig), prog="vpo train")
    if "--help" not in argv and "-h" not in argv:
        parser.error = _parser_error  # one line instead of the 200-line usage
    return parser.parse_args_and_config(argv)


def _config_value_error(err: ValueError) -> UserError:
    msg = str(err)
    if "bf16" in msg and ("gpu" in msg.lower() or "support" in msg):
        return UserError(
            "bf16: true needs a GPU with bf16 support and none is available; on CPU add --bf16 false --use_cpu true "
            "(or --smoke to check that a config starts)"
        )
    return UserError(msg)


def _with_other_problems(err: UserError, argv: list[str]) -> UserError:
    """``err`` (a value the config parser rejected: bf16 on a CPU) together with the run's other
    problems (no model, no task, a missing backend), found by parsing again on CPU settings, so that a
    config missing several pieces says all of them in one line."""
    if "bf16: true needs a GPU" not in str(err):
        return err
    try:
        training_args, model_args = parse_train_args(
            argv + ["--bf16", "false", "--fp16", "false", "--use_cpu", "true"]
        )[:2]
        check_run(training_args, model_args)
    except (UserError, ValueError, SystemExit) as other:
        if isinstance(other, UserError):
            return UserError(_joined([str(err)] + _split_joined(str(other))))
    return err


def _split_joined(message: str) -> list[str]:
    """The problems of a :func:`_joined` message."""
    if not re.match(r"\d+ problems: \(1\) ", message):
        return [message]
    body = message.split(": ", 1)[1]
    return [re.sub(r"^\(\d+\) ", "", part) for part in body.split(" | ")]


def smoke_model_dir() -> Path:
    """The tiny model ``--smoke`` trains (built once into ``$VPO_CACHE``/``~/.cache/vpo``)."""
    from vpo.tasks.text import cache_dir
    from vpo.train.tiny import build_tiny_model

    out = cache_dir() / "smoke_model"
    if not (out / "config.json").exists():
        build_tiny_model(out, hidden_size=64, num_layers=2, num_heads=4, max_position_embeddings=4096)
    return out


def smoke_overrides(config_name: str | None) -> list[str]:
    """Flags that turn any config into a one-step CPU run of the tiny model (they precede the user's
    own flags, so an explicit ``--field value`` still wins)."""
    name = Path(config_name).name.removesuffix(".yaml") if config_name else "flags"
    return [
        "--model_name_or_path",
        str(smoke_model_dir()),
        "--dtype",
        "float32",
        "--bf16",
        "false",
        "--fp16",
        "false",
        "--use_cpu",
        "true",
        "--use_vllm",
        "false",
        "--report_to",
        "none",
        "--gradient_checkpointing",
        "false",
        "--max_steps",
        "1",
        "--num_generations",
        "2",
        "--generation_batch_size",
        "4",
        "--per_device_train_batch_size",
        "4",
        "--gradient_accumulation_steps",
        "1",
        "--max_completion_length",
        "16",
        "--num_weightings",
        "8",
        "--train_size",
        "8",
        "--eval_strategy",
        "no",
        "--save_strategy",
        "no",
        "--logging_steps",
        "1",
        "--output_dir",
        str(Path("runs") / "smoke" / name),
    ]


def check_model(name: str) -> None:
    """A one-line UserError when ``model_name_or_path`` is neither a saved model on disk (a LoRA
    adapter folder included) nor a hub model that can be loaded; ``vpo eval --model`` checks its
    model with the same function (:func:`vpo.search.backends.check_model`), in the same words."""
    from vpo.search.backends import check_model as _check

    _check(name, "model_name_or_path")


# optional backends a config can ask for: (setting, module, how to get it, how to turn it off)
_REPORTERS = {
    "tensorboard": ("tensorboard", 'pip install tensorboard (or pip install -e ".[dev]" in the clone)'),
    "wandb": ("wandb", "pip install wandb"),
    "trackio": ("trackio", "pip install trackio"),
}


def backend_problems(training_args, model_args) -> list[str]:
    """What the config asks for that is not installed (vLLM, a ``report_to`` logger, PEFT), each
    naming the setting, the install command and the override that runs without it."""
    from importlib.util import find_spec

    problems = []
    if training_args.use_vllm and find_spec("vllm") is None:
        problems.append(
            "use_vllm: true needs vLLM, which is not installed; pip install vllm (GPU machines), "
            "or run with --use_vllm false (generation through transformers, slower)"
        )
    for name in training_args.report_to or []:
        module, how = _REPORTERS.get(name, (None, None))
        if module is not None and find_spec(module) is None:
            problems.append(
                f"report_to: {name} needs the {module!r} package, which is not installed; {how}, "
                "or run with --report_to none"
            )
    if getattr(model_args, "use_peft", False) and find_spec("peft") is None:
        problems.append("use_peft: true needs the 'peft' package, which is not installed; pip install peft")
    return problems


def check_backends(training_args, model_args) -> None:
    """A one-line UserError listing every backend the config asks for that is not installed
    (:func:`backend_problems`), instead of a traceback from deep inside TRL or transformers."""
    problems = backend_problems(training_args, model_args)
    if problems:
        raise UserError(_joined(problems))


def _joined(problems: list[str]) -> str:
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} problems: " + " | ".join(f"({i}) {p}" for i, p in enumerate(problems, 1))


def check_run(training_args, model_args) -> None:
    """Every missing or unusable piece of a run at once (model, task, backends), in one line."""
    problems = []
    if not model_args.model_name_or_path:
        problems.append("model_name_or_path is required (in the YAML or as --model_name_or_path)")
    else:
        try:
            check_model(model_args.model_name_or_path)
        except UserError as e:
            problems.append(str(e))
        else:
            local = Path(os.path.expanduser(model_args.model_name_or_path))
            if local.is_dir():  # absolute: a LoRA adapter records its base by this path (loadable from anywhere)
                model_args.model_name_or_path = str(local.resolve())
    if not training_args.task:
        problems.append("task is required (in the YAML or as --task); `vpo tasks` lists them")
    problems += backend_problems(training_args, model_args)
    if problems:
        raise UserError(_joined(problems))


_TRUE = ("true", "yes", "1", "last")
_FALSE = ("false", "no", "0", "none", "")


def _rank0() -> bool:
    return os.environ.get("RANK", "0") in ("", "0")


def resolve_resume(training_args, resume_hint: str | None = None) -> None:
    """Turn ``resume_from_checkpoint`` into a checkpoint path (or None), the way a TRL user expects:
    true (YAML ``true``, ``--resume_from_checkpoint true``, ``--resume``) means the last *complete*
    checkpoint in output_dir; a path must be a complete checkpoint; unset with checkpoints already in
    output_dir is refused (one line saying how to resume) instead of starting over on top of them."""
    from vpo.train.resume import checkpoint_problem, checkpoints, last_complete_checkpoint

    value = training_args.resume_from_checkpoint
    out = training_args.output_dir
    text = str(value).strip().lower() if value is not None else None
    if value is None or value is False or text in _FALSE:
        existing = checkpoints(out)
        if existing:
            raise UserError(
                f"output_dir {out} already holds checkpoints of a run (newest {existing[-1].name}); resume it with: "
                f"{resume_hint or 'the same command plus --resume'}; or give another --output_dir to start over"
            )
        training_args.resume_from_checkpoint = None
        return
    if value is True or text in _TRUE:
        ckpt, notes = last_complete_checkpoint(out)
        if _rank0():
            for n in notes:
                print(f"vpo train: {n}", file=sys.stderr, flush=True)
        if ckpt is None:
            raise UserError(
                f"resume: no complete checkpoint in output_dir {out} (none saved yet, or every save was interrupted); "
                "run without --resume / resume_from_checkpoint to start, or point --output_dir at the run to resume"
            )
    else:
        ckpt = Path(str(value)).expanduser()
        why = "no such directory" if not ckpt.is_dir() else checkpoint_problem(ckpt)
        if why is not None:
            raise UserError(
                f"resume_from_checkpoint {value}: not a complete checkpoint ({why}); give a checkpoint-N folder, "
                "or true (or --resume) for the last complete one in output_dir"
            )
    if _rank0():
        print(f"vpo train: resuming from {ckpt}", file=sys.stderr, flush=True)
    training_args.resume_from_checkpoint = str(ckpt)


def run_training(training_args, model_args, callbacks=None, resume_hint: str | None = None):
    """Build the model/trainer from parsed configs, train, save; returns the trainer. A run stopped
    by a signal (a callback with ``received`` set) keeps its checkpoint and saves no final model."""
    from trl import get_peft_config

    from vpo.train.trainer import VPOTrainer

    check_run(training_args, model_args)
    resolve_resume(training_args, resume_hint)
    init = dict(training_args.model_init_kwargs or {})
    if model_args.dtype is not None:
        init.setdefault("dtype", model_args.dtype)
    if model_args.attn_implementation is not None:
        init.setdefault("attn_implementation", model_args.attn_implementation)
    training_args.model_init_kwargs = init or None
    trainer = VPOTrainer(
        model=model_args.model_name_or_path,
        args=training_args,
        peft_config=get_peft_config(model_args),
        callbacks=callbacks,
    )
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    if any(getattr(cb, "received", None) is not None for cb in callbacks or []):
        return trainer  # interrupted: the checkpoint it saved is the run's state; no "final" model
    trainer.save_model(training_args.output_dir)
    trainer.create_model_card(model_name=Path(training_args.output_dir).name)  # README.md: a VPO card
    if trainer.is_world_process_zero():  # the log history (vpo/* metrics per step) next to the model
        trainer.state.save_to_json(str(Path(training_args.output_dir) / "trainer_state.json"))
    return trainer


def _take_flag(argv: list[str], flag: str, with_value: bool) -> tuple[list[str], list[str]]:
    """(the values of ``flag`` (or ``["1"]`` per occurrence of a bare flag), argv without them)."""
    values, rest, i = [], [], 0
    while i < len(argv):
        tok = argv[i]
        if with_value and tok.startswith(flag + "="):
            values.append(tok.split("=", 1)[1])
        elif tok == flag:
            if with_value:
                if i + 1 >= len(argv):
                    raise UserError(f"{flag} needs a value; `vpo train --help` lists every field")
                values.append(argv[i + 1])
                i += 1
            else:
                values.append("1")
        else:
            rest.append(tok)
        i += 1
    return values, rest


def _main(args) -> int:
    from vpo.tasks import import_user_modules

    argv = ([args.config] if args.config else []) + list(args.overrides or [])
    given = list(argv)
    if args.help or "-h" in argv or "--help" in argv:
        print(help_header(), flush=True)
        parse_train_args(["--help"])  # then every field with its help text; exits 0
        return 0
    imports, argv = _take_flag(argv, "--import", with_value=True)
    smoke, argv = _take_flag(argv, "--smoke", with_value=False)
    resume, argv = _take_flag(argv, "--resume", with_value=False)
    config = argv.pop(0) if argv and not argv[0].startswith("-") else None
    if config is None and "--config" in argv:
        i = argv.index("--config")
        if i + 1 < len(argv):
            config = argv[i + 1]
            del argv[i : i + 2]
    if config is None and not argv and not smoke:
        raise UserError(
            "nothing to train: give a config (vpo train maze_qwen3_4b, or a YAML file) or flags "
            "(vpo train --task maze --model_name_or_path MODEL ...); `vpo train --help` lists every field"
        )
    head = []
    if config is not None:
        path = resolve_config(config)
        check_yaml(path)
        note_yaml_relative_paths(path)
        head = ["--config", str(path)]
    if smoke:
        head += smoke_overrides(config)
    import_user_modules(imports)
    try:
        training_args, model_args = parse_train_args(head + argv)[:2]
    except ValueError as e:
        raise _with_other_problems(_config_value_error(e), head + argv) from None
    if resume and str(training_args.resume_from_checkpoint or "").strip().lower() in _FALSE:
        training_args.resume_from_checkpoint = "true"
    from vpo.train.resume import EpochOrderCallback, SignalCheckpointCallback, resume_command

    hint = resume_command(["vpo", "train", *given])
    stop = SignalCheckpointCallback(resume_hint=hint)
    try:
        run_training(training_args, model_args, callbacks=[EpochOrderCallback(), stop], resume_hint=hint)
    finally:
        stop.restore()  # the handlers go back even when training raised
    if stop.received is not None:
        return 128 + int(stop.received)
    print(f"vpo train: model saved to {training_args.output_dir}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a policy with VPO or a baseline on TRL (vpo train [CONFIG.yaml] [--field value ...])",
        add_help=False,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-h", "--help", action="store_true", help="list every config field with its help text")
    p.add_argument("config", nargs="?", help="YAML config (path, or a shipped config name); --help lists every field")
    p.add_argument(
        "overrides",
        nargs=argparse.REMAINDER,
        help="--field value pairs overriding the YAML; also --import MODULE (repeatable), --smoke and --resume",
    )
    p.set_defaults(func=_main)

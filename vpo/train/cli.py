"""``vpo train CONFIG.yaml [--field value ...]``: TRL's YAML/CLI conventions for VPOTrainer.

The YAML holds fields of :class:`vpo.train.VPOConfig` (TRL's GRPOConfig + vpo's) and of TRL's
``ModelConfig`` (``model_name_or_path``, ``dtype``, ``use_peft``, ``lora_r`` ...); command-line
``--field value`` pairs override it, exactly as with ``trl grpo --config``. ``CONFIG`` may also be
the name of a shipped config (``vpo train maze_qwen3_4b``; see ``vpo/configs/``).

Multi-GPU: ``accelerate launch --config_file vpo/configs/accelerate/multi_gpu.yaml -m vpo.cli train
CONFIG.yaml`` (or a DeepSpeed config from the same folder); see docs/training.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


def shipped_configs() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def resolve_config(name: str) -> Path:
    p = Path(name)
    if p.exists():
        return p
    cand = CONFIG_DIR / f"{name}.yaml"
    if cand.exists():
        return cand
    from vpo.errors import UserError

    raise UserError(
        f"config {name!r} not found: not a file, and not a shipped config ({', '.join(shipped_configs())})"
    )


def parse_train_args(argv: list[str]):
    """(VPOConfig, ModelConfig) from ``[CONFIG] [--field value ...]`` the way TRL's CLI does it."""
    from trl import ModelConfig, TrlParser

    from vpo.train.config import VPOConfig

    parser = TrlParser((VPOConfig, ModelConfig), prog="vpo train")
    return parser.parse_args_and_config(argv)


def run_training(training_args, model_args, callbacks=None):
    """Build the model/trainer from parsed configs, train, save; returns the trainer."""
    from trl import get_peft_config

    from vpo.errors import UserError
    from vpo.train.trainer import VPOTrainer

    if not model_args.model_name_or_path:
        raise UserError("model_name_or_path is required (in the YAML or as --model_name_or_path)")
    if not training_args.task:
        raise UserError("task is required (in the YAML or as --task); `vpo tasks` lists them")
    path = Path(model_args.model_name_or_path)
    if model_args.model_name_or_path.startswith((".", "/")) and not path.exists():
        raise UserError(f"model path {path} does not exist")
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
    trainer.save_model(training_args.output_dir)
    if trainer.is_world_process_zero():  # the log history (vpo/* metrics per step) next to the model
        trainer.state.save_to_json(str(Path(training_args.output_dir) / "trainer_state.json"))
    return trainer


def _main(args) -> int:
    from vpo.errors import UserError

    argv = list(args.overrides or [])
    if args.help or "-h" in argv or "--help" in argv:
        parse_train_args(["--help"])  # prints every field with its help text, exits 0
        return 0
    if args.config:
        argv = ["--config", str(resolve_config(args.config))] + argv
    try:
        training_args, model_args = parse_train_args(argv)[:2]
    except ValueError as e:
        raise UserError(str(e)) from None
    run_training(training_args, model_args)
    print(f"vpo train: model saved to {training_args.output_dir}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a policy with VPO or a baseline on TRL (vpo train CONFIG.yaml [--field value ...])",
        add_help=False,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-h", "--help", action="store_true", help="list every config field with its help text")
    p.add_argument("config", nargs="?", help="YAML config (path, or a shipped config name); --help lists every field")
    p.add_argument("overrides", nargs=argparse.REMAINDER, help="--field value pairs overriding the YAML")
    p.set_defaults(func=_main)

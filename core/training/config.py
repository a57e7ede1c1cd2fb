"""Training options and the checks made before any training starts."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .schedule import SCHEDULES

OPTIMIZERS = ("adamw", "muon")  # also in optimizers.py, which imports torch

if TYPE_CHECKING:  # no torch at import: `zoo train --help` stays fast
    from ..specs.spec import Spec
    from .tokenizer import Tokenizer

DTYPES = ("float32", "bfloat16", "float16")  # names of torch dtypes
# options that may change when resuming (they do not change what the remaining steps compute)
RESUMABLE = {"steps", "out", "resume", "save_every", "eval_every", "stop_at", "progress", "fsdp"}


@dataclass
class TrainConfig:
    """Options of one training run (the CLI's flags; `batch` counts sequences per step)."""

    data: list[str] = field(default_factory=list)
    out: str = "run"
    tokenizer: str = "bytes"
    steps: int = 1000
    batch: int = 8  # sequences per optimizer step, over all ranks and micro-batches
    accum: int = 1  # micro-batches per optimizer step (gradient accumulation)
    seq_len: int = 128
    pack: bool = False  # whole documents packed best-fit into rows, kept apart (document_ids)
    lr: float = 3e-4
    schedule: str = "cosine"
    warmup: int = 100
    min_lr_ratio: float = 0.1  # cosine ends at lr * min_lr_ratio
    label_smoothing: float = 0.0
    optimizer: str = "adamw"  # adamw, or muon on the blocks' hidden matrices + adamw
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    clip: float = 1.0  # max gradient norm; 0 disables clipping
    dtype: str = "float32"
    device: str | None = None
    seed: int = 0
    eval_every: int = 100
    eval_examples: int = 64  # held-out sequences per evaluation
    eval_fraction: float = 0.01  # share of the data held out
    save_every: int = 100
    stop_at: int | None = None  # stop after this step as if interrupted (resume later)
    resume: bool = False
    fsdp: bool = False
    progress: bool = True
    data_cache: str | None = None  # where token files go (default OUT/data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_config(cfg: TrainConfig, world: int) -> None:
    """Option values that make no sense on their own."""
    positive = ("steps", "batch", "accum", "seq_len", "eval_every", "save_every", "eval_examples")
    for name in positive:
        if getattr(cfg, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(cfg, name)}")
    if cfg.schedule not in SCHEDULES:
        raise ValueError(f"--schedule {cfg.schedule!r}: expected one of {', '.join(SCHEDULES)}")
    if cfg.optimizer not in OPTIMIZERS:
        raise ValueError(f"--optimizer {cfg.optimizer!r}: expected one of {', '.join(OPTIMIZERS)}")
    if cfg.optimizer == "muon" and cfg.fsdp:
        raise ValueError(
            "--optimizer muon does not run under --fsdp: Newton-Schulz needs whole matrices, "
            "FSDP2 shards them (use DDP, the default under torchrun)"
        )
    if cfg.dtype not in DTYPES:
        raise ValueError(f"--dtype {cfg.dtype!r}: expected one of {', '.join(DTYPES)}")
    finite = {  # option -> (lowest, highest, whether highest is allowed); NaN fails every test
        "lr": (0.0, math.inf, False),
        "min_lr_ratio": (0.0, 1.0, True),
        "weight_decay": (0.0, math.inf, False),
        "beta1": (0.0, 1.0, False),
        "beta2": (0.0, 1.0, False),
        "clip": (0.0, math.inf, False),
    }
    for name, (low, high, closed) in finite.items():
        value = getattr(cfg, name)
        if not (low <= value <= high if closed else low <= value < high):
            span = (
                f"a finite number >= {low:g}"
                if high == math.inf
                else f"in [{low:g}, {high:g}{']' if closed else ')'}"
            )
            raise ValueError(f"--{name.replace('_', '-')} must be {span}, got {value}")
    if not 0.0 <= cfg.label_smoothing < 1.0:
        raise ValueError(f"--label-smoothing must be in [0, 1), got {cfg.label_smoothing}")
    if not 0.0 < cfg.eval_fraction < 1.0:
        raise ValueError(f"--eval-fraction must be in (0, 1), got {cfg.eval_fraction}")
    if cfg.device is not None:
        check_device(cfg.device)
    if cfg.batch % (cfg.accum * world):
        raise ValueError(
            f"--batch {cfg.batch} must be a multiple of --accum {cfg.accum} x {world} processes"
        )


def check_out(out: str, data: list[str]) -> None:
    """--out is a directory to be, and not a --data directory (whose files are all read:
    the run's own files would become training data on the next run or resume)."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ValueError(f"--out {out}: exists and is not a directory")
    for d in map(Path, data):
        if path.is_dir() and d.is_dir() and os.path.samefile(path, d):
            raise ValueError(
                f"--out {out} is the --data directory {d}: the run's files would be read as "
                "training data; choose another --out (a subdirectory is fine)"
            )


def check_device(name: str) -> None:
    """--device names a device type torch knows, that holds real memory and is present here."""
    import torch

    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"--device {name!r}: expected cpu, cuda, cuda:N or another torch device"
        ) from None
    if device.type == "meta":
        raise ValueError("--device meta holds no data to train on; expected cpu, cuda, cuda:N")
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"--device {name}: no CUDA device is available here")
        if device.index is not None and device.index >= count:
            raise ValueError(f"--device {name}: this machine has CUDA devices 0..{count - 1}")
    elif device.type != "cpu":
        try:  # mps, xpu, ...: an empty tensor is the one probe every backend answers
            torch.empty(0, device=device)
        except Exception:  # noqa: BLE001 - each missing backend fails with its own type
            raise ValueError(f"--device {name}: no {device.type} device is usable here") from None


def check_spec(spec: Spec, cfg: TrainConfig, tok: Tokenizer) -> None:
    """The spec can take sequences of --seq-len and every id the tokenizer makes."""
    for which in spec.stacks():
        max_len = spec.stack(which)["max_len"]
        if cfg.seq_len > max_len:
            raise ValueError(
                f"--seq-len {cfg.seq_len} is above the {which} max_len {max_len} of spec "
                f"{spec.name!r} (lower --seq-len or --set max_len={cfg.seq_len})"
            )
        vocab = spec.stack(which)["vocab_size"]
        if tok.vocab_size > vocab:
            raise ValueError(
                f"--tokenizer {tok.name} has {tok.vocab_size:,} ids but spec {spec.name!r} has "
                f"vocab_size {vocab:,} ({which}); use a matching tokenizer or "
                f"--set vocab_size={tok.vocab_size}"
            )


def check_resume(saved: dict[str, Any], spec: Spec, cfg: TrainConfig, path: str) -> None:
    """A resumed run must be the same spec, optimizer and run options as the saved one."""
    before = saved["config"].get("optimizer", "adamw")  # runs from before --optimizer: adamw
    if before != cfg.optimizer:
        raise ValueError(
            f"--resume {path}: the run was trained with --optimizer {before}; it cannot "
            f"continue with --optimizer {cfg.optimizer} (the saved optimizer state is "
            f"{before}'s): pass --optimizer {before}, or start a new run in another --out"
        )
    if saved["spec"] != spec.to_dict():
        old, new = saved["spec"], spec.to_dict()
        keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        raise ValueError(
            f"--resume {path}: the checkpoint is from spec {old.get('name')!r}, not "
            f"{spec.name!r} as given (differs in: {', '.join(keys)})"
        )
    now = cfg.to_dict()
    changed = [
        f"--{k.replace('_', '-')} was {v!r}, now {now.get(k)!r}"
        for k, v in saved["config"].items()
        if k not in RESUMABLE and now.get(k) != v
    ]
    if changed:
        raise ValueError(
            f"--resume {path}: options differ from the saved run: {'; '.join(changed)}"
        )

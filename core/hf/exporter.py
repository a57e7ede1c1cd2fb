"""Export a ZooModel in the Hugging Face layout, checked by transformers before it is kept.

The HF type is the one whose converter table round-trips the spec exactly (`hf/express.py`);
config.json and the tensor names come from the same table as import. Everything is written
to a temporary directory beside the target; transformers loads it from there and runs the
probe batch, and only an export that loads with no missing or unexpected tensors and agrees
with archzoo within the tolerance is renamed onto the target. Otherwise nothing is left.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch

from ..io.checkpoint_files import read_json
from ..model.zoo_model import ZooModel
from ..parts.converter import ConversionError, Converter
from ..parts.hf_tensors import ZooNames
from ..parts.registry import Registry, get_registry
from ..specs.spec import load_spec
from .express import ExportError, Expression, differences, effective_parts, nearest
from .files import (
    DEFAULT_SHARD_SIZE,
    check_target,
    parse_size,
    staged_directory,
    write_json,
    write_shards,
)
from .probe import (
    compare,
    default_tolerance,
    hf_config,
    model_class,
    probe_batch,
    quiet_progress_bars,
    run,
)

# tokenizer files of an HF directory, copied to an export of a model imported from it
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
)
TOKENIZER_PATTERNS = ("*.model",)  # SentencePiece models (spiece.model, tokenizer.model)
GENERATION_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")


def to_hf(
    model: ZooModel,
    directory: str | os.PathLike[str],
    *,
    model_type: str | None = None,
    max_shard_size: int | str = DEFAULT_SHARD_SIZE,
    tolerance: float | None = None,
    tokenizer_from: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    release: bool = False,
    registry: Registry | None = None,
) -> dict[str, Any]:
    """Write config.json, model.safetensors (sharded above `max_shard_size`, with an index),
    generation_config.json and the source's tokenizer files to `directory`, after
    transformers loaded them and matched archzoo's outputs on a probe batch.

    `model_type` forces the HF type (default: the first that expresses the spec exactly,
    the type the model was imported from first). `tokenizer_from`: a directory whose
    tokenizer files (and generation_config.json) to copy; it must hold a tokenizer (default:
    the directory the model was read from, by `from_hf` or `load`, which may hold none).
    `release=True` frees the model's weights once they are written (it is left on the meta
    device), so transformers' check never holds a second copy (`zoo export` does this).
    Raises ExportError (nothing written) when no type fits or the check fails.
    """
    reg = registry or get_registry()
    target = Path(directory)
    tokenizer_dir = _tokenizer_dir(model, tokenizer_from)
    read_from = [p for p in (getattr(model, "loaded_from", None), tokenizer_dir) if p]
    check_target(target, overwrite=overwrite, inputs=read_from)
    generation = _generation(model, tokenizer_dir)  # the source's file is checked before work
    if any(t.device.type == "meta" for t in model.state_dict().values()):
        raise ExportError(f"cannot export {model.spec.name!r}: it has no weights (meta device)")
    shard_size = parse_size(max_shard_size)
    if tolerance is not None and not tolerance >= 0:  # NaN too: no difference is "<= nan"
        raise ExportError(f"tolerance must be a number >= 0, got {tolerance}")
    source = getattr(model, "hf_source", None) or {}
    prefer = [source["model_type"]] if source.get("model_type") else []
    choice, config, cls = _choose(model, reg, model_type, prefer)
    converter: Converter = reg.converter(choice.model_type)
    tensors = _hf_tensors(model, converter, choice.task, cls, config)
    dtype = _dtype(model)
    config.dtype = dtype  # config.json's `dtype`: the precision of the weights
    inputs, mask = probe_batch(model.spec)
    was_training = model.training
    model.eval()
    try:
        ours = run(model, inputs)
    finally:
        model.train(was_training)
    tol = default_tolerance(dtype) if tolerance is None else tolerance
    with staged_directory(target) as tmp:
        write_shards(tmp, tensors, shard_size, f"export {target.name}: writing tensors")
        del tensors  # the model's own tensors stay; transposed or split copies go
        if release:
            model.to("meta")
        # under the chosen type's name: a config class another type shares writes its own
        # (gpt-sw3's GPT2Config writes gpt2)
        write_json(tmp / "config.json", {**config.to_dict(), "model_type": choice.model_type})
        write_json(tmp / "generation_config.json", generation)
        copied = _copy_tokenizer(tokenizer_dir, tmp) if tokenizer_dir else []
        diff = _probe(cls, tmp, dtype, inputs, mask, ours, tol, target, choice)
        files = sorted(p.name for p in tmp.iterdir())
    return {
        "directory": str(target),
        "model_type": choice.model_type,
        "architecture": cls.__name__,
        "files": files,
        "tokenizer_files": copied,
        "max_relative_diff": diff,
    }


def _choose(
    model: ZooModel, reg: Registry, model_type: str | None, prefer: list[str]
) -> tuple[Expression, Any, type]:
    """The first exact expression whose config transformers keeps as written (its config
    class may normalise keys: the round trip runs again on what it would save)."""
    parts = effective_parts(model.spec, reg)
    rejected = []
    for e in nearest(model.spec, reg, model_type=model_type, prefer=prefer):
        converter = reg.converter(e.model_type)
        try:
            config = hf_config(e.config)
            cls = model_class(converter, e.task, config, model.spec)
            config.architectures = [cls.__name__]
            written = config.to_dict()
            back = effective_parts(load_spec(converter.to_spec(written), registry=reg), reg)
        except ExportError as exc:
            rejected.append(f"{e.model_type}: {exc}")
            continue
        except (ValueError, TypeError, KeyError) as exc:  # transformers refused the config
            rejected.append(f"{e.model_type}: transformers: {type(exc).__name__}: {exc}")
            continue
        changed = differences(parts, back)
        if not changed:
            return e, config, cls
        shown = "; ".join(f"{p}: {a} -> {b}" for p, (a, b) in list(changed.items())[:5])
        rejected.append(f"{e.model_type}: transformers' config changes {shown}")
    raise ExportError(
        f"cannot export {model.spec.name!r}: the types whose tables express it do not survive "
        "transformers' config:\n  " + "\n  ".join(rejected)
    )


def _hf_tensors(
    model: ZooModel, converter: Converter, task: str, cls: type, config: Any
) -> dict[str, torch.Tensor]:
    """HF tensors through the table, under the base prefix the HF class uses; a tensor HF
    ties to another written one, and spellings of one tensor HF lacks, left out."""
    with torch.device("meta"):
        skeleton = cls(config)  # names only: nothing allocated
    keys = set(skeleton.state_dict())
    names = ZooNames.of(model)
    assert converter.tensors is not None
    prefixes = converter.tensors.prefixes

    def hits(prefix: str) -> int:
        expanded = converter.task_table(task, model.spec.data).expand(names, prefix)
        return sum(h.split("|")[0] in keys for _, hf, _ in expanded for h in hf)

    prefix = max(prefixes, key=hits)
    state = model.state_dict()
    out = converter.export_state(state, names, model.spec.data, prefix=prefix, task=task or None)
    by_tensor: dict[int, list[str]] = {}
    for name, t in out.items():
        by_tensor.setdefault(id(t), []).append(name)
    for group in by_tensor.values():  # one tensor under several spellings
        known = [n for n in group if n in keys]
        for n in group:
            if known and n not in known:
                del out[n]
    tied = getattr(skeleton, "all_tied_weights_keys", None) or {}
    for target, source in tied.items():
        if target in out and source in out and out[target] is out[source]:
            del out[target]  # HF ties it on load (and saves it once, too)
    return out


def _dtype(model: ZooModel) -> torch.dtype:
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)


def _probe(
    cls: type,
    directory: Path,
    dtype: torch.dtype,
    inputs: dict[str, torch.Tensor],
    mask: torch.Tensor,
    ours: dict[str, torch.Tensor],
    tolerance: float,
    target: Path,
    choice: Expression,
) -> float:
    """Load the staged files with transformers, run the probe batch and compare."""
    what = f"{target}: the {choice.model_type} export ({cls.__name__})"
    bars = quiet_progress_bars()
    try:
        hf, info = cls.from_pretrained(  # a shape transformers builds otherwise: reported
            directory,
            dtype=dtype,
            output_loading_info=True,
            local_files_only=True,
            ignore_mismatched_sizes=True,
        )
    finally:
        bars()
    problems = [
        f"{key.replace('_', ' ')}: {', '.join(map(str, sorted(info[key])[:10]))}"
        for key in ("missing_keys", "unexpected_keys", "mismatched_keys")
        if info.get(key)
    ]
    if problems:
        raise ExportError(
            f"{what} does not load cleanly in transformers: "
            + " | ".join(problems)
            + "; nothing was written"
        )
    # one full forward, no cache: FSMT's decoder drops its causal mask when it caches
    theirs = run(hf.eval(), inputs, use_cache=False if "decoder_input_ids" in inputs else None)
    del hf
    diff, problem = compare(ours, theirs, mask, tolerance)
    if problem is not None:
        raise ExportError(
            f"{what} disagrees with archzoo on a probe batch: {problem}; nothing was written"
        )
    return diff


def _tokenizer_dir(model: ZooModel, tokenizer_from: str | os.PathLike[str] | None) -> Path | None:
    """The directory tokenizer files and generation_config.json are copied from: the one the
    user names (which must hold a tokenizer), else the one the model was read from (from_hf's
    directory, load's file's directory); never a path recorded inside a weights file."""
    if tokenizer_from is None:
        return getattr(model, "loaded_from", None)
    path = Path(tokenizer_from)
    if not path.exists():
        raise ExportError(f"tokenizer_from {path}: no such directory")
    if not path.is_dir():
        raise ExportError(f"tokenizer_from {path}: not a directory")
    if not _tokenizer_files(path):
        names = ", ".join((*TOKENIZER_FILES, *TOKENIZER_PATTERNS))
        raise ExportError(f"tokenizer_from {path}: holds no tokenizer file ({names})")
    return path


def _generation(model: ZooModel, source: Path | None) -> dict[str, Any]:
    """generation_config.json: the source's (if any), with the spec's special token ids."""
    out: dict[str, Any] = {}
    path = source / "generation_config.json" if source is not None else None
    if path is not None and (path.exists() or path.is_symlink()):
        try:
            loaded = read_json(path, "generation_config.json")  # size and depth capped
        except ConversionError as exc:
            raise ExportError(f"{exc}; nothing was written") from None
        if not isinstance(loaded, dict):
            kind = type(loaded).__name__
            raise ExportError(f"{path}: generation_config.json must be a JSON object, got a {kind}")
        out = loaded
    for key in GENERATION_KEYS:
        value = model.spec.data.get(key)
        if value is not None:
            out[key] = value
    if model.spec.data.get("forced_eos_token_id") is not None:
        out["forced_eos_token_id"] = model.spec.data["forced_eos_token_id"]
    return out


def _tokenizer_files(source: Path) -> list[Path]:
    """The tokenizer files in `source` (regular files, links followed)."""
    found = [source / n for n in TOKENIZER_FILES]
    found += [p for pattern in TOKENIZER_PATTERNS for p in sorted(source.glob(pattern))]
    return [p for p in found if p.is_file()]  # follows links (an HF cache links to blobs)


def _copy_tokenizer(source: Path, directory: Path) -> list[str]:
    """Copy the tokenizer files of `source` to `directory`."""
    copied = []
    for path in _tokenizer_files(source):
        shutil.copyfile(path, directory / path.name)
        copied.append(path.name)
    return copied

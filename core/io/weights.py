"""Weights as safetensors with the resolved spec in the metadata; tied tensors stored once."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from ..errors import SpecError, WeightsError
from ..memory import check_fits
from ..model.builder import build_model, capture_ties, restore_ties
from ..model.placement import as_device, as_dtype
from ..model.zoo_model import ZooModel
from ..parts.registry import get_registry
from ..specs.spec import Spec, load_stored_spec, underive
from .provenance import PROVENANCE_KEY, install_hint, provenance
from .safe_read import SafetensorsFile, UnreadableSafetensors
from .safe_write import write_safetensors

SPEC_KEY = "archzoo.spec"
ALIASES_KEY = "archzoo.aliases"
DERIVED_KEY = "archzoo.derived"  # spec keys computed from others: recomputed on load
VERSION_KEY = "archzoo.version"
HF_SOURCE_KEY = "archzoo.hf_source"  # the HF directory a model was imported from


def save(model: ZooModel, path: str | os.PathLike[str]) -> None:
    """Write the model's weights and resolved spec to one safetensors file."""
    from .. import __version__

    tensors: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    canonical: dict[tuple, str] = {}
    for name, t in model.state_dict().items():
        if t.device.type == "meta":
            raise WeightsError("cannot save a model built on the meta device (no weights)")
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.dtype)
        if key in canonical:
            aliases[name] = canonical[key]
            continue
        canonical[key] = name
        tensors[name] = t.detach().contiguous()
    metadata = {
        "format": "pt",
        SPEC_KEY: json.dumps(model.spec.data),
        ALIASES_KEY: json.dumps(aliases),
        DERIVED_KEY: json.dumps(list(model.spec.derived)),
        VERSION_KEY: __version__,
        PROVENANCE_KEY: json.dumps(provenance(model.spec.data, get_registry())),
    }
    if model.hf_source:
        metadata[HF_SOURCE_KEY] = json.dumps(model.hf_source)
    write_safetensors(path, tensors, metadata)  # atomic, and no NumPy needed


def open_weights(path: str | os.PathLike[str]) -> SafetensorsFile:
    """The file opened once, its header checked, with a clear error for unreadable files."""
    p = Path(path)
    if not p.exists():
        raise WeightsError(f"{p}: no such file")
    if not p.is_file():  # a FIFO or device would block or never end
        raise WeightsError(f"{p}: not a regular file")
    try:
        return SafetensorsFile(p)
    except UnreadableSafetensors as exc:
        raise WeightsError(f"{p}: not a readable safetensors file ({exc})") from None


def read_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The safetensors header metadata, with a clear error for unreadable files."""
    with open_weights(path) as f:
        return f.metadata


def load_file(
    path: str | os.PathLike[str],
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
) -> ZooModel:
    """Rebuild a model (in eval mode) from a file written by `save`; executes no code.

    The file is opened once: spec and tensors come from one version even while another
    process saves over it."""
    device, dtype = as_device(device), as_dtype(dtype)  # before any work, naming them
    p = Path(path)
    with open_weights(p) as f:
        return _load(p, f, device, dtype)


def stored_spec(meta: dict[str, str], p: Path, overrides: dict[str, Any] | None = None) -> Spec:
    """The spec in a weights file's metadata, as data only (load_stored_spec: no name, path,
    YAML text or `extends` in it is read), with `overrides`."""
    if SPEC_KEY not in meta:
        raise WeightsError(f"{p}: safetensors file has no archzoo spec in its metadata")
    try:
        spec_data = json.loads(meta[SPEC_KEY])
        derived = json.loads(meta.get(DERIVED_KEY, "[]"))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise WeightsError(f"{p}: spec metadata is not valid JSON ({exc})") from None
    if isinstance(spec_data, dict) and isinstance(derived, list):
        spec_data = underive(spec_data, derived)
    try:
        return load_stored_spec(spec_data, overrides, registry=get_registry())
    except SpecError as exc:  # a component of a plugin not installed here: name the package
        hint = install_hint(meta.get(PROVENANCE_KEY), get_registry())
        msg = f"{p}: the spec stored in the file does not validate:\n{exc}{hint}"
        raise WeightsError(msg) from None


def _load(
    p: Path,
    f: SafetensorsFile,
    device: str | torch.device | None,
    dtype: torch.dtype | None,
) -> ZooModel:
    meta = f.metadata
    spec = stored_spec(meta, p)
    try:
        aliases = json.loads(meta.get(ALIASES_KEY, "{}"))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise WeightsError(f"{p}: spec metadata is not valid JSON ({exc})") from None
    if not isinstance(aliases, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in aliases.items()
    ):
        raise WeightsError(f"{p}: {ALIASES_KEY} metadata must map tensor names to tensor names")
    check_fits(f.size, "cpu", f"loading {p}")  # the tensors are read into memory
    try:
        state = f.read_all()
    except (UnreadableSafetensors, OSError) as exc:
        raise WeightsError(f"{p}: cannot read tensors ({exc})") from None
    stored = next((t.dtype for t in state.values() if t.is_floating_point()), None)
    model = build_model(spec, device="meta", dtype=stored)  # keep the saved precision
    load_state(model, state, aliases, str(p))
    model.hf_source = _hf_source(meta.get(HF_SOURCE_KEY))
    model.loaded_from = p.absolute().parent  # the metadata's directory is a record, not read
    if device is not None or dtype is not None:
        model = model.to(device=device, dtype=dtype)
    return model.eval()  # as transformers' from_pretrained: call .train() to fine-tune


def _hf_source(stored: str | None) -> dict[str, str] | None:
    """The recorded HF source (strings only; anything else in the file is ignored)."""
    try:
        value = json.loads(stored) if stored else None
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        return None
    return {str(k): v for k, v in value.items()}


def tied_groups(model: torch.nn.Module) -> list[list[str]]:
    """Names that refer to one shared parameter, for each parameter with several names."""
    names: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    return [group for group in names.values() if len(group) > 1]


def load_state(
    model: ZooModel, state: dict[str, torch.Tensor], aliases: dict[str, str], where: str
) -> None:
    """Copy tensors into the model strictly: missing, unexpected or mis-shaped names fail."""
    expected = model.state_dict()
    full: dict[str, Any] = dict(state)
    clash = sorted(set(aliases) & set(state))
    if clash:  # an alias must not replace a tensor the file stores
        raise WeightsError(f"{where}: aliases name stored tensors: {', '.join(clash[:10])}")
    for alias, target in aliases.items():
        if target in state:
            full[alias] = state[target]
    for group in tied_groups(model):  # one stored copy serves every tied name
        present = [n for n in group if n in full]
        for name in group:
            if present and name not in full:
                full[name] = full[present[0]]
    missing = sorted(set(expected) - set(full))
    unexpected = sorted(set(full) - set(expected))
    shapes = [
        f"{k}: file {tuple(full[k].shape)} vs model {tuple(expected[k].shape)}"
        for k in expected
        if k in full and full[k].shape != expected[k].shape
    ]
    kinds = [  # an int or bool tensor where the model has floats: refuse, never cast
        f"{k}: file {full[k].dtype} vs model {expected[k].dtype}"
        for k in expected
        if k in full
        and full[k].dtype != expected[k].dtype
        and not (full[k].is_floating_point() and expected[k].is_floating_point())
    ]
    problems = []
    if missing:
        problems.append(f"missing tensors: {', '.join(missing[:10])}")
    if unexpected:
        problems.append(f"unexpected tensors: {', '.join(unexpected[:10])}")
    if shapes:
        problems.append("mis-shaped tensors: " + "; ".join(shapes[:10]))
    if kinds:
        problems.append("wrong-typed tensors: " + "; ".join(kinds[:10]))
    if problems:
        raise WeightsError(f"{where}: weights do not fit the spec: " + " | ".join(problems))
    params = dict(model.named_parameters(remove_duplicate=False))
    params.update(model.named_buffers(remove_duplicate=False))
    for name, t in full.items():  # keep the model's dtype (checkpoints may be fp16/bf16)
        want = params[name]
        if t.dtype != want.dtype and t.is_floating_point():
            full[name] = t.to(want.dtype)
        if want.device.type != "meta" and t.device != want.device:
            full[name] = full[name].to(want.device)
    ties = capture_ties(model)
    with torch.no_grad():  # assign: take the tensors as they are, no second copy
        model.load_state_dict(full, strict=True, assign=True)
    restore_ties(ties)
    for name, t in [*model.named_parameters(), *model.named_buffers()]:
        if t.device.type == "meta":
            raise WeightsError(f"{where}: {name} was not loaded (still on the meta device)")

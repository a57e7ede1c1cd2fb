"""Import Hugging Face checkpoints (config.json + safetensors) as ZooModels."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from ..errors import SpecError
from ..io.checkpoint_files import check_weight_map, index_shards, read_json, regular_file
from ..io.progress import progress_bar
from ..io.safe_read import LazyTensors
from ..io.weights import WeightsError, load_state
from ..model.builder import build_model
from ..model.placement import as_device, as_dtype
from ..model.zoo_model import ZooModel
from ..parts.converter import ConversionError, Converter, TensorSource
from ..parts.hf_tensors import ZooNames
from ..parts.registry import Registry, RegistryError, check_attention_impl, get_registry
from ..specs.checks import size_estimate
from ..specs.spec import load_spec
from .hub import parse_hub_id, snapshot
from .sentence_transformers import sentence_embedding_head


def read_config(directory: Path) -> dict[str, Any]:
    path = directory / "config.json"
    if not path.exists():
        raise ConversionError(f"{directory}: no config.json")
    config = read_json(path, "config.json")
    if not isinstance(config, dict) or "model_type" not in config:
        raise ConversionError(f"{path}: no 'model_type' key")
    if not isinstance(config["model_type"], str):
        raise ConversionError(f"{path}: model_type must be a string, got {config['model_type']!r}")
    return config


def read_safetensors(directory: Path) -> LazyTensors:
    """Every tensor of model.safetensors or of the shards its index names, by name, each read
    from disk when first asked for (so a converted source can be freed at once), each file
    opened once (close the result, or use it in a `with` block). Never pickle."""
    single = directory / "model.safetensors"
    index = directory / "model.safetensors.index.json"
    if single.exists():
        return LazyTensors([regular_file(single, "model.safetensors")], ConversionError)
    if index.exists():
        files, weight_map = index_shards(directory, index)
        tensors = LazyTensors(files, ConversionError)
        stored = {name: entry[0] for name, entry in tensors.index.items()}
        try:
            check_weight_map(directory, index, weight_map, stored)
        except ConversionError:
            tensors.close()
            raise
        return tensors
    pickles = [p.name for p in directory.glob("*.bin")] + [p.name for p in directory.glob("*.pt")]
    hint = f" (found {', '.join(pickles)}: pickle files are never read)" if pickles else ""
    raise ConversionError(f"{directory}: no model.safetensors or index{hint}")


def from_hf(
    directory: str | os.PathLike[str],
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
    *,
    registry: Registry | None = None,
    revision: str | None = None,
    attention_impl: str | None = None,
) -> ZooModel:
    """Build a ZooModel equivalent to an HF checkpoint directory, or a Hub id
    (`org/name[@revision]`, through huggingface_hub's cache), and load its weights.

    attention_impl: the attention kernel to run (archzoo.list_attention_impls()); by default
    the one that gives transformers' numbers for the family (its eager order in 16-bit floats
    where transformers attends eagerly, else auto)."""
    device, dtype = as_device(device), as_dtype(dtype)  # before any work, naming them
    reg = registry or get_registry()
    if attention_impl is not None:
        check_attention_impl(attention_impl, reg)
    d = Path(directory)
    hub = parse_hub_id(str(directory)) if not d.exists() else None
    if hub is not None:
        d = snapshot(hub[0], hub[1] or revision)
    config = read_config(d)
    model_type = config["model_type"]
    try:
        converter = reg.converter(model_type)
    except ConversionError as exc:
        raise ConversionError(f"{d / 'config.json'}: {exc}") from None
    with read_safetensors(d) as tensors:  # each file opened once: never half of a rewrite
        model = _convert(d, config, converter, tensors, reg)
    if attention_impl is not None:
        model.set_attention_impl(attention_impl)
    model.hf_source = {"directory": str(d.resolve()), "model_type": model_type}
    model.loaded_from = d.absolute()
    if device is not None or dtype is not None:
        model = model.to(device=device, dtype=dtype)
    return model.eval()


def _convert(
    d: Path, config: dict[str, Any], converter: Converter, tensors: LazyTensors, reg: Registry
) -> ZooModel:
    """The model that `config` and `tensors` describe, with those weights loaded."""
    model_type = config["model_type"]
    src = TensorSource(tensors, str(d))
    try:
        spec_data = converter.to_spec(config, src.names())  # a task may show in tensors
        pooling = sentence_embedding_head(d)
        if pooling is not None:  # a sentence-transformers directory: a headless encoder
            head = spec_data.get("head")
            if not isinstance(head, dict) or head.get("kind") != "none":
                raise ConversionError(
                    f"{d / 'modules.json'}: sentence-transformers pooling needs a base model "
                    f"checkpoint, not {config.get('architectures')}"
                )
            head.update(pooling)
        spec = load_spec(spec_data, registry=reg)
    except SpecError as exc:  # name the file the bad values came from
        raise ConversionError(f"{d / 'config.json'}: describes an invalid model:\n{exc}") from None
    except ConversionError as exc:  # a converter's "config.json has no 'x'": name the file
        if str(d) in str(exc):
            raise
        raise ConversionError(f"{d}: {exc}") from None
    except RegistryError:
        raise
    except Exception as exc:  # a converter (a plugin's, maybe) that crashes on odd values
        raise _converter_failed(d, model_type, reg, exc) from None
    check_config_fits_weights(d, spec, tensors.value_count())
    model = build_model(spec, device="meta", registry=reg)
    with progress_bar(len(tensors), f"import {d.name}: reading tensors", "tensor") as bar:
        src.on_take = bar.update  # each tensor is read from disk when the converter takes it
        try:
            state = converter.import_state(src, config, ZooNames.of(model), spec.data)
        except (ConversionError, WeightsError):
            raise
        except Exception as exc:
            raise _converter_failed(d, model_type, reg, exc) from None
    src.check_complete()
    load_state(model, state, {}, str(d))
    kernel = converter.attention_kernel(config)
    if kernel is not None:  # transformers' eager order where it attends eagerly
        model.set_attention_impl(kernel)
    return model


def check_config_fits_weights(d: Path, spec: Any, held: int) -> None:
    """Refuse, before building, a config describing far more parameters than the files hold
    (10,000 layers over a one-layer checkpoint would take minutes to build, then fail)."""
    est = spec.data["vocab_size"] * spec.data["d_model"]  # a rough count (specs/checks.py)
    est += sum(size_estimate(stack) for stack in spec.plan.stacks)
    if est > 4 * held + 2**16:
        raise ConversionError(
            f"{d / 'config.json'}: describes a model of about {est:,} parameters, but the "
            f"checkpoint's safetensors hold {held:,} numbers: the config does not fit the weights"
        )


def _converter_failed(d: Path, model_type: str, reg: Registry, exc: Exception) -> ConversionError:
    plugin = reg.converter_plugin(model_type)
    return ConversionError(
        f"{d / 'config.json'}: the {model_type!r} converter (plugin {plugin!r}) failed on "
        f"this checkpoint: {type(exc).__name__}: {exc}"
    )

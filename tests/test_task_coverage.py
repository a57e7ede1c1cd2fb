"""Every task class transformers has for a type archzoo imports is either imported (one of
the converter's `tasks`) or refused by name (`refused`, with a reason from_hf prints)."""

from __future__ import annotations

import importlib
import inspect
import json

import pytest
import transformers as hf
from transformers.models.auto.configuration_auto import model_type_to_module_name

import archzoo
from archzoo.parts.converter import Converter
from archzoo.parts.registry import get_registry


def hf_task_classes(model_type: str) -> list[str]:
    """transformers' model classes of `model_type`: `XModel`, `XFor...`, `X...Model` (their
    config is the type's; the abstract `...PreTrainedModel` bases and aliases left out)."""
    module = model_type_to_module_name(model_type)
    try:
        modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    except ImportError:
        return []
    return sorted(
        name
        for name, cls in vars(modeling).items()
        if inspect.isclass(cls)
        and issubclass(cls, hf.PreTrainedModel)
        and cls.__module__ == modeling.__name__
        and getattr(cls.config_class, "model_type", None) == model_type
        and (name.endswith("Model") or "For" in name)
        and "PreTrained" not in name
        and "Pretrained" not in name  # BartPretrainedModel, PretrainedBartModel: old names
    )


TYPES = [
    t
    for t in get_registry().model_types()
    if isinstance(get_registry().converter(t), Converter) and get_registry().converter(t).tasks
]


@pytest.mark.parametrize("model_type", TYPES)
def test_every_hf_task_class_is_imported_or_refused_with_a_reason(model_type):
    conv = get_registry().converter(model_type)
    classes = hf_task_classes(model_type)
    assert conv.hf_prefix and all(c.startswith(conv.hf_prefix) for c in classes), (
        f"{model_type}: hf_prefix {conv.hf_prefix!r} does not name {classes}"
    )
    suffixes = [c.removeprefix(conv.hf_prefix) for c in classes]
    gaps = [s for s in suffixes if s not in conv.tasks and s not in conv.refused]
    assert not gaps, f"{model_type}: neither imported nor refused: {gaps}"
    assert not set(conv.tasks) & set(conv.refused)
    for suffix, why in conv.refused.items():
        assert len(why) > 20, f"{model_type} {suffix}: say why it is refused"


REFUSED = [
    (t, s)
    for t in get_registry().model_types()
    if isinstance(get_registry().converter(t), Converter)
    for s in get_registry().converter(t).refused
]


@pytest.mark.parametrize("model_type, suffix", REFUSED)
def test_refused_architectures_are_named_with_their_reason_by_from_hf(tmp_path, model_type, suffix):
    conv = get_registry().converter(model_type)
    arch = conv.hf_prefix + suffix
    config = {"model_type": model_type, "architectures": [arch]}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(archzoo.ConversionError) as err:
        archzoo.from_hf(tmp_path)
    message = str(err.value)
    assert arch in message and conv.refused[suffix] in message
    assert f"supported: {conv.hf_prefix}" in message  # and what is

"""Aliases: an HF model_type with a registered type's layout is one table entry, not a file.

An `Alias` names the converter class whose table reads and writes the type, the type's own
HF class prefix, and what differs in its config.json: settings it must have to share the
layout (`requires`), keys of its own (`fields`), defaults of its config class, keys renamed
by its config class (`renamed`, transformers' attribute_map), its base-model tensor prefix,
and the task classes transformers has for it. `Alias.converter()` makes the converter the
registry holds under the alias's model_type, so import and export go through the one table,
and an imported alias exports as its own model_type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as _replace
from typing import Any

from .converter import Converter, parse_fields, set_path, spec_parts


@dataclass(frozen=True)
class Alias:
    """One HF model_type read and written by the table of `of`, with its differences."""

    model_type: str
    of: type[Converter]  # the converter class of the type it shares the layout with
    hf_prefix: str  # its transformers class names: hf_prefix + task key
    prefix: str | None = None  # its base-model tensor prefix, where it is not `of`'s first
    requires: Mapping[str, Any] = field(default_factory=dict)  # HF settings the layout needs
    fields: str = ""  # its own config keys (a parse_fields table); they win over `of`'s
    defaults: Mapping[str, Any] = field(default_factory=dict)  # its config's keys when absent
    renamed: Mapping[str, str] = field(default_factory=dict)  # its key -> `of`'s key
    fixed: str = ""  # spec parts it always has (spec_parts text), over what `of` reads
    tasks: Sequence[str] | None = None  # the task keys transformers has for it (default: all)
    note: str = ""  # one line for the coverage report: what it is (beyond the layout)

    def converter(self) -> Converter:
        """The converter of this type: `of`'s table with the differences applied."""
        base = self.of
        own = parse_fields(self.fields) if self.fields else ()
        keys = {f.hf for f in own}
        fields = (*(f for f in base.fields if f.hf not in keys), *own)  # read last: they win
        attrs: dict[str, Any] = {
            "model_type": self.model_type,
            "hf_prefix": self.hf_prefix,
            "alias_of": base.model_type,
            "alias": self,
            "requires": {**base.requires, **self.requires},
            "fields": fields,
        }
        if self.tasks is not None:
            missing = [t for t in self.tasks if t not in base.tasks]
            if missing:
                raise ValueError(
                    f"alias {self.model_type!r}: {base.__name__} has no task {missing}"
                )
            attrs["tasks"] = {k: v for k, v in base.tasks.items() if k in self.tasks}
            default = base.default_task
            attrs["default_task"] = default if default in self.tasks else ""
        if self.prefix is not None and base.tensors is not None:
            prefixes = (self.prefix, *base.tensors.prefixes[1:])
            attrs["tensors"] = _replace(base.tensors, prefixes=prefixes)
        cls = type(f"{base.__name__}As{self.hf_prefix}", (_Renaming, base), attrs)
        cls.__module__ = base.__module__
        if self.tasks is not None and not attrs["default_task"]:
            cls.default_task = next((k for k in cls.tasks if k != "Model"), "Model")
        return cls()


class _Renaming(Converter):
    """Reads a config.json of the alias as its parent's: the alias's defaults for absent keys
    (its config class's, where they differ) and its renamed keys under the parent's names."""

    alias: Alias

    def to_spec(self, config: dict[str, Any], tensor_names: Sequence[str] = ()) -> dict[str, Any]:
        config = {**self.alias.defaults, **{k: v for k, v in config.items() if v is not None}}
        for theirs, ours in self.alias.renamed.items():
            if theirs in config and ours not in config:
                config[ours] = config[theirs]
        spec = super().to_spec(config, tensor_names)
        spec = _merged(spec, spec_parts(self.alias.fixed)) if self.alias.fixed else spec
        if spec["family"] != "encoder-decoder":  # one stack: a fixed `decoder:` section's
            section = spec.pop("decoder", None)  # parts are the decoder-alone model's own
            if section and spec["family"] == "decoder":
                spec = _merged(spec, section)
        return spec


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`base` spec parts with `over`'s component keys set on top (a bare name kept as kind)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and "kind" not in value:
            for sub, v in value.items():
                set_path(out, f"{key}.{sub}", v)
        else:
            out[key] = value
    return out

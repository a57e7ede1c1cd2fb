"""X-MOD (Pfeiffer et al., 2022): XLM-RoBERTa whose layers end in language adapters, one
bottleneck MLP per language after the FFN's residual (post_ln's `languages`), chosen by the
`lang_ids` input. transformers keys the adapters by language name
(`adapter_modules.en_XX.dense1`); archzoo stacks them in `languages` order."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from archzoo.parts.converter import TensorSource
from archzoo.parts.hf_tensors import parse_rules

from .bert import RobertaConverter
from .common import ACTIVATION, PATHS

ADAPTER = "encoder.layer.{i}.output.adapter_modules.{lang}.{dense}.{p}"
STACKED = "encoder.layer.{i}.output.adapters.{dense}.{p}"  # archzoo's order, stacked
RULES = """
    encoder.layer.{i}.output.adapters.(dense1,dense2)   ADAPTER_IN,ADAPTER_OUT
    encoder.layer.{i}.output.adapter_layer_norm         ADAPTER_NORM
"""
NORMS = {(True, True): "own", (True, False): "own", (False, True): "ffn", (False, False): "none"}


class XmodConverter(RobertaConverter, model_type="xmod", hf_prefix="Xmod"):
    requires = {"is_decoder": False, "add_cross_attention": False, "pre_norm": False}
    tensors = replace(
        RobertaConverter.tensors, rules=RobertaConverter.tensors.rules + parse_rules(RULES, PATHS)
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The adapters' languages, width, norm, residual and default language."""
        super().adjust(spec, config)
        languages = [str(lang) for lang in config.get("languages", ["en_XX"])]
        default = config.get("default_language")
        own, reuse = (
            config.get("adapter_layer_norm", False),
            config.get("adapter_reuse_layer_norm", True),
        )
        spec["block"] = {
            "kind": "post_ln",
            "languages": languages,
            "default_language": None if default is None else languages.index(default),
            "adapter_dim": int(spec["d_model"] // config.get("adapter_reduction_factor", 2)),
            "adapter_activation": ACTIVATION.read(config.get("hidden_act", "gelu"), "hidden_act"),
            "adapter_norm": NORMS[(bool(own), bool(reuse))],
            "adapter_residual": "normed" if config.get("ln_before_adapter", True) else "sum",
        }

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The adapters' settings as X-MOD's config keys."""
        super().adjust_config(config, spec)
        block = spec["block"]
        default = block.get("default_language")
        factor = spec["d_model"] / block["adapter_dim"]  # an int where it divides
        factor = int(factor) if factor == int(factor) else factor
        config.update(
            languages=list(block["languages"]),
            default_language=None if default is None else block["languages"][default],
            adapter_reduction_factor=factor,
            adapter_layer_norm=block["adapter_norm"] == "own",
            adapter_reuse_layer_norm=block["adapter_norm"] == "ffn",
            ln_before_adapter=block["adapter_residual"] == "normed",
        )

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: Any, ctx: dict[str, Any]
    ) -> dict[str, Any]:
        """Each layer's per-language adapters stacked in `languages` order first."""
        prefix = self.tensors.prefix(src.names())
        languages = ctx["block"]["languages"]
        first = re.compile(re.escape(prefix) + r"encoder\.layer\.(\d+)\.output\.adapter_modules\.")
        layers = sorted({int(m.group(1)) for n in src.names() if (m := first.match(n))})
        for i in layers:
            for dense in ("dense1", "dense2"):
                for p in ("weight", "bias"):
                    parts = [
                        src.take(prefix + ADAPTER.format(i=i, lang=lang, dense=dense, p=p))
                        for lang in languages
                    ]
                    if all(t is not None for t in parts):
                        src.add(prefix + STACKED.format(i=i, dense=dense, p=p), torch.stack(parts))
        return super().import_state(src, config, names, ctx)

    def export_state(
        self,
        state: Mapping[str, Tensor],
        names: Any,
        ctx: dict[str, Any],
        *args: Any,
        **kwargs: Any,
    ) -> dict[str, Tensor]:
        """The stacked adapters split back into one per language name."""
        out = super().export_state(state, names, ctx, *args, **kwargs)
        pattern = re.compile(r"(.*)encoder\.layer\.(\d+)\.output\.adapters\.(dense[12])\.(\w+)$")
        for name in [n for n in out if pattern.match(n)]:
            lead, i, dense, p = pattern.match(name).groups()  # type: ignore[union-attr]
            stacked = out.pop(name)
            for lang, t in zip(ctx["block"]["languages"], stacked, strict=True):
                out[lead + ADAPTER.format(i=i, lang=lang, dense=dense, p=p)] = t.contiguous()
        return out

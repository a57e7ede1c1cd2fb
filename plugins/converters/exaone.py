"""EXAONE 3 (LG AI Research): Llama's architecture (transformers runs it as LlamaForCausalLM)
under EXAONE's own tensor names (GPT-2-like: transformer.h.{i}...) and config keys
(num_layers, layer_norm_epsilon, activation_function)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from torch import Tensor

from archzoo.parts.converter import ConversionError, TensorSource
from archzoo.parts.hf_tensors import ZooNames

from .common import table
from .llama import ROTARY_BUFFER, LlamaConverter

RENAMED = {  # transformers' key -> EXAONE's config.json key (ExaoneConfig.attribute_map)
    "num_hidden_layers": "num_layers",
    "rms_norm_eps": "layer_norm_epsilon",
}


# A headless model (ExaoneModel is LlamaModel) is saved with Llama's outer names around
# EXAONE's inner ones: embed_tokens, layers.{i}.ln_1, ..., norm
HEADLESS_NAMES = (("wte.", "embed_tokens."), ("h.", "layers."), ("ln_f.", "norm."))


def _renamed(name: str, pairs: tuple[tuple[str, str], ...]) -> str:
    """`name` with its first part renamed by the first pair (from, to) it starts with."""
    for old, new in pairs:
        if name.startswith(old):
            return new + name[len(old) :]
    return name


class ExaoneConverter(LlamaConverter, model_type="exaone", hf_prefix="Exaone"):
    layout_of = "llama"  # a Llama spec exports as llama unless imported from exaone
    requires = {"hidden_act": "silu"}
    fields = tuple(
        replace(f, hf=f"{f.hf}|{RENAMED[f.hf]}") if f.hf in RENAMED else f
        for f in LlamaConverter.fields
    )
    tasks = {k: v for k, v in LlamaConverter.tasks.items() if k in ("Model", "ForCausalLM")}
    tensors = table(
        """
        wte                                                     WORD
        h.{i}.ln_1                                              ATTN_NORM
        h.{i}.attn.attention.(q_proj,k_proj,v_proj,out_proj)    Q,K,V,ATTN_OUT
        h.{i}.ln_2                                              FFN_NORM
        h.{i}.mlp.(c_fc_0,c_fc_1,c_proj)                        GATE,UP,DOWN
        ln_f                                                    FINAL_NORM
        """,
        prefixes=("transformer.", ""),
        ignore=tuple(r.replace("layers.", "h.") for r in ROTARY_BUFFER),
    )

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Llama's rotary; EXAONE's own activation key must name SiLU too."""
        act = config.get("activation_function")
        if act not in (None, "silu"):
            raise ConversionError(
                f"config.json activation_function={act!r} is not supported (only 'silu')"
            )
        super().adjust(spec, config)

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: ZooNames, ctx: dict[str, Any]
    ) -> dict[str, Tensor]:
        """A headless checkpoint's outer names read as EXAONE's."""
        back = tuple((new, old) for old, new in HEADLESS_NAMES)
        for name in src.names():
            if re.match(r"^(embed_tokens|layers\.\d+|norm)\.", name):
                src.add(_renamed(name, back), src.take(name))
        return super().import_state(src, config, names, ctx)

    def export_state(self, *args: Any, **kwargs: Any) -> dict[str, Tensor]:
        """A headless export under the outer names transformers saves and loads."""
        out = super().export_state(*args, **kwargs)
        if any(n.startswith("transformer.") for n in out):
            return out
        return {_renamed(n, HEADLESS_NAMES): t for n, t in out.items()}

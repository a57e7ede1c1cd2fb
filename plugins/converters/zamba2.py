"""Zamba 2 (Zyphra, 2024): Mamba 2 layers; on the `hybrid` layers of `layers_block_type`, a
transformer block shared round-robin (`num_mem_blocks` of them) first reads [x | embeddings]
and its output, projected by the layer's own `linear`, joins the Mamba layer's input before
its norm (attention `shared_transformer`). Per-use low-rank adapters on the shared FFN's
gate and up (always) and on q, k, v (`use_shared_attention_adapter`); rotary in the shared
attention when `use_mem_rope`. transformers keeps use u's adapters in slot u of the first
layer running its block: their rules are written per layer from the spec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archzoo.parts.converter import ConversionError, Converter, Field, parse_fields, spec_parts
from archzoo.parts.hf_tensors import Rule, TensorTable, parse_rules
from archzoo.specs.plan import layer_components, stack_config

from .common import ACTIVATION, PAD, PATHS, decoder_tasks, lm_task

# the hybrid layers' own parts, under the shared_transformer attention
ATTN = PATHS["BLOCK"] + "attention."
HYBRID = {f"HYBRID_{k}": v.replace("attention.", "attention.mixer.") for k, v in PATHS.items()}
HYBRID.update(
    HYBRID_NORM=ATTN + "mixer_norm",
    SHARED_PROJ=ATTN + "proj",
    SHARED_IN_NORM=ATTN + "shared.in_norm",
    SHARED_FFN_NORM=ATTN + "shared.ffn_norm",
    **{f"SHARED_{p.upper()}": ATTN + f"shared.attention.{p}" for p in ("q", "k", "v", "out")},
    **{f"SHARED_{p.upper()}": ATTN + f"shared.ffn.{p}" for p in ("gate", "up", "down")},
)

ZAMBA2_TENSORS = """
    embed_tokens                                        WORD
    layers.{i}.input_layernorm                          ATTN_NORM
    layers.{i}.mamba.(in_proj,conv1d,out_proj)          MIXER_IN,MIXER_CONV,MIXER_OUT
    layers.{i}.mamba.norm                               MIXER_NORM
    layers.{i}.mamba.(A_log,dt_bias,D)                  A_LOG,DT_BIAS,SSM_D     tensor
    layers.{i}.mamba_decoder.input_layernorm            HYBRID_NORM
    layers.{i}.mamba_decoder.mamba.(in_proj,conv1d,out_proj)    HYBRID_MIXER_IN,HYBRID_MIXER_CONV,HYBRID_MIXER_OUT
    layers.{i}.mamba_decoder.mamba.norm                 HYBRID_MIXER_NORM
    layers.{i}.mamba_decoder.mamba.(A_log,dt_bias,D)    HYBRID_A_LOG,HYBRID_DT_BIAS,HYBRID_SSM_D  tensor
    layers.{i}.linear                                   SHARED_PROJ
    layers.{i}.shared_transformer.input_layernorm       SHARED_IN_NORM
    layers.{i}.shared_transformer.self_attn.(q_proj,k_proj,v_proj,o_proj)  SHARED_Q,SHARED_K,SHARED_V,SHARED_OUT
    layers.{i}.shared_transformer.pre_ff_layernorm      SHARED_FFN_NORM
    layers.{i}.shared_transformer.feed_forward.gate_up_proj     SHARED_GATE,SHARED_UP   split
    layers.{i}.shared_transformer.feed_forward.down_proj        SHARED_DOWN
    final_layernorm                                     FINAL_NORM
"""
# where transformers keeps one use's adapters -> the layer's own adapter in archzoo
ADAPTERS = {
    "self_attn.linear_q_adapter_list": "q_adapter",
    "self_attn.linear_k_adapter_list": "k_adapter",
    "self_attn.linear_v_adapter_list": "v_adapter",
    "feed_forward.gate_up_proj_adapter_list": "ffn_adapter",
}


def hybrid_layers(spec: Mapping[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """(layer index, its shared_transformer attention) for each hybrid layer of a spec."""
    layers = layer_components(stack_config(dict(spec), "decoder"))
    return [(j, c["attention"]) for j, c in enumerate(layers) if c["attention"]["kind"] == KIND]


KIND = "shared_transformer"


class Zamba2Converter(Converter, model_type="zamba2", hf_prefix="Zamba2", family="decoder"):
    fixed = spec_parts(
        "dropout: 0.0, embedding: token, norm: rmsnorm, ffn: none",
        "block: {kind: pre_ln, ffn_norm: false}",
    )
    fields = (
        *parse_fields(
            """
            vocab_size                  vocab_size                  32000
            hidden_size                 d_model                     2560
            num_hidden_layers           n_layers                    54
            num_attention_heads         n_heads                     32
            max_position_embeddings     max_len                     4096
            attention_dropout           attention_dropout           0.0
            rms_norm_eps                norm.eps                    1e-5
            """
        ),
        Field("intermediate_size", "d_ff", lambda c: 4 * c.get("hidden_size", 2560)),
        Field(  # the shared attention's heads: 2 x hidden_size wide unless stated
            "attention_head_dim|head_dim",
            "head_dim",
            lambda c: 2 * c.get("hidden_size", 2560) // c.get("num_attention_heads", 32),
        ),
        *PAD,
    )
    tasks = {  # transformers' Zamba 2 heads: no token classification, no QA
        k: v
        for k, v in decoder_tasks("ForCausalLM", lm_task(True)).items()
        if k in ("Model", "ForCausalLM", "ForSequenceClassification")
    }
    tensors = TensorTable(parse_rules(ZAMBA2_TENSORS, {**PATHS, **HYBRID}), ("model.", ""))

    def base_table(self, spec: Mapping[str, Any] | None = None) -> TensorTable:
        """The table plus, for a spec, each hybrid layer's adapters at transformers' slot."""
        if spec is None:
            return self.tensors
        rules, first = [], {}
        for use, (j, att) in enumerate(hybrid_layers(spec)):
            at = first.setdefault(att["shared_block"], j)
            for hf, ours in ADAPTERS.items():
                for k, part in enumerate(("down", "up")):
                    name = f"layers.{at}.shared_transformer.{hf}.{use}.{k}.weight"
                    rules.append(
                        Rule((name,), (f"decoder.blocks.{j}.attention.{ours}.{part}.weight",))
                    )
        return TensorTable(self.tensors.rules + tuple(rules), self.tensors.prefixes)

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """The Mamba 2 mixer of every layer, the shared blocks on the hybrid layers, rotary."""
        get, hidden = config.get, config.get("hidden_size", 2560)
        d_inner = int(get("mamba_expand", 2) * hidden)
        heads = get("n_mamba_heads", 8)
        if d_inner % heads:
            raise ConversionError(
                f"config.json n_mamba_heads {heads} does not divide mamba_expand x hidden_size "
                f"= {d_inner}"
            )
        mixer = {
            "kind": "mamba2",
            "d_inner": d_inner,
            "head_dim": d_inner // heads,
            "state_size": get("mamba_d_state", 64),
            "n_groups": get("mamba_ngroups", 1),
            "conv_kernel": get("mamba_d_conv", 4),
            "conv_bias": True,  # transformers' conv1d always has one (use_conv_bias is unread)
            "bias": bool(get("add_bias_linear", False)),
            "chunk_size": get("chunk_size", 256),
            "norm_eps": 1e-5,  # Zamba2RMSNormGated's own epsilon
            "dt_min": float(get("time_step_min", 0.001)),
        }
        spec["attention"] = dict(mixer)
        if get("use_long_context", False):
            spec["max_len"] = 16384  # transformers' config sets it so
        rope = get("use_mem_rope", False)
        spec["position"] = {"kind": "rotary", **rope_base(config)} if rope else "none"
        act = ACTIVATION.read(get("hidden_act", "gelu"), "hidden_act")
        gates = {"gelu": "geglu", "gelu_tanh": "geglu_tanh", "silu": "swiglu", "relu": "reglu"}
        if act not in gates:
            raise ConversionError(f"config.json hidden_act={act!r} has no gated FFN in archzoo")
        types = get("layers_block_type") or default_layer_types()
        if len(types) != spec["n_layers"]:
            raise ConversionError(
                f"config.json layers_block_type has {len(types)} entries for "
                f"{spec['n_layers']} layers"
            )
        hybrid = [j for j, t in enumerate(types) if t == "hybrid"]
        blocks = get("num_mem_blocks", 1)
        head_dim = spec["head_dim"]
        shared = {
            "kind": KIND,
            "mixer": mixer,
            "n_kv_heads": get("num_key_value_heads") or spec["n_heads"],
            "scale": (head_dim / 2) ** -0.5,  # transformers scales by sqrt(head_dim / 2)
            "d_ff": spec["d_ff"],
            "activation": gates[act],
            "ffn_bias": bool(get("add_bias_linear", False)),
            "adapter_rank": get("adapter_rank", 128),
            "attention_adapters": bool(get("use_shared_attention_adapter", False)),
            "ffn_adapter": True,
        }
        widths = {spec["n_heads"] * head_dim, shared["n_kv_heads"] * head_dim}
        if shared["attention_adapters"] and widths != {2 * hidden}:
            raise ConversionError(
                "config.json use_shared_attention_adapter with q, k or v narrower than 2 x "
                f"hidden_size = {2 * hidden} (num_attention_heads {spec['n_heads']}, "
                f"num_key_value_heads {shared['n_kv_heads']} of attention_head_dim {head_dim}): "
                "transformers' adapters are 2 x hidden_size wide and do not fit"
            )
        block = {"kind": "pre_ln", "attention_norm": False, "ffn_norm": False}
        spec["layers"] = [
            {
                "select": hybrid[b::blocks],
                "block": block,
                "attention": {**shared, "shared_block": b},
            }
            for b in range(min(blocks, len(hybrid)))
        ]

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust` (what it cannot say, export's round trip names)."""
        mixer, d = spec["attention"], spec["d_model"]
        config["layers_block_type"] = ["linear_attention"] * spec["n_layers"]
        if mixer.get("kind") == "mamba2":
            config.update(
                mamba_expand=mixer["d_inner"] // d,
                n_mamba_heads=mixer["d_inner"] // mixer["head_dim"],
                mamba_d_state=mixer["state_size"],
                mamba_ngroups=mixer["n_groups"],
                mamba_d_conv=mixer["conv_kernel"],
                add_bias_linear=mixer["bias"],
                chunk_size=mixer["chunk_size"],
                time_step_min=mixer["dt_min"],
            )
        position = spec["position"]
        config["use_mem_rope"] = position["kind"] == "rotary"
        if config["use_mem_rope"]:
            config["rope_parameters"] = {"rope_type": "default", "rope_theta": position["base"]}
        hybrid = hybrid_layers(spec)
        for j, _ in hybrid:
            config["layers_block_type"][j] = "hybrid"
        if hybrid:
            att = hybrid[0][1]
            gates = {"geglu": "gelu", "geglu_tanh": "gelu_pytorch_tanh", "swiglu": "silu"}
            config.update(
                num_mem_blocks=len({a["shared_block"] for _, a in hybrid}),
                num_key_value_heads=att["n_kv_heads"] or spec["n_heads"],
                hidden_act=gates.get(att["activation"], "relu"),
                adapter_rank=att["adapter_rank"],
                use_shared_attention_adapter=att["attention_adapters"],
            )


def rope_base(config: dict[str, Any]) -> dict[str, Any]:
    """The shared attention's rotary base (transformers' default rope only)."""
    params = config.get("rope_parameters") or {}
    if params.get("rope_type", "default") != "default":
        raise ConversionError(
            f"config.json rope_parameters rope_type={params['rope_type']!r}: Zamba 2's shared "
            "attention imports with the default rotary only"
        )
    return {"base": float(params.get("rope_theta", config.get("rope_theta", 10000.0)))}


def default_layer_types() -> list[str]:
    """Zamba2Config's default layers_block_type (54 layers, Zamba2-2.7B)."""
    mamba = "linear_attention"
    return (
        [mamba]
        + ([mamba] * 5 + ["hybrid"]) * 7
        + [mamba] * 4
        + ["hybrid"]
        + [mamba] * 3
        + ["hybrid"]
        + [mamba] * 2
    )

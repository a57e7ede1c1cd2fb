"""TIPSv2's text tower (tipsv2_text_model): CLIP's pre-LN layers run bidirectionally, token
vectors times sqrt(hidden_size) (scale_sqrt_depth) plus tensor2tensor's sinusoids (all sines,
then all cosines), a ReLU MLP and a final norm; its sentence vector the mean of the real
tokens' states (Tipsv2TextModel's pooler_output). transformers 5 saves it under OpenCLIP's
names (its conversion mapping renames them on load): q|k|v fused in `attn.in_proj_*`."""

from __future__ import annotations

from archzoo.parts.converter import Converter, parse_fields, spec_parts
from archzoo.parts.hf_tensors import TensorTable, parse_rules

from .common import ACTIVATION, PAD, PATHS, SIZES, task

SINUSOID = "{kind: sinusoidal, frequencies: tensor2tensor, layout: halves}"
# the fused projection is a bare tensor pair (in_proj_weight, in_proj_bias), not a module
FUSED = {**PATHS, "QKV_WEIGHT": PATHS["QKV"] + ".weight", "QKV_BIAS": PATHS["QKV"] + ".bias"}
TENSORS = """
    token_embedding                                         WORD
    transformer.resblocks.{i}.attn.in_proj_weight           QKV_WEIGHT  tensor  # rows [q|k|v]
    transformer.resblocks.{i}.attn.in_proj_bias             QKV_BIAS    tensor
    transformer.resblocks.{i}.attn.out_proj                 ATTN_OUT
    transformer.resblocks.{i}.(ln_1,ln_2)                   ATTN_NORM,FFN_NORM
    transformer.resblocks.{i}.mlp.(c_fc,c_proj)             FC_IN,FC_OUT
    ln_final                                                FINAL_NORM
"""


class Tipsv2TextConverter(
    Converter, model_type="tipsv2_text_model", hf_prefix="Tipsv2Text", family="encoder"
):
    fixed = spec_parts(
        f"embedding: {{kind: token, dropout: 0.0}}, position: {SINUSOID}, block: pre_ln",
        "attention: {kind: mha, fused_qkv: true, bias: true}, ffn: {kind: mlp, bias: true}",
        "dropout: 0.0, norm: layernorm",
    )
    fields = (
        *SIZES,
        *parse_fields(
            """
            max_position_embeddings     max_len             64
            attention_dropout           attention_dropout   0.0
            layer_norm_eps              norm.eps            1e-5
            hidden_act                  ffn.activation      relu    ACTIVATION
            scale_sqrt_depth            embedding.scale     True
            """,
            ACTIVATION=ACTIVATION,
        ),
        *PAD,
    )
    tasks = {"Model": task("kind: sentence_embedding, pooling: mean, projection: null")}
    tensors = TensorTable(parse_rules(TENSORS, FUSED), ("text_encoder.", ""), {"encoder": {}})

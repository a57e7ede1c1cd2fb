"""NanoChat (Karpathy): Llama's attention with RMSNorms that learn no scale (x / rms(x)) before
each sublayer, on the token vectors and at the end; a weightless QK norm after the rotation,
which turns each head the other way (`halves_swapped` on q and k); a squared-ReLU MLP
without biases; and soft-capped logits (`final_logit_softcapping`)."""

from __future__ import annotations

from archzoo.parts.converter import Field, parse_fields, spec_parts

from .common import ACTIVATION, TASK_LM, decoder_tasks, table, tie
from .common import task as make_task
from .llama import ROTARY_BUFFER, LlamaConverter

LM = make_task(
    "kind: lm",
    TASK_LM,
    fields=(tie(False), Field("final_logit_softcapping", "head.softcap", 15.0)),
)


class NanoChatConverter(LlamaConverter, model_type="nanochat", hf_prefix="NanoChat"):
    requires = {}
    fixed = spec_parts(
        "dropout: 0.0, block: pre_ln, norm: {kind: rmsnorm, scale: false}",
        "embedding: {kind: token, norm: true}",  # the final norm's module, on the inputs too
        "attention: {kind: mha, fused_qkv: false, qk_norm: head, qk_norm_after_position: true}",
        "ffn: {kind: mlp, bias: false}",
    )
    fields = (
        *(f for f in LlamaConverter.fields if f.hf != "mlp_bias"),
        *parse_fields("hidden_act  ffn.activation  relu2  ACTIVATION", ACTIVATION=ACTIVATION),
    )
    tasks = {
        k: v for k, v in decoder_tasks("ForCausalLM", LM).items() if k in ("Model", "ForCausalLM")
    }
    tensors = table(
        """
        embed_tokens                                    WORD
        layers.{i}.self_attn.(q_proj,k_proj)            Q,K     halves_swapped
        layers.{i}.self_attn.(v_proj,o_proj)            V,ATTN_OUT
        layers.{i}.mlp.(fc1,fc2)                        FC_IN,FC_OUT
        """,
        prefixes=("model.", ""),
        ignore=ROTARY_BUFFER,
    )

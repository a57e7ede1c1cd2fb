"""archzoo's parameter paths, named once for every converter table.

`{s}` is the stack (`encoder` / `decoder`), `{i}` the block index. The names come from
the builder (stacks, blocks, final norm, head), the block layouts (`attention_norm`,
`ffn_norm`, `cross_attention`, `cross_norm`) and the built-in components; a test builds
models and checks that every path here exists in one of them.
"""

from __future__ import annotations

WORD = "{s}.embedding.word"
TOKEN_TYPE = "{s}.embedding.token_type"
TASK_TYPE = "{s}.embedding.task_type"  # token embedding task_types: ERNIE's task_type_ids table
EMBED_NORM = "{s}.embedding.norm"
GLOBAL_TOKENS = "{s}.embedding.global_table"  # token embedding global_tokens (PEGASUS-X)
EMBED_PROJECT = "{s}.embedding.project"  # factorized embedding: width E -> d_model
POSITION = "{s}.position.table"  # learned table or T5's bucket bias
RELATIVE, RELATIVE_NORM = "{s}.position.relative", "{s}.position.norm"  # deberta_relative
ABSOLUTE = "{s}.position.absolute.table"  # deberta_relative absolute: its learned table
POSITION_LAYER = "{s}.position.tables.{i}"  # t5_relative per_layer: layer i's bias (UMT5)
RELATIVE_LAYER = "{s}.position.key_tables.{i}"  # relative per_layer: layer i's a^K (BERT)
POSITION_GLOBAL = "{s}.position.global_table"  # t5_windowed: bias toward global summaries
FINAL_NORM = "{s}.final_norm"
STREAM_TABLE = "{s}.embedding.stream_table"  # token embedding predict_streams (ProphetNet)

BLOCK = "{s}.blocks.{i}."
ATTN_NORM = BLOCK + "attention_norm"
FFN_NORM = BLOCK + "ffn_norm"
CROSS_NORM = BLOCK + "cross_norm"
CROSS_OUT_NORM = BLOCK + "cross_out_norm"  # sandwich_ln: the norm after cross-attention
PREFIX_NORM = BLOCK + "prefix_norm"  # pre_ln prefix_attention_norm: the global tokens' norm
Q, K, V, QKV, ATTN_OUT = (BLOCK + "attention." + p for p in ("q", "k", "v", "qkv", "out"))
# longformer global_projections: the global rows' own q/k/v
Q_GLOBAL, K_GLOBAL, V_GLOBAL = (BLOCK + f"attention.{p}_global" for p in "qkv")
CROSS_Q, CROSS_K, CROSS_V, CROSS_OUT = (
    BLOCK + "cross_attention." + p for p in ("q", "k", "v", "out")
)
FC_IN, FC_OUT = BLOCK + "ffn.fc_in", BLOCK + "ffn.fc_out"  # mlp
# mlp activation xielu: its learned scalars and constant buffers
XIELU_ALPHA_P, XIELU_ALPHA_N, XIELU_BETA, XIELU_EPS = (
    BLOCK + "ffn.act." + p for p in ("alpha_p", "alpha_n", "beta", "eps")
)
GATE, UP, DOWN = BLOCK + "ffn.gate", BLOCK + "ffn.up", BLOCK + "ffn.down"  # glu
Q_NORM, K_NORM = BLOCK + "attention.q_norm", BLOCK + "attention.k_norm"  # mha qk_norm
Q_BIAS, V_BIAS = BLOCK + "attention.q_bias", BLOCK + "attention.v_bias"  # disentangled qv
POSITION_KEY = BLOCK + "attention.position_key"  # disentangled: c2p table projection
POSITION_QUERY = BLOCK + "attention.position_query"  # disentangled: p2c table projection
GLOBAL_NORM = BLOCK + "attention.global_norm"  # transient_global: norm of the summaries
STREAM_RELATIVE = BLOCK + "attention.relative"  # ngram_streams: d -> buckets x heads
SINKS = BLOCK + "attention.sinks"  # mha sinks: (H,) per-head sink logits
ROUTER = BLOCK + "ffn.router"  # moe: (E, D) router
EXPERTS_IN, EXPERTS_OUT = BLOCK + "ffn.w_in", BLOCK + "ffn.w_out"  # moe: (E, D, 2F), (E, F, D)
EXPERTS_IN_BIAS, EXPERTS_OUT_BIAS = BLOCK + "ffn.b_in", BLOCK + "ffn.b_out"  # (E, 2F), (E, D)
SHARED_UP, SHARED_DOWN = BLOCK + "ffn.shared.up", BLOCK + "ffn.shared.down"  # [gate|up], down
SHARED_GATE = BLOCK + "ffn.shared_gate"  # moe: sigmoid gate of the shared expert
SCORE_BIAS = BLOCK + "ffn.score_bias"  # moe choice_bias: (E,) buffer added to choose experts
ATTN_SUB_NORM = BLOCK + "attention.out_norm"  # mha out_norm: before the output projection
FFN_SUB_NORM = BLOCK + "ffn.inner_norm"  # glu inner_norm: before the down projection
EXPERTS_SUM_BIAS = BLOCK + "ffn.out_bias"  # moe output_bias: (D,) after the weighted sum
# moa: router (E, D), shared [k | v] projection, the experts' queries (E, D, Hkv hd) and
# outputs (E, Hkv hd, D), the bias after their weighted sum (D,)
MOA_ROUTER, MOA_KV, MOA_Q, MOA_OUT, MOA_BIAS = (
    BLOCK + "attention." + p for p in ("router", "kv", "w_q", "w_out", "out_bias")
)
# mla: low-rank query (q_a, its norm, q_b), latent + rotary key (kv_a), its norm, kv_b
Q_A, Q_A_NORM, Q_B, KV_A, KV_A_NORM, KV_B = (
    BLOCK + "attention." + p for p in ("q_a", "q_a_norm", "q_b", "kv_a", "kv_a_norm", "kv_b")
)

LM_PROJ = "head.proj"  # lm: the output projection (tied or not)
LM_FIXED_BIAS = "head.fixed_bias"  # lm: a bias buffer (BART)
LM_DOWN = "head.down"  # lm: d_model -> E before a tied E-wide table (OPT's project_out)
MLM_DENSE, MLM_NORM = "head.dense", "head.norm"  # mlm: the transform
MLM_DECODER = "head.decoder"  # mlm: the vocabulary projection
MLM_BIAS = "head.bias"  # mlm: a tensor (the decoder bias under a second name), not a module
HEAD_POOLER = "head.pooler"  # none / classifier: BERT's dense + tanh on the first token
CLASSIFIER = "head.classifier"  # classifier, token_classifier: the label projection
QA = "head.qa_outputs"  # question_answering: (start, end) logits
ATTN_OUT_NORM = BLOCK + "attention_out_norm"  # sandwich_ln: the norm after attention
FFN_OUT_NORM = BLOCK + "ffn_out_norm"  # sandwich_ln: the norm after the ffn
DISC_DENSE, DISC_PREDICTION = "head.dense", "head.prediction"  # discriminator (ELECTRA)
HEAD_POOLER_NORM = "head.pooler_norm"  # classifier & co.: the norm after the pooler (ModernBERT)
LANG = "{s}.embedding.lang"  # token embedding n_langs: XLM language vectors
CLASSIFIER_WEIGHT, CLASSIFIER_BIAS = CLASSIFIER + ".weight", CLASSIFIER + ".bias"  # whole tensors
# recurrent mixers (plugins/attention/recurrent.py): projections in and out, the causal
# depthwise convolution (C, 1, K), the gated RMSNorm, and whole per-head tensors
MIXER_IN, MIXER_CONV, MIXER_OUT, MIXER_NORM = (
    BLOCK + "attention." + p for p in ("in_proj", "conv", "out_proj", "norm")
)
A_LOG, DT_BIAS, SSM_D = (BLOCK + "attention." + p for p in ("A_log", "dt_bias", "D"))
# mamba: the low-rank step and B, C projection, the step's up-projection, Jamba's norms
MAMBA_X_PROJ, MAMBA_DT_PROJ = BLOCK + "attention.x_proj", BLOCK + "attention.dt_proj"
DT_NORM, B_NORM, C_NORM = (BLOCK + "attention." + p for p in ("dt_norm", "b_norm", "c_norm"))
# gated_deltanet: q|k|v (convolved together), the output gate z, write strength b, decay step a
GDN_QKV, GDN_Z, GDN_B, GDN_A = (
    BLOCK + "attention." + p for p in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")
)
OUT_GATE = BLOCK + "attention.out_gate"  # lightning: the sigmoid gate on the normed output
# kimi_delta: the decay's and the output gate's low-rank projections, the write strength
KDA_F_A, KDA_F_B, KDA_B, KDA_G_A, KDA_G_B = (
    BLOCK + "attention." + p for p in ("f_a", "f_b", "b", "g_a", "g_b")
)
# diff_mha: the four (hd,) vectors of lambda = exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init
LAMBDA_Q1, LAMBDA_K1, LAMBDA_Q2, LAMBDA_K2 = (
    BLOCK + "attention.lambda_" + p for p in ("q1", "k1", "q2", "k2")
)
# post_ln languages: each layer's language adapters, stacked per language, and their own norm
ADAPTER_IN, ADAPTER_OUT = BLOCK + "adapters.fc_in", BLOCK + "adapters.fc_out"
ADAPTER_NORM = BLOCK + "adapter_norm"
# span_conv: the convolution heads' separable key convolution (depthwise (d, 1, K) taps,
# pointwise d -> A), the kernel generator and the values the kernels weigh
SPAN_KEY_DEPTHWISE, SPAN_KEY_POINTWISE = (
    BLOCK + "attention.key_depthwise",
    BLOCK + "attention.key_pointwise",
)
SPAN_KEY_POINTWISE_WEIGHT, SPAN_KEY_POINTWISE_BIAS = (
    SPAN_KEY_POINTWISE + ".weight",
    SPAN_KEY_POINTWISE + ".bias",
)
SPAN_KERNEL, SPAN_VALUE = BLOCK + "attention.conv_kernel", BLOCK + "attention.conv_value"
# bottleneck block: the input bottleneck, q/k's own one, the output one back to d_model
BOTTLENECK_IN, BOTTLENECK_IN_NORM = BLOCK + "in_proj", BLOCK + "in_norm"
QK_BOTTLENECK, QK_BOTTLENECK_NORM = BLOCK + "qk_proj", BLOCK + "qk_norm"
BOTTLENECK_OUT, BOTTLENECK_OUT_NORM = BLOCK + "out_proj", BLOCK + "out_norm"
MLM_EXTENSION = "head.extension"  # mlm decoder_extension: the decoder's columns past the table
SENTENCE_PROJECTION = "head.projection"  # sentence_embedding projection (CLIP's text_projection)
MOE_OUT_NORM = BLOCK + "ffn.out_norm"  # moe output_norm: over routed + shared (A.X-K1)
MLM_DENSE_OUT = "head.dense_out"  # mlm bottleneck: the transform's second layer (UltraBERT)
# pooled_relative (Funnel): whole tensors, the content bias (H, hd), the distance term's bias
# (H, hd) and projection (d_model, H, hd), the segment term's bias (H, hd) and vectors (2, H, hd)
CONTENT_BIAS, DISTANCE_BIAS, DISTANCE_KERNEL, SEGMENT_BIAS, SEGMENT_EMBED = (
    BLOCK + "attention." + p
    for p in ("content_bias", "position_bias", "position_kernel", "segment_bias", "segment_embed")
)

"""HF text types archzoo refuses, each with the mechanism it lacks (the coverage report's
`refused` rows and from_hf's error; issue 33 lists them). A type not named here and not
converted is reported as "not examined"."""

from __future__ import annotations

MULTIPLIERS = "embedding, residual, attention and logit multipliers"

MISSING_MECHANISMS = {
    "afmoe": (
        "a sliding window on its gated attention layers (gated_mha has the sigmoid gate from its "
        "own projection, gate_source: own_projection, but no window; `local` has no gate); no "
        "converter yet"
    ),
    "axk2": (
        "DeepSeek Sparse Attention's indexer (top-index_topk keys per query), MLA with an "
        "output gate from the query latent, and RMSNorms with a low-rank sigmoid gate"
    ),
    "bailing_hybrid": (
        "Kimi Delta Attention's bounded forget gate (kda_safe_gate) and MLA with a per-head "
        "sigmoid output gate"
    ),
    "beam": (
        "depth-scaled residual adds (x sqrt((n-1)/n) + f(x) / sqrt(n) by sublayer index) and "
        "scalable-softmax query scaling on NoPE layers"
    ),
    "blt": (
        "byte patching by an entropy model, hashed byte n-gram embeddings and cross-attention "
        "between byte and patch stacks"
    ),
    "canine": "hashed character embeddings with strided-convolution downsampling and upsampling",
    "cpmant": (
        "a bucketed relative bias over segment pairs (CPM-Ant's segment position bias) and "
        "prompt-token embeddings"
    ),
    "deepseek_v32": (
        "DeepSeek Sparse Attention's indexer (the top-index_topk keys per query; dense only up "
        "to index_topk tokens)"
    ),
    "deepseek_v4": (
        "hyper-connections (several residual streams mixed per layer), compressed sparse "
        "attention (key compressors and an indexer) and a hash router"
    ),
    "doge": (
        "dynamic mask attention (a learned per-key bias from the values, top-k kept), learned "
        "per-channel residual weights and product-key retrieval experts"
    ),
    "dory": (
        "nGPT's unit-sphere layers (L2 norms, residuals interpolated at learned per-channel "
        "rates, learned query and logit scales) and a block of layers looped n_recurrent_loops "
        "times"
    ),
    "dots3_note_text": (
        "DeepSeek Sparse Attention's indexer, MLA with a per-head sigmoid output gate, latent "
        "scales and a norm on the rotary key"
    ),
    "encoder-decoder": "an encoder-decoder assembled from two separately configured model types",
    "fnet": "Fourier-transform token mixing in place of attention",
    "gemma3n_text": (
        "AltUp's predicted streams, LAuReL residuals, per-layer input embeddings, key/value "
        "sharing across layers and activation sparsity"
    ),
    "gemma4_text": (
        "a weightless RMSNorm on values, per-layer input embeddings, keys used as values on "
        "global layers (attention_k_eq_v), key/value sharing across layers and a per-layer "
        "output scalar"
    ),
    "gemma4_unified_text": (
        "a weightless RMSNorm on values, keys used as values on global layers "
        "(attention_k_eq_v), key/value sharing across layers and a per-layer output scalar"
    ),
    "glm_moe_dsa": "DeepSeek Sparse Attention's indexer, its top-k shared by the following layers",
    "hrm_text": (
        "the hierarchical reasoning model's two stacks cycled H_cycles x L_cycles times over "
        "shared weights, with a prefix-LM mask"
    ),
    "hy_v4": (
        "hyper-connections (several residual streams mixed per layer) and DeepSeek Sparse "
        "Attention's indexer"
    ),
    "inkling2_loop_text": (
        "a hidden-state-conditioned relative position bias, attention residuals over blocks of "
        "layers, softcapped expert projections and layers looped with a low-rank gate"
    ),
    "inkling2_text": (
        "a hidden-state-conditioned relative position bias, attention residuals over blocks of "
        "layers and softcapped expert projections"
    ),
    "inkling_text": (
        "a hidden-state-conditioned relative position bias (per-token mixes of learned bias-by-"
        "distance profiles) with log-scaled attention"
    ),
    "laguna": (
        "a head count per layer (num_attention_heads_per_layer: n_heads is not a per-layer key "
        "and gated_mha has no heads option); its softplus per-head gate from g_proj exists "
        "(gated_mha gate_source: own_projection, gate_activation: softplus, gate_per: head)"
    ),
    "lfm3": (
        "proportional rotary on its global layers (frequencies over the whole head, the upper "
        "ones zero) and a sliding window on its gated layers (gated_mha has none); its sigmoid "
        "per-head gate from g_proj exists (gated_mha gate_source: own_projection, gate_per: head)"
    ),
    "longcat_flash": (
        "LongCat's shortcut-connected MoE layers (two attention and two dense sublayers per layer "
        "beside one MoE branch) with zero-computation (identity) experts"
    ),
    "luke": "entity embeddings and entity-aware self-attention (a query per word/entity pair)",
    "mimo_v2_flash": (
        "GQA attention whose value heads are narrower than its query/key heads (v_head_dim: the "
        "kernels, caches and output projection read a value head width of their own; mha's "
        "value_width is the v projection's input width, not this) with a constant value scale "
        "(attention_value_scale), and twice the key/value heads on its sliding layers"
    ),
    "minimax_m3_vl_text": "a sparse-attention indexer choosing the keys each query attends to",
    "mra": "MRA's multi-resolution (block low-rank) approximation of attention",
    "nystromformer": (
        "Nystrom-approximated attention (segment-mean landmarks, an iterative pseudo-inverse) "
        "with a depthwise convolution over the values"
    ),
    "qwen4_exp_text": (
        "a query-sparse attention indexer, gated residuals, hashed n-gram embeddings and "
        "per-layer embeddings"
    ),
    "recurrent_gemma": "Griffin's RG-LRU recurrent blocks with a temporal convolution",
    "reformer": (
        "LSH attention, chunked local attention, reversible residual layers and axial position "
        "embeddings"
    ),
    "roc_bert": (
        "pronunciation and glyph-shape embeddings concatenated with the token embedding and "
        "projected back (input_pronunciation_ids, input_shape_ids)"
    ),
    "rwkv": "RWKV's time mixing (the WKV recurrence with token shift) and channel mixing",
    "splinter": "the question-aware span selection head (QASS)",
    "xlnet": "two-stream relative attention with segment encodings (XLNet's permutation LM)",
    "xlstm": "xLSTM's mLSTM blocks (matrix memory with exponential input and forget gates)",
    "yoso": "YOSO's LSH-based Bernoulli sampling attention",
    "zaya": (
        "compressed convolutional attention (CCA: q/k mixed by a causal convolution, values with "
        "a delayed recurrent state), an MLP router with a skip expert and learned residual scaling"
    ),
}

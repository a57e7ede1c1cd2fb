"""Published transformers configurations of zoo specs that the converters import (no download:
the sizes are typed from each model card's config.json)."""

from __future__ import annotations

import json

ROPE = {"rope_type": "default"}

# zoo name -> (transformers config class, its keyword arguments)
PUBLISHED: dict[str, tuple[str, dict]] = {
    "mixtral-8x7b": (
        "MixtralConfig",
        dict(
            vocab_size=32000,
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            num_local_experts=8,
            num_experts_per_tok=2,
            max_position_embeddings=32768,
            rms_norm_eps=1e-5,
            rope_parameters={**ROPE, "rope_theta": 1e6},
            tie_word_embeddings=False,
            sliding_window=None,
        ),
    ),
    "qwen2-0.5b": (
        "Qwen2Config",
        dict(
            vocab_size=151936,
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            max_position_embeddings=131072,
            rms_norm_eps=1e-6,
            rope_parameters={**ROPE, "rope_theta": 1e6},
            tie_word_embeddings=True,
        ),
    ),
    "qwen3-0.6b": (
        "Qwen3Config",
        dict(
            vocab_size=151936,
            hidden_size=1024,
            intermediate_size=3072,
            num_hidden_layers=28,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            max_position_embeddings=40960,
            rms_norm_eps=1e-6,
            rope_parameters={**ROPE, "rope_theta": 1e6},
            tie_word_embeddings=True,
        ),
    ),
    "qwen3-30b-a3b": (
        "Qwen3MoeConfig",
        dict(
            vocab_size=151936,
            hidden_size=2048,
            intermediate_size=6144,
            moe_intermediate_size=768,
            num_hidden_layers=48,
            num_attention_heads=32,
            num_key_value_heads=4,
            head_dim=128,
            num_experts=128,
            num_experts_per_tok=8,
            norm_topk_prob=True,
            max_position_embeddings=40960,
            rms_norm_eps=1e-6,
            rope_parameters={**ROPE, "rope_theta": 1e6},
            tie_word_embeddings=False,
            decoder_sparse_step=1,
            mlp_only_layers=[],
        ),
    ),
    "olmo2-1b": (
        "Olmo2Config",
        dict(
            vocab_size=100352,
            hidden_size=2048,
            intermediate_size=8192,
            num_hidden_layers=16,
            num_attention_heads=16,
            num_key_value_heads=16,
            max_position_embeddings=4096,
            rms_norm_eps=1e-6,
            rope_parameters={**ROPE, "rope_theta": 500000.0},
            tie_word_embeddings=False,
        ),
    ),
    "gemma-2b": (
        "GemmaConfig",
        dict(
            vocab_size=256000,
            hidden_size=2048,
            intermediate_size=16384,
            num_hidden_layers=18,
            num_attention_heads=8,
            num_key_value_heads=1,
            head_dim=256,
            max_position_embeddings=8192,
            rms_norm_eps=1e-6,
            rope_parameters={**ROPE, "rope_theta": 10000.0},
            tie_word_embeddings=True,
        ),
    ),
    "gemma2-2b": (
        "Gemma2Config",
        dict(
            vocab_size=256000,
            hidden_size=2304,
            intermediate_size=9216,
            num_hidden_layers=26,
            num_attention_heads=8,
            num_key_value_heads=4,
            head_dim=256,
            max_position_embeddings=8192,
            rms_norm_eps=1e-6,
            rope_parameters={**ROPE, "rope_theta": 10000.0},
            tie_word_embeddings=True,
            query_pre_attn_scalar=256,
            sliding_window=4096,
            attn_logit_softcapping=50.0,
            final_logit_softcapping=30.0,
        ),
    ),
    "gemma3-1b": (
        "Gemma3TextConfig",
        dict(
            vocab_size=262144,
            hidden_size=1152,
            intermediate_size=6912,
            num_hidden_layers=26,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=256,
            max_position_embeddings=32768,
            rms_norm_eps=1e-6,
            rope_parameters={
                "full_attention": {**ROPE, "rope_theta": 1_000_000.0},
                "sliding_attention": {**ROPE, "rope_theta": 10_000.0},
            },
            tie_word_embeddings=True,
            query_pre_attn_scalar=256,
            sliding_window=512,
            sliding_window_pattern=6,
        ),
    ),
    "smollm3-3b": (
        "SmolLM3Config",
        dict(
            vocab_size=128256,
            hidden_size=2048,
            intermediate_size=11008,
            num_hidden_layers=36,
            num_attention_heads=16,
            num_key_value_heads=4,
            max_position_embeddings=65536,
            rms_norm_eps=1e-6,
            rope_parameters={**ROPE, "rope_theta": 5000000.0},
            tie_word_embeddings=True,
            no_rope_layer_interval=4,
        ),
    ),
    "falcon-7b": (
        "FalconConfig",
        dict(
            vocab_size=65024,
            hidden_size=4544,
            num_hidden_layers=32,
            num_attention_heads=71,
            new_decoder_architecture=False,
            multi_query=True,
            parallel_attn=True,
            alibi=False,
            bias=False,
            layer_norm_epsilon=1e-5,
            max_position_embeddings=2048,
            rope_parameters={**ROPE, "rope_theta": 10000.0},
            tie_word_embeddings=True,
            bos_token_id=11,
            eos_token_id=11,
        ),
    ),
    "opt-125m": (
        "OPTConfig",
        dict(
            vocab_size=50272,
            hidden_size=768,
            num_hidden_layers=12,
            num_attention_heads=12,
            ffn_dim=3072,
            max_position_embeddings=2048,
            do_layer_norm_before=True,
            word_embed_proj_dim=768,
            activation_function="relu",
            dropout=0.1,
            attention_dropout=0.0,
            pad_token_id=1,
            bos_token_id=2,
            eos_token_id=2,
            tie_word_embeddings=True,
        ),
    ),
    "starcoder2-3b": (
        "Starcoder2Config",
        dict(
            vocab_size=49152,
            hidden_size=3072,
            intermediate_size=12288,
            num_hidden_layers=30,
            num_attention_heads=24,
            num_key_value_heads=2,
            max_position_embeddings=16384,
            norm_epsilon=1e-5,
            rope_parameters={**ROPE, "rope_theta": 999999.4420358813},
            sliding_window=4096,
            use_bias=True,
            hidden_act="gelu_pytorch_tanh",
            attention_dropout=0.1,
            residual_dropout=0.1,
            embedding_dropout=0.1,
            tie_word_embeddings=True,
            bos_token_id=0,
            eos_token_id=0,
        ),
    ),
    "phi-3-mini": (
        "Phi3Config",
        dict(
            vocab_size=32064,
            hidden_size=3072,
            intermediate_size=8192,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=32,
            max_position_embeddings=4096,
            original_max_position_embeddings=4096,
            rms_norm_eps=1e-5,
            rope_parameters={**ROPE, "rope_theta": 10000.0},
            sliding_window=2047,
            tie_word_embeddings=False,
            bos_token_id=1,
            eos_token_id=32000,
            pad_token_id=32000,
        ),
    ),
}

# encoder-decoders (the values of each model card's config.json)
BART_SIZES = dict(max_position_embeddings=1024, scale_embedding=True)
PUBLISHED.update(
    {
        "marian-en-de": (
            "MarianConfig",
            dict(
                vocab_size=58101,
                decoder_vocab_size=58101,
                d_model=512,
                encoder_layers=6,
                decoder_layers=6,
                encoder_attention_heads=8,
                decoder_attention_heads=8,
                encoder_ffn_dim=2048,
                decoder_ffn_dim=2048,
                activation_function="swish",
                scale_embedding=True,
                share_encoder_decoder_embeddings=True,
                max_position_embeddings=512,
                pad_token_id=58100,
                decoder_start_token_id=58100,
                bos_token_id=0,
                eos_token_id=0,
                attention_dropout=0.0,
                activation_dropout=0.0,
            ),
        ),
        "pegasus-large": (
            "PegasusConfig",
            dict(
                BART_SIZES,
                vocab_size=96103,
                d_model=1024,
                encoder_layers=16,
                decoder_layers=16,
                encoder_attention_heads=16,
                decoder_attention_heads=16,
                encoder_ffn_dim=4096,
                decoder_ffn_dim=4096,
                activation_function="relu",
                pad_token_id=0,
                eos_token_id=1,
                decoder_start_token_id=0,
                attention_dropout=0.1,
                activation_dropout=0.1,
            ),
        ),
        "mbart-large-50": (
            "MBartConfig",
            dict(
                BART_SIZES,
                vocab_size=250054,
                d_model=1024,
                encoder_layers=12,
                decoder_layers=12,
                encoder_attention_heads=16,
                decoder_attention_heads=16,
                encoder_ffn_dim=4096,
                decoder_ffn_dim=4096,
                activation_function="gelu",
                pad_token_id=1,
                bos_token_id=0,
                eos_token_id=2,
                decoder_start_token_id=2,
                attention_dropout=0.0,
                activation_dropout=0.0,
            ),
        ),
        "m2m100-418m": (
            "M2M100Config",
            dict(
                BART_SIZES,
                vocab_size=128112,
                d_model=1024,
                encoder_layers=12,
                decoder_layers=12,
                encoder_attention_heads=16,
                decoder_attention_heads=16,
                encoder_ffn_dim=4096,
                decoder_ffn_dim=4096,
                activation_function="relu",
                pad_token_id=1,
                bos_token_id=0,
                eos_token_id=2,
                decoder_start_token_id=2,
                attention_dropout=0.1,
                activation_dropout=0.0,
            ),
        ),
    }
)

CAUSAL_LM = {
    "MixtralConfig": "MixtralForCausalLM",
    "Qwen2Config": "Qwen2ForCausalLM",
    "Qwen3Config": "Qwen3ForCausalLM",
    "Qwen3MoeConfig": "Qwen3MoeForCausalLM",
    "Olmo2Config": "Olmo2ForCausalLM",
    "GemmaConfig": "GemmaForCausalLM",
    "Gemma2Config": "Gemma2ForCausalLM",
    "Gemma3TextConfig": "Gemma3ForCausalLM",
    "SmolLM3Config": "SmolLM3ForCausalLM",
    "FalconConfig": "FalconForCausalLM",
    "Phi3Config": "Phi3ForCausalLM",
    "OPTConfig": "OPTForCausalLM",
    "MarianConfig": "MarianMTModel",
    "PegasusConfig": "PegasusForConditionalGeneration",
    "MBartConfig": "MBartForConditionalGeneration",
    "M2M100Config": "M2M100ForConditionalGeneration",
    "Starcoder2Config": "Starcoder2ForCausalLM",
}

# GPT-OSS (openai/gpt-oss-20b's config.json without its MXFP4 quantization_config)
PUBLISHED["gpt-oss-20b"] = (
    "GptOssConfig",
    dict(
        vocab_size=201088,
        hidden_size=2880,
        intermediate_size=2880,
        num_hidden_layers=24,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        num_local_experts=32,
        num_experts_per_tok=4,
        sliding_window=128,
        max_position_embeddings=131072,
        rms_norm_eps=1e-5,
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 150000.0,
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4096,
        },
        swiglu_limit=7.0,
        attention_bias=True,
        tie_word_embeddings=False,
        router_aux_loss_coef=0.9,
        output_router_logits=False,
        pad_token_id=199999,
        eos_token_id=200002,
    ),
)
CAUSAL_LM["GptOssConfig"] = "GptOssForCausalLM"

# GPT-J 6B (EleutherAI/gpt-j-6b's config.json)
PUBLISHED["gpt-j-6b"] = (
    "GPTJConfig",
    dict(
        vocab_size=50400,
        n_embd=4096,
        n_layer=28,
        n_head=16,
        rotary_dim=64,
        n_positions=2048,
        activation_function="gelu_new",
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        layer_norm_epsilon=1e-5,
        tie_word_embeddings=False,
        bos_token_id=50256,
        eos_token_id=50256,
    ),
)
CAUSAL_LM["GPTJConfig"] = "GPTJForCausalLM"

# DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json; MTP layers are not part of the model)
PUBLISHED["deepseek-v3"] = (
    "DeepseekV3Config",
    dict(
        vocab_size=129280,
        hidden_size=7168,
        intermediate_size=18432,
        moe_intermediate_size=2048,
        num_hidden_layers=61,
        num_attention_heads=128,
        num_key_value_heads=128,
        n_shared_experts=1,
        n_routed_experts=256,
        routed_scaling_factor=2.5,
        kv_lora_rank=512,
        q_lora_rank=1536,
        qk_rope_head_dim=64,
        v_head_dim=128,
        qk_nope_head_dim=128,
        n_group=8,
        topk_group=4,
        num_experts_per_tok=8,
        first_k_dense_replace=3,
        norm_topk_prob=True,
        max_position_embeddings=163840,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=1,
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
    ),
)
CAUSAL_LM["DeepseekV3Config"] = "DeepseekV3ForCausalLM"
# CTRL (Salesforce/ctrl's config.json; positions are a fixed table, n_positions only bounds them)
PUBLISHED["ctrl"] = (
    "CTRLConfig",
    dict(
        vocab_size=246534,
        n_positions=50000,
        n_embd=1280,
        dff=8192,
        n_layer=48,
        n_head=16,
        resid_pdrop=0.1,
        embd_pdrop=0.1,
        layer_norm_epsilon=1e-6,
    ),
)
CAUSAL_LM["CTRLConfig"] = "CTRLLMHeadModel"

# StarCoderBase 1B (bigcode/starcoderbase-1b config.json)
PUBLISHED["starcoderbase-1b"] = (
    "GPTBigCodeConfig",
    dict(
        vocab_size=49152,
        n_embd=2048,
        n_layer=24,
        n_head=16,
        n_inner=8192,
        n_positions=8192,
        multi_query=True,
        activation_function="gelu_pytorch_tanh",
        layer_norm_epsilon=1e-5,
        bos_token_id=0,
        eos_token_id=0,
    ),
)
CAUSAL_LM["GPTBigCodeConfig"] = "GPTBigCodeForCausalLM"

# StableLM 2 1.6B (stabilityai/stablelm-2-1_6b config.json)
PUBLISHED["stablelm-2-1.6b"] = (
    "StableLmConfig",
    dict(
        vocab_size=100352,
        hidden_size=2048,
        intermediate_size=5632,
        num_hidden_layers=24,
        num_attention_heads=32,
        num_key_value_heads=32,
        max_position_embeddings=4096,
        partial_rotary_factor=0.25,
        rope_parameters={**ROPE, "rope_theta": 10000.0},
        use_qkv_bias=True,
        qk_layernorm=False,
        use_parallel_residual=False,
        layer_norm_eps=1e-5,
        tie_word_embeddings=False,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        bos_token_id=100257,
        eos_token_id=100257,
    ),
)
CAUSAL_LM["StableLmConfig"] = "StableLmForCausalLM"

# MPT-7B (mosaicml/mpt-7b config.json)
PUBLISHED["mpt-7b"] = (
    "MptConfig",
    dict(
        vocab_size=50432,
        d_model=4096,
        n_layers=32,
        n_heads=32,
        expansion_ratio=4,
        max_seq_len=2048,
        no_bias=True,
        layer_norm_epsilon=1e-5,
        attn_config={"alibi": True, "alibi_bias_max": 8},
        resid_pdrop=0.0,
        emb_pdrop=0.0,
        eos_token_id=0,
    ),
)
CAUSAL_LM["MptConfig"] = "MptForCausalLM"

# BigBird-RoBERTa base (google/bigbird-roberta-base config.json), as its base model with pooler
PUBLISHED["bigbird-roberta-base"] = (
    "BigBirdConfig",
    dict(
        vocab_size=50358,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu_new",
        max_position_embeddings=4096,
        type_vocab_size=2,
        attention_type="block_sparse",
        block_size=64,
        num_random_blocks=3,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        sep_token_id=66,
        architectures=["BigBirdModel"],
    ),
)
CAUSAL_LM["BigBirdConfig"] = "BigBirdModel"

# ModernBERT base: answerdotai/ModernBERT-base's config.json, its architecture keys as written
PUBLISHED["modernbert-base"] = (
    "ModernBertConfig",
    json.loads(
        """{"vocab_size": 50368, "hidden_size": 768, "intermediate_size": 1152,
        "num_hidden_layers": 22, "num_attention_heads": 12, "max_position_embeddings": 8192,
        "global_attn_every_n_layers": 3, "local_attention": 128, "global_rope_theta": 160000.0,
        "local_rope_theta": 10000.0, "norm_eps": 1e-05, "norm_bias": false, "attention_bias": false,
        "mlp_bias": false, "classifier_bias": false, "decoder_bias": true,
        "hidden_activation": "gelu", "classifier_activation": "gelu", "classifier_pooling": "mean",
        "tie_word_embeddings": true, "pad_token_id": 50283, "bos_token_id": 50281,
        "eos_token_id": 50282, "cls_token_id": 50281, "sep_token_id": 50282}"""
    ),
)
CAUSAL_LM["ModernBertConfig"] = "ModernBertForMaskedLM"  # the class whose count is checked

# Longformer base (allenai/longformer-base-4096 config.json): its MLM model
PUBLISHED["longformer-base-4096"] = (
    "LongformerConfig",
    dict(
        vocab_size=50265,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=4098,
        type_vocab_size=1,
        attention_window=[512] * 12,
        layer_norm_eps=1e-5,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        sep_token_id=2,
    ),
)
CAUSAL_LM["LongformerConfig"] = "LongformerForMaskedLM"

# XLM MLM English 2048: FacebookAI/xlm-mlm-en-2048's config.json, its architecture keys as written
PUBLISHED["xlm-mlm-en-2048"] = (
    "XLMConfig",
    json.loads(
        """{"vocab_size": 30145, "emb_dim": 2048, "n_layers": 12, "n_heads": 16,
        "max_position_embeddings": 512, "dropout": 0.1, "attention_dropout": 0.1,
        "gelu_activation": true, "sinusoidal_embeddings": false, "causal": false, "asm": false,
        "n_langs": 1, "use_lang_emb": true, "layer_norm_eps": 1e-12, "pad_token_id": 2,
        "bos_token_id": 0, "eos_token_id": 1, "summary_type": "first", "summary_use_proj": true}"""
    ),
)
CAUSAL_LM["XLMConfig"] = "XLMWithLMHeadModel"

# BigBird-Pegasus large arXiv (google/bigbird-pegasus-large-arxiv config.json): Pegasus
# large's sizes over 4096 positions
PUBLISHED["bigbird-pegasus-large-arxiv"] = (
    "BigBirdPegasusConfig",
    dict(
        PUBLISHED["pegasus-large"][1],
        max_position_embeddings=4096,
        activation_function="gelu_new",
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        attention_type="block_sparse",
        block_size=64,
        num_random_blocks=3,
        use_bias=False,
        bos_token_id=2,
        decoder_start_token_id=2,
    ),
)
CAUSAL_LM["BigBirdPegasusConfig"] = "BigBirdPegasusForConditionalGeneration"

# DeBERTa base sizes shared by v1 and v3 (microsoft/deberta-base, microsoft/deberta-v3-base)
_DEBERTA = {
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "max_position_embeddings": 512,
    "relative_attention": True,
    "max_relative_positions": -1,
    "position_biased_input": False,
    "type_vocab_size": 0,
    "layer_norm_eps": 1e-7,
    "pad_token_id": 0,
}
PUBLISHED["deberta-v3-base"] = (
    "DebertaV2Config",
    {
        **_DEBERTA,
        "vocab_size": 128100,
        "position_buckets": 256,
        "norm_rel_ebd": "layer_norm",
        "share_att_key": True,
        "pos_att_type": ["p2c", "c2p"],
    },
)
CAUSAL_LM["DebertaV2Config"] = "DebertaV2ForMaskedLM"
PUBLISHED["deberta-base"] = (
    "DebertaConfig",
    {**_DEBERTA, "vocab_size": 50265, "pos_att_type": "c2p|p2c"},
)
CAUSAL_LM["DebertaConfig"] = "DebertaForMaskedLM"

# LongT5-TGlobal base: google/long-t5-tglobal-base's config.json, its architecture keys as
# written (transformers 5 ties the head whatever tie_word_embeddings says; it only decides
# the d_model^-0.5 rescale)
PUBLISHED["long-t5-tglobal-base"] = (
    "LongT5Config",
    json.loads(
        """{"vocab_size": 32128, "d_model": 768, "d_kv": 64, "d_ff": 2048, "num_layers": 12,
        "num_decoder_layers": 12, "num_heads": 12, "local_radius": 127, "global_block_size": 16,
        "encoder_attention_type": "transient-global", "feed_forward_proj": "gated-gelu",
        "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
        "layer_norm_epsilon": 1e-06, "dropout_rate": 0.1, "n_positions": 4096,
        "tie_word_embeddings": false, "pad_token_id": 0, "eos_token_id": 1,
        "decoder_start_token_id": 0}"""
    ),
)
CAUSAL_LM["LongT5Config"] = "LongT5ForConditionalGeneration"

# UMT5 small: google/umt5-small's config.json, its architecture keys as written (transformers 5
# ties UMT5's head whatever tie_word_embeddings says; false only turns off the rescale)
PUBLISHED["umt5-small"] = (
    "UMT5Config",
    json.loads(
        """{"vocab_size": 256384, "d_model": 512, "d_kv": 64, "d_ff": 1024, "num_layers": 8,
        "num_decoder_layers": 8, "num_heads": 6, "relative_attention_num_buckets": 32,
        "relative_attention_max_distance": 128, "feed_forward_proj": "gated-gelu",
        "layer_norm_epsilon": 1e-06, "dropout_rate": 0.1, "tie_word_embeddings": false,
        "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0,
        "scalable_attention": true}"""
    ),
)
CAUSAL_LM["UMT5Config"] = "UMT5ForConditionalGeneration"

# Aliases (plugins/converters/aliases.py): each model card's config.json, architecture keys
PUBLISHED["camembert-base"] = (  # almanach/camembert-base
    "CamembertConfig",
    dict(
        vocab_size=32005,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        max_position_embeddings=514,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        pad_token_id=1,
        bos_token_id=5,
        eos_token_id=6,
    ),
)
CAUSAL_LM["CamembertConfig"] = "CamembertForMaskedLM"
PUBLISHED["data2vec-text-base"] = (  # facebook/data2vec-text-base
    "Data2VecTextConfig",
    dict(
        vocab_size=50265,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        max_position_embeddings=514,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    ),
)
CAUSAL_LM["Data2VecTextConfig"] = "Data2VecTextForMaskedLM"
PUBLISHED["ministral-8b"] = (  # mistralai/Ministral-8B-Instruct-2410
    "MinistralConfig",
    dict(
        vocab_size=131072,
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=32768,
        rms_norm_eps=1e-5,
        rope_parameters={**ROPE, "rope_theta": 1e8},
        sliding_window=32768,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
    ),
)
CAUSAL_LM["MinistralConfig"] = "MinistralForCausalLM"
PUBLISHED["seed-oss-36b"] = (  # ByteDance-Seed/Seed-OSS-36B-Instruct
    "SeedOssConfig",
    dict(
        vocab_size=155136,
        hidden_size=5120,
        intermediate_size=27648,
        num_hidden_layers=64,
        num_attention_heads=80,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=524288,
        rms_norm_eps=1e-6,
        rope_parameters={**ROPE, "rope_theta": 1e7},
        attention_bias=True,
        attention_out_bias=False,
        attention_dropout=0.1,
        residual_dropout=0.1,
        tie_word_embeddings=False,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    ),
)
CAUSAL_LM["SeedOssConfig"] = "SeedOssForCausalLM"
PUBLISHED["mt5-small"] = (  # google/mt5-small (transformers 5 ties its head: MT5Config)
    "MT5Config",
    dict(
        vocab_size=250112,
        d_model=512,
        d_kv=64,
        d_ff=1024,
        num_layers=8,
        num_decoder_layers=8,
        num_heads=6,
        relative_attention_num_buckets=32,
        feed_forward_proj="gated-gelu",
        layer_norm_epsilon=1e-6,
        dropout_rate=0.1,
        tie_word_embeddings=False,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    ),
)
CAUSAL_LM["MT5Config"] = "MT5ForConditionalGeneration"
PUBLISHED["plbart-base"] = (  # uclanlp/plbart-base
    "PLBartConfig",
    dict(
        BART_SIZES,
        vocab_size=50005,
        d_model=768,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=12,
        decoder_attention_heads=12,
        encoder_ffn_dim=3072,
        decoder_ffn_dim=3072,
        activation_function="gelu",
        dropout=0.1,
        attention_dropout=0.1,
        activation_dropout=0.0,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    ),
)
CAUSAL_LM["PLBartConfig"] = "PLBartForConditionalGeneration"
PUBLISHED["mvp"] = (  # RUCAIBox/mvp
    "MvpConfig",
    dict(
        vocab_size=50267,
        max_position_embeddings=1024,
        d_model=1024,
        encoder_layers=12,
        decoder_layers=12,
        encoder_attention_heads=16,
        decoder_attention_heads=16,
        encoder_ffn_dim=4096,
        decoder_ffn_dim=4096,
        activation_function="gelu",
        scale_embedding=False,
        dropout=0.1,
        attention_dropout=0.1,
        activation_dropout=0.1,
        use_prompt=False,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
    ),
)
CAUSAL_LM["MvpConfig"] = "MvpForConditionalGeneration"
PUBLISHED["flaubert-base-cased"] = (  # flaubert/flaubert_base_cased
    "FlaubertConfig",
    dict(
        vocab_size=68729,
        emb_dim=768,
        n_layers=12,
        n_heads=12,
        max_position_embeddings=512,
        dropout=0.1,
        attention_dropout=0.1,
        gelu_activation=True,
        n_langs=1,
        pre_norm=False,
        pad_token_id=2,
        bos_token_id=0,
        eos_token_id=1,
    ),
)
CAUSAL_LM["FlaubertConfig"] = "FlaubertWithLMHeadModel"
PUBLISHED["internlm3-8b"] = (  # internlm/internlm3-8b-instruct (runs as LlamaForCausalLM)
    "InternLM3Config",
    dict(
        vocab_size=128512,
        hidden_size=4096,
        intermediate_size=10240,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=2,
        head_dim=128,
        max_position_embeddings=32768,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "dynamic", "rope_theta": 5e7, "factor": 6.0},
        qkv_bias=False,
        bias=False,
        tie_word_embeddings=False,
        pad_token_id=2,
        bos_token_id=1,
        eos_token_id=2,
    ),
)
CAUSAL_LM["InternLM3Config"] = "LlamaForCausalLM"
PUBLISHED["iquest-coder-v1-40b"] = (  # IQuestCoderConfig's defaults (IQuest-Coder-V1-40B)
    "IQuestCoderConfig",
    {},
)
CAUSAL_LM["IQuestCoderConfig"] = "LlamaForCausalLM"  # transformers runs it with Llama's classes
PUBLISHED["flexolmo-7x7b"] = ("FlexOlmoConfig", {})  # its defaults: allenai/FlexOlmo-7x7B-1T
CAUSAL_LM["FlexOlmoConfig"] = "FlexOlmoForCausalLM"
PUBLISHED["exaone-moe-28b"] = ("ExaoneMoeConfig", {})  # its defaults (not K-EXAONE-236B's size)
CAUSAL_LM["ExaoneMoeConfig"] = "ExaoneMoeForCausalLM"
PUBLISHED["cwm-32b"] = ("CwmConfig", {})  # its defaults: facebook/cwm
CAUSAL_LM["CwmConfig"] = "CwmForCausalLM"
PUBLISHED["aria-text-18b"] = ("AriaTextConfig", {})  # its defaults (not rhymes-ai/Aria's size)
CAUSAL_LM["AriaTextConfig"] = "AriaTextForCausalLM"
PUBLISHED["hy3-295b"] = ("HYV3Config", {})  # its defaults: tencent/Hy3-preview
CAUSAL_LM["HYV3Config"] = "HYV3ForCausalLM"
PUBLISHED["granite-swash-2b"] = ("GraniteSWAConfig", {})  # its defaults: granite-swash-2b
CAUSAL_LM["GraniteSWAConfig"] = "GraniteSWAForCausalLM"
PUBLISHED["granitemoe-swa-37b"] = ("GraniteMoeSWAConfig", {})  # its defaults (not swash-3b's)
CAUSAL_LM["GraniteMoeSWAConfig"] = "GraniteMoeSWAForCausalLM"
PUBLISHED["flint-40b"] = ("FlintConfig", {})  # its defaults: RecursiveSI/flint
CAUSAL_LM["FlintConfig"] = "FlintForCausalLM"
PUBLISHED["cohere2-moe-190b"] = ("Cohere2MoeConfig", {})  # its defaults
CAUSAL_LM["Cohere2MoeConfig"] = "Cohere2MoeForCausalLM"
PUBLISHED["cohere-compass-text-35b"] = (  # its defaults, with a rotary entry for its layers
    "CohereCompassTextConfig",
    dict(rope_parameters={"full_attention": {**ROPE, "rope_theta": 10000.0}}),
)
CAUSAL_LM["CohereCompassTextConfig"] = "CohereCompassForCausalLM"
PUBLISHED["helium-2b"] = (  # kyutai/helium-1-preview-2b (HeliumConfig's defaults)
    "HeliumConfig",
    dict(
        vocab_size=48000,
        hidden_size=2560,
        intermediate_size=7040,
        num_hidden_layers=24,
        num_attention_heads=20,
        num_key_value_heads=20,
        head_dim=128,
        max_position_embeddings=4096,
        rms_norm_eps=1e-8,
        rope_parameters={**ROPE, "rope_theta": 1e5},
        tie_word_embeddings=False,
        pad_token_id=3,
        bos_token_id=1,
        eos_token_id=2,
    ),
)
CAUSAL_LM["HeliumConfig"] = "HeliumForCausalLM"
PUBLISHED["ernie-4.5-0.3b"] = (  # baidu/ERNIE-4.5-0.3B-PT
    "Ernie4_5Config",
    dict(
        vocab_size=103424,
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=18,
        num_attention_heads=16,
        num_key_value_heads=2,
        head_dim=128,
        max_position_embeddings=131072,
        rms_norm_eps=1e-5,
        rope_parameters={**ROPE, "rope_theta": 5e5},
        use_bias=False,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    ),
)
CAUSAL_LM["Ernie4_5Config"] = "Ernie4_5ForCausalLM"
# arcee-ai/AFM-4.5B-Base's sizes (4.62B parameters; the card says 4.6B); its long-context
# rotary scaling is left out: those values were not checked against the published file
PUBLISHED["afm-4.5b"] = (
    "ArceeConfig",
    dict(
        vocab_size=128004,
        hidden_size=2560,
        intermediate_size=18432,
        num_hidden_layers=36,
        num_attention_heads=20,
        num_key_value_heads=4,
        head_dim=128,
        hidden_act="relu2",
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
        rope_parameters={**ROPE, "rope_theta": 10000.0},
        tie_word_embeddings=False,
        bos_token_id=128000,
        eos_token_id=128001,
    ),
)
CAUSAL_LM["ArceeConfig"] = "ArceeForCausalLM"
PUBLISHED["minitron-4b"] = (  # nvidia/Minitron-4B-Base
    "NemotronConfig",
    dict(
        vocab_size=256000,
        hidden_size=3072,
        intermediate_size=9216,
        num_hidden_layers=32,
        num_attention_heads=24,
        num_key_value_heads=8,
        head_dim=128,
        hidden_act="relu2",
        max_position_embeddings=4096,
        norm_eps=1e-5,
        rope_parameters={**ROPE, "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        tie_word_embeddings=False,
        bos_token_id=2,
        eos_token_id=3,
    ),
)
CAUSAL_LM["NemotronConfig"] = "NemotronForCausalLM"
PUBLISHED["olmo-1b"] = (  # allenai/OLMo-1B-hf
    "OlmoConfig",
    dict(
        vocab_size=50304,
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=16,
        num_key_value_heads=16,
        max_position_embeddings=2048,
        rope_parameters={**ROPE, "rope_theta": 10000.0},
        clip_qkv=None,
        tie_word_embeddings=True,
        pad_token_id=1,
        eos_token_id=50279,
    ),
)
CAUSAL_LM["OlmoConfig"] = "OlmoForCausalLM"
PUBLISHED["phi-2"] = (  # microsoft/phi-2
    "PhiConfig",
    dict(
        vocab_size=51200,
        hidden_size=2560,
        intermediate_size=10240,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        hidden_act="gelu_new",
        max_position_embeddings=2048,
        layer_norm_eps=1e-5,
        rope_parameters={**ROPE, "rope_theta": 10000.0, "partial_rotary_factor": 0.4},
        qk_layernorm=False,
        tie_word_embeddings=False,
        bos_token_id=50256,
        eos_token_id=50256,
    ),
)
CAUSAL_LM["PhiConfig"] = "PhiForCausalLM"
_GLM_4_9B = dict(  # THUDM/glm-4-9b-chat-hf (GlmConfig's defaults)
    vocab_size=151552,
    hidden_size=4096,
    intermediate_size=13696,
    num_hidden_layers=40,
    num_attention_heads=32,
    num_key_value_heads=2,
    head_dim=128,
    attention_bias=True,
    tie_word_embeddings=False,
    pad_token_id=151329,
    eos_token_id=151329,
)
PUBLISHED["glm-4-9b"] = (
    "GlmConfig",
    dict(
        _GLM_4_9B,
        max_position_embeddings=131072,
        rms_norm_eps=1.5625e-07,
        rope_parameters={**ROPE, "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    ),
)
CAUSAL_LM["GlmConfig"] = "GlmForCausalLM"
PUBLISHED["glm-4-9b-0414"] = (  # THUDM/GLM-4-9B-0414: glm-4-9b's sizes, sandwich norms
    "Glm4Config",
    dict(
        _GLM_4_9B,
        max_position_embeddings=32768,
        rms_norm_eps=1e-5,
        rope_parameters={**ROPE, "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    ),
)
CAUSAL_LM["Glm4Config"] = "Glm4ForCausalLM"
# Jais2Config's defaults (its docstring's inceptionai/Jais-2-8B-Chat); the layer count is
# LlamaConfig's default 32, which gives 8.08B parameters, as the name says
PUBLISHED["jais-2-8b"] = (
    "Jais2Config",
    dict(
        vocab_size=150272,
        hidden_size=3328,
        intermediate_size=26624,
        num_hidden_layers=32,
        num_attention_heads=26,
        num_key_value_heads=26,
        hidden_act="relu2",
        max_position_embeddings=8192,
        layer_norm_eps=1e-5,
        rope_parameters={**ROPE, "rope_theta": 10000.0},
        attention_bias=True,
        mlp_bias=True,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=150024,
    ),
)
CAUSAL_LM["Jais2Config"] = "Jais2ForCausalLM"
PUBLISHED["lfm2-350m"] = (  # LiquidAI/LFM2-350M
    "Lfm2Config",
    dict(
        vocab_size=65536,
        hidden_size=1024,
        intermediate_size=6656,
        num_hidden_layers=16,
        num_attention_heads=16,
        num_key_value_heads=8,
        max_position_embeddings=128000,
        norm_eps=1e-5,
        full_attn_idxs=[2, 5, 8, 10, 12, 14],
        conv_L_cache=3,
        conv_bias=False,
        block_multiple_of=256,
        block_ffn_dim_multiplier=1.0,
        block_auto_adjust_ff_dim=True,
        rope_parameters={**ROPE, "rope_theta": 1e6},
        tie_word_embeddings=True,
        pad_token_id=0,
    ),
)
CAUSAL_LM["Lfm2Config"] = "Lfm2ForCausalLM"
PUBLISHED["granite-3.0-2b"] = (  # ibm-granite/granite-3.0-2b-base
    "GraniteConfig",
    dict(
        vocab_size=49155,
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=40,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        rope_parameters={**ROPE, "rope_theta": 10000.0},
        embedding_multiplier=12.0,
        residual_multiplier=0.22,
        attention_multiplier=0.015625,
        logits_scaling=8.0,
        attention_dropout=0.1,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=0,
    ),
)
CAUSAL_LM["GraniteConfig"] = "GraniteForCausalLM"
PUBLISHED["mamba-codestral-7b"] = (  # mistralai/Mamba-Codestral-7B-v0.1: Mamba2Config's defaults
    "Mamba2Config",
    dict(
        vocab_size=32768,
        hidden_size=4096,
        num_hidden_layers=64,
        num_heads=128,
        head_dim=64,
        state_size=128,
        n_groups=8,
        expand=2,
        conv_kernel=4,
        use_bias=False,
        use_conv_bias=True,
        layer_norm_epsilon=1e-5,
        chunk_size=256,
        tie_word_embeddings=False,
        pad_token_id=1,
    ),
)
CAUSAL_LM["Mamba2Config"] = "Mamba2ForCausalLM"
PUBLISHED["mamba-2.8b"] = (  # state-spaces/mamba-2.8b-hf, as recalled (MambaConfig's checkpoint)
    "MambaConfig",
    dict(
        vocab_size=50280,
        hidden_size=2560,
        num_hidden_layers=64,
        state_size=16,
        expand=2,
        conv_kernel=4,
        time_step_rank="auto",
        use_bias=False,
        use_conv_bias=True,
        layer_norm_epsilon=1e-5,
        tie_word_embeddings=True,
        pad_token_id=0,
    ),
)
CAUSAL_LM["MambaConfig"] = "MambaForCausalLM"
PUBLISHED["falcon-mamba-7b"] = (  # tiiuae/falcon-mamba-7b, as recalled (its config's checkpoint)
    "FalconMambaConfig",
    dict(
        vocab_size=65024,
        hidden_size=4096,
        num_hidden_layers=64,
        state_size=16,
        expand=2,
        conv_kernel=4,
        time_step_rank=256,
        use_bias=False,
        use_conv_bias=True,
        layer_norm_epsilon=1e-5,
        mixer_rms_eps=1e-6,
        tie_word_embeddings=False,
        pad_token_id=11,
    ),
)
CAUSAL_LM["FalconMambaConfig"] = "FalconMambaForCausalLM"
PUBLISHED["falcon-h1-1.5b-deep"] = (  # tiiuae/Falcon-H1-1.5B-Deep-Instruct, as recalled
    "FalconH1Config",
    dict(
        vocab_size=65537,
        hidden_size=1280,
        intermediate_size=3072,
        num_hidden_layers=66,
        num_attention_heads=6,
        num_key_value_heads=2,
        head_dim=128,
        mamba_d_ssm=1536,
        mamba_n_heads=24,
        mamba_d_head=64,
        mamba_d_state=256,
        mamba_n_groups=1,
        mamba_d_conv=4,
        mamba_chunk_size=256,
        mamba_rms_norm=False,
        max_position_embeddings=131072,
        rms_norm_eps=1e-5,
        rope_parameters={**ROPE, "rope_theta": 1e11},
        tie_word_embeddings=False,
        pad_token_id=0,
    ),
)
CAUSAL_LM["FalconH1Config"] = "FalconH1ForCausalLM"
PUBLISHED["granite-4.0-h-tiny"] = (  # ibm-granite/granite-4.0-h-tiny, as recalled
    "GraniteMoeHybridConfig",
    dict(
        vocab_size=100352,
        hidden_size=1536,
        intermediate_size=512,
        shared_intermediate_size=1024,
        num_hidden_layers=40,
        num_attention_heads=12,
        num_key_value_heads=4,
        layer_types=[
            "full_attention" if i in (5, 15, 25, 35) else "linear_attention" for i in range(40)
        ],
        num_local_experts=64,
        num_experts_per_tok=6,
        mamba_n_heads=48,
        mamba_d_head=64,
        mamba_d_state=128,
        mamba_n_groups=1,
        mamba_expand=2,
        mamba_d_conv=4,
        mamba_chunk_size=256,
        position_embedding_type=None,
        embedding_multiplier=12.0,
        residual_multiplier=0.22,
        attention_multiplier=0.0078125,
        logits_scaling=6.0,
        rms_norm_eps=1e-5,
        max_position_embeddings=131072,
        tie_word_embeddings=True,
        pad_token_id=100256,
    ),
)
CAUSAL_LM["GraniteMoeHybridConfig"] = "GraniteMoeHybridForCausalLM"
PUBLISHED["command-r-35b"] = (  # CohereForAI/c4ai-command-r-v01
    "CohereConfig",
    dict(
        vocab_size=256000,
        hidden_size=8192,
        intermediate_size=22528,
        num_hidden_layers=40,
        num_attention_heads=64,
        num_key_value_heads=64,
        logit_scale=0.0625,
        max_position_embeddings=8192,
        layer_norm_eps=1e-5,
        rope_parameters={**ROPE, "rope_theta": 8e6},
        use_qk_norm=False,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=5,
        eos_token_id=255001,
    ),
)
CAUSAL_LM["CohereConfig"] = "CohereForCausalLM"
PUBLISHED["xlm-roberta-xl"] = (  # facebook/xlm-roberta-xl
    "XLMRobertaXLConfig",
    dict(
        vocab_size=250880,
        hidden_size=2560,
        num_hidden_layers=36,
        num_attention_heads=32,
        intermediate_size=10240,
        hidden_act="gelu",
        max_position_embeddings=514,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    ),
)
CAUSAL_LM["XLMRobertaXLConfig"] = "XLMRobertaXLForMaskedLM"
# nvidia/megatron-bert-uncased-345m as MegatronBertConfig's defaults (its docstring's
# checkpoint; the vocabulary size is the config class's, not checked against the file)
PUBLISHED["megatron-bert-345m"] = (
    "MegatronBertConfig",
    dict(
        vocab_size=29056,
        hidden_size=1024,
        num_hidden_layers=24,
        num_attention_heads=16,
        intermediate_size=4096,
        hidden_act="gelu",
        max_position_embeddings=512,
        type_vocab_size=2,
        layer_norm_eps=1e-12,
        pad_token_id=0,
    ),
)
CAUSAL_LM["MegatronBertConfig"] = "MegatronBertForMaskedLM"
PUBLISHED["jamba-v0.1"] = (  # ai21labs/Jamba-v0.1: JambaConfig's defaults
    "JambaConfig",
    dict(
        vocab_size=65536,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        num_experts=16,
        num_experts_per_tok=2,
        attn_layer_period=8,
        attn_layer_offset=4,
        expert_layer_period=2,
        expert_layer_offset=1,
        mamba_d_state=16,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_dt_rank="auto",
        max_position_embeddings=262144,
        tie_word_embeddings=False,
    ),
)
CAUSAL_LM["JambaConfig"] = "JambaForCausalLM"
PUBLISHED["bamba-9b"] = (  # ibm-ai-platform/Bamba-9B, as recalled (see zoo/bamba-9b.yaml)
    "BambaConfig",
    dict(
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        attn_layer_indices=[9, 18, 27],
        mamba_n_heads=128,
        mamba_d_head=64,
        mamba_n_groups=1,
        mamba_d_state=128,
        mamba_expand=2,
        mamba_d_conv=4,
        mamba_chunk_size=256,
        rms_norm_eps=1e-5,
        max_position_embeddings=262144,
        rope_parameters={**ROPE, "rope_theta": 10000.0},
        tie_word_embeddings=False,
        pad_token_id=0,
    ),
)
CAUSAL_LM["BambaConfig"] = "BambaForCausalLM"
PUBLISHED["exaone-3.0-7.8b"] = (  # LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct (runs as Llama)
    "ExaoneConfig",
    dict(
        vocab_size=102400,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
        rope_parameters={**ROPE, "rope_theta": 500000.0},
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=361,
    ),
)
CAUSAL_LM["ExaoneConfig"] = "LlamaForCausalLM"
PUBLISHED["qwen1.5-moe-a2.7b"] = (  # Qwen/Qwen1.5-MoE-A2.7B
    "Qwen2MoeConfig",
    dict(
        vocab_size=151936,
        hidden_size=2048,
        intermediate_size=5632,
        moe_intermediate_size=1408,
        shared_expert_intermediate_size=5632,
        num_hidden_layers=24,
        num_attention_heads=16,
        num_key_value_heads=16,
        num_experts=60,
        num_experts_per_tok=4,
        norm_topk_prob=False,
        decoder_sparse_step=1,
        max_position_embeddings=8192,
        rms_norm_eps=1e-6,
        rope_parameters={**ROPE, "rope_theta": 1e6},
        tie_word_embeddings=False,
        bos_token_id=151643,
        eos_token_id=151643,
    ),
)
CAUSAL_LM["Qwen2MoeConfig"] = "Qwen2MoeForCausalLM"
PUBLISHED["qwen3-next-80b-a3b"] = (  # Qwen/Qwen3-Next-80B-A3B, as recalled (see the zoo spec)
    "Qwen3NextConfig",
    dict(
        vocab_size=151936,
        hidden_size=2048,
        intermediate_size=5120,
        num_hidden_layers=48,
        num_attention_heads=16,
        num_key_value_heads=2,
        head_dim=256,
        linear_conv_kernel_dim=4,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_num_key_heads=16,
        linear_num_value_heads=32,
        num_experts=512,
        num_experts_per_tok=10,
        moe_intermediate_size=512,
        shared_expert_intermediate_size=512,
        max_position_embeddings=262144,
        rope_parameters={**ROPE, "rope_theta": 1e7, "partial_rotary_factor": 0.25},
        tie_word_embeddings=False,
    ),
)
CAUSAL_LM["Qwen3NextConfig"] = "Qwen3NextForCausalLM"
# GLM-4.7-Flash (zai-org/GLM-4.7-Flash) as Glm4MoeLiteConfig's defaults: 29.9B parameters, as
# the model's 30B-A3B says; the values were not checked against the published file
PUBLISHED["glm-4.7-flash"] = (
    "Glm4MoeLiteConfig",
    dict(
        vocab_size=154880,
        hidden_size=2048,
        intermediate_size=10240,
        moe_intermediate_size=1536,
        num_hidden_layers=47,
        num_attention_heads=20,
        num_key_value_heads=20,
        n_shared_experts=1,
        n_routed_experts=64,
        routed_scaling_factor=1.8,
        kv_lora_rank=512,
        q_lora_rank=768,
        qk_rope_head_dim=64,
        v_head_dim=256,
        qk_nope_head_dim=192,
        n_group=1,
        topk_group=1,
        num_experts_per_tok=4,
        norm_topk_prob=True,
        max_position_embeddings=202752,
        rms_norm_eps=1e-5,
        rope_parameters={**ROPE, "rope_theta": 10000.0},
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=1,
    ),
)
CAUSAL_LM["Glm4MoeLiteConfig"] = "Glm4MoeLiteForCausalLM"
PUBLISHED["lfm2-8b-a1b"] = (  # LiquidAI/LFM2-8B-A1B, as recalled (see the zoo spec)
    "Lfm2MoeConfig",
    dict(
        vocab_size=65536,
        hidden_size=2048,
        intermediate_size=7168,
        moe_intermediate_size=1792,
        num_hidden_layers=24,
        num_attention_heads=32,
        num_key_value_heads=8,
        num_dense_layers=2,
        num_experts=32,
        num_experts_per_tok=4,
        layer_types=[
            "full_attention" if i in (2, 6, 10, 14, 18, 21) else "conv" for i in range(24)
        ],
        max_position_embeddings=128000,
        rope_parameters={**ROPE, "rope_theta": 1e6},
        tie_word_embeddings=True,
    ),
)
CAUSAL_LM["Lfm2MoeConfig"] = "Lfm2MoeForCausalLM"
PUBLISHED["olmoe-1b-7b"] = (  # allenai/OLMoE-1B-7B-0924
    "OlmoeConfig",
    dict(
        vocab_size=50304,
        hidden_size=2048,
        intermediate_size=1024,
        num_hidden_layers=16,
        num_attention_heads=16,
        num_key_value_heads=16,
        num_experts=64,
        num_experts_per_tok=8,
        norm_topk_prob=False,
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
        rope_parameters={**ROPE, "rope_theta": 10000.0},
        clip_qkv=None,
        tie_word_embeddings=False,
        pad_token_id=1,
        eos_token_id=50279,
    ),
)
CAUSAL_LM["OlmoeConfig"] = "OlmoeForCausalLM"
PUBLISHED["olmo-hybrid-7b"] = ("OlmoHybridConfig", {})  # transformers' defaults (see the spec)
CAUSAL_LM["OlmoHybridConfig"] = "OlmoHybridForCausalLM"
# ibm-granite/granite-3.0-1b-a400m-base: its sizes (1.33B, ~0.43B active, as the name says);
# the multipliers are typed as Granite 3.0's (logits_scaling 6), not checked against the file
PUBLISHED["granite-3.0-1b-a400m"] = (
    "GraniteMoeConfig",
    dict(
        vocab_size=49155,
        hidden_size=1024,
        intermediate_size=512,
        num_hidden_layers=24,
        num_attention_heads=16,
        num_key_value_heads=8,
        num_local_experts=32,
        num_experts_per_tok=8,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        rope_parameters={**ROPE, "rope_theta": 10000.0},
        embedding_multiplier=12.0,
        residual_multiplier=0.22,
        attention_multiplier=0.015625,
        logits_scaling=6.0,
        attention_dropout=0.1,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=0,
    ),
)
CAUSAL_LM["GraniteMoeConfig"] = "GraniteMoeForCausalLM"
# google/vaultgemma-1b's sizes (1.04B; as keras-hub's conversion test of its config.json has
# them); the other settings are Gemma 2's defaults, not checked against the published file
PUBLISHED["vaultgemma-1b"] = (
    "VaultGemmaConfig",
    dict(
        vocab_size=256000,
        hidden_size=1152,
        intermediate_size=6912,
        num_hidden_layers=26,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=256,
        query_pre_attn_scalar=256,
        sliding_window=512,
        max_position_embeddings=1024,
        rms_norm_eps=1e-6,
        rope_parameters={**ROPE, "rope_theta": 10000.0},
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=1,
    ),
)
CAUSAL_LM["VaultGemmaConfig"] = "VaultGemmaForCausalLM"
PUBLISHED["qwen3.5-35b-a3b"] = ("Qwen3_5MoeTextConfig", {})  # transformers' defaults
CAUSAL_LM["Qwen3_5MoeTextConfig"] = "Qwen3_5MoeForCausalLM"
PUBLISHED["qwen3.5-9b"] = ("Qwen3_5TextConfig", {})  # transformers' defaults: "Qwen3.5-9B style"
CAUSAL_LM["Qwen3_5TextConfig"] = "Qwen3_5ForCausalLM"
# MiniMax-Text-01 (MiniMaxAI/MiniMax-Text-01-hf, the checkpoint MiniMaxConfig's docstring
# names): 80 layers, a softmax attention layer after every 7 lightning layers, 32 experts;
# the alphas are (2 x 80)^(1/4). Sizes as recalled from its config.json (not checked
# against the file; MiniMaxConfig's own defaults are Mixtral-8x7B's sizes, no MiniMax model).
PUBLISHED["minimax-text-01"] = (
    "MiniMaxConfig",
    dict(
        vocab_size=200064,
        hidden_size=6144,
        intermediate_size=9216,
        num_hidden_layers=80,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=128,
        layer_types=(["linear_attention"] * 7 + ["full_attention"]) * 10,
        block_size=256,
        num_local_experts=32,
        num_experts_per_tok=2,
        full_attn_alpha_factor=3.5565588200778455,
        full_attn_beta_factor=1.0,
        linear_attn_alpha_factor=3.5565588200778455,
        linear_attn_beta_factor=1.0,
        mlp_alpha_factor=3.5565588200778455,
        mlp_beta_factor=1.0,
        max_position_embeddings=10240000,
        rms_norm_eps=1e-5,
        rope_parameters={**ROPE, "rope_theta": 1e7},
        tie_word_embeddings=False,
    ),
)
CAUSAL_LM["MiniMaxConfig"] = "MiniMaxForCausalLM"
# Issue 33's long-tail decoders. Where the config class's defaults are its documented
# checkpoint's sizes, they are used as such ({}: transformers' defaults); the others are
# typed as recalled from the model card's config.json, not checked against the file.
PUBLISHED["hunyuan-7b"] = ("HunYuanDenseV1Config", dict(head_dim=128))  # Hunyuan-7B defaults
CAUSAL_LM["HunYuanDenseV1Config"] = "HunYuanDenseV1ForCausalLM"
PUBLISHED["olmo3-7b"] = ("Olmo3Config", {})  # its docstring's allenai/Olmo-3-7B-Instruct
CAUSAL_LM["Olmo3Config"] = "Olmo3ForCausalLM"
PUBLISHED["codegen-350m-mono"] = (  # Salesforce/codegen-350M-mono, as recalled
    "CodeGenConfig",
    dict(
        vocab_size=51200,
        n_embd=1024,
        n_layer=20,
        n_head=16,
        rotary_dim=32,
        n_positions=2048,
        n_ctx=2048,
        activation_function="gelu_new",
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=50256,
    ),
)
CAUSAL_LM["CodeGenConfig"] = "CodeGenForCausalLM"
PUBLISHED["persimmon-8b"] = ("PersimmonConfig", {})  # its docstring's adept/persimmon-8b-base
CAUSAL_LM["PersimmonConfig"] = "PersimmonForCausalLM"
PUBLISHED["exaone-4.0-32b"] = (  # LGAI-EXAONE/EXAONE-4.0-32B, as recalled
    "Exaone4Config",
    dict(
        vocab_size=102400,
        hidden_size=5120,
        intermediate_size=27392,
        num_hidden_layers=64,
        num_attention_heads=40,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=131072,
        rms_norm_eps=1e-5,
        sliding_window=4096,
        layer_types=[
            "full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(64)
        ],
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 1000000.0,
            "factor": 16.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        tie_word_embeddings=False,
    ),
)
CAUSAL_LM["Exaone4Config"] = "Exaone4ForCausalLM"
PUBLISHED["nanochat-d32"] = (  # karpathy/nanochat-d32, as recalled (depth 32, width 64 x 32)
    "NanoChatConfig",
    dict(
        vocab_size=65536,
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=32,
        num_attention_heads=16,
        num_key_value_heads=16,
        max_position_embeddings=2048,
    ),
)
CAUSAL_LM["NanoChatConfig"] = "NanoChatForCausalLM"
PUBLISHED["minicpm3-4b"] = ("MiniCPM3Config", {})  # its docstring's openbmb/MiniCPM3-4B
CAUSAL_LM["MiniCPM3Config"] = "MiniCPM3ForCausalLM"
PUBLISHED["apertus-8b"] = ("ApertusConfig", {})  # its docstring's swiss-ai/Apertus-8B
CAUSAL_LM["ApertusConfig"] = "ApertusForCausalLM"
PUBLISHED["glm-4.5-air"] = ("Glm4MoeConfig", dict(head_dim=128))  # defaults: zai-org/GLM-4.5-Air
CAUSAL_LM["Glm4MoeConfig"] = "Glm4MoeForCausalLM"
PUBLISHED["dots-llm1"] = (  # rednote-hilab/dots.llm1.base, as recalled
    "Dots1Config",
    dict(
        vocab_size=152064,
        hidden_size=4096,
        intermediate_size=10944,
        moe_intermediate_size=1408,
        num_hidden_layers=62,
        num_attention_heads=32,
        num_key_value_heads=32,
        n_routed_experts=128,
        num_experts_per_tok=6,
        n_shared_experts=2,
        first_k_dense_replace=1,
        routed_scaling_factor=2.5,
        norm_topk_prob=True,
        max_position_embeddings=32768,
        rope_parameters={**ROPE, "rope_theta": 10000000.0},
        sliding_window=None,
    ),
)
CAUSAL_LM["Dots1Config"] = "Dots1ForCausalLM"
PUBLISHED["hunyuan-a13b"] = (  # tencent/Hunyuan-A13B-Instruct, as recalled
    "HunYuanMoEV1Config",
    dict(
        vocab_size=128167,
        hidden_size=4096,
        intermediate_size=3072,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        num_experts=64,
        moe_topk=8,
        max_position_embeddings=32768,
    ),
)
CAUSAL_LM["HunYuanMoEV1Config"] = "HunYuanMoEV1ForCausalLM"
PUBLISHED["ernie-4.5-21b-a3b"] = ("Ernie4_5_MoeConfig", {})  # its defaults: ERNIE-4.5-21B-A3B
CAUSAL_LM["Ernie4_5_MoeConfig"] = "Ernie4_5_MoeForCausalLM"
PUBLISHED["deepseek-v2-lite"] = (  # deepseek-ai/DeepSeek-V2-Lite, as recalled
    "DeepseekV2Config",
    dict(
        vocab_size=102400,
        hidden_size=2048,
        intermediate_size=10944,
        moe_intermediate_size=1408,
        num_hidden_layers=27,
        num_attention_heads=16,
        num_key_value_heads=16,
        q_lora_rank=None,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        n_routed_experts=64,
        num_experts_per_tok=6,
        n_shared_experts=2,
        first_k_dense_replace=1,
        max_position_embeddings=163840,
    ),
)
CAUSAL_LM["DeepseekV2Config"] = "DeepseekV2ForCausalLM"
PUBLISHED["minimax-m2"] = ("MiniMaxM2Config", {})  # its defaults: MiniMaxAI/MiniMax-M2
CAUSAL_LM["MiniMaxM2Config"] = "MiniMaxM2ForCausalLM"
PUBLISHED["ettin-decoder-150m"] = ("ModernBertDecoderConfig", {})  # its defaults (Ettin 150M)
CAUSAL_LM["ModernBertDecoderConfig"] = "ModernBertDecoderForCausalLM"
PUBLISHED["phi-3.5-moe"] = (  # microsoft/Phi-3.5-MoE-instruct, as recalled; LongRoPE left out
    "PhimoeConfig",
    dict(
        vocab_size=32064,
        hidden_size=4096,
        intermediate_size=6400,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        num_local_experts=16,
        num_experts_per_tok=2,
        max_position_embeddings=131072,
        attention_bias=True,
        lm_head_bias=True,
        rope_parameters={**ROPE, "rope_theta": 10000.0},
    ),
)
CAUSAL_LM["PhimoeConfig"] = "PhimoeForCausalLM"
PUBLISHED["dbrx-132b"] = (  # databricks/dbrx-base, as recalled
    "DbrxConfig",
    dict(
        vocab_size=100352,
        d_model=6144,
        n_heads=48,
        n_layers=40,
        max_seq_len=32768,
        attn_config={"kv_n_heads": 8, "clip_qkv": 8.0, "rope_theta": 500000.0},
        ffn_config={"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4},
        rope_parameters={**ROPE, "rope_theta": 500000.0},
    ),
)
CAUSAL_LM["DbrxConfig"] = "DbrxForCausalLM"
# Kimi-Linear-48B-A3B (moonshotai/Kimi-Linear-48B-A3B-Instruct, the checkpoint
# KimiLinearConfig's docstring names) as KimiLinearConfig's defaults: 27 layers, MLA on every
# 4th after the first and KDA elsewhere, 256 experts top-8 after one dense layer
PUBLISHED["kimi-linear-48b-a3b"] = ("KimiLinearConfig", {})
CAUSAL_LM["KimiLinearConfig"] = "KimiLinearForCausalLM"
# issue 33's long tail (encoders, decoders, encoder-decoders): the installed transformers'
# config class defaults, which are the checkpoints their docstrings name, except where noted
PUBLISHED["roformer-chinese-base"] = ("RoFormerConfig", {})  # junnyu/roformer_chinese_base
CAUSAL_LM["RoFormerConfig"] = "RoFormerForMaskedLM"
PUBLISHED["ibert-roberta-base"] = (  # kssteven/ibert-roberta-base: roberta-base's sizes, as
    "IBertConfig",  # recalled (IBertConfig's defaults are BERT's vocabulary and positions)
    dict(
        vocab_size=50265,
        max_position_embeddings=514,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    ),
)
CAUSAL_LM["IBertConfig"] = "IBertForMaskedLM"
PUBLISHED["gte-multilingual-base"] = ("GteConfig", {})  # GteConfig's defaults
CAUSAL_LM["GteConfig"] = "GteForMaskedLM"
# squeezebert/squeezebert-uncased (SqueezeBertConfig's defaults) as SqueezeBertModel: the
# encoder and its pooler (SqueezeBertForMaskedLM holds that pooler too, unread)
PUBLISHED["squeezebert-uncased"] = ("SqueezeBertConfig", {"architectures": ["SqueezeBertModel"]})
CAUSAL_LM["SqueezeBertConfig"] = "SqueezeBertModel"
PUBLISHED["convbert-base"] = ("ConvBertConfig", {})  # YituTech/conv-bert-base: the defaults
CAUSAL_LM["ConvBertConfig"] = "ConvBertForMaskedLM"
# google/mobilebert-uncased: MobileBertConfig's defaults, as MobileBertForMaskedLM
PUBLISHED["mobilebert-uncased"] = (
    "MobileBertConfig",
    {"architectures": ["MobileBertForMaskedLM"]},
)
CAUSAL_LM["MobileBertConfig"] = "MobileBertForMaskedLM"
# XmodConfig's defaults (its docstring: a facebook/xmod-base style configuration, one
# language adapter, en_XX), with en_XX as the default language as the zoo spec has it
PUBLISHED["xmod-base"] = ("XmodConfig", dict(default_language="en_XX"))
CAUSAL_LM["XmodConfig"] = "XmodForMaskedLM"
PUBLISHED["xglm-564m"] = ("XGLMConfig", {})  # facebook/xglm-564M
CAUSAL_LM["XGLMConfig"] = "XGLMForCausalLM"
PUBLISHED["biogpt"] = ("BioGptConfig", {})  # microsoft/biogpt
CAUSAL_LM["BioGptConfig"] = "BioGptForCausalLM"
PUBLISHED["blenderbot-3b"] = ("BlenderbotConfig", {})  # facebook/blenderbot-3B
CAUSAL_LM["BlenderbotConfig"] = "BlenderbotForConditionalGeneration"
PUBLISHED["blenderbot-small-90m"] = (  # facebook/blenderbot_small-90M, as recalled: its
    "BlenderbotSmallConfig",  # 54,944-token vocabulary, scaled embeddings
    dict(vocab_size=54944, scale_embedding=True),
)
CAUSAL_LM["BlenderbotSmallConfig"] = "BlenderbotSmallForConditionalGeneration"
PUBLISHED["rembert"] = ("RemBertConfig", {})  # google/rembert
CAUSAL_LM["RemBertConfig"] = "RemBertForMaskedLM"
PUBLISHED["mpnet-base"] = (  # microsoft/mpnet-base: MPNetConfig's defaults but its 514
    "MPNetConfig",  # position rows (RoBERTa's 512 + 2), as recalled
    dict(max_position_embeddings=514),
)
CAUSAL_LM["MPNetConfig"] = "MPNetForMaskedLM"
PUBLISHED["ernie-3.0-base-zh"] = (  # nghuyong/ernie-3.0-base-zh, as recalled: a 40k Chinese
    "ErnieConfig",  # vocabulary, 2,048 positions, 4 token types, task types on
    dict(
        vocab_size=40000,
        max_position_embeddings=2048,
        type_vocab_size=4,
        use_task_id=True,
        task_type_vocab_size=3,
        hidden_act="gelu",
        pad_token_id=0,
    ),
)
CAUSAL_LM["ErnieConfig"] = "ErnieForMaskedLM"
PUBLISHED["led-base-16384"] = (  # allenai/led-base-16384, as recalled (LEDConfig's defaults are
    "LEDConfig",  # led-large's sizes)
    dict(
        d_model=768,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=12,
        decoder_attention_heads=12,
        encoder_ffn_dim=3072,
        decoder_ffn_dim=3072,
        attention_window=[1024] * 6,
    ),
)
CAUSAL_LM["LEDConfig"] = "LEDForConditionalGeneration"
PUBLISHED["pegasus-x-large"] = (  # google/pegasus-x-large: PegasusXConfig's defaults with the
    "PegasusXConfig",  # 128 global tokens its docstring names (the class default is 32)
    dict(num_global_tokens=128),
)
CAUSAL_LM["PegasusXConfig"] = "PegasusXForConditionalGeneration"
PUBLISHED["apertus-v1.5-8b-text"] = ("Apertus1p5TextConfig", {})  # defaults: Apertus 1.5's text
CAUSAL_LM["Apertus1p5TextConfig"] = "Apertus1p5TextForCausalLM"
PUBLISHED["switch-base-8"] = (  # google/switch-base-8: the config class's defaults but every
    "SwitchTransformersConfig",  # other layer routed (6 of 12 per stack), as recalled
    dict(num_sparse_encoder_layers=6, num_sparse_decoder_layers=6),
)
CAUSAL_LM["SwitchTransformersConfig"] = "SwitchTransformersForConditionalGeneration"
PUBLISHED["nllb-moe-54b"] = (  # facebook/nllb-moe-54b: NllbMoeConfig's defaults (128 experts,
    "NllbMoeConfig",  # every 4th layer routed) at the checkpoint's sizes, as recalled
    dict(
        d_model=2048,
        encoder_layers=24,
        decoder_layers=24,
        encoder_ffn_dim=8192,
        decoder_ffn_dim=8192,
        vocab_size=256206,
    ),
)
CAUSAL_LM["NllbMoeConfig"] = "NllbMoeForConditionalGeneration"
# Ministral3Config's defaults (its docstring's checkpoint mistralai/Ministral-3-8B-Base-2512)
PUBLISHED["ministral3-8b"] = ("Ministral3Config", {})
CAUSAL_LM["Ministral3Config"] = "Ministral3ForCausalLM"
# DiffLlamaConfig's defaults (its docstring names kajuma/DiffLlama-0.3B-handcut)
PUBLISHED["diffllama-1.2b"] = ("DiffLlamaConfig", {})
CAUSAL_LM["DiffLlamaConfig"] = "DiffLlamaForCausalLM"
# BitNetConfig's defaults (its docstring's checkpoint microsoft/bitnet-b1.58-2B-4T)
PUBLISHED["bitnet-b1.58-2b-4t"] = ("BitNetConfig", {})
CAUSAL_LM["BitNetConfig"] = "BitNetForCausalLM"
# JetMoeConfig's defaults (its docstring's checkpoint jetmoe/jetmoe-8b) at the model card's
# 24 blocks; the default num_hidden_layers 12 is the docstring's "4B style" configuration
PUBLISHED["jetmoe-8b"] = ("JetMoeConfig", dict(num_hidden_layers=24))
CAUSAL_LM["JetMoeConfig"] = "JetMoeForCausalLM"
# facebook/esm2_t6_8M_UR50D (the hub's config.json, written out: EsmConfig's defaults are
# BERT-base sizes with no vocabulary, not a released checkpoint): ESM-2's smallest, rotary
# positions, token dropout, as EsmForMaskedLM (its contact head is left out of the count)
PUBLISHED["esm2-t6-8m"] = (
    "EsmConfig",
    dict(
        vocab_size=33,
        hidden_size=320,
        num_hidden_layers=6,
        num_attention_heads=20,
        intermediate_size=1280,
        max_position_embeddings=1026,
        position_embedding_type="rotary",
        layer_norm_eps=1e-5,
        emb_layer_norm_before=False,
        token_dropout=True,
        mask_token_id=32,
        pad_token_id=1,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    ),
)
CAUSAL_LM["EsmConfig"] = "EsmForMaskedLM"
PUBLISHED["sarvam-105b"] = ("SarvamMLAConfig", {})  # SarvamMLAConfig's defaults (sarvam-105b)
CAUSAL_LM["SarvamMLAConfig"] = "DeepseekV3ForCausalLM"  # transformers' class for sarvam_mla
PUBLISHED["sarvam-30b"] = ("SarvamMoEConfig", {})  # SarvamMoEConfig's defaults (sarvam-30b)
CAUSAL_LM["SarvamMoEConfig"] = "Glm4MoeForCausalLM"  # transformers' class for sarvam_moe
PUBLISHED["solar-open-100b"] = ("SolarOpenConfig", {})  # defaults: upstage/Solar-Open-100B
CAUSAL_LM["SolarOpenConfig"] = "SolarOpenForCausalLM"
PUBLISHED["youtu-llm-2b"] = ("YoutuConfig", {})  # YoutuConfig's defaults (Youtu-LLM-2B)
CAUSAL_LM["YoutuConfig"] = "YoutuForCausalLM"
PUBLISHED["wmt19-en-de"] = (  # facebook/wmt19-en-de, as recalled (FSMTConfig's defaults are
    "FSMTConfig",  # 12 + 12 layers with a 4096 FFN; the checkpoint has 6 + 6 with 8192)
    dict(
        langs=["en", "de"],
        src_vocab_size=42024,
        tgt_vocab_size=42024,
        d_model=1024,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=16,
        decoder_attention_heads=16,
        encoder_ffn_dim=8192,
        decoder_ffn_dim=8192,
        max_position_embeddings=1024,
        dropout=0.2,
        attention_dropout=0.1,
        tie_word_embeddings=False,
    ),
)
CAUSAL_LM["FSMTConfig"] = "FSMTForConditionalGeneration"
# microsoft/prophetnet-large-uncased: ProphetNetConfig's defaults (transformers 5.24's
# configuration_prophetnet.py) are its sizes
PUBLISHED["prophetnet-large-uncased"] = ("ProphetNetConfig", {})
CAUSAL_LM["ProphetNetConfig"] = "ProphetNetForConditionalGeneration"
PUBLISHED["mellum2-12b-a2.5b"] = ("MellumConfig", {})  # defaults: Mellum2-12B-A2.5B-Base
CAUSAL_LM["MellumConfig"] = "MellumForCausalLM"
PUBLISHED["jina-embeddings-v3"] = ("JinaEmbeddingsV3Config", {})  # its config's defaults
CAUSAL_LM["JinaEmbeddingsV3Config"] = "JinaEmbeddingsV3ForMaskedLM"
PUBLISHED["nomic-embed-text-v1.5"] = ("NomicBertConfig", {})  # NomicBertConfig's defaults
CAUSAL_LM["NomicBertConfig"] = "NomicBertForMaskedLM"
PUBLISHED["trocr-base-handwritten"] = ("TrOCRConfig", {})  # TrOCRConfig's defaults
CAUSAL_LM["TrOCRConfig"] = "TrOCRForCausalLM"
# Llama 4 Scout 17B-16E's text model: Llama4TextConfig's defaults (transformers 5.24; its
# docstring names meta-llama/Llama-4-Scout-17B-16E), as Llama4ForCausalLM
PUBLISHED["llama4-scout-17b-16e"] = ("Llama4TextConfig", {})
CAUSAL_LM["Llama4TextConfig"] = "Llama4ForCausalLM"
PUBLISHED["zamba2-2.7b"] = (  # Zamba2Config's defaults ("a Zamba2-2.7B style configuration")
    "Zamba2Config",
    dict(
        vocab_size=32000,
        hidden_size=2560,
        num_hidden_layers=54,
        num_attention_heads=32,
        intermediate_size=10240,
        mamba_d_state=64,
        mamba_expand=2,
        n_mamba_heads=8,
        mamba_ngroups=1,
        num_mem_blocks=1,
        adapter_rank=128,
        use_shared_attention_adapter=False,
        use_mem_rope=False,
        hidden_act="gelu",
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        pad_token_id=0,
    ),
)
CAUSAL_LM["Zamba2Config"] = "Zamba2ForCausalLM"
PUBLISHED["eurobert-210m"] = ("EuroBertConfig", {})  # EuroBertConfig's defaults (EuroBERT-210m)
CAUSAL_LM["EuroBertConfig"] = "EuroBertForMaskedLM"
PUBLISHED["clip-vit-base-patch32-text"] = ("CLIPTextConfig", {})  # its defaults (docstring's)
CAUSAL_LM["CLIPTextConfig"] = "CLIPTextModelWithProjection"  # the text tower, projected
# Molmo2TextConfig's defaults (its docstring's allenai/Molmo2-8B text model): headless, as
# transformers has it (no causal LM class for molmo2_text)
PUBLISHED["molmo2-8b-text"] = ("Molmo2TextConfig", {})
CAUSAL_LM["Molmo2TextConfig"] = "Molmo2TextModel"
# GPTNeoXJapaneseConfig's defaults (abeja/gpt-neox-japanese-2.7b)
PUBLISHED["gpt-neox-japanese-2.7b"] = ("GPTNeoXJapaneseConfig", {})
CAUSAL_LM["GPTNeoXJapaneseConfig"] = "GPTNeoXJapaneseForCausalLM"
# OpenAIPrivacyFilterConfig's defaults (its docstring's openai/privacy-filter), 33 labels
PUBLISHED["openai-privacy-filter"] = ("OpenAIPrivacyFilterConfig", {})
CAUSAL_LM["OpenAIPrivacyFilterConfig"] = "OpenAIPrivacyFilterForTokenClassification"
PUBLISHED["kolibri-1"] = ("Kolibri1Config", {})  # its defaults: Aleph-Alpha/Kolibri-1
CAUSAL_LM["Kolibri1Config"] = "Kolibri1ForCausalLM"
PUBLISHED["a.x-k1"] = ("AXK1Config", {})  # its defaults: skt/A.X-K1
CAUSAL_LM["AXK1Config"] = "AXK1ForCausalLM"
# LaraMiniConfig's defaults (its docstring's translated/Lara-4-Mini-Base)
PUBLISHED["lara-4-mini"] = ("LaraMiniConfig", {})
CAUSAL_LM["LaraMiniConfig"] = "LaraMiniForCausalLM"
# ZambaConfig's defaults (transformers 5.24; its docstring names Zyphra/Zamba-7B-v1)
PUBLISHED["zamba-7b"] = ("ZambaConfig", {})
CAUSAL_LM["ZambaConfig"] = "ZambaForCausalLM"
PUBLISHED["ultrabert-6.7b"] = ("UltrabertConfig", {})  # its defaults (not UltraBERT-150M's size)
CAUSAL_LM["UltrabertConfig"] = "UltrabertForMaskedLM"
PUBLISHED["esmc-6b"] = ("EsmcConfig", {})  # EsmcConfig's defaults (biohub/ESMC-6B)
CAUSAL_LM["EsmcConfig"] = "EsmcForMaskedLM"
# BertGenerationConfig's defaults (google/bert_for_seq_generation_L-24_bbc_encoder), headless
PUBLISHED["bert-generation-l24-bbc-encoder"] = (
    "BertGenerationConfig",
    {"architectures": ["BertGenerationEncoder"]},
)
CAUSAL_LM["BertGenerationConfig"] = "BertGenerationEncoder"
# funnel-transformer/small: FunnelConfig's defaults (the checkpoint its docstring names), as
# FunnelModel (the encoder's three blocks and the upsampling decoder)
PUBLISHED["funnel-small"] = ("FunnelConfig", {"architectures": ["FunnelModel"]})
CAUSAL_LM["FunnelConfig"] = "FunnelModel"
# T5Gemma 2B-2B: T5GemmaConfig's defaults (two T5GemmaModuleConfig defaults, Gemma 2 2B's
# sizes; its docstring loads google/t5gemma-2b-2b-prefixlm-it)
PUBLISHED["t5gemma-2b-2b"] = ("T5GemmaConfig", {})
CAUSAL_LM["T5GemmaConfig"] = "T5GemmaForConditionalGeneration"
# google/tipsv2-b14's text tower: Tipsv2TextConfig's defaults (the checkpoint its docstring names)
PUBLISHED["tipsv2-b14-text"] = ("Tipsv2TextConfig", {})
CAUSAL_LM["Tipsv2TextConfig"] = "Tipsv2TextModel"  # headless: its pooler_output is the mean

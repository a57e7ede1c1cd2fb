"""Parity with Hugging Face: the same weights, copied by hand, give the same logits and loss.

The name mappings are local to this test (not the converters under test elsewhere), so a
match proves the component semantics themselves: post-LN vs pre-LN + final norm, gelu vs
gelu_new, norm eps, token types, tied heads and BERT's MLM transform.
"""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import max_diff_unpadded, perturb

import archzoo

V = 100
LAYERS = 2
# Observed parity is ~1e-6; a wrong activation (gelu vs gelu_new) or norm eps moves these
# tiny models' logits by only ~2e-4, so the bound stays well under that (and under 1e-4).
LOGITS_TOL = 1e-5


def tiny_gpt2() -> hf.GPT2LMHeadModel:
    config = hf.GPT2Config(
        n_layer=LAYERS,
        n_embd=32,
        n_head=4,
        n_inner=64,
        vocab_size=V,
        n_positions=64,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="eager",
    )
    return hf.GPT2LMHeadModel(config)


def tiny_bert() -> hf.BertForMaskedLM:
    config = hf.BertConfig(
        num_hidden_layers=LAYERS,
        hidden_size=32,
        num_attention_heads=4,
        intermediate_size=64,
        vocab_size=V,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        attn_implementation="eager",
    )
    return hf.BertForMaskedLM(config)


OVERRIDES = {
    "n_layers": LAYERS,
    "d_model": 32,
    "n_heads": 4,
    "d_ff": 64,
    "vocab_size": V,
    "max_len": 64,
    "dropout": 0.0,
}


def gpt2_state(ref: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """HF GPT-2 names -> archzoo names; Conv1D stores (in, out), so its weights transpose."""
    out = {
        "decoder.embedding.word.weight": ref["transformer.wte.weight"],
        "decoder.position.table.weight": ref["transformer.wpe.weight"],
        "decoder.final_norm.weight": ref["transformer.ln_f.weight"],
        "decoder.final_norm.bias": ref["transformer.ln_f.bias"],
        "head.proj.weight": ref["lm_head.weight"],
    }
    parts = {
        "ln_1": ("attention_norm", False),
        "attn.c_attn": ("attention.qkv", True),  # q | k | v, as archzoo's fused qkv
        "attn.c_proj": ("attention.out", True),
        "ln_2": ("ffn_norm", False),
        "mlp.c_fc": ("ffn.fc_in", True),
        "mlp.c_proj": ("ffn.fc_out", True),
    }
    for i in range(LAYERS):
        for theirs, (ours, conv1d) in parts.items():
            weight = ref[f"transformer.h.{i}.{theirs}.weight"]
            out[f"decoder.blocks.{i}.{ours}.weight"] = weight.t() if conv1d else weight
            out[f"decoder.blocks.{i}.{ours}.bias"] = ref[f"transformer.h.{i}.{theirs}.bias"]
    return out


def bert_state(ref: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """HF BERT (separate query/key/value) names -> archzoo names."""
    out = {  # tables: a weight only; the MLM decoder's bias is cls.predictions.bias
        "encoder.embedding.word.weight": ref["bert.embeddings.word_embeddings.weight"],
        "encoder.position.table.weight": ref["bert.embeddings.position_embeddings.weight"],
        "encoder.embedding.token_type.weight": ref["bert.embeddings.token_type_embeddings.weight"],
        "head.decoder.weight": ref["cls.predictions.decoder.weight"],
    }
    linear_and_norms = {
        "bert.embeddings.LayerNorm": "encoder.embedding.norm",
        "cls.predictions.transform.dense": "head.dense",
        "cls.predictions.transform.LayerNorm": "head.norm",
    }
    layer = {
        "attention.output.dense": "attention.out",
        "attention.output.LayerNorm": "attention_norm",
        "intermediate.dense": "ffn.fc_in",
        "output.dense": "ffn.fc_out",
        "output.LayerNorm": "ffn_norm",
    }
    for i in range(LAYERS):
        for theirs, ours in layer.items():
            linear_and_norms[f"bert.encoder.layer.{i}.{theirs}"] = f"encoder.blocks.{i}.{ours}"
        qkv = [f"bert.encoder.layer.{i}.attention.self.{n}" for n in ("query", "key", "value")]
        for kind in ("weight", "bias"):  # archzoo's bert-base fuses q | k | v
            out[f"encoder.blocks.{i}.attention.qkv.{kind}"] = torch.cat(
                [ref[f"{n}.{kind}"] for n in qkv]
            )
    for theirs, ours in linear_and_norms.items():
        out[f"{ours}.weight"] = ref[f"{theirs}.weight"]
        out[f"{ours}.bias"] = ref[f"{theirs}.bias"]
    out["head.bias"] = ref["cls.predictions.bias"]
    out["head.decoder.bias"] = ref["cls.predictions.bias"]  # the same archzoo parameter
    return out


def copy_into(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Load strictly: every archzoo parameter gets a value and nothing is left over."""
    expected = set(model.state_dict())
    assert set(state) == expected, (sorted(expected - set(state)), sorted(set(state) - expected))
    model.load_state_dict(state, strict=True)


def batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Three rows of 10 ids; the second is right-padded after 6 tokens, the third after 3."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, V, (3, 10), generator=g)
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    return ids, mask


@pytest.fixture(scope="module")
def gpt2_pair():
    torch.manual_seed(0)
    ref = tiny_gpt2()
    perturb(ref, seed=3, scale=0.1)
    ref.eval()
    assert ref.lm_head.weight is ref.transformer.wte.weight  # HF ties; so does the spec
    ours = archzoo.build_model("gpt2", OVERRIDES).eval()
    copy_into(ours, gpt2_state(ref.state_dict()))
    assert ours.head.proj.weight is ours.decoder.embedding.word.weight
    return ref, ours


@pytest.fixture(scope="module")
def bert_pair():
    torch.manual_seed(0)
    ref = tiny_bert()
    perturb(ref, seed=4, scale=0.1)
    ref.eval()
    assert ref.cls.predictions.decoder.weight is ref.bert.embeddings.word_embeddings.weight
    ours = archzoo.build_model("bert-base", OVERRIDES).eval()
    copy_into(ours, bert_state(ref.state_dict()))
    assert ours.head.decoder.weight is ours.encoder.embedding.word.weight
    return ref, ours


def test_gpt2_spec_components_are_what_hf_computes(gpt2_pair):
    ref, ours = gpt2_pair
    data = ours.spec.data
    assert (data["block"]["kind"], data["ffn"]["activation"]) == ("pre_ln", "gelu_new")
    assert ref.config.activation_function == "gelu_new"  # the tanh approximation
    assert data["norm"]["eps"] == ref.config.layer_norm_epsilon


def test_gpt2_bf16_logits_are_bit_identical_to_hf(tmp_path):
    """In bf16 every op rounds, so parity means transformers' ops in its order: GELU's tanh
    form op by op (`gelu_new`; F.gelu's single rounding moved these logits by up to 1.6e-2),
    the checkpoint's own weight layout (from_hf keeps Conv1D's (in, out) tensors) and SDPA
    (transformers' default attention)."""
    torch.manual_seed(0)
    ref = tiny_gpt2()
    ref.set_attn_implementation("sdpa")
    perturb(ref, seed=3, scale=0.1)
    ref.save_pretrained(tmp_path)
    ours = archzoo.from_hf(tmp_path, dtype=torch.bfloat16)
    ref = ref.to(torch.bfloat16).eval()
    ids = torch.randint(1, V, (4, 12), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        expected, got = ref(input_ids=ids).logits, ours(ids).logits
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, expected)


def test_gpt2_logits_match_hf(gpt2_pair):
    ref, ours = gpt2_pair
    ids, mask = batch()
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask).logits
        got = ours(ids, attention_mask=mask).logits
    assert got.shape == expected.shape == (3, 10, V)
    assert max_diff_unpadded(got, expected, mask) <= LOGITS_TOL
    assert expected.abs().max() > 0.1  # the logits carry signal, not near-zero noise


def test_gpt2_loss_matches_hf(gpt2_pair):
    ref, ours = gpt2_pair
    ids, mask = batch(seed=2)
    labels = ids.masked_fill(mask == 0, -100)
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask, labels=labels).loss
        got = ours(ids, attention_mask=mask, labels=labels).loss
    assert abs(got.item() - expected.item()) <= 1e-5
    assert got.item() > 1.0


def test_bert_spec_components_are_what_hf_computes(bert_pair):
    ref, ours = bert_pair
    data = ours.spec.data
    assert (data["block"]["kind"], data["ffn"]["activation"]) == ("post_ln", "gelu")
    assert ref.config.hidden_act == "gelu"  # the exact erf form
    assert data["norm"]["eps"] == ref.config.layer_norm_eps
    assert data["attention"]["fused_qkv"] is True


def test_bert_logits_match_hf_with_token_types(bert_pair):
    ref, ours = bert_pair
    ids, mask = batch()
    token_types = (torch.arange(10) >= 4).long().expand(3, 10).contiguous()
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask, token_type_ids=token_types).logits
        got = ours(ids, attention_mask=mask, token_type_ids=token_types).logits
        without_types = ours(ids, attention_mask=mask).logits
    assert got.shape == expected.shape == (3, 10, V)
    assert max_diff_unpadded(got, expected, mask) <= LOGITS_TOL
    assert max_diff_unpadded(without_types, got, mask) > 1e-3  # the segment table matters


def test_bert_mlm_loss_matches_hf(bert_pair):
    ref, ours = bert_pair
    ids, mask = batch(seed=3)
    labels = torch.full_like(ids, -100)
    labels[:, [1, 2, 5]] = ids[:, [1, 2, 5]]  # row 2 has padding at 5: ignored there too
    labels[2, 5] = -100
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask, labels=labels).loss
        got = ours(ids, attention_mask=mask, labels=labels).loss
    assert abs(got.item() - expected.item()) <= 1e-5
    assert got.item() > 1.0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_gelu_new_computes_transformers_gelu_new(dtype):
    """Bit-identical in 16-bit floats (the same ops in the same order); in fp32 F.gelu's one
    rounding stays within float32 resolution of it."""
    from transformers.activations import NewGELUActivation

    from archzoo.plugins.ffn.activations import ACTIVATIONS

    x = torch.randn(4, 3000, generator=torch.Generator().manual_seed(0)).mul(4).to(dtype)
    expected = NewGELUActivation()(x)
    graph = x.clone().requires_grad_()  # the out-of-place path autograd can differentiate
    got, grown = ACTIVATIONS["gelu_new"](x), ACTIVATIONS["gelu_new"](graph)
    grown.sum().backward()
    assert graph.grad is not None and bool(graph.grad.isfinite().all())
    if dtype == torch.float32:
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(grown.detach(), expected, rtol=1e-6, atol=1e-6)
    else:
        assert torch.equal(got, expected) and torch.equal(grown.detach(), expected)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gelu_new_lookup_has_transformers_bits_for_every_16_bit_value(dtype):
    """Inference reads gelu_new from a table of all 65,536 values: every bit pattern (NaN,
    infinities and subnormals included) gives transformers' bits, in any layout."""
    from transformers.activations import NewGELUActivation

    from archzoo.plugins.ffn import activations

    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    x = every.view(256, 256).t()  # not contiguous
    with torch.inference_mode():
        got = activations.gelu_new(x)
    expected = NewGELUActivation()(x)
    assert (activations._gelu_new_ops, dtype, x.device) in activations._TABLES  # a lookup
    assert got.shape == x.shape and got.dtype == dtype
    assert torch.equal(got.view(torch.int16), expected.view(torch.int16))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gelu_bloom_has_transformers_bits_for_every_16_bit_value(dtype):
    """BLOOM's tanh-GELU op order: transformers' bits for every 16-bit value, looked up in
    inference and op by op with a graph (float32: F.gelu's tanh form, within 1e-6)."""
    from transformers.models.bloom.modeling_bloom import bloom_gelu_forward

    from archzoo.plugins.ffn import activations

    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    x = every.view(256, 256).t()  # not contiguous
    expected = bloom_gelu_forward(x).view(torch.int16)
    with torch.inference_mode():
        looked_up = activations.gelu_bloom(x)
    assert (activations._gelu_bloom_ops, dtype, x.device) in activations._TABLES
    graph = x.clone().requires_grad_()
    assert torch.equal(looked_up.view(torch.int16), expected)
    assert torch.equal(activations.gelu_bloom(graph).detach().view(torch.int16), expected)
    wide = torch.linspace(-6, 6, 1001)
    torch.testing.assert_close(
        activations.gelu_bloom(wide), bloom_gelu_forward(wide), rtol=1e-6, atol=1e-6
    )

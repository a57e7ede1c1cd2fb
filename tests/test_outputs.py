"""output_hidden_states / output_attentions equal transformers' eager outputs, and only the
layers asked for leave the fast path."""

from __future__ import annotations

import pytest
import torch
from hf_util import V, padded_batch, perturb, save_hf, tiny_hf

import archzoo
import archzoo.parts.attention_probs as probs_module

hf = pytest.importorskip("transformers")

TOL = 1e-5
WINDOW = 5


def gpt_neo() -> torch.nn.Module:
    cfg = hf.GPTNeoConfig(
        num_layers=2,
        hidden_size=32,
        num_heads=4,
        vocab_size=V,
        max_position_embeddings=64,
        attention_types=[[["global", "local"], 1]],
        window_size=WINDOW,
        attn_implementation="eager",
    )
    return hf.GPTNeoForCausalLM(cfg)


def mistral() -> torch.nn.Module:
    cfg = hf.MistralConfig(
        num_hidden_layers=2,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        vocab_size=V,
        max_position_embeddings=64,
        sliding_window=WINDOW,
        attn_implementation="eager",
    )
    return hf.MistralForCausalLM(cfg)


def make(model_type: str) -> torch.nn.Module:
    if model_type == "gpt_neo":
        model = gpt_neo()
    elif model_type == "mistral":
        model = mistral()
    else:
        model = tiny_hf(model_type, attn_implementation="eager")
    perturb(model)
    return model.eval()


def pair(model_type: str, tmp_path) -> tuple[torch.nn.Module, archzoo.ZooModel]:
    ref = make(model_type)
    return ref, archzoo.from_hf(save_hf(ref, tmp_path / "hf"))


def close(got, ref, mask: torch.Tensor | None = None, what: str = "") -> None:
    """Tuples of tensors equal within TOL (rows of padded queries are not compared)."""
    assert got is not None and ref is not None, what
    assert len(got) == len(ref), (what, len(got), len(ref))
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        assert g.shape == r.shape, (what, i, g.shape, r.shape)
        if mask is not None:  # hidden (B, T, D) or probs (B, H, T, Tk): real query rows
            rows = mask.bool()
            g, r = (
                (g[rows], r[rows])
                if g.dim() == 3
                else (g.transpose(1, 2)[rows], r.transpose(1, 2)[rows])
            )
        diff = (g - r).abs().max().item()
        assert diff <= TOL, f"{what}[{i}]: max |diff| {diff:.2e}"


DECODERS = ["gpt2", "llama", "mistral", "gpt_neo"]


@pytest.mark.parametrize("model_type", ["bert", *DECODERS])
def test_hidden_states_and_attentions_equal_transformers_eager(model_type, tmp_path):
    ref, ours = pair(model_type, tmp_path)
    ids, mask = padded_batch(V, length=12, real=8)
    with torch.no_grad():
        want = ref(
            input_ids=ids, attention_mask=mask, output_hidden_states=True, output_attentions=True
        )
        got = ours(ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
    n = len(ours.decoder.layer_map) if ours.decoder is not None else 2
    assert len(got.hidden_states) == n + 1 and len(got.attentions) == n
    close(got.hidden_states, want.hidden_states, mask, "hidden_states")
    close(got.attentions, want.attentions, mask, "attentions")
    assert torch.equal(got.hidden_states[-1], got.last_hidden_state)
    for a in got.attentions:  # masked keys are exactly 0, and each real row sums to 1
        assert (a[1, :, :, 8:] == 0).all()
        torch.testing.assert_close(a[0].sum(-1), torch.ones_like(a[0].sum(-1)))
    if model_type in ("gpt2", "llama", "mistral", "gpt_neo"):
        assert (got.attentions[0][0].triu(1) == 0).all()  # causal
    if model_type == "mistral":  # the window: key q - WINDOW is out of reach, exactly
        q = torch.arange(12)
        k = torch.arange(12)
        outside = (q[:, None] - k[None, :]) >= WINDOW
        assert (got.attentions[1][0][:, outside] == 0).all()


@pytest.mark.parametrize("model_type", ["t5", "bart"])
def test_encoder_decoder_outputs_equal_transformers_eager(model_type, tmp_path):
    ref, ours = pair(model_type, tmp_path)
    ids, mask = padded_batch(V, length=10, real=7)
    dec, dec_mask = padded_batch(V, length=6, real=6)
    with torch.no_grad():
        want = ref(
            input_ids=ids,
            attention_mask=mask,
            decoder_input_ids=dec,
            output_hidden_states=True,
            output_attentions=True,
        )
        got = ours(
            ids,
            attention_mask=mask,
            decoder_input_ids=dec,
            output_hidden_states=True,
            output_attentions=True,
        )
    close(got.encoder_hidden_states, want.encoder_hidden_states, mask, "encoder_hidden_states")
    close(got.encoder_attentions, want.encoder_attentions, mask, "encoder_attentions")
    close(got.decoder_hidden_states, want.decoder_hidden_states, None, "decoder_hidden_states")
    close(got.decoder_attentions, want.decoder_attentions, None, "decoder_attentions")
    close(got.cross_attentions, want.cross_attentions, None, "cross_attentions")
    assert got.hidden_states is None and got.attentions is None
    assert (got.cross_attentions[0][1, :, :, 7:] == 0).all()  # padded source tokens


def test_only_the_requested_layer_computes_probabilities(tmp_path, monkeypatch):
    ref, ours = pair("llama", tmp_path)
    ids, _ = padded_batch(V, length=12)
    calls = []
    original = probs_module.attention_probs

    def counting(q, k, *args, **kwargs):
        calls.append(q.shape)
        return original(q, k, *args, **kwargs)

    monkeypatch.setattr(probs_module, "attention_probs", counting)
    sdpa_calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def counting_sdpa(*args, **kwargs):
        sdpa_calls.append(1)
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counting_sdpa)
    with torch.no_grad():
        got = ours(ids, output_attentions=[1])
        want = ref(input_ids=ids, output_attentions=True)
    assert len(calls) == 1  # layer 1 only
    assert len(sdpa_calls) == 2  # and both layers still ran SDPA for their outputs
    assert got.attentions[0] is None
    close(got.attentions[1:], want.attentions[1:], None, "attentions[1]")
    with torch.no_grad():
        plain = ours(ids)
    assert len(calls) == 1 and plain.attentions is None and plain.hidden_states is None
    torch.testing.assert_close(plain.logits, got.logits, rtol=0, atol=0)
    with pytest.raises(ValueError, match="layer 5 is not a layer index of a stack of 2"):
        ours(ids, output_attentions=[5])


@pytest.mark.parametrize("model_type", ["gpt2", "mistral"])
def test_attentions_under_the_kv_cache_equal_a_full_forward(model_type, tmp_path):
    """Prefill 7 tokens, then decode 5 one by one (past the window of 5 for mistral)."""
    _, ours = pair(model_type, tmp_path)
    ids, _ = padded_batch(V, batch=2, length=12)
    with torch.no_grad():
        full = ours(ids, output_attentions=True, output_hidden_states=True)
        cache = ours.new_cache(2, 12)
        out = ours(ids[:, :7], cache=cache, output_attentions=True)
        close(out.attentions, [a[:, :, :7, :7] for a in full.attentions], None, "prefill")
        for t in range(7, 12):
            step = ours(
                ids[:, t : t + 1], cache=cache, output_attentions=True, output_hidden_states=True
            )
            want = [a[:, :, t : t + 1, : t + 1] for a in full.attentions]
            close(step.attentions, want, None, f"step {t}")
            close(step.hidden_states, [h[:, t : t + 1] for h in full.hidden_states], None, "hidden")


@pytest.mark.parametrize(
    "attention",
    [
        {"kind": "local", "window": 4, "block": 4},
        {"kind": "strided", "stride": 3, "block": 4},
        {"kind": "fixed", "stride": 4, "summary": 1, "block": 4},
        {"kind": "block_sparse", "block": 4, "local_blocks": 0, "global_blocks": 1},
        {"kind": "bigbird", "block": 4, "random_blocks": 1},
        {"kind": "longformer", "window": 4, "global_tokens": [0], "global_projections": True},
    ],
    ids=lambda a: a["kind"],
)
def test_sparse_probabilities_are_the_pattern_scattered_into_the_dense_shape(attention):
    """probs @ v gives the sparse path's own output, and keys off the pattern are exactly 0."""
    torch.manual_seed(0)
    spec = {"n_layers": 1, "d_model": 32, "n_heads": 4, "d_ff": 64, "vocab_size": V}
    model = archzoo.build_model("bert-base", {**spec, "max_len": 64, "attention": attention})
    model.eval()
    att = model.encoder.blocks[0].attention
    captured = {}

    def keep_out(module, args, output):
        captured["x"] = args[0]

    att.register_forward_hook(keep_out)
    ids, mask = padded_batch(V, length=16, real=12)
    with torch.no_grad():
        probs = model(ids, attention_mask=mask, output_attentions=True).attentions[0]
        x = captured["x"]  # the attention's input (B, T, D)
        B, T, _ = x.shape
        ctx = ctx_of(ids, mask)
        _, _, v = att.project(x, ctx, None)  # (B, Hkv, T, hd)
        heads = probs @ v.repeat_interleave(att.n_heads // att.n_kv, 1)  # (B, H, T, hd)
        if attention["kind"] == "longformer":  # the global row uses the global values
            vg = att._heads(att.v_global(x), att.n_kv)
            heads[:, :, 0] = (probs @ vg)[:, :, 0]
        expected = att.out(heads.transpose(1, 2).reshape(B, T, att.q_dim))
        torch.testing.assert_close(att(x, ctx), expected, atol=1e-5, rtol=0)
    assert (probs[1, :, :, 12:] == 0).all()
    keep = probs_module_pattern(att, T, mask)
    assert (probs.masked_fill(keep, 0) == 0).all()
    rows = probs[0].sum(-1)
    torch.testing.assert_close(rows, torch.ones_like(rows))


def ctx_of(ids, mask):
    """The attention context the encoder builds for (ids, mask)."""
    from archzoo.parts.interfaces import AttentionContext
    from archzoo.parts.masks import AttentionMask

    T = ids.shape[1]
    m = AttentionMask.build(T, T, causal=False, key_padding=mask)
    return AttentionContext(m)


def probs_module_pattern(att, T, mask):
    from archzoo.plugins.attention.sparse import pattern_keep

    keep = pattern_keep(att.make_pattern(T, "cpu"), T, T, causal=False, key_padding=mask.bool())
    return keep[:, None]

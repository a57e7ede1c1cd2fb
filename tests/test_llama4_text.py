"""Llama 4's text mechanisms, each against an independent computation: chunked attention (a
mask built by loops), q/k norms without a scale after the rotation (x / rms(x)), the query
temperature of NoPE layers (its formula), and experts that take the routing weight on their
input (expert(w * x), dense)."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from hf_util import perturb

import archzoo
from archzoo.plugins.attention.chunked import ChunkPattern, row_starts
from archzoo.plugins.attention.sparse import (
    blocked_attention,
    dense_attention,
    flex_pattern_attention,
)

V = 96


def chunk_keep(T: int, chunk: int, causal: bool, pad: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) keep mask by loops: same chunk counted from the row's first real token."""
    B = pad.shape[0]
    keep = torch.zeros(B, 1, T, T, dtype=torch.bool)
    for b in range(B):
        first = next(t for t in range(T) if pad[b, t])
        for i in range(T):
            for j in range(T):
                same = (i - first) // chunk == (j - first) // chunk
                keep[b, 0, i, j] = same and bool(pad[b, j]) and (j <= i or not causal)
    return keep


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("T", [21, 32])
def test_chunked_paths_equal_the_mask_built_by_loops(T, causal):
    g = torch.Generator().manual_seed(0)
    B, H, Hkv, hd, chunk = 3, 4, 2, 8, 5
    q = torch.randn(B, H, T, hd, generator=g)
    k = torch.randn(B, Hkv, T, hd, generator=g)
    v = torch.randn(B, Hkv, T, hd, generator=g)
    pad = torch.ones(B, T, dtype=torch.bool)
    pad[0, :3] = False  # left padding: its chunks start at position 3
    pad[1, T - 4 :] = False  # right padding
    keep = chunk_keep(T, chunk, causal, pad)
    kk, vv = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    scores = (q @ kk.transpose(-1, -2)) / math.sqrt(hd)
    want = scores.masked_fill(~keep, float("-inf")).softmax(-1).nan_to_num(0.0) @ vv
    pattern = ChunkPattern(chunk, 8, row_starts(pad, T))
    options = {"causal": causal, "key_padding": pad}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # flex without compile: the unfused fallback
        paths = {
            "dense": dense_attention(q, k, v, pattern, **options),
            "blocked": blocked_attention(q, k, v, pattern, **options),
            "flex": flex_pattern_attention(q, k, v, pattern, **options),
        }
    real = pad[:, None, :, None]  # padded queries are not compared
    for name, got in paths.items():
        assert ((got - want) * real).abs().max().item() <= 1e-5, name


def tiny(**parts) -> torch.nn.Module:
    """A tiny perturbed Llama-like decoder with `parts` in its spec."""
    spec = {"vocab_size": V, "d_model": 32, "n_layers": 1, "n_heads": 4, "d_ff": 48}
    parts.setdefault("attention", {"kind": "mha", "fused_qkv": False})
    parts["attention"] = {**parts["attention"], "n_kv_heads": 4}
    model = archzoo.build_model("llama2-7b", {**spec, "max_len": 64, **parts}).eval()
    perturb(model, scale=0.1)
    return model


def layer_io(model: torch.nn.Module, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The first attention layer's input and output on `ids`."""
    seen = {}
    layer = model.decoder.blocks[0].attention
    handle = layer.register_forward_hook(lambda m, args, out: seen.update(x=args[0], out=out))
    with torch.no_grad():
        model(ids)
    handle.remove()
    return seen["x"], seen["out"]


def heads(t: torch.Tensor) -> torch.Tensor:
    return t.view(1, t.shape[1], 4, 8).transpose(1, 2)  # (B, H, T, hd)


def test_chunked_model_with_unscaled_qk_norm_after_rotation_equals_dense_formula():
    """q = rotate(W_q x) / rms, k likewise, interleaved pairs, chunks of 3: a dense computation."""
    attention = {"kind": "chunked", "chunk": 3, "fused_qkv": False, "qk_norm": "head"}
    attention |= {"qk_norm_after_position": True, "qk_norm_scale": False}
    model = tiny(attention=attention, position={"kind": "rotary", "interleaved": True})
    layer = model.decoder.blocks[0].attention
    assert layer.q_norm.weight is None and layer.k_norm.weight is None
    T = 8
    x, out = layer_io(model, torch.randint(3, V, (1, T)))
    q, k, v = heads(layer.q(x)), heads(layer.k(x)), heads(layer.v(x))
    theta = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float32) / 8)
    turn = torch.polar(torch.ones(T, 4), torch.arange(T, dtype=torch.float32)[:, None] * theta)

    def rotate(t):  # adjacent pairs as complex numbers times e^(i * angle)
        return torch.view_as_real(torch.view_as_complex(t.reshape(1, 4, T, 4, 2)) * turn).flatten(3)

    def l2(t):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + layer.q_norm.cfg.eps)

    i = torch.arange(T)
    keep = (i[:, None] // 3 == i[None, :] // 3) & (i[None, :] <= i[:, None])
    with torch.no_grad():
        want = F.scaled_dot_product_attention(l2(rotate(q)), l2(rotate(k)), v, attn_mask=keep)
        want = layer.out(want.transpose(1, 2).reshape(1, T, 32))
    assert torch.allclose(out, want, atol=1e-5)


@pytest.mark.parametrize("offset", [1, 0])  # Llama 4's (i + 1) / floor, Ministral 3's i / floor
def test_query_temperature_is_its_formula(offset):
    """No positions; q scaled by 1 + 0.5 * ln(1 + floor((i + offset) / 2)) at query i."""
    attention = {"kind": "mha", "fused_qkv": False, "use_position": False}
    attention |= {"temperature_floor": 2, "temperature_scale": 0.5, "temperature_offset": offset}
    model = tiny(attention=attention)
    layer = model.decoder.blocks[0].attention
    T = 7
    x, out = layer_io(model, torch.randint(3, V, (1, T)))
    q, k, v = heads(layer.q(x)), heads(layer.k(x)), heads(layer.v(x))
    scales = torch.tensor([1 + 0.5 * math.log(1 + (i + offset) // 2) for i in range(T)])
    with torch.no_grad():
        want = F.scaled_dot_product_attention(q * scales[:, None], k, v, is_causal=True)
        want = layer.out(want.transpose(1, 2).reshape(1, T, 32))
    assert torch.allclose(out, want, atol=1e-5)
    plain = tiny(attention={"kind": "mha", "fused_qkv": False, "use_position": False})
    plain.load_state_dict(model.state_dict())
    assert not torch.allclose(layer_io(plain, torch.randint(3, V, (1, T)))[1][:, 2:], out[:, 2:])


@pytest.mark.parametrize("top_k", [1, 2])
def test_experts_weighed_on_their_inputs_equal_a_dense_sum(top_k):
    """out = shared(x) + sum over the top-k experts e of expert_e(sigmoid(logit_e) * x)."""
    ffn = {"kind": "moe", "n_experts": 4, "top_k": top_k, "d_expert": 16, "router": "sigmoid"}
    ffn |= {"normalize": False, "weigh": "inputs", "n_shared": 1, "aux_loss_coef": 0.0}
    moe = tiny(ffn=ffn).decoder.blocks[0].ffn
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        got = moe(x)
        h = x.reshape(10, 32)
        logits = moe.router(h)
        top = logits.topk(top_k, dim=-1)
        want = moe.shared(h)
        for n in range(10):
            for logit, e in zip(top.values[n], top.indices[n], strict=True):
                a = (torch.sigmoid(logit) * h[n]) @ moe.w_in[e]  # (2F,) [gate | up]
                gate, up = a.chunk(2)
                want[n] += (F.silu(gate) * up) @ moe.w_out[e]
        dense = moe.dense_experts(h, torch.sigmoid(top.values), top.indices) + moe.shared(h)
    assert torch.allclose(got.reshape(10, 32), want, atol=1e-5)
    assert torch.allclose(dense, want, atol=1e-5)


# ------------------------------------------------------------------ the family, from transformers

# 3 layers: rotary + chunked + experts, NoPE + full + experts, rotary + chunked + dense SwiGLU;
# chunks of 4 (the 10-token batch and 7 + 20 generated tokens cross several), temperature
# steps every 2 tokens
TINY_CONFIG = dict(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=16,
    intermediate_size_mlp=48,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=64,
    pad_token_id=0,
    num_local_experts=4,
    num_experts_per_tok=2,
    moe_layers=[0, 1],
    no_rope_layers=[1, 0, 1],
    attention_chunk_size=4,
    floor_scale=2,
    attn_scale=0.5,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
)


def make(task: str, **changes) -> torch.nn.Module:
    """A perturbed tiny transformers Llama 4 text model of class Llama4<task>."""
    import transformers as hf

    config = hf.Llama4TextConfig(**{**TINY_CONFIG, **changes})
    torch.manual_seed(0)
    model = getattr(hf, f"Llama4{task}")(config)
    perturb(model, scale=0.1)
    return model.eval()


@pytest.mark.parametrize("task", ["ForCausalLM", "TextModel"])
def test_outputs_equal_transformers_with_a_padded_row(tmp_path, task):
    from hf_util import max_diff_unpadded, padded_batch, save_hf

    ref = make(task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / task))
    assert ours.hf_source["model_type"] == "llama4_text"
    kinds = [block.attention.name for block in ours.decoder.blocks]
    assert kinds == ["chunked", "mha", "chunked"]
    ids, mask = padded_batch(V)
    ids = ids.masked_fill(mask == 0, 0)
    with torch.no_grad():
        want, got = ref(input_ids=ids, attention_mask=mask), ours(ids, attention_mask=mask)
    name = "logits" if task == "ForCausalLM" else "last_hidden_state"
    assert max_diff_unpadded(getattr(got, name), getattr(want, name), mask) <= 1e-4
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())


def test_left_padded_logits_equal_transformers(tmp_path):
    """Chunks count from each row's first real token, as transformers' chunked mask."""
    from hf_util import assert_left_padded_equal, save_hf

    ref = make("ForCausalLM")
    assert_left_padded_equal(ref, archzoo.from_hf(save_hf(ref, tmp_path / "m")))


def test_greedy_generation_equals_transformers(tmp_path):
    from hf_util import assert_greedy_equal, save_hf

    ref = make("ForCausalLM")
    assert_greedy_equal(ref, archzoo.from_hf(save_hf(ref, tmp_path / "m")))


def test_export_round_trip(tmp_path):
    import transformers as hf
    from hf_util import padded_batch, save_hf

    ref = make("ForCausalLM")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "in"))
    archzoo.to_hf(ours, tmp_path / "out")
    again = hf.AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    assert again.config.layer_types == ref.config.layer_types
    assert again.config.no_rope_layers == ref.config.no_rope_layers
    assert again.config.moe_layers == ref.config.moe_layers
    ids, mask = padded_batch(V)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).logits
        assert torch.equal(again(input_ids=ids, attention_mask=mask).logits, want)

"""Cost figures against the MFU accounting formulas and the dense mask as references."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from click.testing import CliRunner
from torch import Tensor, nn

import archzoo
from archzoo import Registry, hookimpl, param
from archzoo.cli.main import main
from archzoo.parts.costs import model_costs
from archzoo.parts.interfaces import FeedForward
from archzoo.plugins.attention.sparse import pattern_keep


def costs(name: str, overrides: dict | None = None, context: int | None = None) -> dict:
    return model_costs(archzoo.build_model(name, overrides, device="meta"), context)


def mfu_forward_flops(matmul_params: int, n_layers: int, context: int, d_attn: int) -> int:
    """The standard forward FLOPs per token (PaLM app. B): 2N + 4 * L * T * d_attn."""
    return 2 * matmul_params + 4 * n_layers * context * d_attn


def test_gpt2_flops_per_token_match_the_mfu_formula():
    L, d, ff, V = 12, 768, 3072, 50257
    matmul = L * (d * 3 * d + d * d + 2 * d * ff) + V * d  # qkv, out, mlp, tied LM head
    for context in (1024, 256):
        got = costs("gpt2", context=context)["flops_per_token"]
        expected = mfu_forward_flops(matmul, L, context, d)
        assert abs(got - expected) <= 0.01 * expected
        assert got == expected  # nothing but matmuls is counted, so it is exact


def test_llama2_7b_flops_per_token_match_the_mfu_formula():
    L, d, ff, V = 32, 4096, 11008, 32000
    matmul = L * (4 * d * d + 3 * d * ff) + V * d  # q, k, v, o; gate, up, down; LM head
    got = costs("llama2-7b")["flops_per_token"]  # context = max_len 4096
    expected = mfu_forward_flops(matmul, L, 4096, d)
    assert abs(got - expected) <= 0.01 * expected
    assert got / 1e9 == pytest.approx(15.36, abs=0.01)  # ~2 x 6.7B + attention


def test_shared_layers_cost_flops_every_time_they_are_used():
    L, d, ff, E, V, T = 12, 768, 3072, 128, 30000, 512
    matmul = E * d + L * (4 * d * d + 2 * d * ff) + d * E + E * V  # up-proj, layers, MLM head
    assert costs("albert-base")["flops_per_token"] == mfu_forward_flops(matmul, L, T, d)


def test_kv_cache_bytes_per_token_gpt2_llama_gqa_and_mistral_window():
    gpt2 = costs("gpt2")["kv_cache_bytes_per_token"]
    assert gpt2 == {"float32": 2 * 12 * 768 * 4, "bfloat16": 2 * 12 * 768 * 2, "int8": 2 * 12 * 768}
    llama = costs("llama2-7b")["kv_cache_bytes_per_token"]
    assert llama["bfloat16"] == 2 * 32 * 32 * 128 * 2 == 524_288  # 0.5 MiB per token
    gqa = costs("llama2-7b", {"attention.n_kv_heads": 8})["kv_cache_bytes_per_token"]
    assert gqa["bfloat16"] == 2 * 32 * 8 * 128 * 2 == 131_072
    # Mistral: 8 KV heads, 4096-key window in every layer
    full = 2 * 32 * 8 * 128 * 2
    assert costs("mistral-7b", context=4096)["kv_cache_bytes_per_token"]["bfloat16"] == full
    assert costs("mistral-7b", context=1000)["kv_cache_bytes_per_token"]["bfloat16"] == full
    at_max = costs("mistral-7b")["kv_cache_bytes_per_token"]  # context 32768: cache holds 4096
    assert at_max == {"float32": full * 2 // 8, "bfloat16": full // 8, "int8": full // 16}


def test_encoders_have_no_kv_cache_figure():
    assert costs("bert-base")["kv_cache_bytes_per_token"] is None
    assert "params_active" not in costs("bert-base")


def test_causal_window_counts_its_window_keys():
    """GPT-Neo alternates dense and 256-key local layers: the last query sees 256 of them."""
    T, d = 2048, 768
    base = costs("gpt-neo-125m", {"layers": []}, context=T)["flops_per_token"]
    got = costs("gpt-neo-125m", context=T)["flops_per_token"]
    assert base - got == 6 * 4 * d * (T - 256)
    assert (
        costs("gpt-neo-125m", context=100)["flops_per_token"]
        == (costs("gpt-neo-125m", {"layers": []}, context=100)["flops_per_token"])
    )


@pytest.mark.parametrize(
    "attention",
    [
        {"kind": "local", "window": 5},
        {"kind": "strided", "stride": 4, "block": 8},
        {"kind": "fixed", "stride": 8, "summary": 2, "block": 8},
        {"kind": "longformer", "window": 6, "global_tokens": [0, 9]},
        {"kind": "bigbird", "block": 4, "random_blocks": 1},
    ],
    ids=lambda a: a["kind"],
)
def test_sparse_key_counts_equal_the_dense_mask(attention):
    """Bidirectional: mean keys per query of the dense reference mask; causal: the last row."""
    T, d, H = 40, 32, 2
    spec = {"n_layers": 1, "d_model": d, "n_heads": H, "d_ff": 64, "vocab_size": 50}
    spec.update({"max_len": 64, "attention": attention})
    model = archzoo.build_model("bert-base", spec, device="meta")
    att = model.encoder.blocks[0].attention
    keep = pattern_keep(att.make_pattern(T, "cpu"), T, T, causal=False, key_padding=None)
    assert att.keys_per_query(T, causal=False) == pytest.approx(keep.sum().item() / T)
    causal = pattern_keep(att.make_pattern(T, "cpu"), T, T, causal=True, key_padding=None)
    assert att.keys_per_query(T, causal=True) == causal[0, -1].sum().item()
    dense = model_costs(archzoo.build_model("bert-base", {**spec, "attention": "mha"}, "meta"), T)
    got = model_costs(model, T)
    keys = keep.sum().item() / T
    assert dense["flops_per_token"] - got["flops_per_token"] == pytest.approx(
        4 * d * (T - keys), abs=1
    )


class ToyExperts(FeedForward):
    """A mixture of `experts` MLPs of which each token uses `top_k` (router not modelled)."""

    name = "toy_moe"
    summary = "test-only mixture of experts"

    @dataclass
    class Config:
        experts: int = param(4, "experts", min=1)
        top_k: int = param(1, "experts per token", min=1)

    def __init__(self, cfg, dims) -> None:
        super().__init__(cfg, dims)
        self.router = nn.Linear(dims.d_model, cfg.experts, bias=False)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(dims.d_model, dims.d_ff), nn.Linear(dims.d_ff, dims.d_model))
            for _ in range(cfg.experts)
        )

    def expert_params(self) -> int:
        return sum(p.numel() for p in self.experts[0].parameters())

    def active_parameters(self) -> int:
        return self.router.weight.numel() + self.cfg.top_k * self.expert_params()

    def matmul_flops(self) -> int:
        return 2 * (
            self.router.weight.numel() + self.cfg.top_k * 2 * self.dims.d_model * self.dims.d_ff
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.experts[0](x)


@pytest.fixture()
def moe_registry():
    class Plugin:
        @hookimpl
        def archzoo_register(self, registrar):
            registrar.add_component(ToyExperts)

    reg = Registry(load_entry_points=False)
    reg.register_plugin(Plugin(), "toy-moe")
    return reg


def test_params_active_and_flops_come_from_the_ffn_hook(moe_registry):
    d, ff, L = 64, 128, 3
    spec = {"n_layers": L, "d_model": d, "n_heads": 4, "d_ff": ff, "vocab_size": 100}
    spec["ffn"] = {"kind": "toy_moe", "experts": 8, "top_k": 2}
    model = archzoo.build_model("gpt2", spec, device="meta", registry=moe_registry)
    dense = archzoo.build_model("gpt2", {**spec, "ffn": "mlp"}, device="meta")
    got = model_costs(model, 16)
    expert = d * ff + ff + ff * d + d
    assert got["params_active"] == model.num_parameters() - L * 6 * expert
    # 2 of 8 experts run: twice the dense MLP's matmuls, plus the router
    extra = L * 2 * (d * 8 + 2 * d * ff)
    assert got["flops_per_token"] - model_costs(dense, 16)["flops_per_token"] == extra


def test_zoo_build_json_and_text_show_the_costs():
    runner = CliRunner()
    out = runner.invoke(main, ["build", "llama2-7b", "--context", "2048", "--json"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["context"] == 2048
    assert report["flops_per_token"] == costs("llama2-7b", context=2048)["flops_per_token"]
    assert report["kv_cache_bytes_per_token"]["bfloat16"] == 524_288
    text = runner.invoke(main, ["build", "mistral-7b"]).stdout
    assert "forward FLOPs/token at context 32,768: 16,368,271,360 (16.4B)" in text
    assert "KV cache bytes/token: 32,768 float32, 16,384 bfloat16, 8,192 int8" in text
    bad = runner.invoke(main, ["build", "gpt2", "--context", "0"])
    assert bad.exit_code == 2 and "--context" in bad.output


def test_costs_need_no_memory():
    model = archzoo.build_model("mistral-7b", device="meta")
    assert all(p.device.type == "meta" for p in model.parameters())
    assert model_costs(model)["flops_per_token"] > 2 * 7e9
    with pytest.raises(ValueError, match="context must be a positive"):
        model_costs(model, 0)

"""`zoo diff`: changed keys and components per stack and layer, and what they cost."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import archzoo
from archzoo.cli.main import main
from archzoo.parts.costs import model_costs

ONE_LAYER_LOCAL = "layers=[{select: 3, attention: {kind: local, window: 128}}]"


def zoo(*args: str, ok: bool = True) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == (0 if ok else 2), (result.output, result.exception)
    return result.output


def rows(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines()]


def meta_costs(name: str, overrides: dict | None = None, context: int | None = None) -> dict:
    model = archzoo.build_model(name, overrides, device="meta")
    return {"params": model.num_parameters(), **model_costs(model, context)}


def test_gpt2_to_llama_reads_as_a_summary():
    out = zoo("diff", "gpt2", "llama2-7b")
    lines = rows(out)
    assert lines[0] == "gpt2 -> llama2-7b (decoder)"
    for expected in [
        "d_model 768 -> 4,096",
        "vocab_size 50,257 -> 32,000",
        "n_layers 12 -> 32",
        "head_dim 64 -> 128",
        "d_ff 3,072 -> 11,008",
        "position learned -> rotary",
        "ffn mlp(activation=gelu_new, bias=true) -> glu(activation=swiglu, bias=false)",
        "norm layernorm -> rmsnorm",
        "head: lm: tie true -> false",
        "costs (context 1,024):",
        "parameters 124.4M -> 6.7B (+6.6B, x54.15)",
        "KV cache/token (bf16) 36.9KB -> 524.3KB (+487.4KB, x14.22)",
    ]:
        assert expected in lines, (expected, out)
    attention = next(line for line in lines if line.startswith("attention "))
    assert "bias true -> false" in attention and "fused_qkv true -> false" in attention
    assert "kind:" not in out and "{" not in out  # a summary, not a YAML dump
    assert len(lines) < 25
    # the numbers are the costs of each model at the common context (the smaller max_len)
    a, b = meta_costs("gpt2", context=1024), meta_costs("llama2-7b", context=1024)
    report = json.loads(zoo("diff", "gpt2", "llama2-7b", "--json"))
    delta = report["costs"]["delta"]
    assert delta["params"]["change"] == b["params"] - a["params"]
    assert delta["flops_per_token"]["change"] == b["flops_per_token"] - a["flops_per_token"]
    assert report["keys"]["d_model"] == [768, 4096]
    position = report["stacks"]["decoder"]["components"]["position"]
    assert (position["from"]["kind"], position["to"]["kind"]) == ("learned", "rotary")


def test_bert_to_albert_names_sharing_factorization_and_the_saving():
    out = zoo("diff", "bert-base", "albert-base")
    lines = rows(out)
    for expected in [
        "bert-base -> albert-base (encoder)",
        "vocab_size 30,522 -> 30,000",
        "dropout 0.1 -> 0.0",
        "embedding token -> factorized(embedding_size=128)",
        "sharing none -> all",
        "attention mha: fused_qkv true -> false",
        "ffn mlp: activation gelu -> gelu_new",
        "head: mlm: activation gelu -> gelu_new",
        "parameters 109.5M -> 11.2M (-98.3M, x0.10)",
    ]:
        assert expected in lines, (expected, out)
    assert not any(line.startswith("KV cache") for line in lines)  # encoders do not decode
    report = json.loads(zoo("diff", "bert-base", "albert-base", "--json"))
    a, b = meta_costs("bert-base"), meta_costs("albert-base")
    assert report["costs"]["delta"]["params"]["change"] == b["params"] - a["params"]
    assert report["costs"]["b"]["flops_per_token"] == b["flops_per_token"]


def test_a_set_change_on_one_layer_is_reported_for_that_layer_with_its_cost():
    out = zoo("diff", "gpt2", "--set", ONE_LAYER_LOCAL)
    lines = rows(out)
    assert "attention (layer 3) mha -> local(window=128)" in lines, out
    assert not any(line.startswith(("d_model", "position", "ffn")) for line in lines)
    report = json.loads(zoo("diff", "gpt2", "gpt2", "--set", ONE_LAYER_LOCAL, "--json"))
    stack = report["stacks"]["decoder"]
    assert stack["sizes"] == {} and stack["components"] == {}
    (group,) = stack["layers"]["attention"]
    assert group["layers"] == [3]
    assert (group["change"]["from"]["kind"], group["change"]["to"]["window"]) == ("mha", 128)
    delta = report["costs"]["delta"]
    # one layer now scores 128 keys instead of 1024, and caches 128 of 1024 tokens
    assert delta["flops_per_token"]["change"] == -4 * 768 * (1024 - 128)
    assert delta["kv_cache_bytes_per_token_bf16"]["change"] == -2 * 768 * 2 * (1024 - 128) / 1024
    assert delta["params"]["change"] == 0


def test_alternating_layers_are_grouped():
    out = zoo("diff", "gpt-neo-125m", "gpt2", "--context", "512")
    lines = rows(out)
    local = next(line for line in lines if "layers 1, 3, ..., 11 (every 2nd)" in line)
    assert "local(" in local and "window=256" in local and "-> mha(" in local
    assert "costs (context 512):" in lines


def test_encoder_decoder_stacks_are_compared_one_by_one():
    report = json.loads(
        zoo("diff", "t5-small", "--set", "decoder.n_layers=3", "--set", "d_model=256", "--json")
    )
    assert report["keys"] == {"d_model": [512, 256]}
    assert report["stacks"]["decoder"]["sizes"] == {"n_layers": [6, 3]}
    assert report["stacks"]["encoder"]["sizes"] == {}


def test_same_architecture_and_bad_input():
    assert "same architecture" in zoo("diff", "gpt2", "gpt2")
    assert "needs a second spec" in zoo("diff", "gpt2", ok=False)
    assert "no spec file or zoo model named 'gpt3'" in zoo("diff", "gpt2", "gpt3", ok=False)


@pytest.mark.parametrize("kind", ["safetensors", "hf"])
def test_saved_models_and_hf_directories_diff_by_their_specs(tmp_path, kind):
    tiny = {"n_layers": 2, "d_model": 32, "n_heads": 2, "d_ff": 64, "vocab_size": 100}
    model = archzoo.build_model("gpt2", {**tiny, "max_len": 64})
    if kind == "safetensors":
        source = str(tmp_path / "m.safetensors")
        archzoo.save(model, source)
    else:  # only config.json is read
        from transformers import GPT2Config

        source = str(tmp_path / "hf")
        GPT2Config(
            n_layer=2, n_embd=32, n_head=2, n_inner=64, vocab_size=100, n_positions=64
        ).save_pretrained(source)
    report = json.loads(zoo("diff", source, "gpt2", "--set", "n_layers=3", "--json"))
    assert report["costs"]["a"]["params"] == model.num_parameters()
    assert report["stacks"]["decoder"]["sizes"]["n_layers"] == [2, 3]

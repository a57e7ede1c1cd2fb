"""BitNet (issue 33): mha's `out_norm` and glu's `inner_norm` and `reglu_squared` against the
formula written out here, and the `bitnet` family from tiny perturbed transformers models with
a padded row (LM and headless within 1e-4, the LM loss) and its greedy tokens with the cache;
a quantization_config is refused by name. (Export round trip: tests/test_export.py's sweep of
every registered type; the zoo spec's count: tests/test_zoo_counts.py from published_configs.)
"""

from __future__ import annotations

import json
import math

import pytest
import torch
import transformers as hf
from hf_util import assert_greedy_equal, max_diff_unpadded, padded_batch, perturb, save_hf

import archzoo
from archzoo.hf.probe import model_class
from archzoo.parts.registry import get_registry
from archzoo.parts.tensor_source import ConversionError

V = 96
BITNET = dict(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    rms_norm_eps=0.1,  # the sub norms read it too
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)


def make(task: str) -> torch.nn.Module:
    config = hf.AutoConfig.for_model("bitnet", **BITNET)
    conv = get_registry().converter("bitnet")
    torch.manual_seed(0)
    model = model_class(conv, task, config, None)(config)
    perturb(model, scale=0.1)
    return model.eval()


@pytest.mark.parametrize("task", ["ForCausalLM", "Model"])
def test_bitnet_outputs_equal_transformers(tmp_path, task):
    ref = make(task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "bitnet"))
    assert ours.hf_source["model_type"] == "bitnet"
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())
    ids, mask = padded_batch(V)
    labels = ids.masked_fill(mask == 0, -100) if task == "ForCausalLM" else None
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours(ids, attention_mask=mask, labels=labels)
    name = "logits" if task == "ForCausalLM" else "last_hidden_state"
    assert max_diff_unpadded(getattr(got, name), getattr(want, name), mask) <= 1e-4
    if labels is not None:
        assert abs(got.loss.item() - want.loss.item()) <= 1e-5


def test_bitnet_greedy_generation_equals_transformers(tmp_path):
    ref = make("ForCausalLM")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "bitnet"))
    assert_greedy_equal(ref, ours)


def test_a_quantization_config_is_refused_by_name(tmp_path):
    directory = save_hf(make("ForCausalLM"), tmp_path / "bitnet")
    config = json.loads((directory / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "bitnet", "quantization_mode": "online"}
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConversionError, match="quantization_config \\(quant_method 'bitnet'\\)"):
        archzoo.from_hf(directory)


def rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMS norm, normalised in float32 as transformers' BitNetRMSNorm does at any dtype."""
    h = x.float()
    return weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def test_out_norm_inner_norm_and_reglu_squared_are_the_formula():
    """attention: softmax(q k^T / sqrt(hd)) v per head (causal, no position), the heads
    concatenated, RMS-normed, then the output projection; ffn: down(rms(relu(g)^2 * u))."""
    spec = {"vocab_size": V, "d_model": 32, "n_layers": 1, "n_heads": 4, "d_ff": 48}
    spec.update(max_len=64, position="none", norm={"kind": "rmsnorm", "eps": 0.1})
    spec["attention"] = {"kind": "mha", "fused_qkv": False, "bias": False, "out_norm": True}
    spec["attention"]["n_kv_heads"] = 4
    spec["ffn"] = {"kind": "glu", "activation": "reglu_squared", "inner_norm": True}
    model = archzoo.build_model("llama2-7b", spec).double().eval()
    perturb(model, scale=0.3)
    block = model.decoder.blocks[0]
    attn, ffn = block.attention, block.ffn
    seen = []
    handle = attn.register_forward_hook(lambda m, args, out: seen.append((args[0], out)))
    with torch.no_grad():
        model(torch.randint(0, V, (2, 7), generator=torch.Generator().manual_seed(3)))
    handle.remove()
    x, got = seen[0]
    got = got[0] if isinstance(got, tuple) else got
    B, T, _ = x.shape
    with torch.no_grad():
        q, k, v = (
            (x @ p.weight.T).view(B, T, 4, 8).transpose(1, 2) for p in (attn.q, attn.k, attn.v)
        )
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        scores = (q @ k.transpose(-1, -2) / math.sqrt(8)).masked_fill(future, -math.inf)
        heads = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, 32)
        want = rms(heads, attn.out_norm.weight, 0.1) @ attn.out.weight.T
        assert (got - want).abs().max() <= 1e-10
        gated = torch.relu(x @ ffn.gate.weight.T) ** 2 * (x @ ffn.up.weight.T)
        want = rms(gated, ffn.inner_norm.weight, 0.1) @ ffn.down.weight.T
        assert (ffn(x) - want).abs().max() <= 1e-10

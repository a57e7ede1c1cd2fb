"""A.X-K1 (axk1, issue 33): moe's `output_norm` (the spec's norm over the routed plus shared
experts' sum) against the same block without it, and the family from tiny perturbed
transformers models with a random correction bias and a padded row: AXK1ForCausalLM,
AXK1Model and both classifiers within 1e-4, greedy tokens with the cache, the unused norm the
released checkpoints keep beside dense MLPs read past. (The export round trip: tests/
test_export.py's sweep; the zoo spec's count: tests/test_zoo_counts.py.)"""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import assert_greedy_equal, max_diff_unpadded, padded_batch, perturb, save_hf
from safetensors.torch import load_file, save_file

import archzoo

V = 96
AXK1 = dict(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=4,
    max_position_embeddings=64,
    n_routed_experts=8,
    num_experts_per_tok=2,
    moe_intermediate_size=16,
    q_lora_rank=24,
    kv_lora_rank=16,
    qk_nope_head_dim=8,
    qk_rope_head_dim=8,
    v_head_dim=8,
    n_group=2,
    topk_group=1,
    rms_norm_eps=1e-5,
    mlp_layer_types=["dense", "sparse", "sparse"],
    pad_token_id=0,
)
CLASSES = {
    "ForCausalLM": hf.AXK1ForCausalLM,
    "Model": hf.AXK1Model,
    "ForSequenceClassification": hf.AXK1ForSequenceClassification,
    "ForTokenClassification": hf.AXK1ForTokenClassification,
}


def make(task: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model = CLASSES[task](hf.AutoConfig.for_model("axk1", **AXK1))
    perturb(model, scale=0.1)
    g = torch.Generator().manual_seed(1)
    for name, buffer in model.named_buffers():  # a correction bias that changes the picks
        if name.endswith("e_score_correction_bias"):
            buffer.copy_(torch.randn(buffer.shape, generator=g))
    return model.eval()


def test_output_norm_normalises_the_routed_plus_shared_sum():
    ffn = {"kind": "moe", "n_experts": 4, "top_k": 2, "d_expert": 8, "n_shared": 1}
    spec = {"vocab_size": V, "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32}
    spec |= {"norm": {"kind": "rmsnorm", "eps": 1e-5}, "attention.n_kv_heads": 2}
    torch.manual_seed(0)
    normed = archzoo.build_model("llama2-7b", {**spec, "ffn": {**ffn, "output_norm": True}})
    plain = archzoo.build_model("llama2-7b", {**spec, "ffn": ffn})
    perturb(normed, scale=0.3)
    plain.load_state_dict(normed.state_dict(), strict=False)
    a, b = normed.decoder.blocks[0].ffn, plain.decoder.blocks[0].ffn
    assert [n for n, _ in a.named_parameters() if n.startswith("out_norm")] == ["out_norm.weight"]
    x = torch.randn(2, 5, 16, dtype=torch.float32)
    with torch.no_grad():
        y, w = b(x), a.out_norm.weight
        want = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5) * w
        assert torch.allclose(a(x), want, atol=1e-5)


@pytest.mark.parametrize("task", sorted(CLASSES))
def test_axk1_outputs_equal_transformers(tmp_path, task):
    ref = make(task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "axk1"))
    assert ours.hf_source["model_type"] == "axk1"
    assert ours.spec.data["ffn"]["output_norm"] is True
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())
    ids, mask = padded_batch(V)
    ids = ids.masked_fill(mask == 0, 0)  # the classifier finds each row's last token by pads
    with torch.no_grad():
        want, got = ref(input_ids=ids, attention_mask=mask), ours(ids, attention_mask=mask)
    name = "last_hidden_state" if task == "Model" else "logits"
    a, b = getattr(got, name), getattr(want, name)
    if a.dim() == 2:  # one row of scores per sequence
        a, b, mask = a[:, None], b[:, None], torch.ones(2, 1, dtype=torch.long)
    assert max_diff_unpadded(a, b, mask) <= 1e-4


def test_axk1_greedy_tokens_equal_transformers(tmp_path):
    ref = make("ForCausalLM")
    assert_greedy_equal(ref, archzoo.from_hf(save_hf(ref, tmp_path / "axk1")))


def test_the_unused_norm_beside_a_dense_mlp_is_read_past(tmp_path):
    ref = make("ForCausalLM")
    directory = save_hf(ref, tmp_path / "axk1")
    tensors = load_file(directory / "model.safetensors")
    tensors["model.layers.0.post_mlp_layernorm.weight"] = torch.ones(32)  # layer 0 is dense
    save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})
    ours = archzoo.from_hf(directory)
    ids, mask = padded_batch(V)
    with torch.no_grad():
        want, got = (
            ref(input_ids=ids, attention_mask=mask).logits,
            ours(ids, attention_mask=mask).logits,
        )
    assert max_diff_unpadded(got, want, mask) <= 1e-4

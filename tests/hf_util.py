"""Shared helpers for Hugging Face parity tests: tiny random models, perturbed and saved."""

from __future__ import annotations

import json
from pathlib import Path

import torch


@torch.no_grad()
def perturb(model: torch.nn.Module, seed: int = 0, scale: float = 0.05) -> None:
    """Add noise to every parameter so zero biases and unit norms hide no mistake."""
    g = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        p.add_(torch.randn(p.shape, generator=g) * scale)


def save_hf(model: torch.nn.Module, directory: Path, model_type: str | None = None) -> Path:
    """Save as transformers does; `model_type`: the config.json's, where the type's config
    class is another type's and writes that one's name (gpt-sw3's GPT2Config writes gpt2)."""
    model.save_pretrained(directory, safe_serialization=True)
    if model_type is not None and model.config.model_type != model_type:
        path = Path(directory) / "config.json"
        config = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps({**config, "model_type": model_type}), encoding="utf-8")
    return directory


def padded_batch(vocab: int, *, batch: int = 2, length: int = 10, real: int = 6, low: int = 3):
    """Random ids and a mask whose last row is right-padded after `real` tokens."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(low, vocab, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[-1, real:] = 0
    return ids, mask


def max_diff_unpadded(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> float:
    """Max |a - b| over positions where mask is 1: a, b (B, T, V)."""
    keep = mask.bool()
    return (a - b).abs()[keep].max().item()


V = 96  # vocabulary of every tiny test model
# post_ln's language-adapter options (added with X-MOD) at their defaults: no adapters
NO_LANGUAGE_ADAPTERS = {
    "languages": [],
    "default_language": None,
    "adapter_dim": None,
    "adapter_activation": "gelu",
    "adapter_norm": "ffn",
    "adapter_residual": "normed",
}

# model type -> (transformers class, config class, a tiny configuration)
TINY: dict[str, tuple[str, str, dict]] = {
    "gpt2": ("GPT2LMHeadModel", "GPT2Config", dict(n_layer=2, n_embd=32, n_head=4, n_positions=64)),
    "bert": (
        "BertForMaskedLM",
        "BertConfig",
        dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64),
    ),
    "roberta": (
        "RobertaForMaskedLM",
        "RobertaConfig",
        dict(
            num_hidden_layers=2,
            hidden_size=32,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=66,
            type_vocab_size=1,
        ),
    ),
    "llama": (
        "LlamaForCausalLM",
        "LlamaConfig",
        dict(
            num_hidden_layers=2,
            hidden_size=32,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=64,
        ),
    ),
    "bloom": ("BloomForCausalLM", "BloomConfig", dict(n_layer=2, hidden_size=48, n_head=6)),
    "gpt_neox": (
        "GPTNeoXForCausalLM",
        "GPTNeoXConfig",
        dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64),
    ),
    "t5": (
        "T5ForConditionalGeneration",
        "T5Config",
        dict(num_layers=2, d_model=32, num_heads=4, d_kv=8, d_ff=64),
    ),
    "bart": (
        "BartForConditionalGeneration",
        "BartConfig",
        dict(
            encoder_layers=2,
            decoder_layers=2,
            d_model=32,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
        ),
    ),
}


def tiny_hf(model_type: str, **overrides) -> torch.nn.Module:
    """A tiny transformers model of `model_type` with random weights (vocab V, 64 positions)."""
    import transformers

    model_cls, config_cls, base = TINY[model_type]
    sizes = {"vocab_size": V}
    if model_type not in ("bloom", "t5", "gpt2", "roberta"):
        sizes["max_position_embeddings"] = 64
    config = getattr(transformers, config_cls)(**{**sizes, **base, **overrides})
    return getattr(transformers, model_cls)(config)


def assert_causal_lm_equal(ref: torch.nn.Module, ours, *, vocab: int = V) -> None:
    """Logits (a right-padded row) within 1e-4 and the `labels` loss within 1e-5 of
    transformers' (and the router loss, where transformers reports one)."""
    ids, mask = padded_batch(vocab)
    labels = ids.masked_fill(mask == 0, -100)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours(ids, attention_mask=mask, labels=labels)
    assert max_diff_unpadded(got.logits, want.logits, mask) <= 1e-4
    assert abs(got.loss.item() - want.loss.item()) <= 1e-5
    if getattr(want, "aux_loss", None) is not None:
        assert abs(got.aux_loss.item() - want.aux_loss.item()) <= 1e-5


def assert_seq2seq_equal(ref: torch.nn.Module, ours, inputs: tuple, directory: Path) -> None:
    """Logits within 1e-4 and the `labels` loss within 1e-5 of transformers' for inputs
    (ids, mask, decoder ids); saved to and loaded from `directory` bit-identically."""
    import archzoo

    ids, mask, dec = inputs
    labels = dec.roll(-1, 1)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask, decoder_input_ids=dec, labels=labels)
        got = ours(ids, attention_mask=mask, decoder_input_ids=dec, labels=labels)
    assert (want.logits - got.logits).abs().max().item() <= 1e-4
    assert abs(want.loss.item() - got.loss.item()) <= 1e-5
    archzoo.save(ours, directory / "m.safetensors")
    again = archzoo.load(directory / "m.safetensors")
    a, b = ours.state_dict(), again.state_dict()
    assert again.spec == ours.spec and all(torch.equal(a[k], b[k]) for k in a)


def assert_greedy_equal(ref: torch.nn.Module, ours, *, vocab: int = V) -> None:
    """20 greedy tokens with the cache, for one prompt and a left-padded batch of two, are
    transformers' tokens."""
    g = torch.Generator().manual_seed(4)
    single = torch.randint(3, vocab, (1, 7), generator=g)
    batch = torch.randint(3, vocab, (2, 7), generator=g)
    mask = torch.ones_like(batch)
    mask[0, :3] = 0  # left padding
    kwargs = {"max_new_tokens": 20, "do_sample": False, "pad_token_id": 0}
    assert ours.generate(single, **kwargs).tolist() == ref.generate(single, **kwargs).tolist()
    want = ref.generate(batch, attention_mask=mask, **kwargs)
    got = ours.generate(batch, attention_mask=mask, use_cache=True, **kwargs)
    assert got.tolist() == want.tolist()


def table_export(ref: torch.nn.Module, ours) -> dict[str, torch.Tensor]:
    """archzoo's tensors under HF names, through `ref`'s converter table run backwards."""
    import archzoo
    from archzoo.parts.hf_tensors import ZooNames

    converter = archzoo.get_registry().converter(ref.config.model_type)
    return converter.export_state(ours.state_dict(), ZooNames.of(ours), ours.spec.data)


def assert_seq2seq_generation_equal(ref: torch.nn.Module, ours, ids, mask) -> None:
    """20 greedy tokens and a 4-beam search of 12, for the first prompt alone and for the
    (right-padded) batch, are transformers' tokens."""
    for kwargs in (
        {"max_new_tokens": 20, "min_new_tokens": 20},
        {"num_beams": 4, "max_new_tokens": 12},
    ):
        for rows in (slice(0, 1), slice(0, 2)):
            expected = ref.generate(ids[rows], attention_mask=mask[rows], do_sample=False, **kwargs)
            got = ours.generate(ids[rows], attention_mask=mask[rows], **kwargs)
            assert torch.equal(got, expected), (kwargs, got, expected)


def assert_left_padded_equal(ref: torch.nn.Module, ours) -> None:
    """A left-padded row's logits at its real tokens within 1e-4 of transformers'."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(3, V, (2, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :4] = 0
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).logits
        got = ours(ids, attention_mask=mask).logits
    assert (want - got)[mask.bool()].abs().max() <= 1e-4

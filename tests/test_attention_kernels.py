"""Attention kernels by name: every registered kernel against an explicit float64 reference for
every call it says it serves, the run-time choice on build, load, from_hf and the model, the
fallback when a kernel refuses, and the old spec keys that chose a kernel."""

from __future__ import annotations

import logging
import math
import warnings

import pytest
import torch

import archzoo
from archzoo.parts.kernels import Scoring
from archzoo.parts.masks import AttentionMask
from archzoo.parts.registry import RegistryError, get_registry
from archzoo.plugins.attention.local import LocalPattern
from archzoo.plugins.attention.longformer import LongformerPattern

B, H, HKV, T, HD = 2, 4, 2, 12, 8


def reference(q, k, v, mask, scoring):
    """softmax(cap(q k^T * scale + bias)) over the allowed keys (and the sinks), @ v, in
    float64, written from the formula: (B, H, Tq, hd); a row with no allowed key gives 0."""
    q, k, v = (t.double() for t in (q, k, v))
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    scale = scoring.scale if scoring.scale is not None else q.shape[-1] ** -0.5
    s = q @ k.transpose(-1, -2) * scale  # (B, H, Tq, Tk)
    if scoring.bias is not None:
        s = s + scoring.bias.double()
    if scoring.softcap is not None:
        s = scoring.softcap * torch.tanh(s / scoring.softcap)
    allowed = mask.allowed()
    if allowed is not None:
        s = s.masked_fill(~allowed, -math.inf)
    if scoring.sinks is not None:
        sink = scoring.sinks.double().view(1, -1, 1, 1).expand(*s.shape[:-1], 1)
        p = torch.cat([s, sink], -1).softmax(-1)[..., :-1]
    else:
        p = s.softmax(-1)
    p = p.nan_to_num(0.0)  # rows with no key
    return p @ v


def calls():
    """(name, q, k, v, mask, scoring): the kinds of call the template hands a kernel."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, T, HD, generator=g)
    k, v = torch.randn(B, HKV, T, HD, generator=g), torch.randn(B, HKV, T, HD, generator=g)
    pad = torch.ones(B, T, dtype=torch.bool)
    pad[1, :3] = False  # left padding: row 1's first queries see no key under causal
    bias = torch.randn(1, H, T, T, generator=g) * 0.5
    sinks = torch.randn(H, generator=g)
    causal = AttentionMask(T, T, causal=True)
    padded = AttentionMask(T, T, causal=True, key_padding=pad)
    local = padded.with_pattern(LocalPattern(4, 4))
    glob = torch.zeros(T, dtype=torch.bool)
    glob[0] = True
    longformer = AttentionMask(T, T, key_padding=pad).with_pattern(
        LongformerPattern(2, glob, 4, None)
    )
    decode = AttentionMask(3, T, causal=True, key_padding=pad)  # 3 new queries, cached keys
    yield "causal", q, k, v, causal, Scoring()
    yield "padded", q, k, v, padded, Scoring(scale=0.3)
    yield "bias", q, k, v, padded, Scoring(bias=bias)
    yield "softcap", q, k, v, padded, Scoring(softcap=2.0)
    yield "sinks", q, k, v, padded, Scoring(sinks=sinks)
    yield "local", q, k, v, local, Scoring()
    yield "local-sinks", q, k, v, local, Scoring(sinks=sinks)
    yield "longformer", q, k, v, longformer, Scoring()
    yield "decode", q[:, :, -3:], k, v, decode, Scoring()


CALLS = {c[0]: c[1:] for c in calls()}
KERNELS = archzoo.list_attention_impls()


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("name", KERNELS)
def test_each_kernel_matches_the_formula_on_every_call_it_serves(name, call):
    q, k, v, mask, scoring = CALLS[call]
    kernel = get_registry().kernel(name)
    low = name in ("eager", "baddbmm")  # transformers' eager order: 16-bit floats only
    dtype = torch.bfloat16 if low else torch.float32
    q, k, v = (t.to(dtype) for t in (q, k, v))
    why = kernel.refuses(q, k, mask, scoring)
    if why is not None:
        assert isinstance(why, str) and why
        pytest.skip(f"{name} refuses {call}: {why}")
    out, probs = kernel.run(q, k, v, mask, scoring)
    expected = reference(q, k, v, mask, scoring)
    tol = 3e-2 if low else 2e-5
    assert out.dtype == dtype and out.shape == expected.shape
    torch.testing.assert_close(out.double(), expected, atol=tol, rtol=tol)
    if probs is not None:  # probabilities too, where the kernel forms them
        assert probs.shape == (B, H, q.shape[2], k.shape[2])


def test_each_built_in_kernel_serves_some_call():
    """No kernel refuses everything: each runs at least one of the calls above."""
    for name in KERNELS:
        kernel = get_registry().kernel(name)
        served = []
        for q, k, _, mask, scoring in CALLS.values():
            dtype = torch.bfloat16 if name in ("eager", "baddbmm") else torch.float32
            if kernel.refuses(q.to(dtype), k.to(dtype), mask, scoring) is None:
                served.append(1)
        assert served, name


TINY = {"n_layers": 2, "d_model": 32, "n_heads": 4, "vocab_size": 64, "max_len": 32}
ATTENTIONS = {  # a tiny model of each registered attention, and of the position terms
    "mha": ("gpt2", {}),
    "mha-gqa-rotary": ("llama2-7b", {"attention.n_kv_heads": 2}),
    "mha-alibi": ("bloom-560m", {}),
    "mha-t5-bias-cross": ("t5-small", {}),
    "mha-bart-cross": ("bart-base", {}),
    "mha-scaled-query": ("opt-125m", {}),
    "mha-falcon": ("falcon-7b", {}),
    "local-softcap-gemma2": ("gemma2-2b", {}),
    "local-gpt-neo": ("gpt-neo-125m", {}),
    "local": ("gpt2", {"attention": {"kind": "local", "window": 4}}),
    "strided": ("gpt2", {"attention": {"kind": "strided", "stride": 4}}),
    "fixed": ("gpt2", {"attention": {"kind": "fixed", "block": 4}}),
    "block_sparse": ("gpt2", {"attention": {"kind": "block_sparse", "block": 4}}),
    "sparse-transformer": ("sparse-transformer", {}),
    "longformer": ("longformer-base", {"attention.window": 4, "attention.block": 4}),
    "bigbird": ("bigbird-roberta-base", {"attention.block": 2, "attention.dense_upto": 0}),
    "block_local-transient_global": ("long-t5-tglobal-base", {}),
    "disentangled": ("deberta-v3-base", {}),
    "mla": ("deepseek-v3", {"n_layers": 3, "attention.kv_lora_rank": 16}),
    "diff_mha": ("diffllama-1.2b", {"head_dim": 8, "attention.n_kv_heads": 2}),  # 2 x hd values
    "moa": ("jetmoe-8b", {"head_dim": 8, "attention.n_kv_heads": 2, "ffn.n_experts": 4}),
    "ngram_streams": ("prophetnet-large-uncased", {}),  # predicting streams: an explicit mask
    "pooled_relative": (  # Funnel's terms as the score bias; pooled, upsampled, padded
        "funnel-small",
        {"n_layers": 14, "head_dim": 8, "head": {"kind": "mlm", "transform": False}},
    ),
}


@pytest.mark.parametrize("case", sorted(ATTENTIONS))
def test_every_kernel_gives_each_attention_the_same_logits(case):
    """A model's logits are the same (fp32, 1e-5) whichever kernel its layers run; kernels
    that cannot serve a layer's call hand it on. Left padding included."""
    name, more = ATTENTIONS[case]
    overrides = {**TINY, **more}
    torch.manual_seed(0)
    try:
        model = archzoo.build_model(name, overrides=overrides).eval()
    except archzoo.SpecError as exc:
        pytest.fail(f"{case}: {exc}")
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    inputs = {"attention_mask": mask}
    if model.family == "encoder-decoder":
        inputs["decoder_input_ids"] = ids[:, :6]
    with torch.no_grad():
        expected = model.set_attention_impl("math")(ids, **inputs).logits
        for impl in KERNELS:
            got = model.set_attention_impl(impl)(ids, **inputs).logits
            keep = mask.bool()
            if model.family == "encoder-decoder":
                torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
            elif model.family == "decoder":  # padded queries of a decoder see no key
                torch.testing.assert_close(got[keep], expected[keep], atol=1e-5, rtol=1e-5)
            else:
                torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_the_kernel_is_chosen_on_build_on_the_model_and_on_load(tmp_path):
    model = archzoo.build_model("gpt2", overrides=TINY, attention_impl="math")
    assert model.attention_impl == "math"
    assert model.set_attention_impl("sdpa") is model and model.attention_impl == "sdpa"
    path = tmp_path / "m.safetensors"
    archzoo.save(model, path)
    assert archzoo.load(path).attention_impl == "auto"
    assert archzoo.load(path, attention_impl="flex").attention_impl == "flex"


def test_an_unknown_kernel_is_a_clear_error_listing_the_registered_ones():
    with pytest.raises(RegistryError, match=r"unknown attention kernel 'fast'; registered"):
        archzoo.build_model("gpt2", overrides=TINY, attention_impl="fast")
    model = archzoo.build_model("gpt2", overrides=TINY)
    with pytest.raises(RegistryError, match="sdpa"):
        model.set_attention_impl("spda")
    with pytest.raises(ValueError, match="stack 'encoder' is not one of"):
        model.set_attention_impl("sdpa", stack="encoder")


def test_a_refused_call_runs_auto_and_says_why_in_the_debug_log(caplog):
    """flex refuses a score bias tensor (ALiBi here): the call runs auto, with the same
    numbers, and the reason is in archzoo.parts.kernels' debug log."""
    model = archzoo.build_model("bloom-560m", overrides=TINY).eval()
    ids = torch.randint(0, 64, (1, 10), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = model.set_attention_impl("sdpa")(ids).logits
        with caplog.at_level(logging.DEBUG, logger="archzoo.parts.kernels"):
            got = model.set_attention_impl("flex")(ids).logits
    assert torch.equal(got, expected)
    assert "attention kernel 'flex' cannot serve this call (a score bias tensor): auto" in (
        caplog.text
    )


def test_old_spec_keys_load_with_a_deprecation_warning_mapped_to_the_kernel():
    cases = [
        ({"eager": True}, "eager"),
        ({"eager": True, "fused_bias": True}, "baddbmm"),
        ({"kind": "local", "window": 4, "impl": "dense"}, "sdpa"),
        ({"kind": "local", "window": 4, "impl": "blocked"}, "blocked"),
    ]
    for keys, kernel in cases:
        attention = {"kind": "mha", **keys}
        with pytest.warns(DeprecationWarning, match="the kernel is now a run-time choice"):
            spec = archzoo.load_spec({"extends": "gpt2", **TINY, "attention": attention})
        assert not any(k in spec.data["attention"] for k in ("eager", "fused_bias", "impl"))
        assert archzoo.build_model(spec).attention_impl == kernel
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a spec without them loads without a warning
        archzoo.load_spec({"extends": "gpt2", **TINY})


def test_options_named_after_a_model_load_as_the_typed_options_that_say_what_they_do():
    """`bias_apart`, `scale_query`, `kv_broadcast` and `clip_qkv` load, with a
    DeprecationWarning, as `bias_add`, `scale_at`, `kv_heads_reach_kernel` and `qkv_clamp`:
    the same resolved spec, the same logits; an override with an old name wins over the
    resolved new option; a value that is not a boolean is an error naming the key."""
    old = {"bias_apart": True, "scale_query": True, "kv_broadcast": True, "clip_qkv": 0.5}
    new = {
        "bias_add": "after_matmul",
        "scale_at": "query",
        "kv_heads_reach_kernel": "broadcast",
        "qkv_clamp": 0.5,
    }
    base = {"extends": "gpt2", **TINY}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names load without a warning
        typed = archzoo.load_spec({**base, "attention": {"kind": "mha", "n_kv_heads": 1, **new}})
    with pytest.warns(DeprecationWarning, match="bias_apart -> bias_add, scale_query -> scale_at"):
        named = archzoo.load_spec({**base, "attention": {"kind": "mha", "n_kv_heads": 1, **old}})
    assert named.data == typed.data
    torch.manual_seed(0)
    a = archzoo.build_model(typed).eval()
    b = archzoo.build_model(named).eval()
    b.load_state_dict(a.state_dict())
    ids = torch.randint(0, TINY["vocab_size"], (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(a(ids).logits, b(ids).logits)
    with pytest.warns(DeprecationWarning):
        again = archzoo.load_spec(typed, overrides={"attention.scale_query": False})
    assert again.data["attention"]["scale_at"] == "scores"
    with pytest.warns(DeprecationWarning), pytest.raises(archzoo.SpecError) as err:
        archzoo.load_spec({**base, "attention": {"kind": "mha", "kv_broadcast": "yes"}})
    assert "attention.kv_broadcast: must be true or false, got 'yes'" in str(err.value)


def test_the_zoo_and_the_converters_write_no_deprecated_key():
    """Every zoo spec and every converter's fixed spec parts load without a DeprecationWarning:
    the project itself never writes a renamed option or a kernel key."""
    from archzoo.parts.registry import get_registry

    reg = get_registry()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for name in archzoo.list_models():
            archzoo.load_spec(name)
    old = ("scale_query", "bias_apart", "kv_broadcast", "clip_qkv", "eager", "fused_bias")
    for model_type in reg.model_types():
        fixed = repr(getattr(reg.converter(model_type), "fixed", {}))
        assert not [k for k in old if f"'{k}'" in fixed], (model_type, fixed)


def test_attn_impl_on_the_commands_that_run_models(tmp_path):
    """`zoo train --attn-impl` trains with that kernel; `zoo generate --attn-impl` decodes
    with it (the tokens archzoo.load(..., attention_impl=) gives); an unknown name is a
    one-line error on each command that runs a model."""
    from click.testing import CliRunner

    from archzoo.cli.main import main
    from archzoo.errors import printable
    from archzoo.training import TrainConfig, train
    from archzoo.training.tokenizer import ByteTokenizer

    (tmp_path / "corpus.txt").write_text("the cat sat on the mat. " * 40, encoding="utf-8")
    cfg = TrainConfig(
        data=[str(tmp_path / "corpus.txt")],
        out=str(tmp_path / "run"),
        steps=2,
        batch=4,
        seq_len=16,
        eval_examples=2,
        eval_fraction=0.1,
        progress=False,
        attention_impl="math",
    )
    sizes = {"n_layers": 1, "d_model": 32, "n_heads": 2, "d_ff": 64, "vocab_size": 260}
    result = train("gpt2", cfg, {**sizes, "max_len": 64, "dropout": 0.0})
    assert result["history"][-1]["step"] == 2
    run = tmp_path / "run"

    def zoo(*args, code=0):
        got = CliRunner().invoke(main, [str(a) for a in args])
        assert got.exit_code == code, (got.output, got.exception)
        return got.output

    out = zoo("generate", run, "--prompt", "the", "--max-new-tokens", "4", "--dtype",
              "bfloat16", "--attn-impl", "eager")  # fmt: skip
    model = archzoo.load(run, dtype=torch.bfloat16, attention_impl="eager")
    assert model.attention_impl == "eager"
    tokens = model.generate(torch.tensor([list(b"the")]), max_new_tokens=4)[0].tolist()
    assert out == printable(ByteTokenizer().decode(tokens)) + "\n"
    for command in ("generate", "attn"):
        err = zoo(command, run, "--prompt" if command == "generate" else "--text", "x",
                  "--attn-impl", "nope", code=2)  # fmt: skip
        assert err.startswith("Error: --attn-impl: unknown attention kernel 'nope'; registered")
    err = zoo("train", "gpt2", "--data", tmp_path / "corpus.txt", "--attn-impl", "nope",
              "--out", tmp_path / "r2", code=2)  # fmt: skip
    assert "--attn-impl 'nope': not an attention kernel; one of auto, " in err
    for command in ("generate", "attn", "train", "compare", "eval"):
        assert "--attn-impl" in zoo(command, "--help")

"""`zoo list hf-types` and docs/hf-coverage.md: every model_type of the installed transformers
is supported (a registered converter), refused (naming what archzoo lacks) or out of scope;
the page is the report; every supported type is in the import sweep that matches logits."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

import archzoo
from archzoo.cli.main import main
from archzoo.hf.coverage import Coverage, counts, transformers_version
from archzoo.parts.registry import get_registry

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def report() -> list[dict]:
    """`zoo list hf-types --json`, run once (the sweep reads ~800 transformers configs)."""
    result = CliRunner().invoke(main, ["list", "hf-types", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_every_transformers_type_has_one_row(report):
    assert [r["model_type"] for r in report] == sorted(CONFIG_MAPPING_NAMES)
    assert {r["status"] for r in report} == {"supported", "refused", "out of scope"}
    assert all(r["detail"] for r in report)


def test_the_page_is_the_report_of_the_pinned_version(report):
    spec = importlib.util.spec_from_file_location("make", ROOT / "docs/make_hf_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = [Coverage(**r) for r in report]
    page = (ROOT / "docs/hf-coverage.md").read_text(encoding="utf-8")
    pinned = re.search(r"model_type` of transformers (\S+), as", page).group(1)
    if pinned != transformers_version():  # the page is the report of one version
        pytest.skip(
            f"docs/hf-coverage.md is for transformers {pinned}, {transformers_version()} "
            "is installed: regenerate it where the pin moves"
        )
    assert page == module.render(rows), "docs/hf-coverage.md is stale: run docs/make_hf_coverage.py"
    shown = counts(rows)
    assert f"Counts: {shown['supported']} supported, {shown['refused']} refused" in page


def test_supported_types_are_the_converters_and_each_is_in_the_logits_sweep(report):
    """Every type called supported has a converter, and tests/test_export.py's sweep imports
    a tiny perturbed model of it and matches transformers' logits (to_hf's probe, 1e-4)."""
    from test_export import TYPES

    supported = {r["model_type"] for r in report if r["status"] == "supported"}
    registered = set(get_registry().model_types()) & set(CONFIG_MAPPING_NAMES)
    assert supported == registered
    assert supported <= set(TYPES), sorted(supported - set(TYPES))
    rows = {r["model_type"]: r["detail"] for r in report}
    assert rows["camembert"] == "alias of roberta (RobertaConverter): RoBERTa's classes"
    assert rows["llama"] == "LlamaConverter"
    # a head that transformers maps beside text backbones (JEV's decision head on Qwen2 and
    # Qwen3.5) does not make a type another modality: the Qwen3.5 text model is text
    assert rows["qwen3_5_text"] == "Qwen3_5TextConverter"
    assert {r["model_type"]: r["status"] for r in report}["jev"] == "out of scope"


def test_refused_types_name_the_missing_mechanism_here_and_in_from_hf(report, tmp_path):
    rows = {r["model_type"]: r for r in report}
    assert rows["fnet"] == {  # (llama4_text was the example until it imported)
        "model_type": "fnet",
        "status": "refused",
        "detail": "Fourier-transform token mixing in place of attention",
    }
    assert rows["encoder-decoder"]["detail"] == (
        "an encoder-decoder assembled from two separately configured model types"
    )
    assert rows["rwkv"]["detail"] == (
        "RWKV's time mixing (the WKV recurrence with token shift) and channel mixing"
    )
    assert rows["gemma3"]["status"] == rows["clip"]["status"] == "out of scope"
    assert rows["visual_bert"]["detail"] == "inputs beyond text (visual_embedding_dim)"
    # layout boxes (BROS) and a drafter fed another model's hidden states: its config class
    # cannot be built without arguments, so its declared fields are read
    assert rows["bros"]["detail"] == "inputs beyond text (dim_bbox)"
    assert rows["gemma4_assistant"]["detail"] == "inputs beyond text (backbone_hidden_size)"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "fnet"}))
    (tmp_path / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(archzoo.ConversionError, match=r"'fnet' \(it needs Fourier-transform "):
        archzoo.from_hf(tmp_path)


def test_the_table_prints_with_totals(report, monkeypatch):
    from archzoo.cli import listing

    monkeypatch.setattr(listing, "hf_type_rows", lambda: report)  # the sweep ran once above
    result = CliRunner().invoke(main, ["list", "hf-types"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].split() == ["MODEL_TYPE", "STATUS", "WHY"]
    assert any(line.split()[:2] == ["camembert", "supported"] for line in lines)
    assert lines[-1].endswith("out of scope") and "supported, " in lines[-1]


def test_nllb_moe_transformers_runs_experts_0_and_1_only_so_its_oracle_is_patched():
    """transformers 5.24 as shipped cannot be NLLB-MoE's oracle: with tokens routed to
    experts 2 and 3 (the router's own choice, checked), filling those experts' weights with
    1000 leaves the logits unchanged, while expert 0's changes them. nllb-moe is supported
    and its parity tests (tests/test_nllb_moe.py) run transformers with that dispatch line
    fixed. When this fails, transformers fixed NllbMoeExperts and the patch can go."""
    import torch
    import transformers as hf

    config = hf.NllbMoeConfig(
        vocab_size=64,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        num_experts=4,
        encoder_sparse_step=1,
        decoder_sparse_step=1,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    model = hf.NllbMoeForConditionalGeneration(config).eval()
    g = torch.Generator().manual_seed(0)
    ids, dec = torch.randint(3, 64, (2, 9), generator=g), torch.randint(3, 64, (2, 5), generator=g)
    router = model.model.encoder.layers[0].ffn.router
    with torch.no_grad():
        hidden = model.model.encoder.embed_tokens(ids).view(-1, 16)
        chosen = set(router(hidden)[1].argmax(-1).tolist())
        assert chosen & {2, 3}  # some tokens' first choice is expert 2 or 3
        before = model(ids, decoder_input_ids=dec).logits
        for name, p in model.named_parameters():
            if ".experts.expert_2." in name or ".experts.expert_3." in name:
                p.fill_(1e3)
        assert torch.equal(model(ids, decoder_input_ids=dec).logits, before)
        for name, p in model.named_parameters():
            if ".experts.expert_0." in name:
                p.fill_(1e3)
        assert not torch.equal(model(ids, decoder_input_ids=dec).logits, before)
    from test_nllb_moe import fixed_experts_forward

    from archzoo.plugins.converters.missing import MISSING_MECHANISMS

    assert "nllb-moe" not in MISSING_MECHANISMS and get_registry().converter("nllb-moe")
    assert callable(fixed_experts_forward)

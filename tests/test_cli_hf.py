"""`zoo import` and `zoo generate` on tiny HF checkpoints made in the test."""

from __future__ import annotations

import json

import torch
import transformers as hf
from click.testing import CliRunner
from conftest import WORDS, write_tokenizer
from hf_util import perturb, save_hf

import archzoo
from archzoo.cli.main import main


def tiny_gpt2(tmp_path):
    model = hf.GPT2LMHeadModel(
        hf.GPT2Config(
            n_layer=2,
            n_embd=32,
            n_head=4,
            vocab_size=len(WORDS),
            n_positions=64,
            eos_token_id=1,
            bos_token_id=1,
        )
    )
    perturb(model, scale=0.2)
    directory = save_hf(model.eval(), tmp_path / "gpt2")
    return model, directory


def test_zoo_import_prints_spec_and_saves_a_loadable_file(tmp_path):
    ref, directory = tiny_gpt2(tmp_path)
    out = tmp_path / "m.safetensors"
    result = CliRunner().invoke(main, ["import", str(directory), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["family"] == "decoder"
    assert report["params"] == sum(p.numel() for p in ref.parameters())
    ids = torch.randint(0, len(WORDS), (1, 6))
    with torch.no_grad():
        torch.testing.assert_close(
            archzoo.load(out)(ids).logits, ref(ids).logits, atol=1e-4, rtol=0
        )
    text = CliRunner().invoke(main, ["import", str(directory)])
    assert text.exit_code == 0 and "family: decoder" in text.output and "n_layers: 2" in text.output


def test_zoo_import_of_an_unknown_model_type_exits_2(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "rwkv"}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    result = CliRunner().invoke(main, ["import", str(tmp_path)])
    assert result.exit_code == 2
    assert "unsupported model_type 'rwkv'" in result.output and "Traceback" not in result.output


def test_zoo_generate_prints_the_greedy_continuation(tmp_path):
    _, directory = tiny_gpt2(tmp_path)
    tok = write_tokenizer(directory)
    prompt = "w3 w7 w11"
    result = CliRunner().invoke(
        main,
        [
            "generate",
            str(directory),
            "--prompt",
            prompt,
            "--max-new-tokens",
            "8",
            "--min-new-tokens",
            "8",
        ],
    )
    assert result.exit_code == 0, result.output
    model = archzoo.from_hf(directory)
    ids = torch.tensor([tok.encode(prompt).ids])
    expected = model.generate(ids, max_new_tokens=8, min_new_tokens=8)[0].tolist()
    assert result.output.strip() == tok.decode(expected)
    assert len(result.output.split()) == 11  # 3 prompt words + 8 new ones, space-separated


def test_zoo_generate_without_tokenizer_is_a_clear_error(tmp_path):
    _, directory = tiny_gpt2(tmp_path)
    result = CliRunner().invoke(main, ["generate", str(directory), "--prompt", "w1"])
    assert result.exit_code == 2 and "no tokenizer.json" in result.output

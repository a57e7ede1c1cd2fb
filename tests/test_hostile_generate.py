"""Hostile `zoo generate` arguments: refused with exit 2 before any text is printed."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from hostile_util import zoo_fails

import archzoo
from archzoo.cli.main import main


@pytest.mark.parametrize(
    "option, value, words",
    [
        ("--temperature", "nan", "must be a finite number > 0, got nan"),
        ("--temperature", "inf", "must be a finite number > 0, got inf"),
        ("--temperature", "0", "must be a finite number > 0, got 0.0"),
        ("--temperature", "-1", "must be a finite number > 0, got -1.0"),
        ("--temperature", "hot", "'hot' is not a valid float"),
        ("--top-p", "nan", "must be in (0, 1], got nan"),
        ("--top-p", "0", "must be in (0, 1], got 0.0"),
        ("--top-p", "1.5", "must be in (0, 1], got 1.5"),
        ("--top-k", "-1", "-1 is not in the range x>=0"),
        ("--max-new-tokens", "0", "0 is not in the range x>=1"),
        ("--num-beams", "0", "0 is not in the range x>=1"),
        ("--seed", "1.5", "'1.5' is not a valid integer"),
        ("--seed", str(2**64), "out of range: a seed is an integer in [-2**63, 2**64)"),
    ],
)
def test_bad_generation_arguments_fail_before_loading(option, value, words, tmp_path):
    out = zoo_fails(["generate", tmp_path / "none.safetensors", "--prompt", "hi", option, value])
    assert option in out and words in out


def test_more_tokens_than_max_len_is_refused_before_any_output(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {f"w{i}": i for i in range(64)}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="w0"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    model = archzoo.build_model(
        "gpt2", {"n_layers": 1, "d_model": 16, "n_heads": 2, "vocab_size": 64, "max_len": 8}
    )
    archzoo.save(model, tmp_path / "m.safetensors")
    args = ["generate", str(tmp_path / "m.safetensors"), "--prompt", "w1 w2 w3"]
    result = CliRunner().invoke(main, [*args, "--max-new-tokens", "6"])
    assert result.exit_code == 2 and result.stdout == ""
    assert "--max-new-tokens 6 with a 3-token prompt needs 9 positions" in result.stderr
    assert "has max_len 8" in result.stderr
    ok = CliRunner().invoke(main, [*args, "--max-new-tokens", "5"])
    assert ok.exit_code == 0, ok.output
    assert len(ok.stdout.split()) == 8  # the prompt and five new words

"""Shared tiny model sizes, a tiny word-level tokenizer, and fixtures that build on them.

Test files import the constants and helpers (`from conftest import tiny`) where they are
needed at import time (parametrisation, module-level specs) and use the fixtures otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

# The sizes almost every test model uses: small enough to build and run in milliseconds.
TINY_SIZES: dict[str, Any] = {
    "vocab_size": 50,
    "d_model": 32,
    "n_heads": 4,
    "d_ff": 64,
    "n_layers": 2,
    "max_len": 64,
    "dropout": 0.0,
}
# A word-level vocabulary for `zoo generate` tests: ids 0 and 1 are pad and EOS.
WORDS = ["<pad>", "<eos>"] + [f"w{i}" for i in range(62)]


def tiny(*, without: tuple[str, ...] = (), **changes: Any) -> dict[str, Any]:
    """The shared tiny sizes with `changes` on top and the keys in `without` left out."""
    out = {k: v for k, v in TINY_SIZES.items() if k not in without}
    out.update(changes)
    return out


def write_tokenizer(directory: Path) -> Any:
    """Save a whitespace word-level tokenizer.json over WORDS in `directory`; return it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.save(str(directory / "tokenizer.json"))
    return tok


@pytest.fixture
def tiny_sizes() -> dict[str, Any]:
    """A fresh copy of the shared tiny sizes (a test may change it freely)."""
    return tiny()


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> tuple[Path, Any]:
    """A temporary directory holding tokenizer.json over WORDS, and the tokenizer."""
    return tmp_path, write_tokenizer(tmp_path)

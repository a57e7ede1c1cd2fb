"""Tokenizers for training: raw bytes (no files needed) or a Hugging Face tokenizer.json."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ..tokenizer_file import read_tokenizer

# special tokens looked up by name in a tokenizer.json, first match wins
SPECIAL_NAMES = {
    "pad": ("<pad>", "[PAD]", "<|pad|>", "<|padding|>"),
    "bos": ("<s>", "[CLS]", "<bos>", "<|startoftext|>", "<|endoftext|>"),
    "eos": ("</s>", "<|endoftext|>", "[SEP]", "<eos>"),
    "mask": ("<mask>", "[MASK]", "<|mask|>"),
}


@dataclass(frozen=True)
class Specials:
    """Ids of the special tokens the objectives need (None when the tokenizer has none)."""

    pad: int | None
    bos: int | None
    eos: int | None
    mask: int | None


class ByteTokenizer:
    """UTF-8 bytes as ids 0..255, then pad 256, bos 257, eos 258, mask 259."""

    name = "bytes"
    vocab_size = 260
    specials = Specials(pad=256, bos=257, eos=258, mask=259)
    n_regular = 256  # ids below this are ordinary tokens (MLM's random replacements)

    def encode(self, text: str) -> Tensor:
        """Token ids (N,) of `text` (an integer tensor)."""
        data = text.encode("utf-8")
        if not data:
            return torch.zeros(0, dtype=torch.uint8)
        return torch.frombuffer(bytearray(data), dtype=torch.uint8)  # ids 0..255 as uint8

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

    def fingerprint(self) -> str:
        return "bytes"


class HFTokenizer:
    """A tokenizer.json read with the optional `tokenizers` package (size-capped, guarded)."""

    def __init__(self, path: Path) -> None:
        self.file = read_tokenizer(path)
        self.tok = self.file.tok
        self.path = path
        self.name = str(path)
        # ids may have holes: the model needs room for the largest one
        self.vocab_size = max(self.tok.get_vocab(with_added_tokens=True).values(), default=-1) + 1
        ids = {k: self._first(names) for k, names in SPECIAL_NAMES.items()}
        self.specials = Specials(**ids)
        self.n_regular = min(self.tok.get_vocab_size(with_added_tokens=False), self.vocab_size)

    def _first(self, names: tuple[str, ...]) -> int | None:
        for name in names:
            i = self.tok.token_to_id(name)
            if i is not None:
                return i
        return None

    def encode(self, text: str) -> Tensor:
        ids = self.file.encode(text, add_special_tokens=False).ids
        return torch.tensor(ids, dtype=torch.int64)

    def decode(self, ids: list[int]) -> str:
        return self.file.decode(ids)

    def fingerprint(self) -> str:
        return self.file.sha256[:16]  # of the bytes read, not of what the file holds now


Tokenizer = ByteTokenizer | HFTokenizer


def load_tokenizer(name: str) -> Tokenizer:
    """`bytes` or the path of a tokenizer.json (or a directory holding one)."""
    if name == "bytes":
        return ByteTokenizer()
    path = Path(name)
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.exists():
        raise ValueError(f"--tokenizer {name}: no such file (expected `bytes` or a tokenizer.json)")
    return HFTokenizer(path)

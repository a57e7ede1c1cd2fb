"""Tokenizers for training: raw bytes (no files needed) or a Hugging Face tokenizer.json."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ..io.tokenizer_file import read_tokenizer

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

    def save(self, directory: Path) -> Path:
        """Write DIR/tokenizer.json: the same ids, readable by `tokenizers` and transformers."""
        path = directory / "tokenizer.json"
        path.write_text(byte_tokenizer_json(), encoding="utf-8")
        return path


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

    def save(self, directory: Path) -> Path:
        """Copy the tokenizer.json into DIR (nothing to do when it is already there)."""
        path = directory / "tokenizer.json"
        if not (path.exists() and path.samefile(self.path)):
            shutil.copyfile(self.path, path)
        return path


Tokenizer = ByteTokenizer | HFTokenizer

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<mask>")  # ByteTokenizer's ids 256..259, in order


def byte_symbols() -> list[str]:
    """The printable character that stands for each byte in a byte-level tokenizer.json:
    printable Latin-1 bytes stand for themselves, the other bytes (controls, space, 0x7f-0xa0,
    0xad) take the characters from U+0100 on, in byte order: the `tokenizers` ByteLevel map."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    symbol = {b: chr(b) for b in printable}
    symbol.update({b: chr(0x100 + n) for n, b in enumerate(others)})
    return [symbol[b] for b in range(256)]


def byte_tokenizer_json() -> str:
    """ByteTokenizer as a `tokenizers` file: a byte-level BPE without merges, one token per
    byte (id = the byte). The special tokens are vocabulary entries of several symbols, which
    no text can produce (every byte is one symbol and nothing merges), so any text encodes to
    exactly its UTF-8 bytes, as ByteTokenizer.encode; `token_to_id("</s>")` finds them."""
    vocab = {sym: i for i, sym in enumerate(byte_symbols())}
    vocab.update({tok: 256 + i for i, tok in enumerate(SPECIAL_TOKENS)})
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True}
    data = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {**byte_level, "use_regex": False},  # no split: bytes only
        "post_processor": None,
        "decoder": {**byte_level, "use_regex": False},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [],
        },
    }
    return json.dumps(data, ensure_ascii=False, indent=1)


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

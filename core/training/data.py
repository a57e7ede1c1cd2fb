"""Corpora tokenised once into memory-mapped token files: a stream for LM objectives, pairs from TSV."""

from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from .tokenizer import Tokenizer

CHUNK_CHARS = 1 << 18  # text handed to the tokenizer at a time
FORMAT = 2  # 2: document ends (docs.bin) beside the tokens


def check_sources(paths: list[str | os.PathLike[str]]) -> list[Path]:
    """The data files, each existing and non-empty (a directory gives its files, sorted)."""
    if not paths:
        raise ValueError("--data: no data file given")
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
            if not found:
                raise ValueError(f"--data {p}: directory holds no files")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise ValueError(f"--data {p}: no such file or directory")
    for f in files:
        if f.stat().st_size == 0:
            raise ValueError(f"--data {f}: file is empty")
    return files


def is_pairs(files: list[Path]) -> bool:
    """True when the data is source/target pairs (every file a .tsv)."""
    return all(f.suffix == ".tsv" for f in files)


def documents(path: Path) -> Iterator[Iterator[str]]:
    """Each document of a file as text chunks: a JSONL record, or a whole plain-text file."""
    if path.suffix == ".jsonl":
        with _open_text(path) as f:
            for lineno, line in enumerate(_lines(f, path), 1):
                if line.strip():
                    yield iter([_jsonl_text(line, path, lineno)])
        return
    yield _chunks(path)


def _open_text(path: Path):  # noqa: ANN202 - a text file object
    return open(path, encoding="utf-8", newline="")


def _lines(f, path: Path) -> Iterator[str]:  # noqa: ANN001 - a text file object
    try:
        yield from f
    except UnicodeDecodeError as exc:
        raise ValueError(f"--data {path}: not UTF-8 text ({exc})") from None


def _chunks(path: Path) -> Iterator[str]:
    """About CHUNK_CHARS of text at a time, cut after a newline (so no word is split)."""
    with _open_text(path) as f:
        carry = ""
        while True:
            try:
                block = f.read(CHUNK_CHARS)
            except UnicodeDecodeError as exc:
                raise ValueError(f"--data {path}: not UTF-8 text ({exc})") from None
            if not block:
                break
            text = carry + block
            cut = text.rfind("\n") + 1
            if cut == 0 and len(text) < 4 * CHUNK_CHARS:  # no newline yet: read on (bounded)
                carry = text
                continue
            cut = cut or len(text)
            carry = text[cut:]
            yield text[:cut]
        if carry:
            yield carry


def _jsonl_text(line: str, path: Path, lineno: int) -> str:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
    if isinstance(record, dict) and isinstance(record.get("text"), str):
        record = record["text"]
    if not isinstance(record, str):
        raise ValueError(f'{path}:{lineno}: expected a string or an object with a "text" string')
    if "\\u" in line:  # only a JSON escape can make a lone surrogate: the file is UTF-8
        try:
            record.encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start : exc.end].encode("unicode_escape").decode()
            raise ValueError(
                f"{path}:{lineno}: the text has a lone surrogate ({bad}), not valid Unicode"
            ) from None
    return record


def token_dtype(vocab_size: int) -> torch.dtype:
    return torch.uint16 if vocab_size <= 1 << 16 else torch.int32


def tensor_bytes(t: Tensor) -> bytes:
    """The raw bytes of a CPU tensor (one memcpy; no NumPy needed)."""
    t = t.contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())


class TokenWriter:
    """Appends token ids to a binary file of a fixed integer dtype, counting them."""

    def __init__(self, path: Path, dtype: torch.dtype) -> None:
        self.f = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.dtype = dtype
        self.count = 0

    def write(self, ids: Tensor) -> None:
        if ids.numel():
            self.f.write(tensor_bytes(ids.to(self.dtype)))
            self.count += ids.numel()

    def close(self) -> None:
        self.f.close()


def open_tokens(path: Path, count: int, dtype: torch.dtype) -> Tensor:
    """A memory-mapped 1-D token tensor: pages are read from disk when touched."""
    return torch.from_file(str(path), shared=False, size=count, dtype=dtype)


def _fingerprint(files: list[Path], tok: Tokenizer) -> dict:
    sources = [[str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns] for f in files]
    return {"format": FORMAT, "sources": sources, "tokenizer": tok.fingerprint()}


def _cached(meta_path: Path, fingerprint: dict) -> dict | None:
    if not meta_path.is_file():
        return None
    meta = json.loads(meta_path.read_text())
    return meta if meta.get("fingerprint") == fingerprint else None


@dataclass
class TokenStream:
    """All documents' tokens back to back (each followed by eos when the tokenizer has one)."""

    tokens: Tensor  # (N,) memory-mapped
    ends: Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.int64))
    # (D,) int64 offset after each document (JSONL record or whole file; --pack cuts there)

    def __len__(self) -> int:
        return self.tokens.numel()


@dataclass
class PairData:
    """Source and target token sequences of a TSV corpus, each as a stream plus offsets."""

    src: Tensor  # (Ns,) memory-mapped
    src_offsets: Tensor  # (P + 1,) int64
    tgt: Tensor  # (Nt,)
    tgt_offsets: Tensor  # (P + 1,)

    def __len__(self) -> int:
        return self.src_offsets.numel() - 1

    def pair(self, i: int) -> tuple[Tensor, Tensor]:
        s0, s1 = int(self.src_offsets[i]), int(self.src_offsets[i + 1])
        t0, t1 = int(self.tgt_offsets[i]), int(self.tgt_offsets[i + 1])
        return self.src[s0:s1].long(), self.tgt[t0:t1].long()


def _cache_state(
    files: list[Path], tok: Tokenizer, cache: Path, kind: str, meta_name: str
) -> tuple[dict, torch.dtype, dict | None]:
    """The data's fingerprint, its token dtype and the cached metadata if it still matches."""
    cache.mkdir(parents=True, exist_ok=True)
    fingerprint = {**_fingerprint(files, tok), "kind": kind}
    return fingerprint, token_dtype(tok.vocab_size), _cached(cache / meta_name, fingerprint)


def prepare_stream(files: list[Path], tok: Tokenizer, cache: Path) -> TokenStream:
    """Tokenise the files once into cache/tokens.bin (reused while files and tokenizer match)."""
    fingerprint, dtype, meta = _cache_state(files, tok, cache, "stream", "tokens.json")
    if meta is None:
        tmp = cache / f"tokens.bin.{os.getpid()}.tmp"
        tmp_ends = cache / f"docs.bin.{os.getpid()}.tmp"
        writer, ends = TokenWriter(tmp, dtype), TokenWriter(tmp_ends, torch.int64)
        eos = tok.specials.eos
        try:
            for f in files:
                for doc in documents(f):
                    for text in doc:
                        writer.write(tok.encode(text))
                    if eos is not None:
                        writer.write(torch.tensor([eos]))
                    ends.write(torch.tensor([writer.count]))
        finally:
            writer.close()
            ends.close()
        if writer.count == 0:
            tmp.unlink()
            tmp_ends.unlink()
            raise ValueError(f"--data {', '.join(map(str, files))}: no tokens in the data")
        os.replace(tmp, cache / "tokens.bin")
        os.replace(tmp_ends, cache / "docs.bin")
        meta = {"fingerprint": fingerprint, "count": writer.count, "documents": ends.count}
        _write_json(cache / "tokens.json", meta)
    return TokenStream(
        open_tokens(cache / "tokens.bin", meta["count"], dtype),
        open_tokens(cache / "docs.bin", meta["documents"], torch.int64),
    )


def prepare_pairs(files: list[Path], tok: Tokenizer, cache: Path) -> PairData:
    """Tokenise TSV lines `source<TAB>target` once into cache/{src,tgt}.bin with offsets."""
    fingerprint, dtype, meta = _cache_state(files, tok, cache, "pairs", "pairs.json")
    if meta is None:
        meta = _write_pairs(files, tok, cache, dtype)
        meta["fingerprint"] = fingerprint
        _write_json(cache / "pairs.json", meta)
    out = {}
    for side in ("src", "tgt"):
        count = meta[f"{side}_count"]
        offsets = open_tokens(cache / f"{side}.idx", meta["pairs"] + 1, torch.int64)
        out[side] = (open_tokens(cache / f"{side}.bin", max(count, 1), dtype), offsets)
    return PairData(out["src"][0], out["src"][1], out["tgt"][0], out["tgt"][1])


def _write_pairs(files: list[Path], tok: Tokenizer, cache: Path, dtype: torch.dtype) -> dict:
    writers = {s: TokenWriter(cache / f"{s}.bin", dtype) for s in ("src", "tgt")}
    offsets = {s: TokenWriter(cache / f"{s}.idx", torch.int64) for s in ("src", "tgt")}
    for s in offsets:
        offsets[s].write(torch.zeros(1, dtype=torch.int64))
    pairs = 0
    try:
        for f in files:
            with _open_text(f) as fh:
                for lineno, line in enumerate(_lines(fh, f), 1):
                    line = line.rstrip("\r\n")
                    if not line.strip():
                        continue
                    cols = line.split("\t")
                    if len(cols) != 2:
                        raise ValueError(
                            f"{f}:{lineno}: expected two tab-separated columns "
                            f"(source, target), found {len(cols)}"
                        )
                    for side, text in zip(("src", "tgt"), cols, strict=True):
                        writers[side].write(tok.encode(text))
                        offsets[side].write(torch.tensor([writers[side].count]))
                    pairs += 1
    finally:
        for w in [*writers.values(), *offsets.values()]:
            w.close()
    if pairs == 0:
        raise ValueError(f"--data {', '.join(map(str, files))}: no source/target pairs")
    if writers["src"].count == 0 or writers["tgt"].count == 0:  # from_file needs a non-empty file
        for w in writers.values():
            with open(w.f.name, "ab") as fh:
                fh.write(tensor_bytes(torch.zeros(1, dtype=dtype)))
    return {"pairs": pairs, "src_count": writers["src"].count, "tgt_count": writers["tgt"].count}


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)

"""Corpora tokenised once into memory-mapped token files: a stream for LM objectives, pairs from TSV."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..io.progress import progress_bar
from .token_cache import CacheBuild, cached
from .tokenizer import Tokenizer

CHUNK_CHARS = 1 << 18  # text handed to the tokenizer at a time
FORMAT = 3  # 2: document ends (docs.bin); 3: each file's size and SHA-256, checked on reuse


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


def open_tokens(path: Path, count: int, dtype: torch.dtype) -> Tensor:
    """A memory-mapped 1-D token tensor: pages are read from disk when touched."""
    return torch.from_file(str(path), shared=False, size=count, dtype=dtype)


def _fingerprint(files: list[Path], tok: Tokenizer) -> dict:
    sources = [[str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns] for f in files]
    return {"format": FORMAT, "sources": sources, "tokenizer": tok.fingerprint()}


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
    files: list[Path], tok: Tokenizer, cache: Path, kind: str
) -> tuple[dict, torch.dtype]:
    """The data's fingerprint and its token dtype."""
    cache.mkdir(parents=True, exist_ok=True)
    return {**_fingerprint(files, tok), "kind": kind}, token_dtype(tok.vocab_size)


def tokenising_bar(files: list[Path]) -> Any:
    """A progress bar over the files' bytes, on stderr (archzoo.io.progress)."""
    total = sum(f.stat().st_size for f in files)
    names = files[0].name if len(files) == 1 else f"{len(files)} files"
    return progress_bar(total, f"tokenising {names}", "B")


def prepare_stream(files: list[Path], tok: Tokenizer, cache: Path) -> TokenStream:
    """Tokenise the files once into cache/tokens.bin (reused while files and tokenizer match
    and the file passes its size and hash check)."""
    fingerprint, dtype = _cache_state(files, tok, cache, "stream")
    meta = cached(
        cache / "tokens.json", fingerprint, {"tokens.bin": dtype, "docs.bin": torch.int64}
    )
    if meta is None:
        with CacheBuild(cache) as build, tokenising_bar(files) as bar:
            writer = build.writer("tokens.bin", dtype)
            ends = build.writer("docs.bin", torch.int64)
            eos = tok.specials.eos
            for f in files:
                for doc in documents(f):
                    for text in doc:
                        writer.write(tok.encode(text))
                        bar.update(len(text.encode("utf-8")))
                    if eos is not None:
                        writer.write(torch.tensor([eos]))
                    ends.write(torch.tensor([writer.count]))
            if writer.count == 0:
                raise ValueError(f"--data {', '.join(map(str, files))}: no tokens in the data")
            meta = build.commit("tokens.json", {"fingerprint": fingerprint})
    counts = {name: entry["count"] for name, entry in meta["files"].items()}
    return TokenStream(
        open_tokens(cache / "tokens.bin", counts["tokens.bin"], dtype),
        open_tokens(cache / "docs.bin", counts["docs.bin"], torch.int64),
    )


PAIR_FILES = ("src.bin", "src.idx", "tgt.bin", "tgt.idx")


def prepare_pairs(files: list[Path], tok: Tokenizer, cache: Path) -> PairData:
    """Tokenise TSV lines `source<TAB>target` once into cache/{src,tgt}.bin with offsets."""
    fingerprint, dtype = _cache_state(files, tok, cache, "pairs")
    dtypes = {n: (torch.int64 if n.endswith(".idx") else dtype) for n in PAIR_FILES}
    meta = cached(cache / "pairs.json", fingerprint, dtypes)
    if meta is None:
        with CacheBuild(cache) as build, tokenising_bar(files) as bar:
            pairs = _write_pairs(files, tok, build, dtypes, bar.update)
            meta = build.commit("pairs.json", {"fingerprint": fingerprint, "pairs": pairs})
    counts = {n: meta["files"][n]["count"] for n in PAIR_FILES}
    out = {n: open_tokens(cache / n, counts[n], dtypes[n]) for n in PAIR_FILES}
    return PairData(out["src.bin"], out["src.idx"], out["tgt.bin"], out["tgt.idx"])


def _write_pairs(
    files: list[Path],
    tok: Tokenizer,
    build: CacheBuild,
    dtypes: dict[str, torch.dtype],
    read: Callable[[int], Any],
) -> int:
    """Write the four pair files into `build`; returns the number of pairs (`read`: told
    the bytes of each line, for the progress bar)."""
    w = {n: build.writer(n, dtypes[n]) for n in PAIR_FILES}
    for side in ("src", "tgt"):
        w[f"{side}.idx"].write(torch.zeros(1, dtype=torch.int64))
    pairs = 0
    for f in files:
        with _open_text(f) as fh:
            for lineno, line in enumerate(_lines(fh, f), 1):
                read(len(line.encode("utf-8")))
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
                    w[f"{side}.bin"].write(tok.encode(text))
                    w[f"{side}.idx"].write(torch.tensor([w[f"{side}.bin"].count]))
                pairs += 1
    if pairs == 0:
        raise ValueError(f"--data {', '.join(map(str, files))}: no source/target pairs")
    for side in ("src", "tgt"):  # from_file needs a non-empty file; offsets never reach this
        if w[f"{side}.bin"].count == 0:
            w[f"{side}.bin"].write(torch.zeros(1, dtype=dtypes["src.bin"]))
    return pairs

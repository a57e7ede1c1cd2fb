"""A tokenizer.json as untrusted input: size-capped before it is read, and every failure of
the `tokenizers` library on it (a Rust panic included) an error that names the file.

The library reports a bad file, an `[UNK]` missing from the vocabulary or a normaliser
regex that exhausts its backtracking budget as an Exception or as a PanicException, which
derives from BaseException (so `except Exception` lets it through), after printing the
panic to the process's stderr. Each call into the library is guarded here, once.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

MAX_TOKENIZER_BYTES = 200 * 2**20  # the largest real tokenizer.json files are ~40 MB
T = TypeVar("T")


class TokenizerError(ValueError):
    """A tokenizer file that cannot be read, or text it cannot encode or decode."""


def invalid_utf8(text: str) -> str | None:
    """What makes `text` impossible to write as UTF-8 (None when nothing does).

    Undecodable bytes reach Python as lone surrogates (U+DC80..U+DCFF stand for bytes
    0x80..0xFF under the `surrogateescape` handler that argv and click use)."""
    for i, c in enumerate(text):
        code = ord(c)
        if 0xDC80 <= code <= 0xDCFF:
            return f"byte 0x{code - 0xDC00:02x} at character {i} is not valid UTF-8"
        if 0xD800 <= code <= 0xDFFF:
            return f"a lone surrogate U+{code:04X} at character {i}"
    return None


class TokenizerFile:
    """A `tokenizers.Tokenizer` read from `path`; encode and decode raise TokenizerError."""

    def __init__(self, path: Path, tok: Any, sha256: str) -> None:
        self.path = path
        self.tok = tok  # the library's object, for vocabulary look-ups
        self.sha256 = sha256  # of the bytes that were read

    def encode(self, text: str, add_special_tokens: bool = True) -> Any:
        """The library's Encoding of `text` (ids, tokens)."""
        if not isinstance(text, str):
            raise TokenizerError(f"text to encode must be a str, got {type(text).__name__}")
        problem = invalid_utf8(text)
        if problem is not None:
            raise TokenizerError(f"the text to encode is not valid UTF-8: {problem}")
        encode = self.tok.encode
        return guarded(
            self.path, "encoding the text", encode, text, add_special_tokens=add_special_tokens
        )

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return guarded(
            self.path,
            "decoding token ids",
            self.tok.decode,
            ids,
            skip_special_tokens=skip_special_tokens,
        )

    def id_to_token(self, token_id: int) -> str | None:
        """The vocabulary's piece for an id (`Ġthe`, `<0xC3>`), or None."""
        return self.tok.id_to_token(token_id)


def read_tokenizer(path: Path) -> TokenizerFile:
    """Read a tokenizer.json: a regular file of at most MAX_TOKENIZER_BYTES, UTF-8 JSON that
    the `tokenizers` library accepts; anything else is a TokenizerError naming the file."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise TokenizerError(
            f"{path}: reading a tokenizer.json needs the `tokenizers` package: "
            "pip install 'archzoo[generate]'"
        ) from None
    data = _read_capped(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TokenizerError(
            f"{path}: not a tokenizer.json: byte 0x{data[exc.start]:02x} at offset {exc.start} "
            "is not UTF-8 text"
        ) from None
    try:
        tok = guarded(path, "reading the tokenizer", Tokenizer.from_str, text)
    except TokenizerError as exc:
        raise TokenizerError(_why_not_a_tokenizer(path, text) or str(exc)) from None
    return TokenizerFile(path, tok, hashlib.sha256(data).hexdigest())


def _read_capped(path: Path) -> bytes:
    """The file's bytes; refused before reading when it is not a regular file or too large."""
    try:
        info = path.stat()  # links followed (an HF cache links its files to blobs)
        if not stat.S_ISREG(info.st_mode):  # a FIFO or a device would block or never end
            raise TokenizerError(f"{path}: the tokenizer is not a regular file")
        if info.st_size > MAX_TOKENIZER_BYTES:
            raise TokenizerError(_too_large(path, info.st_size))
        with open(path, "rb") as f:
            data = f.read(MAX_TOKENIZER_BYTES + 1)
    except OSError as exc:
        raise TokenizerError(f"{path}: cannot read the tokenizer ({exc.strerror})") from None
    if len(data) > MAX_TOKENIZER_BYTES:  # it grew after the size check
        raise TokenizerError(_too_large(path, len(data)))
    return data


def _too_large(path: Path, size: int) -> str:
    return (
        f"{path}: the tokenizer is {size:,} bytes, more than the {MAX_TOKENIZER_BYTES:,} "
        "a tokenizer.json may have; it was not read"
    )


def _why_not_a_tokenizer(path: Path, text: str) -> str | None:
    """A plainer reason than the library's when the file is not JSON or not a tokenizer."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"{path}: not a tokenizer.json: not JSON ({exc})"
    except RecursionError:
        return f"{path}: not a tokenizer.json: JSON nested too deeply"
    if not isinstance(value, dict) or "model" not in value:
        kind = "an object" if isinstance(value, dict) else f"a JSON {type(value).__name__}"
        return f"{path}: not a tokenizer.json: {kind} without a 'model'"
    return None


def guarded(path: Path, doing: str, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`call(*args, **kwargs)` into the tokenizers library; its exceptions and panics become a
    TokenizerError naming `path` (the panic's own stderr report is dropped)."""
    try:
        with _native_stderr_held():
            return call(*args, **kwargs)
    except Exception as exc:
        raise TokenizerError(f"{path}: {doing} failed: {exc}") from None
    except BaseException as exc:  # pyo3's PanicException is not an Exception
        if type(exc).__name__ != "PanicException":
            raise
        raise TokenizerError(f"{path}: the tokenizers library failed {doing}: {exc}") from None


@contextmanager
def _native_stderr_held() -> Iterator[None]:
    """Hold what native code writes to file descriptor 2 during the block; pass it on
    afterwards, unless the block ended in a panic (reported by the TokenizerError).
    Descriptor 2 belongs to the process: threads take turns (nested holds in one thread
    restore in order)."""
    with _HOLDING, ExitStack() as stack:
        try:
            held = stack.enter_context(tempfile.TemporaryFile())
            saved = os.dup(2)
        except OSError:  # no stderr, or no room for a temp file: nothing is held
            yield
            return
        if sys.stderr is not None:
            sys.stderr.flush()
        os.dup2(held.fileno(), 2)
        panicked = False
        try:
            yield
        except BaseException as exc:
            panicked = type(exc).__name__ == "PanicException"
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if not panicked:  # a warning the library printed: on to where it was going
                held.seek(0)
                rest = memoryview(held.read())
                while rest:
                    rest = rest[os.write(2, rest) :]


_HOLDING = threading.RLock()

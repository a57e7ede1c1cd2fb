"""Tokens as a person reads them: each id decoded, with the invisible made visible.

`tokenizer.decode([id])` turns byte-level pieces (`Ġthe`) and SentencePiece pieces (`▁the`)
back into text. What it cannot show is made explicit: a newline is `↵`, a tab `⇥`, a token of
spaces only `␣`, another control character or a byte that is only part of a UTF-8 character
is `<XX>` (its hex).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

SHOWN = {"\n": "↵", "\r": "␍", "\t": "⇥"}
BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # SentencePiece byte fallback


@cache
def byte_alphabet() -> dict[str, int]:
    """Byte-level BPE's printable stand-in for each byte (GPT-2): printable Latin-1 bytes
    stand for themselves, the others for chr(256 + n) in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    alphabet = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            alphabet[chr(256 + extra)] = b
            extra += 1
    return alphabet


def show_bytes(data: bytes) -> str:
    """UTF-8 text, with each byte that starts no complete character shown as <XX>."""
    out, i = [], 0
    while i < len(data):
        for n in (4, 3, 2, 1):  # the longest complete character(s) starting here
            try:
                out.append(data[i : i + n].decode("utf-8"))
            except UnicodeDecodeError:
                continue
            i += n
            break
        else:
            out.append(f"<{data[i]:02X}>")
            i += 1
    return "".join(out)


def visible(text: str) -> str:
    """Newlines, tabs and other control characters as visible marks; a token of spaces
    only as `␣` each (a leading space elsewhere stays a space)."""
    if text and text.strip(" ") == "":
        return "␣" * len(text)
    return "".join(
        SHOWN.get(c, f"<{ord(c):02X}>" if ord(c) < 0x20 or ord(c) == 0x7F else c) for c in text
    )


def token_text(tokenizer: Any, token_id: int) -> str:
    """One token as text: decoded, or its bytes where it holds part of a character."""
    text = tokenizer.decode([token_id], skip_special_tokens=False)
    if "\ufffd" in text:  # a piece of a multi-byte character: show the bytes themselves
        piece = tokenizer.id_to_token(token_id) or ""
        if "\ufffd" not in piece:
            fallback = BYTE_PIECE.fullmatch(piece)
            alphabet = byte_alphabet()
            if fallback:
                text = f"<{fallback[1].upper()}>"
            elif piece and all(c in alphabet for c in piece):
                text = show_bytes(bytes(alphabet[c] for c in piece))
    return visible(text)


def token_texts(tokenizer: Any, ids: list[int]) -> list[str]:
    """Each id as text a person can read (see token_text)."""
    return [token_text(tokenizer, i) for i in ids]

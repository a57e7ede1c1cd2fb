"""`zoo train --pack`: whole documents packed best-fit into rows, kept apart by document ids.

A token stream's documents end at each record of a JSONL file, at each file's end, and
after each end-of-document token of the tokenizer (`document_spans`). A document longer
than a row is cut into row-sized pieces. Best-fit decreasing places every piece in the
fullest row it still fits (`best_fit`), so rows end with little padding; the padded
alternative (`one_per_row`) gives each piece a row of its own. The model keeps the pieces
of a row apart through `document_ids` (archzoo.model.documents).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import torch
from torch import Tensor

PAD_DOCUMENT = -1  # the document id of a row's padding (a run of its own)


def document_spans(
    tokens: Tensor, ends: Tensor, eos: int | None, start: int, stop: int, size: int
) -> list[tuple[int, int]]:
    """(start, length) of the documents of tokens[start:stop], each at most `size` long.

    ends: (D,) offsets where a record or file ends; an `eos` token ends its document too.
    """
    cuts = {start, stop}
    cuts.update(int(e) for e in ends.tolist() if start < e < stop)
    if eos is not None:
        at = (tokens[start:stop] == eos).nonzero().flatten() + start + 1
        cuts.update(int(e) for e in at.tolist() if e < stop)
    bounds = sorted(cuts)
    spans = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        for piece in range(a, b, size):  # a long document in row-sized pieces
            spans.append((piece, min(size, b - piece)))
    return spans


def best_fit(lengths: list[int], capacity: int) -> list[list[int]]:
    """Rows of document indices: longest first, each into the row with the least room that
    still holds it (a new row when none does). Deterministic for given lengths.

    Rows are kept in buckets by free room, and the distinct room values in a sorted list
    (at most `capacity` of them), so each placement is a bisection: O(n log n) in all.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    rows: list[list[int]] = []
    by_room: dict[int, list[int]] = {}  # free tokens -> rows with that much room
    rooms: list[int] = []  # the keys of by_room, sorted
    for i in order:
        n = lengths[i]
        at = bisect.bisect_left(rooms, n)
        if at == len(rooms):
            rows.append([])
            r, free = len(rows) - 1, capacity
        else:
            free = rooms[at]
            r = by_room[free].pop()
            if not by_room[free]:
                del by_room[free], rooms[at]
        rows[r].append(i)
        left = free - n
        if left > 0:
            if left not in by_room:
                by_room[left] = []
                bisect.insort(rooms, left)
            by_room[left].append(r)
    return rows


def one_per_row(lengths: list[int]) -> list[list[int]]:
    """The padded layout: each document in a row of its own."""
    return [[i] for i in range(len(lengths))]


@dataclass
class PackedRows:
    """Rows of documents of a token stream, `capacity` tokens each (the rest padding)."""

    tokens: Tensor  # (N,) the stream (memory-mapped)
    spans: list[tuple[int, int]]  # (start, length) of each document
    rows: list[list[int]]  # document indices of each row
    capacity: int
    pad_id: int

    def __len__(self) -> int:
        return len(self.rows)

    def padding_fraction(self) -> float:
        """Share of the rows' token slots that are padding."""
        used = sum(n for _, n in self.spans)
        return 1.0 - used / max(len(self.rows) * self.capacity, 1)

    def batch(self, index: list[int]) -> tuple[Tensor, Tensor]:
        """ids (b, capacity) and document ids (b, capacity) of rows `index`; padding has
        pad_id and document PAD_DOCUMENT."""
        ids = torch.full((len(index), self.capacity), self.pad_id, dtype=torch.long)
        docs = torch.full_like(ids, PAD_DOCUMENT)
        for r, row in enumerate(index):
            at = 0
            for d, i in enumerate(self.rows[row]):
                start, n = self.spans[i]
                ids[r, at : at + n] = self.tokens[start : start + n].long()
                docs[r, at : at + n] = d
                at += n
        return ids, docs


def pack_stream(
    tokens: Tensor,
    ends: Tensor,
    eos: int | None,
    span: tuple[int, int],
    capacity: int,
    pad_id: int,
    *,
    padded: bool = False,
) -> PackedRows:
    """The documents of tokens[span[0]:span[1]] packed best-fit into rows of `capacity`
    (`padded`: one per row instead)."""
    spans = document_spans(tokens, ends, eos, span[0], span[1], capacity)
    lengths = [n for _, n in spans]
    rows = one_per_row(lengths) if padded else best_fit(lengths, capacity)
    return PackedRows(tokens, spans, rows, capacity, pad_id)

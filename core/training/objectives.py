"""Training objectives: what a batch is for each family (causal LM, MLM, denoising, pairs).

A step's batch is a function of (seed, step) alone: every rank draws the same global batch
plan and reads only its own rows, so any split over ranks and micro-batches sees the same data.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .data import PairData, TokenStream
from .packing import PAD_DOCUMENT, pack_stream
from .tokenizer import Specials

IGNORE = -100
MASK_RATE = 0.15  # BERT: 15% of tokens are predicted; of those 80% [MASK], 10% random, 10% kept


def step_generator(seed: int, *keys: int) -> torch.Generator:
    """A CPU generator seeded from the run seed and integer keys (step, eval batch...)."""
    value = seed
    for k in keys:
        value = (value * 1_000_003 + k + 1) % (1 << 63)
    return torch.Generator().manual_seed(value)


def token_loss(logits: Tensor, labels: Tensor, smoothing: float = 0.0) -> Tensor:
    """Summed cross-entropy over labels that are not -100 (label smoothing as in torch)."""
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),  # (B*T, V)
        labels.reshape(-1),
        ignore_index=IGNORE,
        label_smoothing=smoothing,
        reduction="sum",
    )


class Objective:
    """Draws batches of model inputs plus `labels` from a train split and a held-out split."""

    name = ""

    def __init__(self, seq_len: int, seed: int, eval_fraction: float) -> None:
        self.seq_len = seq_len
        self.seed = seed
        self.eval_fraction = eval_fraction

    def train_batch(self, step: int, n_global: int, rows: slice) -> dict[str, Tensor]:
        """The rows `rows` of step `step`'s global batch of `n_global` examples."""
        raise NotImplementedError

    def eval_examples(self, limit: int) -> int:
        """How many held-out examples evaluation uses (at most `limit`)."""
        raise NotImplementedError

    def eval_batch(self, index: Tensor) -> dict[str, Tensor]:
        """Held-out examples by their indices."""
        raise NotImplementedError


class StreamObjective(Objective):
    """Windows cut from a token stream; the last `eval_fraction` of it is held out."""

    window = 0  # tokens per example

    def __init__(
        self, data: TokenStream, seq_len: int, seed: int, eval_fraction: float, specials: Specials
    ) -> None:
        super().__init__(seq_len, seed, eval_fraction)
        self.tokens = data.tokens
        self.specials = specials
        n = len(data)
        n_eval = max(int(n * eval_fraction), self.window)
        self.n_train = n - n_eval
        if self.n_train < self.window:
            raise ValueError(
                f"--data: {n:,} tokens are too few for --seq-len {seq_len} with a held-out "
                f"split of {eval_fraction:g}: need at least {2 * self.window + 1:,} tokens"
            )

    def _windows(self, starts: Tensor) -> Tensor:
        return torch.stack([self.tokens[s : s + self.window] for s in starts.tolist()]).long()

    def train_batch(self, step: int, n_global: int, rows: slice) -> dict[str, Tensor]:
        g = step_generator(self.seed, step)
        starts = torch.randint(0, self.n_train - self.window + 1, (n_global,), generator=g)
        return self.make(self._windows(starts[rows]), g, n_global, rows)

    def eval_examples(self, limit: int) -> int:
        self.n_eval = min(limit, (len(self.tokens) - self.n_train) // self.window)
        return self.n_eval

    def eval_batch(self, index: Tensor) -> dict[str, Tensor]:
        g = step_generator(self.seed, -1)  # the same held-out masks at every evaluation
        x = self._windows(self.n_train + index * self.window)
        return self.make(x, g, self.n_eval, index)

    def make(self, x: Tensor, g: torch.Generator, n_global: int, rows: slice | Tensor) -> dict:
        raise NotImplementedError


class CausalLM(StreamObjective):
    """Next-token prediction: inputs are a window's first T tokens, labels the last T."""

    name = "causal_lm"

    def __init__(
        self, data: TokenStream, seq_len: int, seed: int, eval_fraction: float, specials: Specials
    ) -> None:
        self.window = seq_len + 1
        super().__init__(data, seq_len, seed, eval_fraction, specials)

    def make(self, x: Tensor, g: torch.Generator, n_global: int, rows: slice | Tensor) -> dict:
        return {"input_ids": x[:, :-1], "labels": x[:, 1:]}  # (b, T) each

    def make_packed(
        self, x: Tensor, docs: Tensor, g: torch.Generator, n_global: int, rows: slice | Tensor
    ) -> dict:
        """Packed rows x (b, T): each token's target is the next token of its document."""
        same = (docs[:, 1:] == docs[:, :-1]) & (docs[:, 1:] != PAD_DOCUMENT)  # (b, T - 1)
        labels = torch.full_like(x, IGNORE)
        labels[:, :-1] = torch.where(same, x[:, 1:], IGNORE)
        return {"input_ids": x, "document_ids": docs, "labels": labels}


def _special_ids(specials: Specials) -> Tensor:
    return torch.tensor([i for i in vars(specials).values() if i is not None], dtype=torch.long)


class MaskingObjective(StreamObjective):
    """A stream objective that hides tokens behind the tokenizer's mask token. Its last
    constructor argument is one number the subclass names in `extra` (MLM: how many ids are
    regular tokens; denoising: the decoder's start id)."""

    task = ""  # for the error: what needs the mask token
    extra = ""  # the attribute the last constructor argument is stored in

    def __init__(
        self,
        data: TokenStream,
        seq_len: int,
        seed: int,
        eval_fraction: float,
        specials: Specials,
        value: int,
    ) -> None:
        if specials.mask is None:
            raise ValueError(
                f"--tokenizer: {self.task} training needs a mask token ([MASK] or <mask>)"
            )
        self.window = seq_len
        setattr(self, self.extra, value)
        super().__init__(data, seq_len, seed, eval_fraction, specials)


class MaskedLM(MaskingObjective):
    """BERT's MLM: 15% of (non-special) tokens predicted; 80% become mask, 10% random, 10% kept."""

    name = "mlm"
    task, extra = "masked-LM", "n_regular"
    n_regular: int

    def make(self, x: Tensor, g: torch.Generator, n_global: int, rows: slice | Tensor) -> dict:
        T = self.window  # draws for all n_global rows, so each rank's rows match one process
        pick = torch.rand(n_global, T, generator=g)[rows]
        how = torch.rand(n_global, T, generator=g)[rows]
        rand_ids = torch.randint(0, self.n_regular, (n_global, T), generator=g)[rows]
        pick = (pick < MASK_RATE) & ~torch.isin(x, _special_ids(self.specials))
        inputs = torch.where(pick & (how < 0.8), self.specials.mask, x)
        inputs = torch.where(pick & (how >= 0.8) & (how < 0.9), rand_ids, inputs)
        return {"input_ids": inputs, "labels": torch.where(pick, x, IGNORE)}

    def make_packed(
        self, x: Tensor, docs: Tensor, g: torch.Generator, n_global: int, rows: slice | Tensor
    ) -> dict:
        """Packed rows: the same masking; padding is never a target."""
        out = self.make(x, g, n_global, rows)
        out["labels"] = out["labels"].masked_fill(docs == PAD_DOCUMENT, IGNORE)
        return {**out, "document_ids": docs}


class Denoising(MaskingObjective):
    """Encoder-decoder denoising: the encoder sees the window with 15% masked, the decoder
    rebuilds it with teacher forcing (inputs are the labels shifted right behind a start id)."""

    name = "denoising"
    task, extra = "denoising", "start_id"
    start_id: int

    def make(self, x: Tensor, g: torch.Generator, n_global: int, rows: slice | Tensor) -> dict:
        pick = torch.rand(n_global, self.window, generator=g)[rows] < MASK_RATE
        source = torch.where(pick, self.specials.mask, x)
        start = torch.full_like(x[:, :1], self.start_id)
        return {
            "input_ids": source,
            "decoder_input_ids": torch.cat([start, x[:, :-1]], dim=1),  # (b, T) teacher forcing
            "labels": x,
        }

    def make_packed(
        self, x: Tensor, docs: Tensor, g: torch.Generator, n_global: int, rows: slice | Tensor
    ) -> dict:
        """Packed rows: each document rebuilt on its own, the decoder restarting with the
        start id at each document (both sides packed alike)."""
        out = self.make(x, g, n_global, rows)
        first = torch.ones_like(docs, dtype=torch.bool)
        first[:, 1:] = docs[:, 1:] != docs[:, :-1]  # (b, T) each document's first token
        decoder = torch.where(first, self.start_id, out["decoder_input_ids"])
        return {
            "input_ids": out["input_ids"],
            "decoder_input_ids": decoder,
            "labels": x.masked_fill(docs == PAD_DOCUMENT, IGNORE),
            "document_ids": docs,
            "decoder_document_ids": docs,
        }


class Packed(Objective):
    """A stream objective's examples as rows of whole documents packed best-fit
    (`zoo train --pack`); the held-out documents are packed alike for evaluation."""

    def __init__(self, inner: StreamObjective, data: TokenStream, pad_id: int) -> None:
        super().__init__(inner.seq_len, inner.seed, inner.eval_fraction)
        self.inner = inner
        self.name = inner.name
        eos, n = inner.specials.eos, len(data)
        args = (data.tokens, data.ends, eos)
        self.train_rows = pack_stream(*args, (0, inner.n_train), inner.seq_len, pad_id)
        self.eval_rows = pack_stream(*args, (inner.n_train, n), inner.seq_len, pad_id)

    def padding_fraction(self) -> float:
        """Share of the training rows' token slots that are padding."""
        return self.train_rows.padding_fraction()

    def train_batch(self, step: int, n_global: int, rows: slice) -> dict[str, Tensor]:
        g = step_generator(self.seed, step)
        index = torch.randint(0, len(self.train_rows), (n_global,), generator=g)
        ids, docs = self.train_rows.batch(index[rows].tolist())
        return self.inner.make_packed(ids, docs, g, n_global, rows)

    def eval_examples(self, limit: int) -> int:
        self.n_eval = min(limit, len(self.eval_rows))
        return self.n_eval

    def eval_batch(self, index: Tensor) -> dict[str, Tensor]:
        g = step_generator(self.seed, -1)  # the same held-out masks at every evaluation
        ids, docs = self.eval_rows.batch(index.tolist())
        return self.inner.make_packed(ids, docs, g, self.n_eval, index)


class Translation(Objective):
    """Source/target pairs with teacher forcing: the decoder reads `start + target[:-1]`."""

    name = "pairs"

    def __init__(
        self,
        data: PairData,
        seq_len: int,
        seed: int,
        eval_fraction: float,
        specials: Specials,
        start_id: int,
    ) -> None:
        super().__init__(seq_len, seed, eval_fraction)
        self.data = data
        self.start_id = start_id
        self.eos = specials.eos
        self.pad = specials.pad if specials.pad is not None else 0
        n = len(data)
        n_eval = max(int(n * eval_fraction), 1)
        self.n_train = n - n_eval
        if self.n_train < 1:
            raise ValueError(f"--data: {n} source/target pairs are too few (need at least 2)")

    def train_batch(self, step: int, n_global: int, rows: slice) -> dict[str, Tensor]:
        g = step_generator(self.seed, step)
        index = torch.randint(0, self.n_train, (n_global,), generator=g)
        return self._batch(index[rows].tolist())

    def eval_examples(self, limit: int) -> int:
        return min(limit, len(self.data) - self.n_train)

    def eval_batch(self, index: Tensor) -> dict[str, Tensor]:
        return self._batch((self.n_train + index).tolist())

    def _batch(self, pairs: list[int]) -> dict[str, Tensor]:
        T = self.seq_len
        b = len(pairs)
        src = torch.full((b, T), self.pad, dtype=torch.long)
        src_mask = torch.zeros(b, T, dtype=torch.long)
        dec = torch.full((b, T), self.pad, dtype=torch.long)
        labels = torch.full((b, T), IGNORE, dtype=torch.long)
        for r, i in enumerate(pairs):
            s, t = self.data.pair(i)
            s = s[:T]
            if self.eos is not None:
                t = torch.cat([t, torch.tensor([self.eos])])
            t = t[:T]
            src[r, : len(s)] = s
            src_mask[r, : max(len(s), 1)] = 1  # an empty source still attends to one pad
            labels[r, : len(t)] = t
            dec[r, 0] = self.start_id
            dec[r, 1 : len(t)] = t[:-1]
        return {
            "input_ids": src,
            "attention_mask": src_mask,
            "decoder_input_ids": dec,
            "labels": labels,
        }

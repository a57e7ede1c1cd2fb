"""The `archzoo` model of lm-evaluation-harness: loglikelihood, rolling loglikelihood and
greedy/sampled `generate_until`, batched, on any zoo decoder with a tokenizer.

Importing this module registers it (`lm_eval.api.registry.register_model("archzoo")`);
then `lm_eval.simple_evaluate(model="archzoo", model_args="pretrained=PATH,...")` works, as
does `python -m archzoo.evaluation --model archzoo --model_args pretrained=PATH`.
Scoring follows lm-eval's `hf` model: the same context/continuation split and rolling
windows (lm-eval's own helpers), inputs truncated on the left to max_length + 1 tokens,
continuation log-probabilities summed from a log-softmax over the vocabulary.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
import torch.nn.functional as F
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.models.utils import handle_stop_sequences, postprocess_generated_text
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
from tqdm.auto import tqdm

from ..generation.decode import generate
from ..model.placement import as_device
from .tokenized_model import open_model

eval_logger = logging.getLogger("lm_eval.models.archzoo")  # under lm-eval's log settings
MAX_GEN_TOKS = 256  # lm-eval's default when a task sets none


@register_model("archzoo")
class ArchzooLM(TemplateLM):
    """A zoo model for lm-eval: `pretrained` is any name archzoo.load takes (a run directory,
    a .safetensors file, an HF directory, a Hub id) with a tokenizer.json in its directory."""

    def __init__(
        self,
        pretrained: str,
        batch_size: int | str = 1,
        max_batch_size: int | None = None,
        device: str | None = None,
        dtype: str | None = None,
        max_length: int | None = None,
        max_gen_toks: int = MAX_GEN_TOKS,
        add_bos_token: bool | None = None,
        **unused: Any,
    ) -> None:
        super().__init__()
        if unused:
            raise ValueError(
                f"model_args {', '.join(sorted(unused))}: not arguments of the archzoo model "
                "(known: pretrained, batch_size, device, dtype, max_length, max_gen_toks, "
                "add_bos_token)"
            )
        self.batch = _batch_size(batch_size)
        self._device = _pick_device(device)
        self.model, self.tok = open_model(pretrained, device=self._device, dtype=dtype)
        self.model.eval()
        if self.model.family != "decoder":
            raise ValueError(
                f"pretrained={pretrained}: a {self.model.family} model; the archzoo lm-eval "
                "model scores decoder (causal LM) models"
            )
        self._max_length = int(max_length) if max_length else self.model.spec.data["max_len"]
        self._max_gen_toks = int(max_gen_toks)
        self.add_bos_token = add_bos_token
        if self.tok.eos_id is None and self.tok.bos_id is None:
            raise ValueError(f"pretrained={pretrained}: the tokenizer has no eos or bos token")

    # ---------------------------------------------------------------- tokens

    @property
    def eot_token_id(self) -> int:
        return self.tok.eos_id if self.tok.eos_id is not None else self.tok.bos_id

    @property
    def prefix_token_id(self) -> int:
        """The token an empty context or the first rolling window conditions on (bos first)."""
        return self.tok.bos_id if self.tok.bos_id is not None else self.eot_token_id

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def max_gen_toks(self) -> int:
        return self._max_gen_toks

    @property
    def device(self) -> torch.device:
        return self._device

    def tok_encode(
        self, string: str, add_special_tokens: bool | None = None, **_: Any
    ) -> list[int]:
        """Ids of `string`; None: the tokenizer's default (or add_bos_token), and no specials
        for a string already starting with the bos text (as lm-eval's hf model)."""
        if add_special_tokens is None:
            add_special_tokens = True if self.add_bos_token is None else bool(self.add_bos_token)
            bos = self.tok.decode([self.prefix_token_id], skip_special_tokens=False)
            if bos and string.startswith(bos):
                add_special_tokens = False
        ids = self.tok.encode(string, add_special_tokens=add_special_tokens)
        if self.add_bos_token and add_special_tokens and self.tok.bos_id is not None:
            if not ids or ids[0] != self.tok.bos_id:
                ids = [self.tok.bos_id, *ids]
        return ids

    def tok_decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.tok.decode(ids, skip_special_tokens=skip_special_tokens)

    # ---------------------------------------------------------------- scoring

    @torch.no_grad()
    def _log_probs(self, rows: list[list[int]]) -> torch.Tensor:
        """Log-softmax (B, T, V) of right-padded rows (padding never reaches a scored position:
        attention is causal and padding is at the right)."""
        width = max(len(r) for r in rows)
        ids = torch.zeros(len(rows), width, dtype=torch.long)
        mask = torch.zeros(len(rows), width, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = 1
        logits = self.model(ids.to(self.device), attention_mask=mask.to(self.device)).logits
        return F.log_softmax(logits.float(), dim=-1)  # (B, T, V)

    def _loglikelihood_tokens(
        self, requests: list[tuple[Any, list[int], list[int]]], disable_tqdm: bool = False, **_: Any
    ) -> list[tuple[float, bool]]:
        """(sum of log p(continuation | context), whether greedy decoding gives it) per request,
        batched longest first; inputs keep the last max_length + 1 tokens, minus the last."""
        order = sorted(range(len(requests)), key=lambda i: -len(requests[i][1] + requests[i][2]))
        out: list[tuple[float, bool] | None] = [None] * len(requests)
        bar = tqdm(total=len(requests), disable=disable_tqdm, desc="archzoo loglikelihood")
        for start in range(0, len(order), self.batch):
            chunk = order[start : start + self.batch]
            rows, conts = [], []
            for i in chunk:
                _, context, continuation = requests[i]
                if not context or not continuation:
                    raise ValueError("a loglikelihood request needs a context and a continuation")
                rows.append((context + continuation)[-(self.max_length + 1) :][:-1])
                conts.append(continuation)
            logp = self._log_probs(rows)
            for b, i in enumerate(chunk):
                n, cont = len(rows[b]), conts[b]
                picked = logp[b, n - len(cont) : n]  # (len(cont), V): the continuation's scores
                target = torch.tensor(cont, device=picked.device)
                total = picked.gather(-1, target[:, None]).sum().item()
                greedy = bool((picked.argmax(-1) == target).all())
                out[i] = (total, greedy)
                self.cache_hook.add_partial("loglikelihood", requests[i][0], out[i])
            bar.update(len(chunk))
        bar.close()
        return out  # type: ignore[return-value]

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        """Log-likelihood of whole texts, in windows of max_length tokens (lm-eval's windows)."""
        windows, owner = [], []
        for r, req in enumerate(requests):
            (text,) = req.args
            for context, pred in map(
                make_disjoint_window,
                get_rolling_token_windows(
                    token_list=self.tok_encode(text),
                    prefix_token=self.prefix_token_id,
                    max_seq_len=self.max_length,
                    context_len=1,
                ),
            ):
                windows.append((None, context, pred))
                owner.append(r)
        scores = self._loglikelihood_tokens(windows, disable_tqdm=disable_tqdm)
        totals = [0.0] * len(requests)
        for r, (score, _) in zip(owner, scores, strict=True):
            totals[r] += score
        for req, total in zip(requests, totals, strict=True):
            self.cache_hook.add_partial("loglikelihood_rolling", req.args, total)
        return totals

    # ---------------------------------------------------------------- generation

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        """Continuations of each context, cut at the first stop sequence (or the eos text),
        at most max_gen_toks tokens; requests with the same settings are batched (left pad)."""
        out: list[str | None] = [None] * len(requests)
        groups: dict[str, list[int]] = {}
        for i, req in enumerate(requests):
            groups.setdefault(repr(sorted(req.args[1].items())), []).append(i)
        bar = tqdm(total=len(requests), disable=disable_tqdm, desc="archzoo generate_until")
        eos_text = self.tok_decode([self.eot_token_id], skip_special_tokens=False)
        for members in groups.values():
            kwargs = dict(requests[members[0]].args[1])
            until = handle_stop_sequences(kwargs.pop("until", None), eos=eos_text)
            new = int(kwargs.pop("max_gen_toks", self.max_gen_toks))
            do_sample = bool(kwargs.pop("do_sample", False))
            temperature = float(kwargs.pop("temperature", 0.0) or 0.0)
            if temperature == 0.0:
                do_sample = False
            keep = self.max_length - new
            if keep <= 0:
                raise ValueError(
                    f"max_gen_toks {new} leaves no room below max_length {self.max_length}"
                )
            members = sorted(members, key=lambda i: -len(self.tok_encode(requests[i].args[0])))
            for start in range(0, len(members), self.batch):
                chunk = members[start : start + self.batch]
                contexts = [self.tok_encode(requests[i].args[0])[-keep:] for i in chunk]
                texts = self._generate(contexts, new, do_sample, temperature, until)
                for i, text in zip(chunk, texts, strict=True):
                    out[i] = postprocess_generated_text(text, until, None)
                    self.cache_hook.add_partial("generate_until", requests[i].args, out[i])
                bar.update(len(chunk))
        bar.close()
        return out  # type: ignore[return-value]

    @torch.no_grad()
    def _generate(
        self,
        contexts: list[list[int]],
        new: int,
        do_sample: bool,
        temperature: float,
        until: list[str],
    ) -> list[str]:
        """Decode up to `new` tokens after left-padded contexts; each row's text up to its
        eos. Decoding stops once every row has its eos or a stop string (the text is cut at
        the first stop string anyway, so the result is the same as decoding all `new`)."""
        width = max(len(c) for c in contexts)
        pad = self.tok.pad_id if self.tok.pad_id is not None else self.eot_token_id
        ids = torch.full((len(contexts), width), pad, dtype=torch.long)
        mask = torch.zeros(len(contexts), width, dtype=torch.long)
        for i, c in enumerate(contexts):
            ids[i, width - len(c) :] = torch.tensor(c)
            mask[i, width - len(c) :] = 1
        steps: list[list[int]] = []  # each step's (B,) tokens
        finished = [False] * len(contexts)

        def watch(token: torch.Tensor) -> None:
            steps.append(token.tolist())
            for i, done in enumerate(finished):
                if not done:
                    row = [step[i] for step in steps]
                    text = self.tok_decode(row)
                    finished[i] = self.eot_token_id in row or any(u and u in text for u in until)
            if all(finished):
                raise _AllStopped

        try:
            generate(
                self.model,
                ids.to(self.device),
                mask.to(self.device),
                max_new_tokens=new,
                do_sample=do_sample,
                temperature=temperature if do_sample else 1.0,
                eos_token_id=self.eot_token_id,
                pad_token_id=pad,
                on_token=watch,
            )
        except _AllStopped:
            pass
        tokens = [list(row) for row in zip(*steps, strict=True)] if steps else [[]] * len(contexts)
        texts = []
        for row in tokens:
            if self.eot_token_id in row:
                row = row[: row.index(self.eot_token_id)]
            texts.append(self.tok_decode(row))
        return texts


class _AllStopped(Exception):
    """Raised from generate's per-token callback once every row has stopped."""


def _pick_device(device: str | None) -> torch.device:
    """The device asked for; none, or CUDA where there is none (lm-eval's command line asks
    for cuda by default): the machine's accelerator when it has one, else the CPU, with a
    warning, as lm-eval's hf."""
    if device is not None:
        try:
            return as_device(device)
        except ValueError as exc:
            if not device.startswith("cuda"):
                raise
            eval_logger.warning(f"{exc}; evaluating on the CPU")
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    return accelerator if accelerator is not None else torch.device("cpu")


def _batch_size(value: int | str) -> int:
    """lm-eval passes batch_size as given on its command line: an integer (or its text)."""
    try:
        size = int(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"batch_size={value!r}: the archzoo model takes an integer batch size (not 'auto')"
        ) from None
    if size < 1:
        raise ValueError(f"batch_size={value!r}: must be >= 1")
    return size

"""Beam search with transformers' scoring, length penalty and stopping rules."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .runner import Runner, Settings, process_scores, repeat_rows

NEG = -1.0e9  # transformers' "impossible" score in beam search


def beam_search(runner: Runner, prompt: Tensor, s: Settings) -> Tensor:
    """Beam search with transformers' scoring, length penalty and stopping rules."""
    B, L = prompt.shape
    K, dev = s.num_beams, prompt.device
    max_len = L + s.max_new_tokens
    fill = s.pad if s.pad else (s.eos[0] if s.eos else -1)  # transformers' `pad or eos[0]`
    keep = max(2, 1 + len(s.eos)) * K
    top_mask = torch.arange(keep, device=dev) < K
    eos = s.eos_ids

    running = prompt.new_full((B, K, max_len), fill)
    running[:, :, :L] = prompt[:, None]
    finished_seqs = running.clone()
    running_scores = torch.zeros(B, K, device=dev)
    running_scores[:, 1:] = NEG
    finished_scores = torch.full((B, K), NEG, device=dev)
    finished = torch.zeros(B, K, dtype=torch.bool, device=dev)
    finished_len = torch.zeros(B, K, dtype=torch.long, device=dev)
    can_improve = torch.ones(B, 1, dtype=torch.bool, device=dev)
    offsets = torch.arange(B, device=dev)[:, None] * K

    logits = runner.start(repeat_rows(prompt, K))
    cur = L
    while True:
        log_probs = process_scores(F.log_softmax(logits.float(), dim=-1), cur - L, s, warp=True)
        V = log_probs.shape[-1]
        total = (log_probs.view(B, K, V) + running_scores[:, :, None]).view(B, K * V)
        if s.do_sample:
            idx = torch.multinomial(total.softmax(-1), keep, generator=s.generator)
            cand_scores, order = total.gather(1, idx).sort(dim=-1, descending=True)
            idx = idx.gather(1, order)  # best first, as transformers orders the draws
        else:
            cand_scores, idx = torch.topk(total, keep)
        src, token = idx // V, idx % V  # (B, keep) source beam and new token
        cand = running.gather(1, src[:, :, None].expand(B, keep, max_len)).clone()
        cand[:, :, cur] = token
        hits = torch.full_like(token, cur + 1 >= max_len, dtype=torch.bool)
        if eos is not None:
            hits |= torch.isin(token, eos)

        # the best unfinished candidates keep running
        live_scores = cand_scores + hits.float() * NEG
        chosen = torch.topk(live_scores, K).indices
        running = cand.gather(1, chosen[:, :, None].expand(B, K, max_len))
        running_scores = live_scores.gather(1, chosen)
        beam_origin = src.gather(1, chosen)  # (B, K)

        # finished candidates among the top K compete with earlier finished ones
        just_done = hits & top_mask[None]
        done_scores = cand_scores / ((cur + 1 - L) ** s.length_penalty)
        full = finished.all(-1, keepdim=True) & (s.early_stopping is True)
        done_scores = done_scores + full.float() * NEG + (~can_improve).float() * NEG
        done_scores = done_scores + (~just_done).float() * NEG
        merged_scores = torch.cat([finished_scores, done_scores], dim=1)
        best = torch.topk(merged_scores, K).indices
        finished_seqs = torch.cat([finished_seqs, cand], 1).gather(
            1, best[:, :, None].expand(B, K, max_len)
        )
        finished_scores = merged_scores.gather(1, best)
        finished = torch.cat([finished, just_done], 1).gather(1, best)
        new_len = torch.full_like(just_done, cur + 1 - L, dtype=torch.long)
        finished_len = torch.cat([finished_len, new_len], 1).gather(1, best)

        cur += 1
        if s.early_stopping == "never" and s.length_penalty > 0.0:
            best_len = max_len - L
        else:
            best_len = cur - L
        best_running = running_scores[:, :1] / (best_len**s.length_penalty)
        worst_done = torch.where(finished, finished_scores.min(1, keepdim=True).values, NEG)
        can_improve = can_improve & (best_running > worst_done).any(-1, keepdim=True)
        open_beams = not (bool(finished.all()) and s.early_stopping is True)
        if not (bool(can_improve.any()) and open_beams and not bool(hits.all())):
            break
        runner.reorder((beam_origin + offsets).view(-1))
        logits = runner.step(running[:, :, cur - 1].reshape(-1))

    length = L + int(finished_len[:, 0].max())
    return finished_seqs[:, 0, :length]

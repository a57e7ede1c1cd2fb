"""Shared helpers for Hugging Face parity tests: tiny random models, perturbed and saved."""

from __future__ import annotations

from pathlib import Path

import torch


@torch.no_grad()
def perturb(model: torch.nn.Module, seed: int = 0, scale: float = 0.05) -> None:
    """Add noise to every parameter so zero biases and unit norms hide no mistake."""
    g = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        p.add_(torch.randn(p.shape, generator=g) * scale)


def save_hf(model: torch.nn.Module, directory: Path) -> Path:
    model.save_pretrained(directory, safe_serialization=True)
    return directory


def padded_batch(vocab: int, *, batch: int = 2, length: int = 10, real: int = 6, low: int = 3):
    """Random ids and a mask whose last row is right-padded after `real` tokens."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(low, vocab, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[-1, real:] = 0
    return ids, mask


def max_diff_unpadded(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> float:
    """Max |a - b| over positions where mask is 1: a, b (B, T, V)."""
    keep = mask.bool()
    return (a - b).abs()[keep].max().item()

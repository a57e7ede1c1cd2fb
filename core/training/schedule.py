"""Learning-rate schedules as multipliers of the peak rate, with linear warm-up."""

from __future__ import annotations

import math
from collections.abc import Callable

SCHEDULES = ("cosine", "inverse_sqrt", "constant")


def lr_factor(
    schedule: str, warmup: int, total: int, min_ratio: float = 0.0
) -> Callable[[int], float]:
    """f(step) for 1-based optimizer steps: the peak learning rate is multiplied by f(step).

    inverse_sqrt is Vaswani et al.'s min(step^-0.5, step * warmup^-1.5), scaled so its peak
    (at step = warmup) is 1: lr = peak * min(step / warmup, sqrt(warmup / step)).
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"--schedule {schedule!r}: expected one of {', '.join(SCHEDULES)}")
    if warmup < 0:
        raise ValueError(f"--warmup must be >= 0, got {warmup}")

    def warm(step: int) -> float | None:
        return step / warmup if step < warmup else None

    def cosine(step: int) -> float:
        w = warm(step)
        if w is not None:
            return w
        span = max(total - warmup, 1)
        progress = min((step - warmup) / span, 1.0)
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    def inverse_sqrt(step: int) -> float:
        if warmup == 0:
            return 1 / math.sqrt(max(step, 1))
        return min(step / warmup, math.sqrt(warmup / step))

    def constant(step: int) -> float:
        w = warm(step)
        return 1.0 if w is None else w

    return {"cosine": cosine, "inverse_sqrt": inverse_sqrt, "constant": constant}[schedule]

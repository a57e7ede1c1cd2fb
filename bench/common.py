"""Shared helpers of the benchmark scripts: timing, machine roofs and RESULTS.md sections."""

from __future__ import annotations

import os
import platform
import re
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

RESULTS = Path(__file__).with_name("RESULTS.md")


def median_time(fn: Callable[[], object], repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_times(
    fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Times of each function over rounds that run every one once, in order, so drifting
    load hits all alike."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def paired_times(
    fn_hf: Callable[[], object], fn_az: Callable[[], object], repeats: int, warmup: int = 1
) -> tuple[list[float], list[float]]:
    """Times of interleaved runs (HF, archzoo, HF, ...), so drifting load hits both alike."""
    times = interleaved_times({"hf": fn_hf, "az": fn_az}, repeats, warmup)
    return times["hf"], times["az"]


def matmul_peak(repeats: int = 5) -> float:
    """Best measured fp32 FLOP/s of large square matmuls on this machine."""
    best = 0.0
    for n in (1024, 2048, 3072):
        a, b = torch.randn(n, n), torch.randn(n, n)
        t = median_time(lambda a=a, b=b: a @ b, repeats, warmup=2)
        best = max(best, 2 * n**3 / t)
    return best


def gemv_floor(shapes: list[tuple[int, int]], repeats: int = 5) -> float:
    """Seconds to multiply one token by fresh weights of these (out, in) shapes, nothing else.

    A batch-1 decoding step must stream every weight matrix from memory once, so with
    PyTorch's CPU kernels no implementation of that step can be faster than this.
    """
    weights = [torch.randn(o, i) for o, i in shapes]
    inputs = {i: torch.randn(1, i) for _, i in shapes}

    def step() -> None:
        for w in weights:
            torch.nn.functional.linear(inputs[w.shape[1]], w)

    return min(median_time(step, repeats, warmup=2) for _ in range(3))


def anon_rss() -> int:
    """Resident anonymous memory of this process in bytes (heap and tensors, not libraries)."""
    with open("/proc/self/statm") as f:
        _, resident, shared = (int(x) for x in f.read().split()[:3])
    return (resident - shared) * os.sysconf("SC_PAGE_SIZE")


def peak_memory_growth(fn: Callable[[], object], interval: float = 0.001) -> int:
    """Peak growth of anonymous RSS while `fn` runs, sampled every `interval` seconds.

    CPU PyTorch keeps no allocator statistics, and the kernel's high-water mark also counts
    shared-library pages faulted back in, so a sampling thread watches anonymous memory
    (torch kernels release the GIL, so it keeps sampling while they run).
    """
    base = anon_rss()
    peak = base
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, anon_rss())
            time.sleep(interval)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    try:
        fn()
    finally:
        done.set()
        watcher.join()
    return max(peak, anon_rss()) - base


def machine() -> str:
    return (
        f"{platform.machine()} {platform.processor() or ''}".strip()
        + f", {torch.get_num_threads()} threads, torch {torch.__version__}"
    )


def write_section(title: str, lines: list[str]) -> None:
    """Put `## title` and `lines` in RESULTS.md, replacing an older section of that title."""
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmarks\n"
    body = f"## {title}\n\n" + "\n".join(lines).strip() + "\n"
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: body + "\n", text, count=1).rstrip() + "\n"
    else:
        text = text.rstrip() + "\n\n" + body
    RESULTS.write_text(text, encoding="utf-8")
    print(f"wrote section {title!r} to {RESULTS}")

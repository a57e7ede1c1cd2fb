"""Worker for the distributed `zoo train` test: one rank of a torchrun-like job on gloo."""

from __future__ import annotations

import os
from dataclasses import replace

import torch
import torch.distributed as dist

from archzoo.training import TrainConfig, train


def run_rank(rank: int, world: int, port: int, spec: dict, cfg: TrainConfig, queue) -> None:
    """Train with DDP, then with FSDP2, in one process group (as torchrun's env:// sets it up)."""
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    try:
        results = {}
        for mode in ("ddp", "fsdp2"):
            run = replace(cfg, out=f"{cfg.out}-{mode}", fsdp=mode == "fsdp2")
            results[mode] = train(spec["name"], run, spec["overrides"])["history"]
        if rank == 0:
            queue.put(results)
    finally:
        dist.destroy_process_group()

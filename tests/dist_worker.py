"""Worker for the distributed tests: trains a tiny model on one rank's share of a batch."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

import archzoo

TINY = {"n_layers": 2, "d_model": 32, "n_heads": 4, "d_ff": 64, "vocab_size": 50, "dropout": 0.0}
STEPS = 3


def batch() -> torch.Tensor:
    return torch.randint(0, 50, (4, 12), generator=torch.Generator().manual_seed(1))


def train(model: torch.nn.Module, x: torch.Tensor, world: int = 1) -> list[float]:
    """AdamW steps on x; returns the loss averaged over ranks at each step."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(STEPS):
        loss = model(x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        total = loss.detach().clone()
        if world > 1:
            dist.all_reduce(total)
        losses.append(total.item() / world)
    return losses


def single_process() -> list[float]:
    torch.manual_seed(0)
    return train(archzoo.build_model("gpt2", TINY), batch())


def run_rank(rank: int, world: int, mode: str, port: int, queue) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        model = archzoo.build_model("gpt2", TINY)
        if mode == "ddp":
            wrapped = torch.nn.parallel.DistributedDataParallel(model)
        else:
            from torch.distributed.fsdp import fully_shard

            for block in model.decoder.blocks:
                fully_shard(block)
            fully_shard(model)
            wrapped = model
        losses = train(wrapped, batch().chunk(world)[rank], world)
        if rank == 0:
            queue.put(losses)
        dist.barrier()  # both ranks done before either tears gloo down (one aborted otherwise)
    finally:
        dist.destroy_process_group()

"""DDP and FSDP2 on two CPU processes (gloo) train exactly like one process on the whole batch."""

from __future__ import annotations

import socket

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp
from dist_worker import run_rank, single_process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not dist.is_gloo_available(), reason="this torch build has no gloo backend")
@pytest.mark.parametrize("mode", ["ddp", "fsdp2"])
def test_two_process_training_equals_single_process(mode):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.start_processes(
        run_rank, args=(2, mode, free_port(), queue), nprocs=2, start_method="spawn", join=True
    )
    distributed = queue.get(timeout=60)
    expected = single_process()
    assert len(distributed) == len(expected) == 3
    assert max(abs(a - b) for a, b in zip(distributed, expected, strict=True)) <= 1e-5
    assert expected[-1] < expected[0]  # it trained

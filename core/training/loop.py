"""The training loop: one process, or one rank of a torchrun job (DDP or FSDP2)."""

from __future__ import annotations

import json
import math
import os
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..io.weights import save
from ..memory import check_fits
from ..model.builder import build_model
from ..specs.spec import Spec, load_spec
from .checkpoint import CHECKPOINT, full_model_state, load_checkpoint, read_info, save_checkpoint
from .config import TrainConfig, check_config, check_out, check_resume, check_spec
from .data import check_sources, is_pairs, prepare_pairs, prepare_stream
from .measure import PeakMemory, train_flops_per_token
from .metrics import METRICS, check_metrics, keep_until, read_metrics
from .objectives import (
    IGNORE,
    CausalLM,
    Denoising,
    MaskedLM,
    Objective,
    Packed,
    Translation,
    step_generator,
)
from .optimizers import Optimizers, make_optimizers
from .run_lock import run_lock
from .schedule import lr_factor
from .tokenizer import Tokenizer, load_tokenizer

SPEC_FILE = "spec.yaml"  # the run's resolved spec, beside model.safetensors

__all__ = ["METRICS", "SPEC_FILE", "read_metrics", "train"]


class Ranks:
    """This process's place in a torchrun job (rank 0 of 1 when run alone)."""

    def __init__(self) -> None:
        self.owned = int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized()
        if self.owned:  # under torchrun: the launcher's env:// rendezvous, nothing home-made
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        self.on = dist.is_initialized()
        self.rank = dist.get_rank() if self.on else 0
        self.world = dist.get_world_size() if self.on else 1
        self.local = int(os.environ.get("LOCAL_RANK", "0"))

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        if self.on:
            dist.all_reduce(t)
        return t

    def barrier(self) -> None:
        if self.on:
            dist.barrier()

    def close(self) -> None:
        """End the process group if this run started it."""
        if self.owned:
            dist.destroy_process_group()


def make_objective(
    spec: Spec, cfg: TrainConfig, tok: Tokenizer, files: list[Path], cache: Path
) -> Objective:
    """The objective of the spec's family, over the tokenised data."""
    args = (cfg.seq_len, cfg.seed, cfg.eval_fraction, tok.specials)
    sp = tok.specials
    start = next((i for i in (sp.bos, sp.pad, sp.eos) if i is not None), None)
    if spec.family == "encoder-decoder" and start is None:
        raise ValueError(f"--tokenizer {tok.name}: no bos, pad or eos token to start decoding with")
    if spec.family == "encoder-decoder" and is_pairs(files):
        if cfg.pack:
            raise ValueError(
                "--pack packs the documents of text or JSONL files; TSV pairs are one "
                "source/target example per row (leave --pack out)"
            )
        return Translation(prepare_pairs(files, tok, cache), *args, start)
    stream = prepare_stream(files, tok, cache)
    objective: Objective
    if spec.family == "decoder":
        objective = CausalLM(stream, *args)
    elif spec.family == "encoder":
        objective = MaskedLM(stream, *args, tok.n_regular)
    else:
        objective = Denoising(stream, *args, start)
    if not cfg.pack:
        return objective
    pad = next((i for i in (sp.pad, sp.eos) if i is not None), 0)
    return Packed(objective, stream, pad)


def wrap(model: nn.Module, ranks: Ranks, fsdp: bool) -> nn.Module:
    """DDP, or FSDP2 with each block sharded and then the whole model."""
    if not ranks.on:
        return model
    if not fsdp:
        return nn.parallel.DistributedDataParallel(model)
    from torch.distributed.fsdp import fully_shard

    for stack in (model.encoder, model.decoder):
        for block in stack.blocks if stack is not None else []:
            fully_shard(block)
    fully_shard(model)
    return model


def optimizer_for(
    model: nn.Module, cfg: TrainConfig, spec: Spec | None = None
) -> torch.optim.AdamW:
    """AdamW alone, as --optimizer adamw makes it (optimizers.py; muP groups under the
    spec's muP)."""
    return make_optimizers(model, replace(cfg, optimizer="adamw"), spec)[0]


def check_head(model: nn.Module, vocab: int) -> None:
    """The head scores the vocabulary (checked on one token before any training)."""
    weight = next(model.parameters())
    probe = torch.zeros(1, 1, model.head.dims.d_model, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        logits = model.head(probe)  # (1, 1, V)
    if not isinstance(logits, torch.Tensor) or logits.shape[-1] != vocab:
        raise ValueError(
            "the spec's head makes no vocabulary logits, so it cannot be trained on text"
        )


def batch_loss(
    net: nn.Module,
    batch: dict[str, torch.Tensor],
    device: torch.device,
    smoothing: float = 0.0,
    num_items: float | None = None,
) -> torch.Tensor:
    """The summed (or / num_items) token loss of a batch, through the head's chunked loss:
    no (B, T, V) logits are made (`labels` are aligned with the positions, -100 ignored)."""
    inputs = {k: v.to(device) for k, v in batch.items() if k != "labels"}
    return net(
        **inputs,
        shift_labels=batch["labels"].to(device),
        num_items_in_batch=1.0 if num_items is None else num_items,
        label_smoothing=smoothing,
        return_logits=False,
    ).loss


def _progress(cfg: TrainConfig, start: int, show: bool, desc: str):  # noqa: ANN202 - tqdm
    from tqdm.auto import tqdm

    return tqdm(  # on stderr
        total=cfg.stop_at or cfg.steps,
        initial=start,
        desc=desc,
        unit="step",
        disable=not show,
        dynamic_ncols=True,
    )


def train(
    spec: Any,
    cfg: TrainConfig,
    overrides: dict[str, Any] | None = None,
    *,
    label: str | None = None,
) -> dict[str, Any]:
    """Train `spec` (name, path, dict, Spec) as `cfg` says; returns a summary of the run.
    `label` names the progress bar (default: "train SPEC")."""
    ranks = Ranks()
    try:
        return _train(ranks, spec, cfg, overrides, label)
    finally:
        ranks.close()


def _train(
    ranks: Ranks,
    spec: Any,
    cfg: TrainConfig,
    overrides: dict[str, Any] | None,
    label: str | None = None,
) -> dict[str, Any]:
    spec = load_spec(spec, overrides)
    cfg = replace(cfg, data=[str(Path(p).resolve()) for p in cfg.data])
    check_config(cfg, ranks.world)
    micro = cfg.batch // (cfg.accum * ranks.world)
    check_fits(  # a lower bound, before any work: a step's drawn starts and one micro-batch's ids
        8 * (cfg.batch + micro * (cfg.seq_len + 1)),
        "cpu",
        f"a step of --batch {cfg.batch:,} sequences (micro-batches of {micro:,})",
        "lower --batch or raise --accum",
    )
    files = check_sources(cfg.data)
    check_out(cfg.out, cfg.data)
    tok = load_tokenizer(cfg.tokenizer)
    check_spec(spec, cfg, tok)
    out = Path(cfg.out)
    with run_lock(out, take=ranks.rank == 0):  # one run per directory: the others are refused
        return _run(ranks, spec, cfg, files, tok, out, micro, label or f"train {spec.name}")


def _check_resume(spec: Spec, cfg: TrainConfig, out: Path) -> int:
    """The checkpoint's step, once the checkpoint, options and metrics.jsonl fit the resume."""
    ckpt = out / CHECKPOINT
    if not cfg.resume:
        if ckpt.is_file():
            raise ValueError(
                f"--out {out} already holds a run; pass --resume or choose another --out"
            )
        return 0
    if not ckpt.is_file():
        raise ValueError(f"--resume: {out} holds no {CHECKPOINT} to resume from")
    start, saved = read_info(ckpt)
    check_resume(saved, spec, cfg, str(out))
    for option, value in (("--steps", cfg.steps), ("--stop-at", cfg.stop_at)):
        if value is not None and value < start:
            raise ValueError(
                f"{option} {value} is below step {start} of the checkpoint in {out}; "
                f"give {option} {start} or more to continue the run"
            )
    check_metrics(out / METRICS)
    return start


def _run(
    ranks: Ranks,
    spec: Spec,
    cfg: TrainConfig,
    files: list[Path],
    tok: Tokenizer,
    out: Path,
    micro: int,
    label: str,
) -> dict[str, Any]:
    ckpt = out / CHECKPOINT
    info = {"spec": spec.to_dict(), "config": cfg.to_dict()}
    start = _check_resume(spec, cfg, out)
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(cfg.data_cache) if cfg.data_cache else out / "data"
    if ranks.local == 0:  # one tokeniser per machine; the others wait and then map the files
        objective = make_objective(spec, cfg, tok, files, cache)
    ranks.barrier()
    if ranks.local != 0:
        objective = make_objective(spec, cfg, tok, files, cache)
    n_eval = objective.eval_examples(cfg.eval_examples)
    if n_eval < 1:
        raise ValueError(
            "--data: the held-out split is too small for one evaluation example; raise --eval-fraction"
        )
    if ranks.rank == 0:  # a run directory is a model directory: spec and tokenizer beside
        write_model_files(out, spec, tok)  # the weights that the end of the run adds (written
        # once the data is accepted: a refused run leaves nothing behind)

    device = torch.device(
        cfg.device or (f"cuda:{ranks.local}" if torch.cuda.is_available() else "cpu")
    )
    torch.manual_seed(cfg.seed)  # the same initial weights on every rank
    dtype = getattr(torch, cfg.dtype)
    model = build_model(spec, device=device, dtype=dtype, attention_impl=cfg.attention_impl)
    flops = train_flops_per_token(model, cfg.seq_len)
    params = model.num_parameters()
    check_head(model, spec.stack(spec.stacks()[-1])["vocab_size"])  # the head's stack
    net = wrap(model, ranks, cfg.fsdp)
    opt = Optimizers(
        make_optimizers(net, cfg, spec),
        lambda e: lr_factor(cfg.schedule, cfg.warmup, cfg.steps, cfg.min_lr_ratio)(e + 1),
    )
    if cfg.resume:
        start = load_checkpoint(ckpt, net, opt)
    lead = ranks.rank == 0
    metrics_path = out / METRICS
    if lead:
        keep_until(metrics_path, start)

    def rows(m: int) -> slice:  # this rank's rows of micro-batch m in the step's global batch
        first = (m * ranks.world + ranks.rank) * micro
        return slice(first, first + micro)

    def evaluate() -> tuple[float, float]:
        """Mean loss over the held-out examples, split over ranks (same set at any world size)."""
        model.eval()  # DDP's wrapper is not needed without gradients; FSDP2 hooks live on model
        total = torch.zeros(2, dtype=torch.float64)
        mine = torch.arange(ranks.rank, n_eval, ranks.world)
        rounds = math.ceil(math.ceil(n_eval / ranks.world) / micro)  # equal on every rank
        with torch.no_grad():
            for r in range(rounds):
                chunk = mine[r * micro : (r + 1) * micro]
                weight = 1.0 if len(chunk) else 0.0  # FSDP2 ranks must all run each forward
                batch = objective.eval_batch(
                    chunk if len(chunk) else torch.zeros(1, dtype=torch.long)
                )
                count = (batch["labels"] != IGNORE).sum()
                loss = batch_loss(model, batch, device)  # summed
                total += weight * torch.stack([loss.cpu(), count]).double()
        model.train()
        loss_sum, count = ranks.sum(total).tolist()
        mean = loss_sum / max(count, 1)
        return mean, math.exp(min(mean, 700))

    end = min(cfg.stop_at or cfg.steps, cfg.steps)
    memory = PeakMemory(device)
    bar = _progress(cfg, start, lead and cfg.progress, label)
    history: list[dict[str, Any]] = []
    tokens_per_step = cfg.batch * cfg.seq_len
    t0 = time.perf_counter()
    net.train()
    for step in range(start + 1, end + 1):
        torch.manual_seed(step_generator(cfg.seed, step, ranks.rank).initial_seed())  # dropout
        batches = [objective.train_batch(step, cfg.batch, rows(m)) for m in range(cfg.accum)]
        count = ranks.sum(
            torch.stack([(b["labels"] != IGNORE).sum() for b in batches]).sum().double()
        )
        count = count.clamp(min=1).item()
        loss_sum = torch.zeros((), dtype=torch.float64)
        for m, batch in enumerate(batches):
            sync = m == cfg.accum - 1 or not isinstance(net, nn.parallel.DistributedDataParallel)
            with nullcontext() if sync else net.no_sync():
                share = count / ranks.world  # each rank's loss: its sum / share (DDP averages)
                loss = batch_loss(net, batch, device, cfg.label_smoothing, share)
                loss.backward()
            loss_sum += loss.detach().double().cpu() * share
        norm = nn.utils.clip_grad_norm_(net.parameters(), cfg.clip if cfg.clip > 0 else math.inf)
        norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
        lr = opt.lr
        opt.step()  # and the schedule
        opt.zero_grad()
        train_loss = ranks.sum(loss_sum).item() / count
        elapsed = time.perf_counter() - t0
        record = {
            "step": step,
            "loss": train_loss,
            "lr": lr,
            "grad_norm": float(norm),
            "tokens": step * tokens_per_step,
            "tokens_per_s": (step - start) * tokens_per_step / elapsed,
        }
        if step % cfg.eval_every == 0 or step == cfg.steps:
            record["eval_loss"], record["eval_perplexity"] = evaluate()
        history.append(record)
        if lead:
            with open(metrics_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        bar.set_postfix_str(f"loss {train_loss:.4f}, {record['tokens_per_s']:,.0f} tok/s")
        bar.update(1)
        if step % cfg.save_every == 0 or step == end:
            save_checkpoint(ckpt, net, opt, step=step, info=info, write=lead)
    bar.close()
    if end == cfg.steps:
        _save_model(spec, net, out / "model.safetensors", lead)
    ranks.barrier()
    return {
        "name": spec.name,
        "rank": ranks.rank,
        "params": params,
        "flops_per_token": flops,
        "tokens_per_s": history[-1]["tokens_per_s"] if history else None,
        "peak_memory": memory.peak_bytes(),
        "padding_fraction": objective.padding_fraction() if cfg.pack else None,
        "history": history,
        "out": str(out),
    }


def write_model_files(out: Path, spec: Spec, tok: Tokenizer) -> None:
    """DIR/spec.yaml (the resolved spec) and DIR/tokenizer.json (the bytes tokenizer written
    out, or a copy of --tokenizer), so `zoo generate DIR` and `archzoo.load(DIR)` need nothing
    else once DIR/model.safetensors is written."""
    (out / SPEC_FILE).write_text(spec.to_yaml(), encoding="utf-8")
    tok.save(out)


def _save_model(spec: Spec, net: nn.Module, path: Path, lead: bool) -> None:
    """The trained weights as an archzoo model file (loadable with archzoo.load)."""
    state = full_model_state(net)
    if lead:
        dtype = next(iter(state.values())).dtype
        model = build_model(spec, device="cpu", dtype=dtype)
        model.load_state_dict(state)
        save(model, path)

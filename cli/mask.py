"""`zoo mask`: which keys each query may attend to, as a terminal grid or a PNG."""

from __future__ import annotations

import math
import struct
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .common import SET_OPTION, load_spec

if TYPE_CHECKING:
    from torch import Tensor

MAX_COLUMNS = 64  # terminal grid: at most this many cells per row
MAX_PIXELS = 2048  # PNG: at most this many pixels per side
# peak bytes per (query, key) pair of `zoo mask`, measured: 8 (causal) to 16 (Longformer)
MASK_BYTES_PER_PAIR = 16


def layer_keep(
    name: str, sets: tuple[str, ...], length: int, layer: int, stack: str | None
) -> tuple[Tensor, str]:
    """The (length, length) bool mask of one layer's self-attention, and a description."""
    import archzoo
    from archzoo.memory import check_fits

    spec = load_spec(name, sets)
    stacks = spec.stacks()
    which = stack or stacks[-1]
    if which not in stacks:
        raise click.BadParameter(
            f"{spec.name} has stacks {stacks}, not {which!r}", param_hint="--stack"
        )
    part = getattr(archzoo.build_model(spec, device="meta"), which)
    if not 0 <= layer < len(part.layer_map):
        raise click.BadParameter(
            f"{which} has layers 0..{len(part.layer_map) - 1}", param_hint="--layer"
        )
    attention = part.blocks[part.layer_map[layer]].attention
    causal = part.causal
    check_fits(  # the mask is dense: refuse before computing one the machine cannot hold
        MASK_BYTES_PER_PAIR * length * length,
        "cpu",
        f"the {length}x{length} mask of {which} layer {layer} ({attention.name})",
        "use a smaller --len",
    )
    keep = attention.keep_mask(length, causal=causal)
    mode = "causal" if causal else "bidirectional"
    title = f"{spec.name} {which} layer {layer}: {attention.name} ({mode}), {length} tokens"
    return keep, title


def pool(keep: Tensor, cells: int) -> Tensor:
    """Fraction of allowed pairs in each of (cells x cells) squares of a (n, n) mask.

    One band of query rows at a time, so the pooling adds no copy of the whole mask."""
    import torch

    n = keep.shape[0]
    size = math.ceil(n / cells)
    m = math.ceil(n / size)
    counts = torch.zeros(m, m)
    for i in range(m):
        band = keep[i * size : (i + 1) * size].sum(0)  # (n,) allowed pairs per key
        padded = torch.zeros(m * size, dtype=band.dtype)
        padded[:n] = band
        counts[i] = padded.view(m, size).sum(1).float()  # (m,) per key cell
    rows = torch.arange(m) * size
    area = torch.clamp(n - rows, max=size)[:, None] * torch.clamp(n - rows, max=size)[None, :]
    return counts / area


def grid(keep: Tensor) -> list[str]:
    """Rows of '#' (all allowed), '+' (some), '.' (none), one line per query (or cell)."""
    n = keep.shape[0]
    frac = pool(keep, MAX_COLUMNS)
    size = math.ceil(n / frac.shape[0])
    width = len(str(n - 1))
    lines = []
    for i, row in enumerate(frac.tolist()):
        cells = "".join("#" if f >= 1.0 else ("." if f <= 0.0 else "+") for f in row)
        lines.append(f"q{i * size:<{width}d} |{cells}|")
    return lines


def write_png(path: Path, pixels: Tensor) -> None:
    """An 8-bit grayscale PNG from a (h, w) uint8 tensor (zlib + struct, no dependency)."""
    h, w = pixels.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + bytes(row) for row in pixels.tolist())  # filter 0 per row
    header = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)  # 8-bit grayscale
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
    png += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    path.write_bytes(png)


def write_figure(path: Path, frac: Tensor, length: int, title: str, note: str) -> bool:
    """The pooled mask as a matplotlib picture: query rows, key columns, axes in token
    positions, and a legend; False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        return False
    cells = frac.shape[0]
    size = math.ceil(length / cells)  # token positions per cell side
    fig, ax = plt.subplots(figsize=(6.4, 7.0))
    fig.subplots_adjust(left=0.14, right=0.95, top=0.82, bottom=0.09)
    edges = [-0.5, cells * size - 0.5, cells * size - 0.5, -0.5]  # axes in token positions
    ax.imshow(frac.numpy(), cmap="Greys", vmin=0.0, vmax=1.0, extent=edges, interpolation="nearest")
    ax.set_xlim(-0.5, length - 0.5)
    ax.set_ylim(length - 0.5, -0.5)
    ax.xaxis.set_label_position("top")
    ax.xaxis.tick_top()
    ax.set_xlabel("key position (attended to) →")
    ax.set_ylabel("query position (attending) ↓")
    fig.suptitle(title + "\n" + note, fontsize=9, y=0.985)
    handles = [
        Patch(facecolor="black", edgecolor="grey", label="allowed: the query sees the key"),
        Patch(facecolor="white", edgecolor="grey", label="masked"),
    ]
    if size > 1:
        handles.append(
            Patch(
                facecolor="grey",
                edgecolor="grey",
                label=f"some allowed (cell = {size}x{size} pairs)",
            )
        )
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


@click.command("mask")
@click.argument("name")
@click.option("--len", "length", type=click.IntRange(1, 65536), default=64, show_default=True)
@click.option("--layer", type=int, default=0, show_default=True, help="Layer index.")
@click.option("--stack", type=click.Choice(["encoder", "decoder"]), help="Default: the last.")
@SET_OPTION
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a PNG: with axes and a legend (matplotlib), else one pixel per cell.",
)
def mask(
    name: str, length: int, layer: int, stack: str | None, sets: tuple[str, ...], out: Path | None
) -> None:
    """Show which keys each query of a layer may attend to (NAME: zoo name or spec file)."""
    import torch

    if out is not None:  # before the mask: never overwrite the spec file or follow a link
        from archzoo.io.safe_write import check_out_path

        check_out_path(out, inputs=[Path(name)])
    keep, title = layer_keep(name, sets, length, layer, stack)
    seen = keep.sum(-1).float()
    stats = f"keys per query: mean {seen.mean():.1f}, max {int(seen.max())}"
    click.echo(f"{title}; {stats}")
    if out is not None:
        frac = pool(keep, MAX_PIXELS)
        if write_figure(out, frac, length, title, stats):
            click.echo(f"wrote {out} (queries x keys, {frac.shape[0]}x{frac.shape[1]} cells)")
            return
        write_png(out, ((1.0 - frac) * 255).round().to(torch.uint8))  # black: allowed
        click.echo(
            f"wrote {out} ({frac.shape[0]}x{frac.shape[1]} pixels, black: allowed; for axes "
            "and a legend: pip install 'archzoo[plot]')"
        )
        return
    if length > MAX_COLUMNS:
        size = math.ceil(length / MAX_COLUMNS)
        click.echo(f"one cell = {size}x{size} pairs: '#' all allowed, '+' some, '.' none")
    for line in grid(keep):
        click.echo(line)

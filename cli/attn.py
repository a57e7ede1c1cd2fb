"""`zoo attn`: what each layer and head attends to in a sentence, as a page or a PNG grid."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .attn_page import head_view_html
from .common import UserError, model_options, utf8_text
from .generate import load_model, load_tokenizer
from .token_text import token_texts

if TYPE_CHECKING:
    import torch


def pick(value: int | None, n: int, what: str) -> list[int]:
    """[value] (checked against n; negative counts from the end) or all of range(n)."""
    if value is None:
        return list(range(n))
    if not -n <= value < n:
        raise UserError(f"--{what} {value} is out of range: the model has {n} {what}s")
    return [value % n]


def attention_maps(model: Any, ids: torch.Tensor, layers: list[int]) -> list[torch.Tensor]:
    """(H, T, T) self-attention probabilities of each layer in `layers` for one sequence.

    Encoder-decoders show their encoder's self-attention."""
    import torch

    with torch.no_grad():
        if model.family == "encoder-decoder":
            start = model.spec.data.get("decoder_start_token_id") or 0
            start_ids = torch.tensor([[start]], device=ids.device)
            out = model(ids, decoder_input_ids=start_ids, output_attentions=layers)
            maps = out.encoder_attentions
        else:
            maps = model(ids, output_attentions=layers).attentions
    return [maps[i][0].float().cpu() for i in layers]


def stack_sizes(model: Any) -> tuple[int, int]:
    """(layers, heads) of the stack whose self-attention is shown (the encoder, if any)."""
    which = "encoder" if model.encoder is not None else "decoder"
    return len(getattr(model, which).layer_map), model.spec.stack(which)["n_heads"]


def write_png(
    path: Path,
    tokens: list[str],
    layers: list[int],
    heads: list[int],
    maps: list[torch.Tensor],
    drop_sink: bool = False,
) -> None:
    """A layers x heads grid of heat maps (query rows, key columns) with token labels and a
    colour bar over the data's range (without key 0's column when `drop_sink`)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError(
            "PNG output needs matplotlib: pip install 'archzoo[plot]' (or write .html)"
        ) from None
    import numpy as np

    n, rows, cols = len(tokens), len(layers), len(heads)
    grids = [
        np.ma.masked_array(m[h].numpy(), mask=np.zeros((n, n), bool)) for m in maps for h in heads
    ]
    for g in grids:  # (T, T) each; the sink column is drawn grey, outside the scale
        g.mask[:, 0] = drop_sink and n > 1
    lo = float(min(g.min() for g in grids))
    hi = float(max(g.max() for g in grids))
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#e8e8e8")
    font = 9 if n <= 16 else 7 if n <= 32 else 5
    panel = max(1.3, n * font / 72 * 1.25)  # inches: one token label per row at `font` pt
    label = max(len(t) for t in tokens) * font / 72 * 0.62 + 0.45  # room for the labels
    bar = 1.1  # inches right of the panels: the colour bar and its label
    width, height = cols * panel + label + bar, rows * panel + label + 0.6
    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False)
    fig.subplots_adjust(
        left=label / width,
        right=1 - bar / width,
        bottom=label / height,
        top=1 - 0.65 / height,
        wspace=0.06,
        hspace=0.06,
    )
    image = None
    for r, layer in enumerate(layers):
        for c, head in enumerate(heads):
            ax = axes[r][c]
            image = ax.imshow(grids[r * cols + c], cmap=cmap, vmin=lo, vmax=hi)
            ax.set_xticks(range(n), tokens if r == rows - 1 else [], rotation=90, fontsize=font)
            ax.set_yticks(range(n), tokens if c == 0 else [], fontsize=font)
            ax.tick_params(length=0, pad=2)
            if r == 0:
                ax.set_title(f"head {head}", fontsize=font + 1, pad=4)
            if c == 0:  # the layer names the row, left of the query tokens
                ax.annotate(
                    f"layer {layer}",
                    (0, 0.5),
                    xycoords="axes fraction",
                    xytext=(-label * 72 + 4, 0),
                    textcoords="offset points",
                    rotation=90,
                    va="center",
                    fontsize=font + 1,
                )
    colour_bar = fig.colorbar(image, ax=axes.ravel().tolist(), fraction=0.3 / width, pad=0.02)
    colour_bar.set_label("attention probability", fontsize=font + 1)
    colour_bar.ax.tick_params(labelsize=font)
    sink = "; key 0 (grey) left out of the scale" if drop_sink and n > 1 else ""
    fig.text(
        0.01,
        1 - 0.08 / height,
        f"rows: query (attending), columns: key (attended to); range {lo:.4f}-{hi:.4f}{sink}",
        va="top",
        fontsize=font + 1,
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)


@click.command("attn")
@click.argument("source", metavar="MODEL")
@click.option("--text", required=True, help="The sentence to look at.", callback=utf8_text)
@click.option("--layer", type=int, help="Only this layer (default: all).")
@click.option("--head", type=int, help="Only this head (default: all).")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default="attention.html",
    show_default=True,
    help="FILE.html (interactive heat maps) or FILE.png (grid of heat maps).",
)
@click.option(
    "--drop-sink",
    is_flag=True,
    help="Leave key 0 (the first token's attention sink) out of the colour scale.",
)
@model_options
def attn_cmd(
    source: str,
    text: str,
    layer: int | None,
    head: int | None,
    out: str,
    drop_sink: bool,
    device: str | None,
    dtype: str | None,
    revision: str | None,
) -> None:
    """Attention of a model on TEXT: HTML heat maps (query x key) or a PNG grid.

    MODEL: a weights file, a `zoo train` run or HF directory, or a Hub id org/name[@rev]."""
    path = Path(out)
    if path.suffix.lower() not in (".html", ".png"):
        raise UserError(f"--out {out}: give a .html or a .png file name")
    from archzoo.io.safe_write import check_out_path

    check_out_path(path, inputs=[Path(source)])  # no link followed, no FIFO blocked on
    model, directory = load_model(source, device, dtype, revision)
    tokenizer = load_tokenizer(directory)
    encoding = tokenizer.encode(text)
    if not encoding.ids:
        raise UserError("--text gives no tokens")
    import torch

    ids = torch.tensor([encoding.ids], device=next(model.parameters()).device)
    n_layers, n_heads = stack_sizes(model)
    layers, heads = pick(layer, n_layers, "layer"), pick(head, n_heads, "head")
    maps = attention_maps(model.eval(), ids, layers)
    tokens = token_texts(tokenizer, list(encoding.ids))  # decoded: no Ġ, newline as ↵
    if path.suffix.lower() == ".png":
        write_png(path, tokens, layers, heads, maps, drop_sink)
    else:
        attn = [
            [[[round(p, 4) for p in row] for row in m[h].tolist()] for h in heads] for m in maps
        ]
        title = f"{model.spec.name}: {text}"
        page = head_view_html(
            tokens, layers, heads, attn, title, ids=list(encoding.ids), drop_sink=drop_sink
        )
        path.write_text(page, encoding="utf-8")
    click.echo(f"wrote {out} ({len(layers)} layers x {len(heads)} heads, {len(tokens)} tokens)")

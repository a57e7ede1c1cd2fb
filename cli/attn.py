"""`zoo attn`: what each layer and head attends to in a sentence, as a page or a PNG grid."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .attn_page import head_view_html
from .common import UserError, model_options, utf8_text
from .generate import load_model, load_tokenizer

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
    path: Path, tokens: list[str], layers: list[int], heads: list[int], maps: list[torch.Tensor]
) -> None:
    """A layers x heads grid of heat maps (query rows, key columns) with token labels."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError(
            "PNG output needs matplotlib: pip install 'archzoo[plot]' (or write .html)"
        ) from None
    n, rows, cols = len(tokens), len(layers), len(heads)
    font = 9 if n <= 16 else 7 if n <= 32 else 5
    panel = max(1.3, n * font / 72 * 1.25)  # inches: one token label per row at `font` pt
    label = max(len(t) for t in tokens) * font / 72 * 0.62 + 0.45  # room for the labels
    width, height = cols * panel + label, rows * panel + label + 0.3
    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False)
    fig.subplots_adjust(
        left=label / width,
        right=1 - 0.1 / width,
        bottom=label / height,
        top=1 - 0.35 / height,
        wspace=0.06,
        hspace=0.06,
    )
    for r, layer in enumerate(layers):
        for c, head in enumerate(heads):
            ax = axes[r][c]
            ax.imshow(maps[r][head].numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
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
    help="FILE.html (interactive head view) or FILE.png (grid of heat maps).",
)
@model_options
def attn_cmd(
    source: str,
    text: str,
    layer: int | None,
    head: int | None,
    out: str,
    device: str | None,
    dtype: str | None,
    revision: str | None,
) -> None:
    """Attention of an imported model on TEXT: an HTML head view or a PNG grid.

    MODEL: a weights file, a `zoo train` run or HF directory, or a Hub id org/name[@rev]."""
    path = Path(out)
    if path.suffix.lower() not in (".html", ".png"):
        raise UserError(f"--out {out}: give a .html or a .png file name")
    from archzoo.safe_write import check_out_path

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
    tokens = list(encoding.tokens)
    if path.suffix.lower() == ".png":
        write_png(path, tokens, layers, heads, maps)
    else:
        attn = [
            [[[round(p, 4) for p in row] for row in m[h].tolist()] for h in heads] for m in maps
        ]
        title = f"{model.spec.name}: {text}"
        path.write_text(head_view_html(tokens, layers, heads, attn, title), encoding="utf-8")
    click.echo(f"wrote {out} ({len(layers)} layers x {len(heads)} heads, {len(tokens)} tokens)")

"""`zoo mask --out FILE.png`: a picture with query and key axes and a legend (matplotlib),
or, without matplotlib, one grayscale pixel per cell; the cells are the layer's mask."""

from __future__ import annotations

import sys

import pytest
import torch
from click.testing import CliRunner

from archzoo.cli.main import main

LOCAL = "layers=[{select: '1::2', attention: {kind: local, window: 5}}]"


def zoo(*args: str) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def local_causal(n: int, window: int) -> torch.Tensor:
    """The oracle: query q sees key k when 0 <= q - k < window."""
    q, k = torch.arange(n)[:, None], torch.arange(n)[None, :]
    return (q - k >= 0) & (q - k < window)


def test_png_has_query_and_key_axes_a_legend_and_the_layers_mask(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    seen = {}
    save = Figure.savefig

    def spy(fig, *args, **kwargs):
        (ax,) = fig.axes
        seen["x"], seen["y"] = ax.get_xlabel(), ax.get_ylabel()
        seen["xlim"], seen["ylim"] = ax.get_xlim(), ax.get_ylim()
        seen["legend"] = [t.get_text() for t in fig.legends[0].get_texts()]
        seen["image"] = torch.as_tensor(ax.images[0].get_array())
        seen["title"] = fig.get_suptitle()
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    out = tmp_path / "mask.png"
    printed = zoo(
        "mask", "gpt-neo-125m", "--len", "24", "--layer", "1", "--set", LOCAL, "--out", out
    )
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "wrote" in printed and "queries x keys" in printed
    assert seen["x"] == "key position (attended to) →"
    assert seen["y"] == "query position (attending) ↓"
    assert seen["xlim"] == (-0.5, 23.5) and seen["ylim"] == (23.5, -0.5)  # query 0 on top
    assert seen["legend"] == ["allowed: the query sees the key", "masked"]
    assert seen["title"].startswith("gpt-neo-125m decoder layer 1: local (causal), 24 tokens")
    assert torch.equal(seen["image"] == 1.0, local_causal(24, 5))  # 1: allowed, drawn black


def test_pooled_cells_get_a_legend_entry_saying_their_size(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from archzoo.cli import mask

    monkeypatch.setattr(mask, "MAX_PIXELS", 8)  # 24 tokens -> 8 cells of 3 x 3 pairs
    seen = {}
    save = Figure.savefig

    def spy(fig, *args, **kwargs):
        seen["legend"] = [t.get_text() for t in fig.legends[0].get_texts()]
        seen["image"] = torch.as_tensor(fig.axes[0].images[0].get_array())
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    zoo(
        "mask",
        "gpt-neo-125m",
        "--len",
        "24",
        "--layer",
        "1",
        "--set",
        LOCAL,
        "--out",
        tmp_path / "m.png",
    )
    assert seen["legend"][-1] == "some allowed (cell = 3x3 pairs)"
    want = local_causal(24, 5).float().view(8, 3, 8, 3).mean((1, 3))  # (8, 8) share allowed
    torch.testing.assert_close(seen["image"].float(), want)


def test_without_matplotlib_the_png_is_one_pixel_per_cell_and_says_how_to_get_axes(
    tmp_path, monkeypatch
):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    out = tmp_path / "m.png"
    printed = zoo("mask", "gpt2", "--len", "32", "--set", "n_layers=1", "--out", out)
    assert "pip install 'archzoo[plot]'" in printed
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == int.from_bytes(data[20:24], "big") == 32

"""`zoo attn`: the head-view page in a real headless browser, the PNG grid, bad input."""

from __future__ import annotations

import json
import re
import sys

import pytest
import torch
from click.testing import CliRunner
from hf_util import perturb, save_hf
from page_util import CHROMIUM, dump_dom

import archzoo
from archzoo.cli.main import main

hf = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

WORDS = "[PAD] [UNK] [CLS] [SEP] the cat sat on mat because it was tired and warm".split()
SENTENCE = "[CLS] the cat sat on the mat because it was tired [SEP]"  # 12 tokens


def bert_dir(tmp_path, layers: int = 2, heads: int = 4):
    """A tiny random BERT saved as an HF directory with a word-level tokenizer.json."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    cfg = hf.BertConfig(
        vocab_size=len(WORDS),
        hidden_size=8 * heads,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    model = hf.BertForMaskedLM(cfg)
    perturb(model, scale=0.3)
    directory = save_hf(model.eval(), tmp_path / "bert")
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(directory / "tokenizer.json"))
    return directory


def zoo(*args: str, ok: bool = True) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == (0 if ok else 2), (result.output, result.exception)
    return result.output


def page_data(path) -> dict:
    text = path.read_text(encoding="utf-8")
    payload = re.search(
        r'<script type="application/json" id="attn-data">(.*?)</script>', text, re.S
    )
    return json.loads(payload.group(1))


def test_page_is_self_contained_and_holds_the_model_probabilities(tmp_path):
    directory = bert_dir(tmp_path)
    out = tmp_path / "view.html"
    assert "wrote" in zoo("attn", directory, "--text", SENTENCE, "--out", out)
    text = out.read_text(encoding="utf-8")
    assert "<script src" not in text and "<link" not in text and "https://" not in text
    assert "@import" not in text and "url(" not in text  # no fetches from CSS either
    data = page_data(out)
    assert data["tokens"] == SENTENCE.split()
    assert data["layers"] == [0, 1] and data["heads"] == [0, 1, 2, 3]
    model = archzoo.from_hf(directory)
    ids = torch.tensor([[WORDS.index(w) for w in SENTENCE.split()]])
    with torch.no_grad():
        want = model(ids, output_attentions=True).attentions
    for layer in (0, 1):
        got = torch.tensor(data["attn"][layer])  # (H, T, T), rounded to 4 places
        assert (got - want[layer][0]).abs().max() <= 5e-5


def test_layer_and_head_select_one_panel(tmp_path):
    directory = bert_dir(tmp_path)
    out = tmp_path / "one.html"
    zoo("attn", directory, "--text", SENTENCE, "--layer", "-1", "--head", "2", "--out", out)
    data = page_data(out)
    assert data["layers"] == [1] and data["heads"] == [2]
    assert len(data["attn"]) == 1 and len(data["attn"][0]) == 1


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (CI installs it)")
def test_page_renders_in_headless_chromium_without_console_errors(tmp_path):
    directory = bert_dir(tmp_path, layers=3, heads=4)
    out = tmp_path / "view.html"
    zoo("attn", directory, "--text", SENTENCE, "--out", out)
    dom, console = dump_dom(out, tmp_path / "profile")
    assert console == [], console  # no console output at all, errors included
    assert 'data-rendered="1"' in dom
    assert dom.count("<option") == 3  # one per layer
    assert dom.count('class="swatch head-swatch"') == 4  # one per head
    assert "layers 3, heads 4, tokens 12" in dom
    assert dom.count('class="token-left"') == 12 and dom.count('class="token-right"') == 12
    assert dom.count('class="attn-line"') > 12  # every head draws lines for layer 0


def test_png_grid_has_one_labelled_panel_per_layer_and_head(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    directory = bert_dir(tmp_path, layers=3, heads=4)
    seen = {}
    save = Figure.savefig

    def spy(fig, *args, **kwargs):
        seen["titles"] = [ax.get_title() for ax in fig.axes]
        seen["rows"] = [[t.get_text() for t in ax.get_yticklabels()] for ax in fig.axes]
        seen["cols"] = [[t.get_text() for t in ax.get_xticklabels()] for ax in fig.axes]
        seen["images"] = [len(ax.images) for ax in fig.axes]
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    out = tmp_path / "grid.png"
    zoo("attn", directory, "--text", SENTENCE, "--out", out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert seen["images"] == [1] * 12  # 3 layers x 4 heads, one heat map each
    assert seen["titles"][:4] == [f"head {h}" for h in range(4)]
    tokens = SENTENCE.split()
    assert seen["rows"][0] == tokens and seen["rows"][4] == tokens  # first column: queries
    assert seen["cols"][-1] == tokens  # bottom row: keys


def test_bad_input_is_a_clear_error(tmp_path, monkeypatch):
    directory = bert_dir(tmp_path)
    assert "--layer 5 is out of range" in zoo(
        "attn",
        directory,
        "--text",
        SENTENCE,
        "--layer",
        "5",
        "--out",
        tmp_path / "a.html",
        ok=False,
    )
    assert ".html or a .png" in zoo(
        "attn", directory, "--text", SENTENCE, "--out", tmp_path / "a.txt", ok=False
    )
    (directory / "tokenizer.json").rename(directory / "gone.json")
    assert "no tokenizer.json" in zoo(
        "attn", directory, "--text", SENTENCE, "--out", tmp_path / "a.html", ok=False
    )
    (directory / "gone.json").rename(directory / "tokenizer.json")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    assert "archzoo[plot]" in zoo(
        "attn", directory, "--text", SENTENCE, "--out", tmp_path / "a.png", ok=False
    )

"""`zoo attn`: the head-view page in a real headless browser, the PNG grid, bad input."""

from __future__ import annotations

import html
import json
import re
import sys

import pytest
import torch
from click.testing import CliRunner
from hf_util import perturb, save_hf
from page_util import CHROMIUM, dump_dom, elements, texts_of_class

import archzoo
from archzoo.cli.attn_page import head_view_html
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


needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


def with_script(page, script: str):
    """A copy of the page that runs `script` after the page's own (as a user's events)."""
    text = page.read_text(encoding="utf-8").replace("</body>", f"<script>{script}</script></body>")
    copy = page.with_name("driven-" + page.name)
    copy.write_text(text, encoding="utf-8")
    return copy


def cells(dom: str) -> list[dict[str, str]]:
    """Each drawn heat-map cell's attributes (data-q, data-k, data-p, class)."""
    return elements(dom, "rect", "attn-cell")


def span(values) -> tuple[str, str]:
    """The colour bar's (min, max) text for these probabilities."""
    values = list(values)
    return f"{min(values):.4f}", f"{max(values):.4f}"


@needs_chromium
def test_page_renders_one_head_with_labelled_sides_and_a_colour_bar_of_its_range(tmp_path):
    directory = bert_dir(tmp_path, layers=3, heads=4)
    out = tmp_path / "view.html"
    zoo("attn", directory, "--text", SENTENCE, "--out", out)
    data = page_data(out)
    dom, console = dump_dom(out, tmp_path / "profile")
    assert console == [], console  # no console output at all, errors included
    assert 'data-rendered="1"' in dom
    assert dom.count("<option") == 3 + 4 + 1  # layers, heads, and "all heads"
    assert "layers 3, heads 4, tokens 12; showing layer 0, head 0" in dom
    tokens = SENTENCE.split()
    assert texts_of_class(dom, "token-left") == tokens  # the query side, rows
    assert texts_of_class(dom, "token-right") == tokens  # the key side, columns
    assert texts_of_class(dom, "axis")[:2] == ["key (attended to) →", "query (attending) ←"]
    drawn = cells(dom)
    assert len(drawn) == 12 * 12  # one head, not blended
    head = data["attn"][0][0]
    assert [float(c["data-p"]) for c in drawn] == [p for row in head for p in row]
    low, high = span(p for row in head for p in row)
    assert texts_of_class(dom, "cbar-min") == [low] and texts_of_class(dom, "cbar-max") == [high]
    assert float(high) < 1.0 or float(low) > 0.0  # the data's range, not a fixed 0-1


@needs_chromium
def test_small_multiples_draw_every_head_on_one_shared_scale(tmp_path):
    directory = bert_dir(tmp_path, layers=2, heads=4)
    out = tmp_path / "view.html"
    zoo("attn", directory, "--text", SENTENCE, "--out", out)
    data = page_data(out)
    dom, console = dump_dom(out, tmp_path / "profile", "#layer=1&head=all")
    assert console == []
    assert "showing layer 1, all heads" in dom
    assert texts_of_class(dom, "panel-title") == [f"head {h}" for h in range(4)]
    drawn = cells(dom)
    assert len(drawn) == 4 * 12 * 12
    layer = data["attn"][1]
    assert [float(c["data-p"]) for c in drawn] == [p for h in layer for r in h for p in r]
    low, high = span(p for h in layer for r in h for p in r)
    assert texts_of_class(dom, "cbar-min") == [low] and texts_of_class(dom, "cbar-max") == [high]


def sink_page(path, drop_sink: bool):
    """A page of one head whose rows put 0.6-0.9 on key 0 (a sink) and spread the rest."""
    g = torch.Generator().manual_seed(0)
    n = 6
    rows = []
    for q in range(n):
        sink = 0.6 + 0.3 * q / n
        rest = torch.rand(n - 1, generator=g)
        rows.append(
            [round(sink, 4)] + [round(p, 4) for p in (rest / rest.sum() * (1 - sink)).tolist()]
        )
    tokens = [f"t{i}" for i in range(n)]
    path.write_text(head_view_html(tokens, [0], [0], [[rows]], "sink", drop_sink=drop_sink))
    return rows


@needs_chromium
def test_drop_sink_leaves_key_0_out_of_the_colour_scale(tmp_path):
    directory = bert_dir(tmp_path, layers=1, heads=2)
    out = tmp_path / "cli.html"
    zoo("attn", directory, "--text", SENTENCE, "--drop-sink", "--head", "1", "--out", out)
    assert page_data(out)["drop_sink"] is True and page_data(out)["heads"] == [1]
    out = tmp_path / "view.html"
    rows = sink_page(out, drop_sink=True)
    dom, console = dump_dom(out, tmp_path / "profile")
    assert console == []
    assert "key 0 left out of the colour scale" in dom
    left_out = [c for c in cells(dom) if "left-out" in c["class"].split()]
    assert [c["data-k"] for c in left_out] == ["0"] * 6  # exactly column 0, every row
    low, high = span(p for row in rows for p in row[1:])
    assert texts_of_class(dom, "cbar-min") == [low] and texts_of_class(dom, "cbar-max") == [high]
    assert float(high) < 0.4 < 0.6 <= min(row[0] for row in rows)  # the sink is out of range
    dom, _ = dump_dom(out, tmp_path / "profile", "#sink=0")  # the page's toggle, off
    assert texts_of_class(dom, "cbar-max") == [span(p for row in rows for p in row)[1]]
    assert not [c for c in cells(dom) if "left-out" in c["class"].split()]


@needs_chromium
@pytest.mark.parametrize(
    ("target", "row", "column"),
    [
        (".token-right[data-k='3']", None, "3"),
        (".token-left[data-q='5']", "5", None),
        (".attn-cell[data-q='7'][data-k='2']", "7", "2"),
    ],
    ids=["key label", "query label", "cell"],
)
def test_hover_highlights_the_row_and_column_on_both_sides(tmp_path, target, row, column):
    directory = bert_dir(tmp_path, layers=1, heads=2)
    out = tmp_path / "view.html"
    zoo("attn", directory, "--text", SENTENCE, "--out", out)
    hover = (
        f'document.querySelector("{target}").dispatchEvent(new MouseEvent("mouseenter"));'
        'document.body.setAttribute("data-info", document.getElementById("info").textContent);'
    )
    dom, console = dump_dom(with_script(out, hover), tmp_path / "profile")
    assert console == []
    drawn = cells(dom)
    in_row = sorted(c["data-k"] for c in drawn if "hl-row" in c["class"].split())
    in_col = sorted(c["data-q"] for c in drawn if "hl-col" in c["class"].split())
    everything = sorted(str(i) for i in range(12))
    assert in_row == (everything if row else [])
    assert in_col == (everything if column else [])
    assert all(c["data-q"] == row for c in drawn if "hl-row" in c["class"].split())
    assert all(c["data-k"] == column for c in drawn if "hl-col" in c["class"].split())
    lit_keys = [e["data-k"] for e in elements(dom, "text", "hl") if "data-k" in e]
    lit_queries = [e["data-q"] for e in elements(dom, "text", "hl") if "data-q" in e]
    assert lit_keys == ([column] if column else []) and lit_queries == ([row] if row else [])
    tokens = SENTENCE.split()
    info = html.unescape(re.search(r'data-info="([^"]*)"', dom)[1])
    if row and column:
        assert f'query {row} "{tokens[int(row)]}" → key {column} "{tokens[int(column)]}"' in info


def test_tokens_are_decoded_text_not_byte_level_pieces(tmp_path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=280, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(["the cat sat on the mat"] * 20, trainer)
    torch.manual_seed(0)
    sizes = {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32, "max_len": 32}
    model = archzoo.build_model("gpt2", {**sizes, "vocab_size": tok.get_vocab_size()})
    archzoo.save(model, tmp_path / "m.safetensors")
    tok.save(str(tmp_path / "tokenizer.json"))
    text = "the cat\nsat  café"
    encoding = tok.encode(text)
    assert any("Ġ" in t for t in encoding.tokens)  # the raw pieces hold byte stand-ins
    out = tmp_path / "view.html"
    zoo("attn", tmp_path / "m.safetensors", "--text", text, "--out", out)
    shown = page_data(out)["tokens"]
    decoded = [tok.decode([i]) for i in encoding.ids]
    assert decoded[-2:] == ["\ufffd", "\ufffd"]  # é is two byte tokens: neither decodes alone
    assert decoded.count("\n") == 1 and decoded.count(" ") == 2  # "  ": two pieces
    expected = ["↵" if d == "\n" else "␣" if d == " " else d for d in decoded[:-2]] + [
        "<C3>",
        "<A9>",
    ]  # é = C3 A9 in UTF-8
    assert shown == expected
    assert "".join(decoded[:-2]) + "é" == text  # the decoded pieces are the text itself
    assert page_data(out)["ids"] == encoding.ids
    if CHROMIUM is not None:  # what the browser draws is that text, spaces kept
        dom, console = dump_dom(out, tmp_path / "profile")
        assert console == [] and texts_of_class(dom, "token-left") == expected


@pytest.mark.parametrize("drop_sink", [False, True], ids=["full range", "drop sink"])
def test_png_grid_has_labelled_panels_and_a_colour_bar_of_the_data_range(
    tmp_path, monkeypatch, drop_sink
):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    directory = bert_dir(tmp_path, layers=3, heads=4)
    seen = {}
    save = Figure.savefig

    def spy(fig, *args, **kwargs):
        maps = [ax for ax in fig.axes if ax.images]
        seen["maps"] = len(maps)
        seen["titles"] = [ax.get_title() for ax in maps]
        seen["rows"] = [[t.get_text() for t in ax.get_yticklabels()] for ax in maps]
        seen["cols"] = [[t.get_text() for t in ax.get_xticklabels()] for ax in maps]
        seen["clim"] = {ax.images[0].get_clim() for ax in maps}
        seen["bars"] = [ax.get_ylabel() for ax in fig.axes if not ax.images]
        seen["texts"] = [t.get_text() for t in fig.texts]
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    out = tmp_path / "grid.png"
    zoo(
        "attn", directory, "--text", SENTENCE, "--out", out, *(["--drop-sink"] if drop_sink else [])
    )
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert seen["maps"] == 12  # 3 layers x 4 heads, one heat map each
    assert seen["titles"][:4] == [f"head {h}" for h in range(4)]
    tokens = SENTENCE.split()
    assert seen["rows"][0] == tokens and seen["rows"][4] == tokens  # first column: queries
    assert seen["cols"][-1] == tokens  # bottom row: keys
    assert seen["bars"] == ["attention probability"]  # one colour bar, labelled
    assert "rows: query (attending), columns: key (attended to)" in seen["texts"][0]
    model = archzoo.from_hf(directory)
    ids = torch.tensor([[WORDS.index(w) for w in tokens]])
    with torch.no_grad():
        maps = torch.stack([a[0] for a in model(ids, output_attentions=True).attentions])
    shown = maps[..., 1:] if drop_sink else maps  # (L, H, T, T): key 0 left out, or not
    ((low, high),) = seen["clim"]  # every panel on one scale: the data's range
    assert low == pytest.approx(shown.min().item(), abs=1e-6)
    assert high == pytest.approx(shown.max().item(), abs=1e-6)


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

"""Hostile input, category 5: the `zoo attn` page shows any token text exactly, in a browser.

The data block is JSON inside <script type="application/json">; a token `<!--` followed by
`<script>` switched the HTML parser into its escaped script state, so `</script>` no longer
closed the block and the page stayed blank. The oracle is the token list itself: the text
of every token element the browser drew must equal it, character for character.
"""

from __future__ import annotations

import json
import re

import pytest
import torch
from click.testing import CliRunner
from page_util import CHROMIUM, dump_dom, texts_of_class

import archzoo
from archzoo.cli.attn_page import head_view_html
from archzoo.cli.main import main

HOSTILE = [
    "-->",  # first: after `<!--` it would end the escaped state the next two tokens start
    "<!--",
    "<script>",
    "</script>",
    "<SCRIPT>",
    "</style>",
    "]]>",
    "<![CDATA[",
    "&amp;",
    "&lt;",
    "a\u2028b",
    "\u2029",
    '"',
    "'",
    "\\",
    "\\u003c/script>",
    "`${x}`",
    "\U0001f600",
]
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


def page(tokens: list[str], title: str) -> str:
    n = len(tokens)
    attn = [[[[1 / n] * n for _ in range(n)] for _ in range(2)]]  # 1 layer, 2 heads, uniform
    return head_view_html(tokens, [0], [0, 1], attn, title)


def data_block(text: str) -> str:
    return re.search(r'<script type="application/json" id="attn-data">(.*?)</script>', text, re.S)[
        1
    ]


def test_the_data_block_holds_no_markup_characters_and_parses_back_to_the_tokens():
    text = page(HOSTILE, "title")
    block = data_block(text)
    assert not set(block) & set("<>&"), block  # the HTML parser sees plain text only
    assert json.loads(block)["tokens"] == HOSTILE
    assert text.count("</script>") == 2  # the data block's end and the code's: nothing else


@needs_chromium
def test_hostile_tokens_render_exactly_in_headless_chromium(tmp_path):
    title = "<!-- <script>alert(1)</script> & \u2028"
    out = tmp_path / "view.html"
    out.write_text(page(HOSTILE, title), encoding="utf-8")
    dom, console = dump_dom(out, tmp_path / "profile")
    assert console == [], console  # no script error, nothing logged
    assert 'data-rendered="1"' in dom
    assert f"layers 1, heads 2, tokens {len(HOSTILE)}" in dom
    assert texts_of_class(dom, "token-left") == HOSTILE
    assert texts_of_class(dom, "token-right") == HOSTILE
    assert dom.count('class="attn-cell"') == len(HOSTILE) ** 2  # one head: every cell drawn


@needs_chromium
def test_zoo_attn_page_of_a_comment_and_a_script_token_renders(tmp_path):
    """End to end: a tokenizer whose tokens are markup, through `zoo attn`, into the browser."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["[UNK]", "-->", "<!--", "<script>", "x", "</script>", "&amp;", "]]>", "a\u2028b"]
    torch.manual_seed(0)
    sizes = {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32, "max_len": 16}
    model = archzoo.build_model("bert-base", {**sizes, "vocab_size": len(words)})
    archzoo.save(model, tmp_path / "m.safetensors")
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="removed")
    tok.save(str(tmp_path / "tokenizer.json"))
    out = tmp_path / "view.html"
    text = " ".join(words[1:])
    result = CliRunner().invoke(
        main, ["attn", str(tmp_path / "m.safetensors"), "--text", text, "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    dom, console = dump_dom(out, tmp_path / "profile")
    assert console == [], console
    assert f"layers 1, heads 2, tokens {len(words) - 1}" in dom
    assert texts_of_class(dom, "token-left") == words[1:]

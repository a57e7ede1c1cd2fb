"""The self-contained head-view page of `zoo attn`: tokens, and lines weighted by attention.

One HTML file with inline CSS, JS and data; nothing is fetched. Pick a layer; click a head's
colour to show or hide it; hover a token to see only its lines. The page writes what it drew
into `#status` (layers, heads, tokens) so a test can read it back from the rendered DOM.
"""

from __future__ import annotations

import html
import json
from typing import Any

STYLE = """
body { font-family: sans-serif; margin: 16px; background: #fff; color: #222; }
#controls { margin-bottom: 8px; }
.swatch { display: inline-block; width: 18px; height: 18px; margin: 0 2px; cursor: pointer;
  border: 2px solid #fff; vertical-align: middle; }
.swatch.off { opacity: 0.2; }
svg text { font-size: 14px; cursor: default; }
#status { color: #666; font-size: 12px; margin-top: 6px; }
"""

SCRIPT = """
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("attn-data").textContent);
  const nLayers = data.layers.length, nHeads = data.heads.length, n = data.tokens.length;
  const colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31",
    "#843c39", "#7b4173", "#3182bd"];
  const rowH = 22, width = 520, leftX = 150, rightX = 370;
  const layerSel = document.getElementById("layer");
  const swatches = document.getElementById("heads");
  const svg = document.getElementById("view");
  const shown = new Set(data.heads.map((h, i) => i));
  let focus = null;
  data.layers.forEach(function (l, i) {
    const opt = document.createElement("option");
    opt.value = String(i); opt.textContent = "layer " + l; layerSel.appendChild(opt);
  });
  data.heads.forEach(function (h, i) {
    const s = document.createElement("span");
    s.className = "swatch head-swatch"; s.title = "head " + h;
    s.style.background = colors[i % colors.length];
    s.addEventListener("click", function () {
      if (shown.has(i)) { shown.delete(i); s.classList.add("off"); }
      else { shown.add(i); s.classList.remove("off"); }
      draw();
    });
    swatches.appendChild(s);
  });
  layerSel.addEventListener("change", draw);
  const NS = "http://www.w3.org/2000/svg";
  function el(name, attrs) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) { e.setAttribute(k, attrs[k]); }
    return e;
  }
  function draw() {
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    svg.setAttribute("width", width); svg.setAttribute("height", (n + 1) * rowH);
    const layer = data.attn[Number(layerSel.value)];
    let lines = 0;
    shown.forEach(function (h) {
      const w = layer[h];
      for (let q = 0; q < n; q++) {
        if (focus !== null && focus !== q) { continue; }
        for (let k = 0; k < n; k++) {
          const p = w[q][k];
          if (p < 0.01) { continue; }
          svg.appendChild(el("line", {
            x1: leftX + 6, y1: (q + 1) * rowH - 5, x2: rightX - 6, y2: (k + 1) * rowH - 5,
            stroke: colors[h % colors.length], "stroke-width": 2,
            "stroke-opacity": Math.min(1, p * 0.9 / Math.max(1, shown.size / 3)),
            class: "attn-line"
          }));
          lines++;
        }
      }
    });
    data.tokens.forEach(function (t, i) {
      const left = el("text", { x: leftX, y: (i + 1) * rowH, "text-anchor": "end",
        class: "token-left" });
      left.textContent = t;
      left.addEventListener("mouseenter", function () { focus = i; draw(); });
      left.addEventListener("mouseleave", function () { focus = null; draw(); });
      svg.appendChild(left);
      const right = el("text", { x: rightX, y: (i + 1) * rowH, class: "token-right" });
      right.textContent = t;
      svg.appendChild(right);
    });
    document.getElementById("status").textContent = "layers " + nLayers + ", heads " + nHeads +
      ", tokens " + n + ", lines " + lines;
    document.body.setAttribute("data-rendered", "1");
  }
  draw();
})();
"""


# JSON inside <script type="application/json"> is raw text to the HTML parser: `</script>`
# would end it and `<!--` then `<script>` would stop the real end from ending it, so no
# markup character is left in it (JSON.parse reads the \u escapes back as the characters)
SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def head_view_html(
    tokens: list[str], layers: list[int], heads: list[int], attn: list[Any], title: str
) -> str:
    """The page: attn[layer][head][query][key] probabilities for the given layer/head ids."""
    data = {"tokens": tokens, "layers": layers, "heads": heads, "attn": attn}
    payload = json.dumps(data, separators=(",", ":")).translate(SCRIPT_SAFE)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{html.escape(title)}</title>
<style>{STYLE}</style>
</head>
<body>
<h3>{html.escape(title)}</h3>
<div id="controls">
<label>Layer: <select id="layer"></select></label>
<span>Heads: <span id="heads"></span></span>
</div>
<svg id="view" xmlns="http://www.w3.org/2000/svg"></svg>
<div id="status"></div>
<script type="application/json" id="attn-data">{payload}</script>
<script>{SCRIPT}</script>
</body>
</html>
"""

"""The self-contained attention page of `zoo attn`: heat maps of query x key probabilities.

One HTML file with inline CSS, JS and data; nothing is fetched. Rows are queries (the token
that attends), columns keys (the token attended to), both labelled with the decoded tokens.
One head at a time, or all heads as small multiples on one shared scale, never blended. The
colour bar spans the range of what is drawn; "leave out key 0" greys the first token's column
(its attention sink) and leaves it out of the range, so the other cells use the whole scale.
Hovering a cell, a query label or a key label highlights its row and/or column in every panel.

The state can be set in the address: `#layer=1&head=all&sink=1` (head: an index into the
page's heads, or `all`). The page writes what it drew into `#status` and the colour bar's
ends into `.cbar-min` / `.cbar-max`, so a test reads them back from the rendered DOM.
"""

from __future__ import annotations

import html
import json
from typing import Any

STYLE = """
body { font-family: sans-serif; margin: 16px; background: #fff; color: #222; }
#controls { margin-bottom: 8px; display: flex; flex-wrap: wrap; gap: 6px 16px; }
#controls label { white-space: nowrap; }
svg text { font-size: 12px; cursor: default; white-space: pre; }
svg text.axis { font-size: 13px; fill: #555; font-style: italic; }
svg text.panel-title { font-size: 13px; font-weight: bold; }
svg text.hl { fill: #d00; font-weight: bold; }
rect.attn-cell.hl-row, rect.attn-cell.hl-col { stroke: #d00; stroke-width: 1.5; }
rect.attn-cell.left-out { fill: #e8e8e8; }
#status { color: #666; font-size: 12px; margin-top: 6px; }
#info { font-size: 13px; min-height: 1.2em; margin: 4px 0; white-space: pre; }
"""

SCRIPT = """
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("attn-data").textContent);
  const nLayers = data.layers.length, nHeads = data.heads.length, n = data.tokens.length;
  const NS = "http://www.w3.org/2000/svg";
  // viridis at five stops; a value's colour is interpolated between its two stops
  const STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  const layerSel = document.getElementById("layer");
  const headSel = document.getElementById("head");
  const sinkBox = document.getElementById("drop-sink");
  const svg = document.getElementById("view");
  const info = document.getElementById("info");
  data.layers.forEach(function (l, i) {
    const opt = document.createElement("option");
    opt.value = String(i); opt.textContent = "layer " + l; layerSel.appendChild(opt);
  });
  data.heads.forEach(function (h, i) {
    const opt = document.createElement("option");
    opt.value = String(i); opt.textContent = "head " + h; headSel.appendChild(opt);
  });
  if (nHeads > 1) {
    const opt = document.createElement("option");
    opt.value = "all"; opt.textContent = "all heads (small multiples)"; headSel.appendChild(opt);
  }
  sinkBox.checked = Boolean(data.drop_sink);
  const wanted = new URLSearchParams(location.hash.slice(1));
  if (wanted.has("layer") && Number(wanted.get("layer")) < nLayers) {
    layerSel.value = wanted.get("layer");
  }
  if (wanted.has("head") && (wanted.get("head") === "all" ? nHeads > 1 :
      Number(wanted.get("head")) < nHeads)) { headSel.value = wanted.get("head"); }
  if (wanted.has("sink")) { sinkBox.checked = wanted.get("sink") === "1"; }

  function colour(t) {
    const x = Math.min(1, Math.max(0, t)) * (STOPS.length - 1);
    const i = Math.min(STOPS.length - 2, Math.floor(x)), f = x - i;
    const c = STOPS[i].map(function (a, j) { return Math.round(a + f * (STOPS[i + 1][j] - a)); });
    return "rgb(" + c.join(",") + ")";
  }
  function el(name, attrs, text) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) { e.setAttribute(k, attrs[k]); }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function fmt(p) { return p.toFixed(4); }
  function labelWidth(size) {
    let longest = 1;
    data.tokens.forEach(function (t) { longest = Math.max(longest, Array.from(t).length); });
    return Math.min(180, longest * size * 0.62 + 8);
  }
  function highlight(q, k) {
    svg.querySelectorAll(".hl, .hl-row, .hl-col").forEach(function (e) {
      e.classList.remove("hl", "hl-row", "hl-col");
    });
    if (q !== null) {
      svg.querySelectorAll('[data-q="' + q + '"]').forEach(function (e) {
        e.classList.add(e.tagName === "text" ? "hl" : "hl-row");
      });
    }
    if (k !== null) {
      svg.querySelectorAll('[data-k="' + k + '"]').forEach(function (e) {
        e.classList.add(e.tagName === "text" ? "hl" : "hl-col");
      });
    }
  }
  function describe(h, q, k, p) {
    return "head " + data.heads[h] + ": query " + q + " " + JSON.stringify(data.tokens[q]) +
      " \\u2192 key " + k + " " + JSON.stringify(data.tokens[k]) + ": " + fmt(p);
  }
  function hoverable(e, q, k, text) {
    e.addEventListener("mouseenter", function () { highlight(q, k); info.textContent = text; });
    e.addEventListener("mouseleave", function () { highlight(null, null); info.textContent = ""; });
  }
  // one heat map at (x0, y0): query labels left, key labels on top, rows = queries
  function panel(g, h, x0, y0, cell, font, labels, lo, hi, dropSink) {
    const w = data.attn[Number(layerSel.value)][h];
    const pad = labels ? labelWidth(font) : 0;
    const gx = x0 + pad + 18, gy = y0 + pad + 18;  // 18: room for the axis names
    g.appendChild(el("text", { x: gx + n * cell / 2, y: y0 - 4, "text-anchor": "middle",
      class: "panel-title" }, "head " + data.heads[h]));
    if (labels) {
      g.appendChild(el("text", { x: gx + n * cell / 2, y: y0 + 12, "text-anchor": "middle",
        class: "axis" }, "key (attended to) \\u2192"));
      g.appendChild(el("text", { x: 0, y: 0, "text-anchor": "middle", class: "axis",
        transform: "translate(" + (x0 + 12) + "," + (gy + n * cell / 2) + ") rotate(-90)" },
        "query (attending) \\u2190"));  // rotated: the arrow points down the rows
    }
    for (let q = 0; q < n; q++) {
      for (let k = 0; k < n; k++) {
        const p = w[q][k], out = dropSink && k === 0;
        const r = el("rect", { x: gx + k * cell, y: gy + q * cell, width: cell, height: cell,
          fill: out ? "#e8e8e8" : colour((p - lo) / Math.max(hi - lo, 1e-12)),
          class: "attn-cell" + (out ? " left-out" : ""), "data-q": q, "data-k": k,
          "data-p": fmt(p) });
        const text = describe(h, q, k, p) + (out ? " (left out of the colour scale)" : "");
        r.appendChild(el("title", {}, text));
        hoverable(r, q, k, text);
        g.appendChild(r);
      }
    }
    if (!labels) { return; }
    data.tokens.forEach(function (t, i) {
      const left = el("text", { x: gx - 4, y: gy + i * cell + cell / 2 + font * 0.35,
        "text-anchor": "end", class: "token-left", "data-q": i, "font-size": font }, t);
      hoverable(left, i, null, "query " + i + " " + JSON.stringify(t) + " (row)");
      g.appendChild(left);
      const cx = gx + i * cell + cell / 2 + font * 0.35;
      const top = el("text", { x: 0, y: 0, class: "token-right", "data-k": i,
        "font-size": font, transform: "translate(" + cx + "," + (gy - 4) + ") rotate(-90)" }, t);
      hoverable(top, null, i, "key " + i + " " + JSON.stringify(t) + " (column)");
      g.appendChild(top);
    });
  }
  function colourBar(x, y, height, lo, hi) {
    const steps = 64;  // bands, bottom (lo) to top (hi): plain rects, no gradient to reference
    for (let i = 0; i < steps; i++) {
      svg.appendChild(el("rect", { x: x, y: y + height * (steps - 1 - i) / steps, width: 14,
        height: height / steps + 0.5, fill: colour(i / (steps - 1)), class: "cbar-band" }));
    }
    svg.appendChild(el("rect", { x: x, y: y, width: 14, height: height, fill: "none",
      stroke: "#999", class: "cbar" }));
    svg.appendChild(el("text", { x: x + 18, y: y + 10, class: "cbar-max" }, fmt(hi)));
    svg.appendChild(el("text", { x: x + 18, y: y + height / 2 + 4, class: "cbar-mid" },
      fmt((lo + hi) / 2)));
    svg.appendChild(el("text", { x: x + 18, y: y + height, class: "cbar-min" }, fmt(lo)));
    svg.appendChild(el("text", { x: 0, y: 0, class: "axis", "text-anchor": "middle",
      transform: "translate(" + (x + 78) + "," + (y + height / 2) + ") rotate(90)" },
      "attention probability"));
  }
  function draw() {
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    info.textContent = "";
    const layer = data.attn[Number(layerSel.value)];
    const all = headSel.value === "all";
    const shown = all ? data.heads.map(function (h, i) { return i; }) : [Number(headSel.value)];
    const dropSink = sinkBox.checked && n > 1;
    let lo = Infinity, hi = -Infinity;
    shown.forEach(function (h) {
      layer[h].forEach(function (row) {
        row.forEach(function (p, k) {
          if (dropSink && k === 0) { return; }
          lo = Math.min(lo, p); hi = Math.max(hi, p);
        });
      });
    });
    const cols = all ? Math.min(shown.length, 4) : 1;
    const cell = all ? Math.max(4, Math.min(16, Math.floor(220 / n)))
      : Math.max(12, Math.min(36, Math.floor(560 / n)));
    const font = Math.max(8, Math.min(13, cell - 2));
    const labels = !all || cell >= 9;
    const size = (labels ? labelWidth(font) : 0) + 18 + n * cell + 24;
    const g = el("g", {});
    shown.forEach(function (h, i) {
      panel(g, h, (i % cols) * size, 16 + Math.floor(i / cols) * (size + 8), cell, font,
        labels, lo, hi, dropSink);
    });
    svg.appendChild(g);
    const rows = Math.ceil(shown.length / cols);
    const barX = cols * size + 10;
    colourBar(barX, 16 + size - n * cell - 24, Math.max(120, n * cell), lo, hi);
    svg.setAttribute("width", barX + 110);
    svg.setAttribute("height", 24 + rows * (size + 8));
    document.getElementById("status").textContent = "layers " + nLayers + ", heads " + nHeads +
      ", tokens " + n + "; showing layer " + data.layers[Number(layerSel.value)] + ", " +
      (all ? "all heads" : "head " + data.heads[shown[0]]) +
      (dropSink ? ", key 0 left out of the colour scale" : "");
    document.body.setAttribute("data-rendered", "1");
  }
  [layerSel, headSel, sinkBox].forEach(function (c) { c.addEventListener("change", draw); });
  draw();
})();
"""


# JSON inside <script type="application/json"> is raw text to the HTML parser: `</script>`
# would end it and `<!--` then `<script>` would stop the real end from ending it, so no
# markup character is left in it (JSON.parse reads the \u escapes back as the characters)
SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def head_view_html(
    tokens: list[str],
    layers: list[int],
    heads: list[int],
    attn: list[Any],
    title: str,
    *,
    ids: list[int] | None = None,
    drop_sink: bool = False,
) -> str:
    """The page: attn[layer][head][query][key] probabilities for the given layer/head ids;
    `tokens` as shown (decoded), `ids` the token ids, `drop_sink` the toggle's first state."""
    data = {"tokens": tokens, "layers": layers, "heads": heads, "attn": attn}
    data.update(ids=ids, drop_sink=drop_sink)
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
<label>Head: <select id="head"></select></label>
<label title="the first token's attention sink"><input type="checkbox" id="drop-sink">
leave out key 0 (the sink) from the colour scale</label>
</div>
<div id="info"></div>
<svg id="view" xmlns="http://www.w3.org/2000/svg"></svg>
<div id="status"></div>
<script type="application/json" id="attn-data">{payload}</script>
<script>{SCRIPT}</script>
</body>
</html>
"""

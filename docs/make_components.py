"""Write docs/components.md from the registry: `python docs/make_components.py [--check]`.

The page lists what the built-in plugin registers (third-party plugins are disabled while
it runs), so it never drifts from the code; `tests/test_docs.py` runs `--check`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

OUT = Path(__file__).with_name("components.md")

INTRO = """\
# Components

Every component registered by the built-in plugin, with its parameters and capability
flags. This page is generated from the registry by `docs/make_components.py`; run
`zoo list` to see what your installed plugins add and `zoo show KIND:NAME` for one entry.

In a spec a component is a bare name (`block: pre_ln`) or a mapping with `kind:` plus
any of the parameters below (`norm: {kind: rmsnorm, eps: 1.0e-6}`); parameters left out
take the defaults shown. Capability flags are checked when a spec is validated: for
example a `bias` position (ALiBi, T5, Shaw) needs an attention that `accepts_bias`, a
`rotate` position needs `accepts_rotate`, and generation with a KV cache needs
`kv_cache`.
"""


def sentence(summary: str) -> str:
    """Capitalise a summary unless it opens with a name or a formula (n_groups, x = ...)."""
    first = summary.split()[0]
    return (
        summary[:1].upper() + summary[1:]
        if first.replace("-", "").isalpha() and first != "x"
        else summary
    )


def render() -> str:
    import archzoo
    from archzoo.parts.component import KINDS

    builtin = [c for c in archzoo.list_components() if c.__module__.startswith("archzoo.")]
    by_kind = {k: sorted((c for c in builtin if c.kind == k), key=lambda c: c.name) for k in KINDS}
    lines = [INTRO, "| kind | names |", "|---|---|"]
    for kind, classes in by_kind.items():
        links = ", ".join(f"[`{c.name}`](#{kind}{c.name})" for c in classes)
        lines.append(f"| `{kind}` | {links} |")
    for kind, classes in by_kind.items():
        lines += ["", f"## {kind}"]
        for cls in classes:
            info = cls.describe()
            lines += ["", f"### {kind}:{cls.name}", "", f"{sentence(info['summary'])}.", ""]
            if info["params"]:
                lines += ["| parameter | type | default | meaning |", "|---|---|---|---|"]
                for name, p in info["params"].items():
                    kind_text = p["type"].replace("|", "\\|")
                    default = json.dumps(p["default"])
                    doc = p["doc"].replace("|", "\\|")
                    lines.append(f"| `{name}` | {kind_text} | `{default}` | {doc} |")
            else:
                lines.append("No parameters.")
            flags = [f"`{f}`" for f, on in info["capabilities"].items() if on]
            lines += ["", f"Capabilities: {', '.join(flags) or 'none'}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the page is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        if OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is stale: run python docs/make_components.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The docs say what the code does: generated pages are current, examples run as written."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
# blocks that need a checkpoint on disk, GPUs or an installed plugin are exercised elsewhere
NOT_RUNNABLE = ("path/to", "init_process_group", "hookimpl")


def python_blocks(path: Path) -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S)
    return [b for b in blocks if not any(marker in b for marker in NOT_RUNNABLE)]


def test_components_page_is_generated_from_the_registry():
    spec = importlib.util.spec_from_file_location(
        "make_components", ROOT / "docs/make_components.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = (ROOT / "docs/components.md").read_text(encoding="utf-8")
    assert page == module.render(), (
        "docs/components.md is stale: run python docs/make_components.py"
    )
    import archzoo

    for cls in archzoo.list_components():
        if cls.__module__.startswith("archzoo."):
            assert f"### {cls.kind}:{cls.name}" in page


@pytest.mark.parametrize(
    "doc",
    [
        "README.md",
        "docs/python-api.md",
        "docs/huggingface.md",
        "docs/generation.md",
        "docs/attention.md",
        "docs/training.md",
    ],
)
def test_python_examples_run(doc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that save files write here
    torch.manual_seed(0)
    namespace: dict = {}
    blocks = python_blocks(ROOT / doc)
    assert blocks, f"no runnable python examples found in {doc}"
    for i, block in enumerate(blocks):
        exec(compile(block, f"{doc} python block {i}", "exec"), namespace)  # noqa: S102


def test_specs_page_example_validates(tmp_path):
    import archzoo

    text = (ROOT / "docs/specs.md").read_text(encoding="utf-8")
    yaml_text = re.findall(r"```yaml\n(.*?)```", text, re.S)[0]
    spec = archzoo.load_spec(yaml_text)
    model = archzoo.build_model(spec, device="meta")
    assert model.num_parameters() == 54_927_872  # the figure the docs quote for `zoo validate`
    # the per-layer override really reached the odd layers only
    kinds = [type(b.attention).__name__ for b in model.decoder.blocks]
    assert kinds[0] != kinds[1] and kinds[1] == kinds[3]


def doc(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


def test_cli_page_diff_example_is_the_real_output():
    from click.testing import CliRunner

    from archzoo.cli.main import main

    shown = re.search(
        r"\$ zoo diff bert-base albert-base\n(.*?)```", doc("docs/cli.md"), re.S
    ).group(1)
    result = CliRunner().invoke(main, ["diff", "bert-base", "albert-base"])
    assert result.exit_code == 0, result.output
    assert shown == result.output


def test_zoo_page_components_table_lists_every_registered_name():
    import archzoo

    section = doc("docs/zoo.md").split("## Components", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \|(.*)$", section, re.M))
    missing = [
        f"{c.kind}:{c.name}"
        for c in archzoo.list_components()
        if c.__module__.startswith("archzoo.") and f"`{c.name}`" not in rows.get(c.kind, "")
    ]
    assert not missing, f"docs/zoo.md's components table lacks {missing}"


def test_one_file_plugin_example_works_and_does_not_reuse_a_shipped_name(monkeypatch):
    import sys
    import types

    import archzoo
    from archzoo import Registry

    blocks = re.findall(r"```python\n(.*?)```", doc("docs/plugins.md"), re.S)
    block = next(b for b in blocks if "archzoo_unitnorm" in b)
    module = types.ModuleType("readme_plugin")
    monkeypatch.setitem(sys.modules, "readme_plugin", module)  # as an imported plugin is
    exec(compile(block, "docs/plugins.md one-file plugin", "exec"), module.__dict__)  # noqa: S102
    registry = Registry(load_entry_points=False)
    info = registry.register_plugin(module, "readme-plugin")
    assert info.status == "ok", info.error
    (declared,) = info.components
    kind, name = declared.split(":")
    example = ROOT / "examples/archzoo-plugin-example/src"
    shipped = set(
        re.findall(r'name\s*=\s*"(\w+)"', "".join(p.read_text() for p in example.rglob("*.py")))
    )
    assert name not in shipped and registry.has(kind, name)
    sizes = {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32, "vocab_size": 50}
    model = archzoo.build_model("gpt2", {**sizes, "norm": name}, registry=registry)
    norm = model.decoder.blocks[0].attention_norm
    x = torch.randn(2, 3, 16)
    torch.testing.assert_close(norm(x), x / x.norm(dim=-1, keepdim=True))  # gain starts at 1


def test_zoo_page_table_is_the_zoo():
    """Every shipped model has its row, with the family and the parameter count of `zoo list
    models` (built on the meta device), and no row names a model the zoo lacks."""
    import archzoo

    section = doc("docs/zoo.md").split("## The zoo", 1)[1].split("\n## ", 1)[0]
    rows = {
        name: (family, int(params.replace(",", "")))
        for name, family, params in re.findall(
            r"^\| `([\w.-]+)` \| ([\w-]+) \| ([\d,]+) \|", section, re.M
        )
    }
    shipped = {}
    for name in archzoo.list_models():
        model = archzoo.build_model(name, device="meta")
        shipped[name] = (model.family, model.num_parameters())
    assert rows == shipped

"""No hostile input executes code: every payload tries to create a marker file, none may.

Payloads: YAML python tags in spec files and `--set` values, pickles named like weights,
code in JSON and metadata text, component and zoo names that look like Python, an
`extends` that points at a Python file. Each run is also watched for os.system/Popen calls.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from hostile_util import GPT2_CONFIG, hf_gpt2

import archzoo
from archzoo.cli.main import main
from archzoo.io.safe_write import write_safetensors


class Payload:
    """Unpickling this creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def tag_spec(marker: Path, tag: str) -> str:
    return f"extends: gpt2\nname: !!python/{tag} ['touch {marker}']\n"


def spec_file(tmp: Path, text: str) -> list[str]:
    path = tmp / "evil.yaml"
    path.write_text(text)
    return ["validate", str(path)]


def hf_with(tmp: Path, files: dict[str, bytes], drop_weights: bool = False) -> list[str]:
    d = hf_gpt2(tmp / "hf")
    if drop_weights:
        (d / "model.safetensors").unlink()
    for name, data in files.items():
        (d / name).write_bytes(data)
    return ["import", str(d)]


def weights_with(tmp: Path, data: bytes) -> list[str]:
    path = tmp / "m.safetensors"
    path.write_bytes(data)
    return ["generate", str(path), "--prompt", "hi"]


def metadata_spec(tmp: Path, marker: Path) -> list[str]:
    path = tmp / "m.safetensors"
    archzoo.save(archzoo.build_model("gpt2", {"n_layers": 1, "d_model": 16, "n_heads": 2}), path)
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
        meta = f.metadata()
    spec = json.loads(meta["archzoo.spec"])
    spec["attention"]["kind"] = f"__import__('os').system('touch {marker}')"
    write_safetensors(path, tensors, {**meta, "archzoo.spec": json.dumps(spec)})
    return ["generate", str(path), "--prompt", "hi"]


def torch_zip(marker: Path) -> bytes:
    import io

    buf = io.BytesIO()
    torch.save({"w": Payload(marker)}, buf)
    return buf.getvalue()


# id -> (tmp, marker) -> zoo arguments; each must fail cleanly (exit 2) without running code
PAYLOADS = {
    "yaml-apply-os-system": lambda t, m: spec_file(t, tag_spec(m, "object/apply:os.system")),
    "yaml-new-popen": lambda t, m: spec_file(t, tag_spec(m, "object/new:subprocess.Popen")),
    "yaml-name-eval": lambda t, m: spec_file(t, "extends: gpt2\nname: !!python/name:eval ''\n"),
    "yaml-module": lambda t, m: spec_file(t, "extends: gpt2\nname: !!python/module:os\n"),
    "yaml-tag-in-extends": lambda t, m: spec_file(
        t,
        tag_spec(m, "object/apply:os.system")
        .replace("name:", "extends:", 1)
        .replace("extends: gpt2\n", ""),
    ),
    "yaml-tag-in-set": lambda t, m: [
        "build",
        "gpt2",
        "--set",
        f"name=!!python/object/apply:os.system ['touch {m}']",
        "--set",
        "n_layers=0",
    ],
    "extends-python-file": lambda t, m: (
        (t / "evil.py").write_text(f"import os; os.system('touch {m}')\n")
        and spec_file(t, "extends: evil.py\n")
    ),
    "component-name-is-code": lambda t, m: spec_file(
        t, f"extends: gpt2\nattention: {{kind: \"__import__('os').system('touch {m}')\"}}\n"
    ),
    "component-name-dotted": lambda t, m: spec_file(t, "extends: gpt2\nnorm: os.system\n"),
    "zoo-name-is-code": lambda t, m: ["build", f"__import__('os').system('touch {m}')"],
    "zoo-name-is-module-path": lambda t, m: ["build", "os.system"],
    "pickle-only-checkpoint": lambda t, m: hf_with(
        t, {"pytorch_model.bin": pickle.dumps(Payload(m))}, drop_weights=True
    ),
    "pickle-as-safetensors": lambda t, m: hf_with(
        t, {"model.safetensors": pickle.dumps(Payload(m))}
    ),
    "torch-zip-as-safetensors": lambda t, m: hf_with(t, {"model.safetensors": torch_zip(m)}),
    "pickle-as-weights-file": lambda t, m: weights_with(t, pickle.dumps(Payload(m))),
    "torch-zip-as-weights-file": lambda t, m: weights_with(t, torch_zip(m)),
    "code-in-config-model-type": lambda t, m: hf_with(
        t,
        {
            "config.json": json.dumps(
                {**GPT2_CONFIG, "model_type": f"__import__('os').system('touch {m}')"}
            ).encode()
        },
    ),
    "yaml-tag-in-config-json": lambda t, m: hf_with(
        t, {"config.json": f"!!python/object/apply:os.system ['touch {m}']".encode()}
    ),
    "code-in-saved-spec": metadata_spec,
}


@pytest.mark.parametrize("case", sorted(PAYLOADS))
def test_no_hostile_payload_runs_code(case, tmp_path, monkeypatch):
    marker = tmp_path / "PWNED"
    args = PAYLOADS[case](tmp_path, marker)  # pickled before the watch starts
    calls: list[tuple] = []  # any attempt to start a process
    monkeypatch.setattr(os, "system", lambda *a: calls.append(("os.system", a)) or 0)
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: calls.append(("Popen", a)))
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, (result.output, result.exception)
    assert "Traceback" not in result.output and "Error:" in result.output
    assert not marker.exists(), f"{case} created the marker"
    assert calls == []

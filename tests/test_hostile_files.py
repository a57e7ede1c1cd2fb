"""Hostile input, categories 1 and 2: plain installs save and load; no save ever loses a file."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hostile_util import TINY, TINY_SETS, hf_gpt2, snapshot, zoo_fails, zoo_subprocess

import archzoo
from archzoo.io.safe_write import TEMP_SUFFIX, remove_stale_temps, write_safetensors

# ---------------------------------------------------------------- 1. plain install (no NumPy)

NO_NUMPY = "import sys; sys.modules['numpy'] = None  # as after `pip install archzoo`\n"
PLAIN_CASES = {
    "save-and-load": (
        "import archzoo, torch, sys\n"
        "m = archzoo.build_model('gpt2', {tiny})\n"
        "archzoo.save(m, sys.argv[1]); m2 = archzoo.load(sys.argv[1])\n"
        "ids = torch.tensor([[1, 2, 3]])\n"
        "assert torch.equal(m.eval()(ids).logits, m2(ids).logits)\n"
    ),
    "zoo-build-out": (
        "import sys\nfrom archzoo.cli.main import main\n"
        "main(['build', 'gpt2', *{sets}, '--out', sys.argv[1]])\n"
    ),
    "zoo-import-out": (
        "import sys\nfrom archzoo.cli.main import main\n"
        "main(['import', sys.argv[2], '--out', sys.argv[1]])\n"
    ),
    "bf16-and-int-tensors": (
        "import sys, archzoo, torch\nfrom archzoo.io.safe_write import write_safetensors\n"
        "from safetensors import safe_open\n"
        "t = {{'a': torch.ones(3, dtype=torch.bfloat16), 'b': torch.arange(4), "
        "'c': torch.tensor([True, False])}}\n"
        "write_safetensors(sys.argv[1], t, {{}})\n"
        "with safe_open(sys.argv[1], 'pt') as f:\n"
        "    assert all(torch.equal(f.get_tensor(k), v) for k, v in t.items())\n"
    ),
}


@pytest.mark.parametrize("case", sorted(PLAIN_CASES))
def test_plain_install_saves_and_loads_without_numpy(case, tmp_path):
    code = NO_NUMPY + PLAIN_CASES[case].format(tiny=TINY, sets=TINY_SETS)
    out, hf = tmp_path / "m.safetensors", hf_gpt2(tmp_path / "hf")
    run = subprocess.run(
        [sys.executable, "-c", code, str(out), str(hf)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert "numpy" not in (run.stdout + run.stderr).lower()
    assert out.stat().st_size > 200  # header and tensors


# ---------------------------------------------------------------- 2. data loss


def tiny_model() -> archzoo.ZooModel:
    torch.manual_seed(0)
    return archzoo.build_model("gpt2", TINY)


def special_targets(tmp: Path) -> dict[str, tuple[Path, str]]:
    """Paths `save` must refuse, with the words the refusal names."""
    real = tmp / "real.safetensors"
    real.write_bytes(b"precious")
    (tmp / "link.safetensors").symlink_to(real)
    (tmp / "dangling.safetensors").symlink_to(tmp / "nowhere")
    os.mkfifo(tmp / "fifo.safetensors")
    (tmp / "dir.safetensors").mkdir()
    return {
        "symlink": (tmp / "link.safetensors", "symbolic link"),
        "dangling-symlink": (tmp / "dangling.safetensors", "symbolic link"),
        "fifo": (tmp / "fifo.safetensors", "not a regular file"),
        "directory": (tmp / "dir.safetensors", "not a regular file"),
        "dev-null": (Path("/dev/null"), "not a regular file"),
        "missing-dir": (tmp / "no" / "such" / "m.safetensors", "does not exist"),
        "parent-is-file": (real / "m.safetensors", "does not exist"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "symlink",
        "dangling-symlink",
        "fifo",
        "directory",
        "dev-null",
        "missing-dir",
        "parent-is-file",
    ],
)
def test_save_refuses_targets_that_would_lose_data(case, tmp_path):
    target, words = special_targets(tmp_path)[case]
    before = snapshot(tmp_path)
    with pytest.raises(archzoo.WeightsError, match=words) as err:
        archzoo.save(tiny_model(), target)
    assert str(target) in str(err.value)
    assert snapshot(tmp_path) == before  # the linked file and everything else intact
    assert not list(tmp_path.glob(f"*{TEMP_SUFFIX}"))


@pytest.mark.parametrize(
    "case", ["symlink", "dangling-symlink", "fifo", "dev-null", "missing-dir", "parent-is-file"]
)
def test_zoo_build_out_refuses_before_building(case, tmp_path):
    target, words = special_targets(tmp_path)[case]
    before = snapshot(tmp_path)
    zoo_fails(["build", "gpt2", *TINY_SETS, "--out", target], words)
    assert snapshot(tmp_path) == before


def test_zoo_build_out_on_a_fifo_does_not_block(tmp_path):
    fifo = tmp_path / "out.safetensors"
    os.mkfifo(fifo)
    run = zoo_subprocess(["build", "gpt2", *TINY_SETS, "--out", fifo])
    assert run.returncode == 2 and "not a regular file" in run.stderr


def test_zoo_build_out_cannot_overwrite_its_own_spec(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("extends: gpt2\nn_layers: 1\nd_model: 16\nn_heads: 2\nvocab_size: 64\n")
    zoo_fails(["build", spec, "--out", spec], "input of this command")
    assert spec.read_text().startswith("extends: gpt2")


@pytest.mark.parametrize(
    "name", ["model.safetensors", "config.json", "model-00001-of-00002.safetensors"]
)
def test_zoo_import_out_cannot_overwrite_the_checkpoint(name, tmp_path):
    hf = hf_gpt2(tmp_path / "hf", shards=2 if "of" in name else 1)
    before = snapshot(hf)
    zoo_fails(["import", hf, "--out", hf / name], "input of this command")
    assert snapshot(hf) == before


def test_zoo_import_out_through_another_path_to_the_checkpoint(tmp_path):
    hf = hf_gpt2(tmp_path / "hf")
    before = snapshot(hf)
    (tmp_path / "alias").symlink_to(hf)
    zoo_fails(["import", hf, "--out", tmp_path / "alias" / "model.safetensors"], "input")
    assert snapshot(hf) == before


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_files_get_the_umask_default(umask, mode, tmp_path):
    old = os.umask(umask)
    try:
        archzoo.save(tiny_model(), tmp_path / "m.safetensors")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "m.safetensors").stat().st_mode) == mode


@pytest.mark.parametrize("mode", [0o640, 0o444, 0o755])
def test_replaced_files_keep_their_permissions(mode, tmp_path):
    path = tmp_path / "m.safetensors"
    archzoo.save(tiny_model(), path)
    os.chmod(path, mode)
    archzoo.save(tiny_model(), path)
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert archzoo.load(path).num_parameters() == tiny_model().num_parameters()


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_killed_save_leaves_no_temp_after_the_next_save(tmp_path):
    """The save is killed (SIGKILL) after its temp file is complete, before the rename."""
    path = tmp_path / "m.safetensors"
    code = (
        "import os, sys, archzoo\n"
        "os.replace = lambda *a: os.kill(os.getpid(), 9)\n"
        f"archzoo.save(archzoo.build_model('gpt2', {TINY}), sys.argv[1])\n"
    )
    run = subprocess.run([sys.executable, "-c", code, str(path)], timeout=60)
    assert run.returncode == -signal.SIGKILL
    temps = list(tmp_path.glob(f".m.safetensors.*{TEMP_SUFFIX}"))
    assert len(temps) == 1 and temps[0].stat().st_size > 1000  # found by its name
    assert not path.exists()
    archzoo.save(tiny_model(), path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]


def test_temps_of_a_live_save_are_left_alone(tmp_path):
    target = tmp_path / "m.safetensors"
    live = tmp_path / f".m.safetensors.{os.getppid()}{TEMP_SUFFIX}"
    dead = tmp_path / f".m.safetensors.{dead_pid()}{TEMP_SUFFIX}"
    other = tmp_path / f".other.safetensors.{dead_pid()}{TEMP_SUFFIX}"
    for p in (live, dead, other):
        p.write_bytes(b"x")
    remove_stale_temps(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])


@pytest.mark.parametrize("existing", [True, False])
def test_disk_full_is_a_clean_error_and_keeps_the_old_file(existing, tmp_path):
    """RLIMIT_FSIZE makes writes fail with EFBIG as a full disk fails with ENOSPC."""
    path = tmp_path / "m.safetensors"
    if existing:
        path.write_bytes(b"old weights")
    code = (
        "import resource, signal, sys, archzoo\n"
        f"model = archzoo.build_model('gpt2', {TINY})\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "try:\n"
        "    archzoo.save(model, sys.argv[1])\n"
        "except archzoo.WeightsError as exc:\n"
        "    print(exc)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert f"cannot write {path}: File too large; no file was changed" in run.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == (["m.safetensors"] if existing else [])
    if existing:
        assert path.read_bytes() == b"old weights"


def test_unwritable_location_is_a_clean_error():
    with pytest.raises(archzoo.WeightsError, match="cannot write /proc/archzoo.safetensors"):
        archzoo.save(tiny_model(), "/proc/archzoo.safetensors")


def test_unsupported_dtype_is_named_before_writing(tmp_path):
    with pytest.raises(archzoo.WeightsError, match=r"'w' has dtype torch.complex128"):
        write_safetensors(
            tmp_path / "x.safetensors", {"w": torch.zeros(2, dtype=torch.cdouble)}, {}
        )
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("case", ["symlink", "dangling-symlink", "fifo", "missing-dir"])
def test_zoo_mask_out_refuses_before_drawing(case, tmp_path):
    target, words = special_targets(tmp_path)[case]
    before = snapshot(tmp_path)
    out = zoo_fails(["mask", "gpt2", *TINY_SETS, "--out", target], words)
    assert "keys per query" not in out  # refused before the mask was computed
    assert snapshot(tmp_path) == before


def test_zoo_mask_out_cannot_overwrite_its_own_spec(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("extends: gpt2\nn_layers: 1\nd_model: 16\nn_heads: 2\nvocab_size: 64\n")
    zoo_fails(["mask", spec, "--out", spec], "input of this command")
    assert spec.read_text().startswith("extends: gpt2")


def test_zoo_attn_out_refuses_before_loading(tmp_path):
    """The page was written through a link (here onto a spec) and into a FIFO (blocking)."""
    spec = tmp_path / "s.yaml"
    spec.write_text("extends: gpt2\n")
    (tmp_path / "link.html").symlink_to(spec)
    (tmp_path / "dangling.html").symlink_to(tmp_path / "nowhere.yaml")
    os.mkfifo(tmp_path / "fifo.html")
    before = snapshot(tmp_path)
    cases = {"link.html": "symbolic link", "dangling.html": "symbolic link"}
    cases.update({"fifo.html": "not a regular file", "no/such/a.html": "does not exist"})
    for name, words in cases.items():
        args = ["attn", tmp_path / "no-model", "--text", "w", "--out", tmp_path / name]
        zoo_fails(args, f"cannot write {tmp_path / name}", words)
    assert snapshot(tmp_path) == before

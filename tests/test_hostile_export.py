"""Hostile input, category 4: `zoo export` / `archzoo.to_hf`.

An export replaces its target directory in one rename, so a target that is, or holds, one
of its inputs (the source, the tokenizer directory) or the current directory is refused
before any work; the source's generation_config.json is read under a size cap and a depth
limit; a tokenizer directory the user names must exist and hold a tokenizer; and tokenizer
files are copied only from that directory or the one the model was read from, never from
a path written in a weights file's metadata. The user's files stay byte-identical.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile_util import assert_clean_failure, hf_gpt2, snapshot, zoo_fails, zoo_subprocess

import archzoo
from archzoo.hf.express import ExportError
from archzoo.io.safe_write import write_safetensors
from archzoo.io.weights import HF_SOURCE_KEY

safetensors = pytest.importorskip("safetensors")

pytest.importorskip("transformers")

TOKENIZER = {"tokenizer.json": '{"version": "1.0"}', "vocab.json": "{}", "merges.txt": "#\n"}


def source(tmp_path: Path, name: str = "src") -> Path:
    """A tiny GPT-2 HF directory with tokenizer files and a file of the user's own."""
    directory = hf_gpt2(tmp_path / name)
    for file, text in {**TOKENIZER, "notes.txt": "mine"}.items():
        (directory / file).write_text(text)
    return directory


def everything(tmp_path: Path) -> dict[str, bytes]:
    return snapshot(tmp_path)


@pytest.mark.parametrize(
    "target, words",
    [
        ("src", "it is the input"),  # the HF directory being exported
        (".", "it holds the input"),  # tmp_path: the source's parent
    ],
)
def test_export_onto_its_own_source_is_refused_and_deletes_nothing(tmp_path, target, words):
    src = source(tmp_path)
    before = everything(tmp_path)
    out = tmp_path / target
    for force in ([], ["--force"]):
        zoo_fails(["export", src, "--hf", out, *force], f"cannot write {out}", words)
    assert everything(tmp_path) == before


def test_export_of_a_weights_file_into_its_own_directory_is_refused(tmp_path):
    src = source(tmp_path)
    archzoo.save(archzoo.from_hf(src), src / "tuned.safetensors")
    before = everything(tmp_path)
    zoo_fails(
        ["export", src / "tuned.safetensors", "--hf", src, "--force"],
        f"cannot write {src}: it holds the input {src / 'tuned.safetensors'}",
    )
    model = archzoo.load(src / "tuned.safetensors")
    with pytest.raises(archzoo.WeightsError, match=f"cannot write {src}: it is the input"):
        archzoo.to_hf(model, src, overwrite=True)  # the directory it was loaded from
    assert everything(tmp_path) == before


def test_export_onto_the_tokenizer_directory_is_refused(tmp_path):
    src, tok = source(tmp_path), source(tmp_path, "tok")
    before = everything(tmp_path)
    args = ["export", src, "--tokenizer", tok, "--hf", tok, "--force"]
    zoo_fails(args, f"cannot write {tok}: it is the input {tok}")
    with pytest.raises(archzoo.WeightsError, match="it is the input"):
        archzoo.to_hf(archzoo.from_hf(src), tok, tokenizer_from=tok, overwrite=True)
    assert everything(tmp_path) == before


@pytest.mark.parametrize("target", [".", "..", "./"])
def test_the_current_directory_or_a_parent_of_it_is_refused_before_any_work(
    tmp_path, monkeypatch, target
):
    src = source(tmp_path)
    work = tmp_path / "work" / "here"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    before = everything(tmp_path)
    words = "it is the current directory or holds it"
    for force in ([], ["--force"]):
        zoo_fails(["export", src, "--hf", target, *force], f"cannot write {Path(target)}", words)
    with pytest.raises(archzoo.WeightsError, match=words):
        archzoo.to_hf(archzoo.from_hf(src), target, overwrite=True)
    assert everything(tmp_path) == before  # no staged directory left beside it either


# id, generation_config.json text, words of the error (after the file's path)
GENERATION_CASES = [
    ("deep-100000", '{"a":' * 100_000 + "1" + "}" * 100_000, "generation_config.json is not valid JSON"),
    ("deep-200", '{"a":' * 200 + "1" + "}" * 200, "generation_config.json is nested more than 32 levels deep"),
    ("deep-list", "[" * 50 + "]" * 50, "generation_config.json is nested more than 32 levels deep"),
    ("not-json", "{'bos_token_id': 1}", "generation_config.json is not valid JSON"),
    ("not-an-object", "[1, 2]", "generation_config.json must be a JSON object, got a list"),
    ("not-utf8", b'{"a": "\xff"}', "generation_config.json is not valid JSON"),
]  # fmt: skip


@pytest.mark.parametrize("case", GENERATION_CASES, ids=[c[0] for c in GENERATION_CASES])
def test_a_hostile_generation_config_is_refused_naming_it(tmp_path, case):
    _, text, words = case
    src = source(tmp_path)
    path = src / "generation_config.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    before = everything(tmp_path)
    zoo_fails(["export", src, "--hf", tmp_path / "out"], f"{path}: {words}")
    with pytest.raises(ExportError, match="generation_config.json"):
        archzoo.to_hf(archzoo.from_hf(src), tmp_path / "out")
    assert everything(tmp_path) == before  # no out/, no staged directory


def test_a_multi_gb_generation_config_is_refused_before_it_is_read(tmp_path):
    """A sparse 4 GiB file, under a 3 GiB address-space limit: refused, not a MemoryError."""
    src = source(tmp_path)
    with open(src / "generation_config.json", "wb") as f:
        f.truncate(4 * 2**30)
    run = zoo_subprocess(["export", src, "--hf", tmp_path / "out"])
    words = "generation_config.json is 4294967296 bytes (more than"
    assert_clean_failure(run, f"{src / 'generation_config.json'}: {words}")
    assert not (tmp_path / "out").exists()


def test_a_missing_or_empty_tokenizer_directory_is_refused(tmp_path):
    src = source(tmp_path)
    model = archzoo.from_hf(src)
    (tmp_path / "empty").mkdir()
    for where, words in [("missing", "no such directory"), ("empty", "holds no tokenizer file")]:
        with pytest.raises(ExportError, match=f"tokenizer_from {tmp_path / where}: {words}"):
            archzoo.to_hf(model, tmp_path / "out", tokenizer_from=tmp_path / where)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ExportError, match="file: not a directory"):
        archzoo.to_hf(model, tmp_path / "out", tokenizer_from=tmp_path / "file")
    zoo_fails(["export", src, "--tokenizer", tmp_path / "empty", "--hf", tmp_path / "out"])
    assert not (tmp_path / "out").exists()


def planted(tmp_path: Path) -> Path:
    """A weights file whose metadata says it came from a directory of someone else's files."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "tokenizer.json").write_text('{"secret": 1}')
    (elsewhere / "id.model").write_text("private key")
    (elsewhere / "generation_config.json").write_text('{"secret_key": 1}')
    src = source(tmp_path)
    model = archzoo.from_hf(src)
    weights = tmp_path / "weights" / "m.safetensors"
    weights.parent.mkdir()
    archzoo.save(model, weights)

    with safetensors.safe_open(str(weights), "pt") as f:
        meta = dict(f.metadata())
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    meta[HF_SOURCE_KEY] = json.dumps({"directory": str(elsewhere), "model_type": "gpt2"})
    write_safetensors(weights, tensors, meta)
    return weights


def test_tokenizer_files_never_come_from_a_path_in_the_weights_metadata(tmp_path):
    weights = planted(tmp_path)
    report = archzoo.to_hf(archzoo.load(weights), tmp_path / "out")
    assert report["tokenizer_files"] == []
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "config.json",
        "generation_config.json",
        "model.safetensors",
    ]
    generation = json.loads((tmp_path / "out" / "generation_config.json").read_text())
    assert "secret_key" not in generation


def test_tokenizer_files_come_from_the_directory_the_weights_were_loaded_from(tmp_path):
    weights = planted(tmp_path)
    for file, text in TOKENIZER.items():
        (weights.parent / file).write_text(text)
    out = tmp_path / "out"
    result = zoo_cli(["export", weights, "--hf", out, "--json"])
    assert sorted(json.loads(result)["tokenizer_files"]) == sorted(TOKENIZER)
    assert {f: (out / f).read_text() for f in TOKENIZER} == TOKENIZER
    assert not (out / "id.model").exists()


def zoo_cli(args: list) -> str:
    from click.testing import CliRunner

    from archzoo.cli.main import main

    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output

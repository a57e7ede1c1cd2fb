"""Hostile checkpoints: HF directories and archzoo weights files made to escape, block or crash.

Each case asserts the exact outcome (error type, the file at fault and what is wrong);
the CLI exits 2 with `Error:` and no traceback; cases that could block run in a subprocess
under a time limit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from hostile_util import (
    GPT2_CONFIG,
    assert_clean_failure,
    gpt2_tensors,
    hf_gpt2,
    snapshot,
    zoo_fails,
    zoo_subprocess,
)
from safetensors import safe_open

import archzoo
from archzoo.io.safe_write import write_safetensors

INDEX = "model.safetensors.index.json"


def set_index(d: Path, data: object) -> None:
    (d / INDEX).write_text(data if isinstance(data, str) else json.dumps(data))


def shard_named(name: str) -> Callable[[Path], None]:
    """Point one tensor of a two-shard checkpoint at `name`."""

    def edit(d: Path) -> None:
        index = json.loads((d / INDEX).read_text())
        index["weight_map"]["wte.weight"] = name
        set_index(d, index)

    return edit


def outside_shard(d: Path) -> None:
    write_safetensors(d.parent / "secret.safetensors", {"wte.weight": torch.zeros(64, 16)}, {})
    shard_named("../secret.safetensors")(d)


SHARD1, SHARD2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"


def also_in_first_shard(d: Path) -> None:
    """wte.weight (in shard 2) stored in shard 1 too, with other values."""
    with safe_open(str(d / SHARD1), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - not a mapping
    write_safetensors(d / SHARD1, {**tensors, "wte.weight": torch.zeros(64, 16)}, {})


def weight_map(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        index = json.loads((d / INDEX).read_text())
        change(index["weight_map"])
        set_index(d, index)

    return edit


def pooling_at(path: Callable[[Path], str]) -> Callable[[Path], None]:
    """A sentence-transformers modules.json whose Pooling module is at `path(d)`; a pooling
    config waits at d/../elsewhere, outside the checkpoint."""

    def edit(d: Path) -> None:
        (d.parent / "elsewhere").mkdir()
        (d.parent / "elsewhere" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
        pooling = {
            "idx": 1,
            "name": "1",
            "path": path(d),
            "type": "sentence_transformers.models.Pooling",
        }
        (d / "modules.json").write_text(json.dumps([pooling]))

    return edit


def config(**changes: object) -> Callable[[Path], None]:
    return lambda d: (d / "config.json").write_text(json.dumps({**GPT2_CONFIG, **changes}))


def raw_file(name: str, data: bytes) -> Callable[[Path], None]:
    return lambda d: (d / name).write_bytes(data)


def tensors_with(name: str, value: torch.Tensor) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        tensors = {**gpt2_tensors(), name: value}
        write_safetensors(d / "model.safetensors", tensors, {"format": "pt"})

    return edit


def link(name: str, target: str) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        (d / name).unlink(missing_ok=True)
        (d / name).symlink_to(target)

    return edit


def replace_with_dir(name: str) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        (d / name).unlink()
        (d / name).mkdir()

    return edit


def huge(name: str, size: int) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        with open(d / name, "wb") as f:
            f.truncate(size)

    return edit


# id, shards, edit of the checkpoint, error type, words of the message (file and problem)
# fmt: off
HF_CASES = [
    # 4. shard paths must stay inside the checkpoint
    ("shard-dotdot", 2, outside_shard, archzoo.ConversionError, [INDEX, "shard '../secret.safetensors' is outside the checkpoint directory"]),
    ("shard-absolute", 2, shard_named("/etc/passwd"), archzoo.ConversionError, [INDEX, "shard '/etc/passwd' is outside"]),
    ("shard-nested-dotdot", 2, shard_named("sub/../../x.safetensors"), archzoo.ConversionError, ["is outside the checkpoint directory"]),
    ("shard-backslash", 2, shard_named("..\\x.safetensors"), archzoo.ConversionError, ["is outside the checkpoint directory"]),
    ("shard-nul", 2, shard_named("a\x00b"), archzoo.ConversionError, ["is outside the checkpoint directory"]),
    ("shard-proc", 2, shard_named("/proc/self/environ"), archzoo.ConversionError, ["'/proc/self/environ' is outside"]),
    # 4. one tensor, one shard: the later shard silently won, whatever weight_map said
    ("tensor-in-two-shards", 2, also_in_first_shard, archzoo.ConversionError, [f"{SHARD2}: tensor 'wte.weight' is also in {SHARD1}; a tensor must be stored in one shard only"]),
    ("weight-map-other-shard", 2, weight_map(lambda m: m.update({"wte.weight": SHARD1})), archzoo.ConversionError, [INDEX, f"weight_map does not match the shards: 'wte.weight' is listed in {SHARD1} but stored in {SHARD2}"]),
    ("weight-map-absent-tensor", 2, weight_map(lambda m: m.update({"lm_head.weight": SHARD1})), archzoo.ConversionError, [INDEX, f"'lm_head.weight' is listed in {SHARD1} but stored in no shard"]),
    ("weight-map-unlisted-tensor", 2, weight_map(lambda m: m.pop("wpe.weight")), archzoo.ConversionError, [INDEX, "'wpe.weight' is stored in model-0000", "but not listed"]),
    # 4. a sentence-transformers module path must stay inside the checkpoint too
    ("st-pooling-absolute", 1, pooling_at(lambda d: str(d.parent / "elsewhere")), archzoo.ConversionError, ["modules.json: Pooling module path", "elsewhere' is outside the checkpoint directory"]),
    ("st-pooling-dotdot", 1, pooling_at(lambda d: "../elsewhere"), archzoo.ConversionError, ["modules.json: Pooling module path '../elsewhere' is outside the checkpoint directory"]),
    # 6. malformed index files name the file
    ("index-bad-json", 2, lambda d: set_index(d, "{bad"), archzoo.ConversionError, [INDEX, "the weights index is not valid JSON"]),
    ("index-not-utf8", 2, raw_file(INDEX, b'{"weight_map": "\xff"}'), archzoo.ConversionError, [INDEX, "not valid JSON"]),
    ("index-deep-json", 2, lambda d: set_index(d, "[" * 100_000 + "]" * 100_000), archzoo.ConversionError, [INDEX, "not valid JSON"]),
    ("index-list", 2, lambda d: set_index(d, [1, 2]), archzoo.ConversionError, [INDEX, "expected an object with a non-empty 'weight_map'"]),
    ("index-no-weight-map", 2, lambda d: set_index(d, {"metadata": {}}), archzoo.ConversionError, ["non-empty 'weight_map'"]),
    ("index-empty-weight-map", 2, lambda d: set_index(d, {"weight_map": {}}), archzoo.ConversionError, ["non-empty 'weight_map'"]),
    ("index-weight-map-list", 2, lambda d: set_index(d, {"weight_map": ["a"]}), archzoo.ConversionError, ["non-empty 'weight_map'"]),
    ("index-value-int", 2, lambda d: set_index(d, {"weight_map": {"a": 3}}), archzoo.ConversionError, [INDEX, "weight_map values must be file names, got 3"]),
    ("index-value-empty", 2, lambda d: set_index(d, {"weight_map": {"a": ""}}), archzoo.ConversionError, ["must be file names, got ''"]),
    ("index-value-null", 2, lambda d: set_index(d, {"weight_map": {"a": None}}), archzoo.ConversionError, ["must be file names, got None"]),
    ("shard-missing", 2, shard_named("model-9.safetensors"), archzoo.ConversionError, ["model-9.safetensors", "cannot read shard"]),
    ("shard-is-directory", 2, lambda d: (d / "sub").mkdir() or shard_named("sub")(d), archzoo.ConversionError, ["shard 'sub' is not a regular file"]),
    ("shard-links-to-device", 2, lambda d: link("dev.safetensors", "/dev/zero")(d) or shard_named("dev.safetensors")(d), archzoo.ConversionError, ["shard 'dev.safetensors' is not a regular file"]),
    # 6. malformed config.json names the file
    ("config-bad-json", 1, raw_file("config.json", b'{"model_type": '), archzoo.ConversionError, ["config.json", "config.json is not valid JSON"]),
    ("config-not-utf8", 1, raw_file("config.json", b'{"model_type": "\xfe"}'), archzoo.ConversionError, ["config.json is not valid JSON"]),
    ("config-deep-json", 1, raw_file("config.json", b"{" + b'"a":{' * 50_000 + b"}" * 50_001), archzoo.ConversionError, ["config.json is not valid JSON"]),
    ("config-list", 1, raw_file("config.json", b"[]"), archzoo.ConversionError, ["config.json: no 'model_type' key"]),
    ("config-model-type-int", 1, config(model_type=5), archzoo.ConversionError, ["config.json: model_type must be a string, got 5"]),
    ("config-model-type-escape", 1, config(model_type="gpt2\x1b[31m"), archzoo.ConversionError, ["unsupported model_type 'gpt2\\x1b[31m'"]),
    ("config-n-layer-bool", 1, config(n_layer=True), archzoo.ConversionError, ["config.json: describes an invalid model", "n_layers: must be an integer, got bool True"]),
    ("config-n-layer-string", 1, config(n_layer="1"), archzoo.ConversionError, ["config.json: describes an invalid model", "got str '1'"]),
    ("config-eps-nan", 1, config(layer_norm_epsilon=float("nan")), archzoo.ConversionError, ["config.json", "norm.eps: must be a finite number"]),
    ("config-huge", 1, huge("config.json", 2**31), archzoo.ConversionError, ["config.json is 2147483648 bytes (more than 50000000)"]),
    ("config-is-directory", 1, replace_with_dir("config.json"), archzoo.ConversionError, ["config.json is not a regular file"]),
    ("config-links-to-device", 1, link("config.json", "/dev/zero"), archzoo.ConversionError, ["config.json is not a regular file"]),
    # 6. tensors of the wrong kind are refused by name, not cast and not a traceback
    ("int-tensor", 1, tensors_with("ln_f.weight", torch.ones(16, dtype=torch.int64)), archzoo.WeightsError, ["wrong-typed tensors: decoder.final_norm.weight: file torch.int64 vs model torch.float32"]),
    ("bool-tensor", 1, tensors_with("h.0.ln_1.bias", torch.ones(16, dtype=torch.bool)), archzoo.WeightsError, ["decoder.blocks.0.attention_norm.bias: file torch.bool vs model torch.float32"]),
    ("uint8-tensor", 1, tensors_with("wpe.weight", torch.ones(32, 16, dtype=torch.uint8)), archzoo.WeightsError, ["decoder.position.table.weight: file torch.uint8"]),
    ("weights-is-directory", 1, replace_with_dir("model.safetensors"), archzoo.ConversionError, ["model.safetensors is not a regular file"]),
    ("weights-links-to-device", 1, link("model.safetensors", "/dev/zero"), archzoo.ConversionError, ["model.safetensors is not a regular file"]),
    ("weights-header-lies", 1, raw_file("model.safetensors", (10**12).to_bytes(8, "little") + b"{}"), archzoo.ConversionError, ["model.safetensors: cannot read safetensors"]),
    ("weights-truncated", 1, lambda d: (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:200]), archzoo.ConversionError, ["cannot read safetensors"]),
    # 3. a config far larger than its weights is refused before building (10,000 layers took minutes)
    ("config-10000-layers", 1, config(n_layer=10_000), archzoo.ConversionError, ["config.json: describes a model of about 25,601,536 parameters", "hold 3,792 numbers"]),
    ("config-huge-vocab", 2, config(vocab_size=5_000_000), archzoo.ConversionError, ["config.json: describes a model of about 80,003,072 parameters"]),
    # 8. errors of the converter table name the checkpoint and config.json
    ("config-unknown-type", 1, config(model_type="rwkv"), archzoo.ConversionError, ["config.json: unsupported model_type 'rwkv'"]),
    ("config-key-of-another-type", 1, config(model_type="llama"), archzoo.ConversionError, ["hf: config.json has no 'hidden_size'"]),
]
# fmt: on


@pytest.mark.parametrize(
    "shards, edit, error, words", [c[1:] for c in HF_CASES], ids=[c[0] for c in HF_CASES]
)
def test_hostile_hf_checkpoint_is_a_named_error(shards, edit, error, words, tmp_path):
    d = hf_gpt2(tmp_path / "hf", shards=shards)
    edit(d)
    with pytest.raises(error) as err:
        archzoo.from_hf(d)
    message = str(err.value)
    for word in words:
        assert word in message, (word, message)
    assert "\x1b" not in message


@pytest.mark.parametrize(
    "case", ["shard-dotdot", "index-bad-json", "config-n-layer-bool", "int-tensor", "config-huge"]
)
def test_hostile_hf_checkpoint_through_zoo_import(case, tmp_path):
    shards, edit, _, words = next(c[1:] for c in HF_CASES if c[0] == case)
    d = hf_gpt2(tmp_path / "hf", shards=shards)
    edit(d)
    before = snapshot(tmp_path)
    zoo_fails(["import", d, "--out", tmp_path / "out.safetensors"], *words)
    assert snapshot(tmp_path) == before  # no output written, the checkpoint intact


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "shard"])
def test_fifo_in_a_checkpoint_does_not_block(name, tmp_path):
    d = hf_gpt2(tmp_path / "hf", shards=2 if name == "shard" else 1)
    target = "pipe.safetensors" if name == "shard" else name
    (d / target).unlink(missing_ok=True)
    os.mkfifo(d / target)
    if name == "shard":
        shard_named(target)(d)
    run = zoo_subprocess(["import", d])
    assert_clean_failure(run, target, "is not a regular file")


def test_control_sequences_in_the_model_name_never_reach_the_terminal(tmp_path):
    d = hf_gpt2(tmp_path / "hf", config={**GPT2_CONFIG, "_name_or_path": "x/evil\x1b]0;pwned\x07"})
    assert archzoo.from_hf(d).spec.name == "evil]0;pwned"
    run = zoo_subprocess(["import", d])
    assert run.returncode == 0, run.stderr
    assert "\x1b" not in run.stdout and "\x07" not in run.stdout
    assert "name: evil]0;pwned" in run.stdout


def test_special_tokens_past_the_vocabulary_are_dropped_on_import(tmp_path):
    cfg = {**GPT2_CONFIG, "bos_token_id": 50256, "eos_token_id": [3, 50256]}
    spec = archzoo.from_hf(hf_gpt2(tmp_path / "hf", config=cfg)).spec
    assert spec.data["bos_token_id"] is None and spec.data["eos_token_id"] == [3]


# ---------------------------------------------------------------- archzoo weights files


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    path = tmp_path_factory.mktemp("w") / "m.safetensors"
    archzoo.save(archzoo.build_model("gpt2", {"n_layers": 1, "d_model": 16, "n_heads": 2}), path)
    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


SPEC = "archzoo.spec"


def spec_with(meta: dict[str, str], **changes: object) -> dict[str, str]:
    return {SPEC: json.dumps({**json.loads(meta[SPEC]), **changes})}


# id, (tensors, metadata) -> (tensors, metadata changes), words of the WeightsError
# fmt: off
FILE_CASES = [
    ("int-tensor", lambda t, m: ({**t, "decoder.final_norm.weight": torch.ones(16, dtype=torch.int32)}, {}), ["wrong-typed tensors: decoder.final_norm.weight: file torch.int32"]),
    ("bool-tensor", lambda t, m: ({**t, "decoder.final_norm.bias": torch.ones(16, dtype=torch.bool)}, {}), ["decoder.final_norm.bias: file torch.bool"]),
    ("int8-embedding", lambda t, m: ({**t, "decoder.embedding.word.weight": torch.ones(50257, 16, dtype=torch.int8)}, {}), ["decoder.embedding.word.weight: file torch.int8"]),
    ("spec-deep-json", lambda t, m: (t, {SPEC: "[" * 100_000 + "]" * 100_000}), ["spec metadata is not valid JSON"]),
    ("aliases-deep-json", lambda t, m: (t, {"archzoo.aliases": "{" * 100_000}), ["spec metadata is not valid JSON"]),
    ("spec-list", lambda t, m: (t, {SPEC: "[1]"}), ["does not validate", "cannot load a spec from list"]),
    ("spec-name-escape", lambda t, m: (t, spec_with(m, name="a\x1b[2Jb")), ["does not validate", "name: must not contain control characters"]),
    ("spec-eos-outside", lambda t, m: (t, spec_with(m, eos_token_id=10**9)), ["does not validate", "token id 1000000000 is outside"]),
    ("spec-extends-injected", lambda t, m: (t, spec_with(m, extends="/etc/passwd")), ["stored spec names extends='/etc/passwd'; saved specs are resolved"]),
    ("spec-select-quoted", lambda t, m: (t, spec_with(m, layers=[{"select": "0", "ffn": {"kind": "glu"}}])), ["does not validate", "'0' is a string"]),
    ("alias-replaces-stored", lambda t, m: (t, {"archzoo.aliases": json.dumps({"decoder.final_norm.weight": "decoder.final_norm.bias"})}), ["aliases name stored tensors: decoder.final_norm.weight"]),
    ("alias-not-mapping", lambda t, m: (t, {"archzoo.aliases": "[1]"}), ["archzoo.aliases metadata must map tensor names"]),
]
# fmt: on


@pytest.mark.parametrize("edit, words", [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES])
def test_hostile_weights_file_is_a_weights_error(edit, words, saved, tmp_path):
    tensors, meta = saved
    new_tensors, changes = edit(dict(tensors), meta)
    path = tmp_path / "bad.safetensors"
    write_safetensors(path, new_tensors, {**meta, **changes})
    with pytest.raises(archzoo.WeightsError) as err:
        archzoo.load(path)
    assert str(path) in str(err.value)
    for word in words:
        assert word in str(err.value), (word, str(err.value))
    assert "\x1b" not in str(err.value)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_weights_path_that_is_not_a_regular_file(kind, tmp_path):
    if kind == "fifo":
        path = tmp_path / "w.safetensors"
        os.mkfifo(path)
    elif kind == "dev-zero":
        path = Path("/dev/zero")
    else:
        path = tmp_path / "w.safetensors"
        path.mkdir()
    with pytest.raises(archzoo.WeightsError, match=f"{path}: not a regular file"):
        archzoo.load(path)

"""Property tests on files built from scratch: random bytes and random JSON structures as a
safetensors file, random config.json dicts and indexes in an HF directory. The only outcomes
allowed are success or an archzoo error (WeightsError; ConversionError, WeightsError or
SpecError for HF directories), each within a few seconds; never another exception type.
(test_spec_properties.py mutates valid files; these start from nothing valid.)
"""

from __future__ import annotations

import json
import math
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from hostile_util import GPT2_CONFIG, gpt2_tensors
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import archzoo
from archzoo.io.safe_write import write_safetensors

SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TIME_LIMIT_S = 10.0
NUMBERS = st.sampled_from(
    [0, 1, 2, 3, 8, 16, 32, 64, -1, -(2**63), 2**63, 10**4, 10**9, 0.5, -0.0, 1e308, math.nan]
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=12))
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
DTYPES = st.sampled_from(["F32", "F16", "BF16", "I64", "BOOL", "F8_E4M3", "C64", "", "f32"])


@st.composite
def tensor_entries(draw: st.DrawFn, data_len: int) -> Any:
    """A header entry that looks like a tensor's, with random dtype, shape and offsets."""
    if draw(st.integers(0, 4)) == 0:
        return draw(JSON)
    entry: dict[str, Any] = {
        "dtype": draw(st.one_of(DTYPES, SCALARS)),
        "shape": draw(st.one_of(st.lists(st.integers(-2, 9), max_size=3), JSON)),
        "data_offsets": draw(
            st.one_of(st.lists(st.integers(-1, data_len + 4), min_size=2, max_size=2), JSON)
        ),
    }
    if draw(st.booleans()):
        del entry[draw(st.sampled_from(sorted(entry)))]
    return entry


@st.composite
def random_safetensors(draw: st.DrawFn) -> bytes:
    """Random bytes, or a length prefix with random JSON, or a tensor-shaped random header."""
    kind = draw(st.sampled_from(["bytes", "json", "header", "header"]))
    if kind == "bytes":
        return draw(st.binary(max_size=96))
    data = draw(st.binary(max_size=64))
    if kind == "json":
        header: Any = draw(JSON)
    else:
        names = draw(st.lists(st.text(min_size=1, max_size=10), max_size=4, unique=True))
        header = {n: draw(tensor_entries(len(data))) for n in names if n != "__metadata__"}
        if draw(st.booleans()):
            meta = draw(st.dictionaries(st.text(max_size=12), JSON, max_size=3))
            if draw(st.booleans()):
                meta["archzoo.spec"] = draw(st.one_of(JSON.map(json.dumps), st.text(max_size=20)))
            header["__metadata__"] = meta
    text = json.dumps(header).encode()
    size = len(text) if draw(st.integers(0, 5)) else draw(st.integers(0, 2**64 - 1))
    return struct.pack("<Q", size) + text + data


@settings(SETTINGS, max_examples=100)
@given(random_safetensors())
def test_random_weights_files_fail_only_with_weights_error(raw):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.safetensors"
        path.write_bytes(raw)
        start = time.monotonic()
        try:
            archzoo.load(path)
        except archzoo.WeightsError as exc:
            assert str(path) in str(exc)
            event("refused")
        else:
            event("loaded")
        assert time.monotonic() - start < TIME_LIMIT_S


HF_KEYS = sorted(
    {
        *GPT2_CONFIG,
        "n_ctx",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "intermediate_size",
        "max_position_embeddings",
        "type_vocab_size",
        "hidden_act",
        "rope_theta",
        "rope_scaling",
        "rms_norm_eps",
        "layer_norm_epsilon",
        "tie_word_embeddings",
        "head_dim",
        "sliding_window",
        "architectures",
        "pad_token_id",
        "eos_token_id",
        "num_labels",
        "id2label",
    }
)


@st.composite
def random_configs(draw: st.DrawFn) -> tuple[Any, bool]:
    """A config.json value: GPT-2's tiny config with random keys changed, a random dict
    under a registered (or unknown) model_type, or any JSON value at all; and whether the
    weights come as shards behind a random index."""
    kind = draw(st.sampled_from(["gpt2", "gpt2", "any-type", "json"]))
    if kind == "json":
        return draw(JSON), False
    base = dict(GPT2_CONFIG) if kind == "gpt2" else {}
    changes = draw(
        st.dictionaries(st.one_of(st.sampled_from(HF_KEYS), st.text(max_size=8)), JSON, max_size=5)
    )
    base.update(changes)
    if kind == "any-type" or draw(st.integers(0, 5)) == 0:
        types = archzoo.get_registry().model_types()
        base["model_type"] = draw(st.one_of(st.sampled_from(types), SCALARS))
    return base, draw(st.booleans())


def _write_checkpoint(root: Path, config: Any, sharded: bool, index: Any) -> None:
    (root / "config.json").write_text(json.dumps(config))
    tensors = gpt2_tensors()
    if not sharded:
        write_safetensors(root / "model.safetensors", tensors, {"format": "pt"})
        return
    names = sorted(tensors)
    write_safetensors(root / "a.safetensors", {k: tensors[k] for k in names[::2]}, {})
    write_safetensors(root / "b.safetensors", {k: tensors[k] for k in names[1::2]}, {})
    (root / "model.safetensors.index.json").write_text(json.dumps(index))


@settings(SETTINGS, max_examples=100)
@given(random_configs(), JSON)
def test_random_hf_configs_and_indexes_fail_only_with_archzoo_errors(case, random_index):
    config, sharded = case
    names = sorted(gpt2_tensors())
    index = (
        {"weight_map": {n: "ab"[i % 2] + ".safetensors" for i, n in enumerate(names)}}
        if isinstance(random_index, bool)  # a valid index now and then
        else random_index
    )
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        _write_checkpoint(root, config, sharded, index)
        start = time.monotonic()
        try:
            model = archzoo.from_hf(root)
        except (archzoo.ConversionError, archzoo.WeightsError, archzoo.SpecError) as exc:
            assert str(root) in str(exc), str(exc)
            event(f"refused: {type(exc).__name__}")
        else:
            ids = torch.tensor([[1, 2, 3]]) % model.spec.data["vocab_size"]
            with torch.no_grad():
                assert model(ids).last_hidden_state.shape[:2] == (1, 3)
            event("imported")
        assert time.monotonic() - start < TIME_LIMIT_S

"""Property tests: randomly mutated zoo specs fail only with SpecError, or build and train.

Each example takes a zoo spec as written (raw YAML data), applies one to three random
mutations (delete a key, rename it, set it to a random value of a random type, add a key)
and loads the result. The only exception allowed is archzoo.SpecError. A mutated spec
that validates is then shrunk to tiny sizes, built on the CPU, and run forward and
backward. Runs are derandomized, so CI sees the same examples every time.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
import torch
import yaml
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import archzoo
from archzoo.specs.fields import COMPONENT_KEYS, STACK_KEYS, ModelFields
from archzoo.specs.spec import find_model

MODELS = archzoo.list_models()
RAW = {name: yaml.safe_load(find_model(name).read_text()) for name in MODELS}
TINY = {
    "vocab_size": 64,
    "d_model": 16,
    "n_layers": 1,
    "n_heads": 2,
    "head_dim": 8,
    "d_ff": 24,
    "max_len": 32,
}
MAX_TINY_PARAMS = 2_000_000  # a component parameter (a bucket count, say) can still be big
SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def known_names() -> list[str]:
    """Every key and component name a spec may use, so mutations hit real names often."""
    names = {f.name for f in dataclasses.fields(ModelFields)}
    names |= {*COMPONENT_KEYS, *STACK_KEYS, "kind", "select", "encoder", "decoder"}
    for cls in archzoo.list_components():
        names.add(cls.name)
        names |= set(cls.describe()["params"])
    return sorted(names)


NAMES = known_names()
NUMBERS = st.sampled_from([0, -1, 1, 2, 3, 5, 7, 64, 10**6, 10**12, 2**63, 0.5, 1.0, -0.0, 1e-9])
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    NUMBERS,
    st.integers(min_value=-3, max_value=5000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(NAMES),
    st.text(max_size=12),
    st.lists(st.one_of(st.integers(-2, 5), st.text(max_size=3)), max_size=3),
    st.dictionaries(st.sampled_from(NAMES), st.one_of(NUMBERS, st.sampled_from(NAMES)), max_size=3),
)
KEYS = st.one_of(st.sampled_from(NAMES), st.text(max_size=10), st.integers(-2, 3))


def nudged(value: Any) -> st.SearchStrategy:
    """Values like `value`: another small size, rate, flag or known name."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(min_value=0, max_value=max(8, 2 * value))
    if isinstance(value, float):
        return st.floats(min_value=0.0, max_value=max(1.0, 2 * value))
    if isinstance(value, str):
        return st.sampled_from(NAMES)
    return VALUES


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path into nested mappings and lists."""
    out = []
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        out.append((*prefix, key))
        if isinstance(value, (dict, list)):
            out += paths(value, (*prefix, key))
    return out


def containers(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Paths of every mapping, the top level included."""
    out = [prefix] if isinstance(node, dict) else []
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        if isinstance(value, (dict, list)):
            out += containers(value, (*prefix, key))
    return out


def at(data: Any, path: tuple) -> Any:
    for p in path:
        data = data[p]
    return data


@st.composite
def mutated_specs(draw: st.DrawFn) -> tuple[str, dict]:
    """A zoo spec's raw data with one to three random mutations."""
    name = draw(st.sampled_from(MODELS))
    data = copy.deepcopy(RAW[name])
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["delete", "set", "set", "rename", "add", "nudge", "nudge"]))
        if op == "add":
            where = at(data, draw(st.sampled_from(containers(data))))
            where[draw(KEYS)] = draw(VALUES)
            continue
        options = paths(data)
        if not options:
            continue
        path = draw(st.sampled_from(options))
        parent, key = at(data, path[:-1]), path[-1]
        if op == "delete":
            del parent[key]
        elif op == "set":
            parent[key] = draw(VALUES)
        elif op == "nudge":  # a plausible value of the same type: explores valid specs
            parent[key] = draw(nudged(parent[key]))
        elif isinstance(parent, dict):  # rename
            parent[draw(KEYS)] = parent.pop(key)
    note(f"{name} mutated: {data!r}")
    return name, data


TOKEN_KEYS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")
TOKEN_KEYS += ("forced_eos_token_id",)
EOS = 3  # the end-of-text id a tiny head pools at, inside TINY's vocabulary


def tiny_overrides(data: dict) -> dict[str, Any]:
    """TINY, plus one KV head where the spec sets a count that 2 heads cannot divide; two
    layers where per-layer selections need them ('1::2'); no special token ids of the real
    vocabulary (they are outside TINY's, which validation refuses)."""
    out = dict(TINY)
    attention = data.get("attention")
    if isinstance(attention, dict) and attention.get("n_kv_heads") is not None:
        out["attention.n_kv_heads"] = _tiny_kv_heads(attention)
    if isinstance(attention, dict) and attention.get("kind") == "mla":  # latent sizes from head_dim
        out.update({f"attention.{k}": None for k in ("kv_lora_rank", "qk_nope_head_dim")})
        out.update({"attention.v_head_dim": None, "attention.q_lora_rank": 8})
    if isinstance(attention, dict) and attention.get("kind") == "gated_deltanet":  # heads too
        out.update({f"attention.{k}": None for k in ("n_k_heads", "n_v_heads")})
        out.update({f"attention.{k}": None for k in ("head_k_dim", "head_v_dim")})
    if isinstance(attention, dict) and attention.get("kind") == "mamba2":  # SSM sizes too
        out.update({"attention.d_inner": None, "attention.head_dim": 8, "attention.n_groups": 1})
        out["attention.state_size"] = 8
    if isinstance(attention, dict) and attention.get("kind") == "mamba":  # sizes from d_model
        out.update({"attention.d_inner": None, "attention.dt_rank": None})
    if isinstance(attention, dict) and attention.get("kind") == "kimi_delta":  # the model's
        out.update({"attention.n_heads": None, "attention.head_dim": None})
    position = data.get("position")
    if isinstance(position, dict) and position.get("fraction") not in (None, 1.0):
        out["position.fraction"] = 0.5  # partial rotary: an even share of TINY's head
    if data.get("layers"):  # enough layers that every selection picks one
        out["n_layers"] = max([2] + [_first_needed(e.get("select")) for e in data["layers"]])
        if any(_restates_sizes(e.get("attention")) for e in data["layers"]):  # per-layer too
            out["layers"] = [_tiny_layer(e) for e in data["layers"]]
    decoder = data.get("decoder") or {}  # an encoder-decoder's own decoder layers (T5Gemma)
    if any(_restates_sizes(e.get("attention")) for e in decoder.get("layers") or []):
        out["decoder.layers"] = [_tiny_layer(e) for e in decoder["layers"]]
    ffn = data.get("ffn")
    if isinstance(ffn, dict) and ffn.get("kind") == "moe":  # a few small experts
        out.update({"ffn.n_experts": 4, "ffn.top_k": 2, "ffn.d_expert": None})
        if ffn.get("d_shared") is not None:  # the shared expert from d_expert too
            out["ffn.d_shared"] = None
        if ffn.get("n_groups", 1) > 1:  # 2 groups of 2, one kept: still 2 to choose from
            out.update({"ffn.n_groups": 2, "ffn.topk_groups": 1})
    out.update({k: None for k in TOKEN_KEYS if isinstance(data.get(k), (int, list))})
    head = data.get("head")
    if isinstance(head, dict) and head.get("eos_token_id") is not None:  # CLIP's pooled token
        out["head.eos_token_id"] = EOS
    if _counts_tokens(data):  # positions numbered around the pad id need one, inside TINY's
        out["pad_token_id"] = 1
    for stack in ("encoder", "decoder"):  # a stack's own sizes shrink too
        section = data.get(stack) or {}
        out.update({f"{stack}.{k}": v for k, v in TINY.items() if k in section})
        own = section.get("attention")  # a stack's own attention restating its KV heads
        if isinstance(own, dict) and own.get("n_kv_heads") is not None:
            out[f"{stack}.attention.n_kv_heads"] = _tiny_kv_heads(own)
        if isinstance(section.get("layers"), list) and section["layers"]:  # PEGASUS-X's stagger
            needed = max([2] + [_first_needed(e.get("select")) for e in section["layers"]])
            key = "n_layers" if stack == "encoder" else "decoder.n_layers"
            out[key] = max(out.get(key, 1), needed)
    if isinstance(attention, dict) and attention.get("value_width") is not None:  # MobileBERT
        out["attention.value_width"] = TINY["d_model"]  # v reads the layer's input
    block = data.get("block")
    if isinstance(block, dict) and block.get("inner_dim") is not None:  # a bottleneck
        out["block.inner_dim"] = 8
    return out


def _counts_tokens(data: dict) -> bool:
    """Whether a position of the spec (or of a stack) has `count: tokens`."""
    sections = [data, *(data.get(s) or {} for s in ("encoder", "decoder"))]
    positions = [section.get("position") for section in sections]
    return any(isinstance(p, dict) and p.get("count") == "tokens" for p in positions)


MLA_SIZES = {"kv_lora_rank": None, "qk_nope_head_dim": None, "v_head_dim": None}


def _tiny_kv_heads(attention: dict) -> int:
    """One KV head, or two where heads pair up (differential attention)."""
    return 2 if attention.get("kind") == "diff_mha" else 1


def _restates_sizes(attention: Any) -> bool:
    return isinstance(attention, dict) and (
        attention.get("n_kv_heads") is not None
        or attention.get("kind") in ("mla", "shared_transformer")
    )


def _tiny_layer(entry: dict) -> dict:
    """A per-layer entry whose attention restates n_kv_heads (GPT-OSS's sliding layers) or
    latent sizes (Kimi Linear's MLA layers), at tiny sizes."""
    attention = entry.get("attention")
    if not _restates_sizes(attention):
        return entry
    attention = dict(attention)
    if attention.get("n_kv_heads") is not None:
        attention["n_kv_heads"] = _tiny_kv_heads(attention)
    if attention.get("kind") == "mla":  # latent sizes from head_dim
        attention.update({**MLA_SIZES, "q_lora_rank": 8 if attention.get("q_lora_rank") else None})
    if attention.get("kind") == "shared_transformer":  # its FFN, adapters and Mamba mixer
        mixer = {**attention["mixer"], "d_inner": None, "state_size": 8}
        if mixer.get("kind") == "mamba2":  # Zamba 2's SSD heads
            mixer.update(head_dim=8, n_groups=1)
        else:  # Zamba's multi-head Mamba: its dt rank from d_model, heads dividing d_inner
            mixer.update(dt_rank=None, heads=2)
        attention.update(mixer=mixer, d_ff=None, adapter_rank=4)
    return {**entry, "attention": attention}


def _first_needed(select: Any) -> int:
    """Layers a `select:` needs to match at least one: max index + 1, or a slice's start + 1."""
    if isinstance(select, list) and select:
        return max(select) + 1
    if isinstance(select, int):
        return select + 1
    if isinstance(select, str) and ":" in select:
        start = select.split(":")[0]
        return int(start) + 1 if start else 1
    return 1


def inputs(model: archzoo.ZooModel) -> dict[str, torch.Tensor]:
    ids = torch.randint(0, TINY["vocab_size"], (2, 5), generator=torch.Generator().manual_seed(0))
    if getattr(getattr(model.head, "cfg", None), "eos_token_id", None) is not None:
        ids[:, -1] = EOS  # a head that pools at the end-of-text token finds one in each row
    if model.family == "encoder-decoder":
        return {"input_ids": ids, "decoder_input_ids": ids}
    return {"input_ids": ids}


def train_step(spec: archzoo.Spec) -> None:
    """Build on the CPU, run forward and backward; check shapes and that gradients flow."""
    torch.manual_seed(0)
    model = archzoo.build_model(spec)
    out = model(**inputs(model))
    assert out.last_hidden_state.shape == (2, 5, TINY["d_model"])
    loss = out.last_hidden_state.float().sum()
    if out.logits is not None:
        assert out.logits.shape[:2] in ((2, 5), (2, out.logits.shape[1]))
        loss = loss + out.logits.float().sum()
    loss.backward()
    assert any(p.grad is not None for p in model.parameters())


@settings(SETTINGS, max_examples=500)
@given(mutated_specs())
def test_mutated_zoo_specs_fail_only_with_spec_error_or_build_and_train(case):
    _, data = case
    try:
        spec = archzoo.load_spec(data)
    except archzoo.SpecError as exc:
        assert exc.issues and all(i.message for i in exc.issues)
        event("refused")
        return
    assert archzoo.load_spec(spec.to_yaml()) == spec  # a valid result round-trips
    try:
        tiny = archzoo.load_spec(data, overrides=tiny_overrides(data))
    except archzoo.SpecError:
        event("valid, but not at tiny size")
        return
    if archzoo.build_model(tiny, device="meta").num_parameters() > MAX_TINY_PARAMS:
        event("valid, too big to run at tiny size")
        return
    train_step(tiny)
    event("valid, built and trained")


@pytest.mark.parametrize("name", MODELS)
def test_every_zoo_spec_is_a_valid_starting_point(name):
    """The mutations start from specs that validate and build tiny (or the test is moot)."""
    spec = archzoo.load_spec(RAW[name], overrides=tiny_overrides(RAW[name]))
    assert archzoo.build_model(spec, device="meta").num_parameters() < MAX_TINY_PARAMS


# ---------------------------------------------------------------- weights files and HF dirs

WEIGHT_ERRORS = (archzoo.WeightsError,)
IMPORT_ERRORS = (archzoo.ConversionError, archzoo.WeightsError, archzoo.SpecError)
DTYPES = ["F32", "F16", "BF16", "F64", "I64", "I32", "I8", "U8", "BOOL", "F8_E4M3", "XX", 3, None]


def _tiny_file() -> bytes:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.safetensors"
        archzoo.save(archzoo.build_model("gpt2", {**TINY, "d_ff": 32}), path)
        return path.read_bytes()


TINY_FILE = _tiny_file()


def _split(raw: bytes) -> tuple[dict, bytes]:
    import json
    import struct

    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def _join(header: dict, data: bytes) -> bytes:
    import json
    import struct

    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


@st.composite
def mutated_weight_files(draw: st.DrawFn) -> bytes:
    """A saved tiny model with one to three mutations of its header, metadata or bytes."""
    import json

    header, data = _split(TINY_FILE)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["spec", "spec", "meta", "dtype", "shape", "offsets", "drop"]))
        names = sorted(k for k in header if k != "__metadata__")
        meta = header["__metadata__"]
        if op == "spec":  # one mutation of the stored spec, as the spec property does
            try:
                spec = json.loads(meta["archzoo.spec"])
            except ValueError:  # an earlier "meta" mutation replaced it
                continue
            if not isinstance(spec, dict) or not spec:
                continue
            path = draw(st.sampled_from(paths(spec)))
            at(spec, path[:-1])[path[-1]] = draw(VALUES)
            meta["archzoo.spec"] = json.dumps(spec)
        elif op == "meta":
            key = draw(st.sampled_from(sorted(meta)))
            meta[key] = draw(st.one_of(st.text(max_size=20), st.sampled_from(["{}", "[]", "null"])))
        elif op == "dtype":
            header[draw(st.sampled_from(names))]["dtype"] = draw(st.sampled_from(DTYPES))
        elif op == "shape":
            header[draw(st.sampled_from(names))]["shape"] = draw(
                st.lists(st.integers(-1, 70), max_size=3)
            )
        elif op == "offsets":
            entry = header[draw(st.sampled_from(names))]
            entry["data_offsets"] = draw(st.lists(st.integers(-1, len(data) + 8), max_size=3))
        else:
            del header[draw(st.sampled_from(names))]
    raw = _join(header, data)
    if draw(st.booleans()):  # and sometimes the bytes themselves
        cut = draw(st.integers(0, len(raw)))
        raw = raw[:cut] + draw(st.binary(max_size=16)) + raw[cut + draw(st.integers(0, 16)) :]
    return raw


@settings(SETTINGS, max_examples=150)
@given(mutated_weight_files())
def test_mutated_weights_files_load_or_fail_only_with_weights_error(raw):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.safetensors"
        path.write_bytes(raw)
        try:
            model = archzoo.load(path)
        except WEIGHT_ERRORS as exc:
            assert str(path) in str(exc)
            event("refused")
            return
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        assert model(ids).logits.shape[:2] == (1, 3)
    event("loaded")


@st.composite
def mutated_hf_dirs(draw: st.DrawFn) -> tuple[dict, dict, bool]:
    """A tiny GPT-2 checkpoint's config and tensors with one to three mutations."""
    from hostile_util import GPT2_CONFIG, gpt2_tensors

    config, tensors = dict(GPT2_CONFIG), gpt2_tensors()
    for _ in range(draw(st.integers(1, 3))):
        op = draw(
            st.sampled_from(["config", "config", "drop-key", "dtype", "shape", "drop", "add"])
        )
        name = draw(st.sampled_from(sorted(tensors))) if tensors else None
        if op == "config":
            config[draw(st.sampled_from(sorted(config) + ["n_ctx", "tie_word_embeddings"]))] = draw(
                st.one_of(VALUES, nudged(1))
            )
        elif op == "drop-key" and len(config) > 1:
            del config[draw(st.sampled_from(sorted(k for k in config if k != "model_type")))]
        elif op == "dtype" and name:
            dtype = draw(st.sampled_from([torch.float16, torch.bfloat16, torch.int32, torch.bool]))
            tensors[name] = tensors[name].to(dtype)
        elif op == "shape" and name:
            tensors[name] = torch.zeros(draw(st.lists(st.integers(0, 50), max_size=3)))
        elif op == "drop" and name:
            del tensors[name]
        elif op == "add":
            tensors[draw(st.text(min_size=1, max_size=12))] = torch.zeros(2)
    return config, tensors, draw(st.booleans())


@settings(SETTINGS, max_examples=150)
@given(mutated_hf_dirs())
def test_mutated_hf_dirs_import_or_fail_only_with_archzoo_errors(case):
    import json
    import tempfile
    from pathlib import Path

    from archzoo.io.safe_write import write_safetensors

    config, tensors, sharded = case
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "config.json").write_text(json.dumps(config))
        if sharded and len(tensors) > 1:
            names = sorted(tensors)
            parts = {"a.safetensors": names[::2], "b.safetensors": names[1::2]}
            for fname, keys in parts.items():
                write_safetensors(root / fname, {k: tensors[k] for k in keys}, {})
            weight_map = {k: f for f, keys in parts.items() for k in keys}
            (root / "model.safetensors.index.json").write_text(
                json.dumps({"weight_map": weight_map})
            )
        else:
            write_safetensors(root / "model.safetensors", tensors, {"format": "pt"})
        try:
            model = archzoo.from_hf(root)
        except IMPORT_ERRORS as exc:
            assert str(exc)
            event("refused")
            return
    ids = torch.tensor([[1, 2, 3]]) % model.spec.data["vocab_size"]
    with torch.no_grad():
        assert model(ids).last_hidden_state.shape[:2] == (1, 3)
    event("imported")

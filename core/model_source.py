"""One way to name a model: what a user writes, resolved to a spec and (maybe) weights.

Every command and `archzoo.load` take the same names, tried in this order:

1. an existing path: a weights file (`.safetensors` written by archzoo.save), a spec file
   (`.yaml`), a run directory of `zoo train` or any directory holding an archzoo
   `model.safetensors`, or a Hugging Face directory (`config.json` + safetensors);
2. a zoo name (`gpt2`): a spec without weights, so random weights where that makes sense;
3. a Hub id `org/name[@revision]`, through huggingface_hub's cache (hub.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .errors import SpecError, WeightsError
from .hf.hub import parse_hub_id, snapshot
from .hf.importer import from_hf, read_config
from .io.weights import SPEC_KEY, load_file, read_metadata, stored_spec
from .model.placement import as_device, as_dtype
from .model.zoo_model import ZooModel
from .parts.registry import get_registry
from .specs.spec import Spec, find_model, load_spec

WEIGHTS_FILE = "model.safetensors"  # what archzoo.save names a run's or directory's weights
CHECKPOINT_FILE = "checkpoint.safetensors"  # a zoo train run still in progress
SPEC_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class ModelRef:
    """What a model name resolved to.

    kind: `spec` (a zoo name or spec file: no weights), `weights` (an archzoo .safetensors
    file), `archzoo` (a directory holding one: a `zoo train` run) or `hf` (a Hugging Face
    directory, from the Hub or not). `path` is the file or directory; `spec_source` what
    load_spec reads for a `spec`.
    """

    name: str
    kind: str
    path: Path | None = None
    spec_source: Any = None
    hub_id: str | None = None

    @property
    def has_weights(self) -> bool:
        return self.kind != "spec"

    @property
    def directory(self) -> Path | None:
        """Where the model's tokenizer files are: its directory, or the weights file's."""
        if self.path is None:
            return None
        return self.path.parent if self.kind == "weights" else self.path

    @property
    def weights_file(self) -> Path | None:
        """The archzoo weights file of a `weights` or `archzoo` model."""
        if self.kind == "weights":
            return self.path
        if self.kind == "archzoo":
            return self.path / WEIGHTS_FILE
        return None

    def spec(self, overrides: dict[str, Any] | None = None) -> Spec:
        """The model's resolved spec (with `overrides`), read without loading any weights."""
        if self.kind == "spec":
            return load_spec(self.spec_source, overrides)
        if self.kind == "hf":
            config = read_config(self.path)
            converter = get_registry().converter(config["model_type"])
            return load_spec(converter.to_spec(config), overrides)
        return stored_spec(read_metadata(self.weights_file), self.weights_file, overrides)

    def load(
        self, device: str | torch.device | None = None, dtype: torch.dtype | str | None = None
    ) -> ZooModel:
        """The model with its weights, in eval mode; a zoo name is refused (it has none)."""
        if self.kind == "spec":
            raise WeightsError(no_weights_message(self.name))
        if self.kind == "hf":
            return from_hf(self.path, device=device, dtype=dtype)
        return load_file(self.weights_file, device=device, dtype=dtype)


def no_weights_message(name: str) -> str:
    """Why a zoo name or spec file cannot be loaded, and how to get weights."""
    return (
        f"{name} is a spec without weights (random weights are for build, show and train). "
        f"Train it (zoo train {name} --data FILE --out RUN, then name RUN), or name a weights "
        "file, an HF directory or a Hub id such as openai-community/gpt2"
    )


def resolve_model(
    name: str | os.PathLike[str], revision: str | None = None, *, spec_only: bool = False
) -> ModelRef:
    """Resolve a model name (see the module docstring); `revision` picks a Hub revision,
    like `org/name@rev`. `spec_only` fetches only a Hub model's configs, not its weights."""
    text = os.fspath(name)
    path = Path(text)
    local = path.exists() or (isinstance(name, str) and find_model(text) is not None)
    if local and revision is not None:
        raise WeightsError(f"revision {revision!r} applies to Hub ids; {text} is not one")
    if path.exists():
        return _local(text, path, spec_only=spec_only)
    if isinstance(name, str) and find_model(text) is not None:
        return ModelRef(text, "spec", spec_source=text)
    hub = parse_hub_id(text) if isinstance(name, str) else None
    if hub is not None and path.parent.is_dir() and str(path.parent) not in ("", "."):
        hub = None  # runs/tiny where runs/ exists: a path, not the Hub model runs/tiny
    if hub is None:
        if path.suffix == ".safetensors":
            raise WeightsError(f"{text}: no such file")
        if path.suffix in SPEC_SUFFIXES or not ("/" in text or os.sep in text):
            load_spec(text)  # "no spec file or zoo model named ...", with a close zoo name
        raise WeightsError(f"{text}: no such file or directory")
    repo, rev = hub
    if rev is not None and revision is not None and rev != revision:
        raise WeightsError(f"{text}: two revisions given ({rev!r} and --revision {revision!r})")
    snap = snapshot(repo, rev or revision, spec_only=spec_only)
    if spec_only and not (snap / "config.json").is_file():  # an archzoo repo: the spec is
        snap = snapshot(repo, rev or revision)  # in its weights file's metadata
    ref = _local(text, snap)
    return ModelRef(ref.name, ref.kind, ref.path, ref.spec_source, hub_id=repo)


def _local(name: str, path: Path, *, spec_only: bool = False) -> ModelRef:
    """What an existing path holds (`spec_only`: a command that reads specs, to which a
    path that is neither a directory nor a regular file is a spec file it refuses)."""
    if path.suffix == ".safetensors":  # a directory or FIFO of that name: load_file refuses
        return ModelRef(name, "weights", path)
    if path.is_dir():
        weights = path / WEIGHTS_FILE
        if weights.is_file() and SPEC_KEY in _metadata(weights):
            return ModelRef(name, "archzoo", path)
        if (path / "config.json").is_file():
            return ModelRef(name, "hf", path)
        if (path / CHECKPOINT_FILE).is_file():
            raise WeightsError(
                f"{name}: a zoo train run without {WEIGHTS_FILE} yet (it is written when the "
                f"run ends; continue it with zoo train ... --out {name} --resume)"
            )
        raise WeightsError(
            f"{name}: not a model directory (no archzoo {WEIGHTS_FILE} and no HF config.json)"
        )
    if path.suffix in SPEC_SUFFIXES or path.is_file() or spec_only:  # load_spec reads or refuses it
        return ModelRef(name, "spec", path, spec_source=path)
    raise WeightsError(f"{name}: not a regular file")


def _metadata(path: Path) -> dict[str, str]:
    try:
        return read_metadata(path)
    except WeightsError:
        return {}


def load(
    name: str | os.PathLike[str],
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
    *,
    revision: str | None = None,
) -> ZooModel:
    """A model with its weights from any name: an archzoo .safetensors file, a `zoo train`
    run directory, an HF directory or a Hub id (`org/name[@revision]`); in eval mode."""
    device, dtype = as_device(device), as_dtype(dtype)  # before any work, naming them
    try:
        return resolve_model(name, revision).load(device=device, dtype=dtype)
    except SpecError as exc:  # a name that is nothing: say so as a weights error
        raise WeightsError(str(exc)) from None

"""A zoo model with its tokenizer, for evaluation: any name `archzoo.load` takes that has
weights (a `zoo train` run directory, an archzoo .safetensors file, a Hugging Face directory,
a Hub id) and a tokenizer.json in the model's directory."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..io.tokenizer_file import TokenizerFile, read_tokenizer
from ..model.placement import as_device, as_dtype
from ..model.zoo_model import ZooModel
from ..model_source import resolve_model
from ..training.tokenizer import SPECIAL_NAMES


@dataclass
class TextTokenizer:
    """Text <-> ids as lm-eval needs them, from a tokenizer.json (the `tokenizers` library,
    which transformers' fast tokenizers run), with the bos/eos/pad ids transformers would use."""

    file: TokenizerFile
    bos_id: int | None
    eos_id: int | None
    pad_id: int | None

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Ids of `text`; `add_special_tokens`: the tokenizer.json's post-processor, as transformers."""
        return list(self.file.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.file.decode(ids, skip_special_tokens=skip_special_tokens)


def open_model(
    name: str, device: str | torch.device | None = None, dtype: str | torch.dtype | None = None
) -> tuple[ZooModel, TextTokenizer]:
    """The model (eval mode, weights loaded) and its tokenizer; a clear error naming what is
    missing otherwise (a zoo name has no weights; a directory without tokenizer.json)."""
    ref = resolve_model(name)
    model = ref.load(device=as_device(device), dtype=as_dtype(dtype)).eval()
    directory = ref.directory
    file = directory / "tokenizer.json" if directory is not None else None
    if file is None or not file.is_file():
        raise ValueError(f"{name}: no tokenizer.json in {directory}; lm-eval needs one")
    return model, _tokenizer(read_tokenizer(file), directory, model)


def _tokenizer(file: TokenizerFile, directory: Path, model: ZooModel) -> TextTokenizer:
    """bos/eos/pad from tokenizer_config.json (as transformers reads them); without one, the
    usual token names, then the spec's ids."""
    config = _read_json(directory / "tokenizer_config.json")
    spec = model.spec.data

    def special(key: str) -> int | None:
        token = config.get(f"{key}_token")
        token = token.get("content") if isinstance(token, dict) else token
        if isinstance(token, str) and file.tok.token_to_id(token) is not None:
            return file.tok.token_to_id(token)
        if config:  # transformers: a tokenizer_config.json without the key has none
            return None
        found = (file.tok.token_to_id(n) for n in SPECIAL_NAMES[key])
        found_id = next((i for i in found if i is not None), None)
        if found_id is not None:
            return found_id
        ids = spec.get(f"{key}_token_id")
        return (ids[0] if ids else None) if isinstance(ids, list) else ids

    return TextTokenizer(file, special("bos"), special("eos"), special("pad"))


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not readable JSON ({exc})") from None
    return data if isinstance(data, dict) else {}

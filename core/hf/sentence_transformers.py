"""A sentence-transformers directory (modules.json, 1_Pooling/config.json) as head settings.

The Transformer module is the HF checkpoint in the same directory; Pooling becomes a
`sentence_embedding` head's `pooling`, a Normalize module its `normalize`. Other modules
are refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..io.checkpoint_files import read_json
from ..parts.converter import ConversionError

MODULE = "sentence_transformers.models."
# 1_Pooling/config.json mode keys -> the head's pooling
MODES = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_lasttoken": "last",
}


def sentence_embedding_head(directory: Path) -> dict[str, Any] | None:
    """The head settings a sentence-transformers directory asks for (None: not one)."""
    path = directory / "modules.json"
    if not path.exists():
        return None
    modules = read_json(path, "modules.json")
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise ConversionError(f"{path}: expected a list of modules, each a mapping")
    head: dict[str, Any] = {"kind": "sentence_embedding", "pooling": "mean", "normalize": False}
    for m in modules:
        kind = str(m.get("type", "")).removeprefix(MODULE)
        if kind == "Transformer":
            continue
        if kind == "Pooling":
            head["pooling"] = _pooling(directory, str(m.get("path", "")))
        elif kind == "Normalize":
            head["normalize"] = True
        else:
            raise ConversionError(
                f"{path}: module {m.get('type')!r} is not supported "
                "(supported: Transformer, Pooling, Normalize)"
            )
    return head


def _pooling(directory: Path, sub: str) -> str:
    """The one pooling mode that 1_Pooling/config.json turns on."""
    if Path(sub).is_absolute() or ".." in Path(sub).parts or "\\" in sub or "\0" in sub:
        raise ConversionError(  # the name is checked, as for shards in an index
            f"{directory / 'modules.json'}: Pooling module path {sub!r} is outside the "
            f"checkpoint directory {directory}"
        )
    path = directory / sub / "config.json"
    if not sub or not path.exists():
        raise ConversionError(f"{directory / 'modules.json'}: Pooling module has no config {sub!r}")
    config = read_json(path, f"{sub}/config.json")
    if not isinstance(config, dict):
        raise ConversionError(f"{path}: expected a JSON object")
    on = [k for k, v in config.items() if k.startswith("pooling_mode") and v is True]
    if len(on) != 1 or on[0] not in MODES:
        raise ConversionError(
            f"{path}: pooling modes {on or 'none'} are not supported; exactly one of "
            f"{', '.join(MODES)} must be true"
        )
    return MODES[on[0]]

"""Hugging Face Hub ids (`org/name[@revision]`) to a local snapshot, through huggingface_hub.

`snapshot_download` does the work, so its cache (`HF_HOME`, `HF_HUB_CACHE`), offline mode
(`HF_HUB_OFFLINE=1`) and revisions behave as in every other Hugging Face tool. Only the
files a model needs are fetched: configs, safetensors and tokenizer files, never pickles.
huggingface_hub is optional (the `hf` extra), so it is imported only when an id is resolved.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import WeightsError

# org/name, each part as the Hub allows (letters, digits, '-', '_', '.'), then @revision
HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<rev>[\w./-]+))?$")

MODEL_FILES = [
    "*.json",  # config.json, safetensors index, tokenizer and generation configs
    "*.safetensors",
    "*.txt",  # merges.txt, vocab.txt
    "*.model",  # sentencepiece
    "*.jinja",  # chat templates
    "1_Pooling/*",  # sentence-transformers pooling
]
SPEC_FILES = ["*.json"]  # enough to know the architecture


def parse_hub_id(name: str) -> tuple[str, str | None] | None:
    """('org/name', revision or None) when `name` reads as a Hub id, else None."""
    m = HUB_ID.match(name)
    if m is None or m.group("repo").endswith((".safetensors", ".yaml", ".yml", ".json")):
        return None
    return m.group("repo"), m.group("rev")


def offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub reads it, looked up now (not at its import)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "on", "yes", "true")


def snapshot(repo: str, revision: str | None = None, *, spec_only: bool = False) -> Path:
    """The local directory of a Hub model at `revision` (default: main), downloaded when it
    is not in the cache and the Hub may be reached; a one-line WeightsError otherwise."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import (
            GatedRepoError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError:
        raise WeightsError(
            f"{repo}: a Hugging Face Hub id needs huggingface_hub: pip install 'archzoo[hf]'"
        ) from None
    at = f"{repo}@{revision}" if revision else repo
    local = offline()
    try:
        path = snapshot_download(
            repo,
            revision=revision,
            allow_patterns=SPEC_FILES if spec_only else MODEL_FILES,
            local_files_only=local,
        )
    except LocalEntryNotFoundError:
        why = "HF_HUB_OFFLINE is set" if local else "the Hub could not be reached"
        raise WeightsError(
            f"{at}: not in the Hugging Face cache and {why} (no file or directory of that name "
            "here either)"
        ) from None
    except RevisionNotFoundError:
        raise WeightsError(f"{at}: the Hub model has no revision {revision!r}") from None
    except GatedRepoError:
        raise WeightsError(f"{at}: a gated model; accept its terms and `hf auth login`") from None
    except RepositoryNotFoundError:
        raise WeightsError(
            f"{at}: no such model on the Hugging Face Hub (a private one needs `hf auth login`)"
        ) from None
    except (OSError, ValueError) as exc:  # network errors, a malformed id, a broken cache
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise WeightsError(f"{at}: cannot get it from the Hugging Face Hub: {first}") from None
    return Path(path)

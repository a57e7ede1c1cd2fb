"""HF types with a supported type's layout: one `Alias` entry each, read and written by the
converter table of the type named (checked against transformers' modeling code)."""

from __future__ import annotations

from archzoo.hf_alias import Alias

from .bert import RobertaConverter

ALIASES = (Alias("camembert", RobertaConverter, "Camembert", note="RoBERTa's classes"),)

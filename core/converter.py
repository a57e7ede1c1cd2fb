"""The contract of a Hugging Face converter: config.json -> spec, HF tensors -> archzoo names."""

from __future__ import annotations

from typing import Any, ClassVar

from torch import Tensor


class ConversionError(ValueError):
    """A checkpoint that cannot be imported: unsupported config, missing or extra tensors."""


class TensorSource:
    """HF tensors by name; remembers what was taken so leftovers can be reported."""

    def __init__(self, tensors: dict[str, Tensor], where: str) -> None:
        self.tensors = tensors
        self.where = where
        self.taken: set[str] = set()
        self.missing: list[str] = []

    def has(self, name: str) -> bool:
        return name in self.tensors

    def take(self, *names: str) -> Tensor | None:
        """The first present of `names` (aliases, e.g. a tied head saved or not)."""
        for name in names:
            if name in self.tensors:
                self.taken.add(name)
                return self.tensors[name]
        self.missing.append(names[0])
        return None

    def skip(self, prefix_or_name: str) -> None:
        """Mark tensors as known and deliberately unused (e.g. buffers saved by old versions)."""
        for name in self.tensors:
            if name == prefix_or_name or name.endswith(prefix_or_name):
                self.taken.add(name)

    def check_complete(self) -> None:
        problems = []
        if self.missing:
            problems.append(f"missing tensors: {', '.join(self.missing[:10])}")
        extra = sorted(set(self.tensors) - self.taken)
        if extra:
            problems.append(f"unexpected tensors: {', '.join(extra[:10])}")
        if problems:
            raise ConversionError(f"{self.where}: " + " | ".join(problems))


class Converter:
    """Subclass per HF `model_type`; register with `registrar.add_converter(Converter())`."""

    model_type: ClassVar[str] = ""

    def to_spec(self, config: dict[str, Any]) -> dict[str, Any]:
        """The archzoo spec (as a dict) equivalent to an HF config.json."""
        raise NotImplementedError

    def convert(self, src: TensorSource, config: dict[str, Any]) -> dict[str, Tensor]:
        """archzoo state-dict entries from HF tensors (tied copies may be left out)."""
        raise NotImplementedError


def get(config: dict[str, Any], key: str, default: Any = ...) -> Any:
    """config[key] with a ConversionError naming the key when it is required and absent."""
    if key in config and config[key] is not None:
        return config[key]
    if default is ...:
        raise ConversionError(f"config.json has no {key!r}")
    return default

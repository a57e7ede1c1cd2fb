"""The contract of a Hugging Face converter: config.json <-> spec, HF tensors <-> archzoo names.

A converter is a two-way table: `fields` map HF config keys to spec keys (with `Values` for
renamed values), `fixed` holds the spec parts every checkpoint of the type shares,
`requires` the HF settings it can reproduce, and `tensors` (archzoo.parts.hf_tensors.TensorTable)
maps tensor names with their transforms. Import and export both read the same table.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as _replace
from typing import TYPE_CHECKING, Any, ClassVar

import yaml
from torch import Tensor

from .table_inverse import UNWRITABLE, contains, label_config, read_path
from .table_inverse import get_path as get_path  # its old home
from .tensor_source import ConversionError, TensorSource

if TYPE_CHECKING:
    from .hf_tensors import Rule, TensorTable, ZooNames


REQUIRED: Any = object()  # a Field default: the key must be in config.json


def get(config: dict[str, Any], key: str, default: Any = REQUIRED) -> Any:
    """config[key] (`a|b`: the first present) or `default`; a ConversionError names a required key."""
    for k in key.split("|"):
        if config.get(k) is not None:
            return config[k]
    if default is REQUIRED or default is ...:
        raise ConversionError(f"config.json has no {key.split('|')[0]!r}")
    return default(config) if callable(default) else default


@dataclass(frozen=True)
class Values:
    """A two-way map of config values, HF -> spec; export writes the first HF value of each."""

    table: Mapping[Any, Any]

    def read(self, value: Any, key: str) -> Any:
        if not isinstance(value, Hashable) or value not in self.table:  # a list, say
            raise ConversionError(
                f"config.json {key}={value!r} is not supported; "
                f"supported: {', '.join(map(str, self.table))}"
            )
        return copy.deepcopy(self.table[value])

    def write(self, value: Any) -> Any:
        """The first HF value meaning `value` (a mapping: whose table entry it contains);
        UNWRITABLE when none does."""
        for hf, ours in self.table.items():
            if isinstance(ours, str) and isinstance(value, Mapping):
                ours = {"kind": ours}  # a bare component name: that component, any defaults
            if ours == value or contains(value, ours):
                return hf
        return UNWRITABLE


@dataclass(frozen=True)
class Field:
    """HF config key (`a|b`: aliases) <-> spec key path(s) (dotted; export reads the first)."""

    hf: str
    spec: str | tuple[str, ...]
    default: Any = REQUIRED  # a value, or a function of the config
    values: Values | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.spec,) if isinstance(self.spec, str) else self.spec


def parse_fields(text: str, **values: Values) -> tuple[Field, ...]:
    """Fields from a text table, one per line: `HF-KEY  SPEC-PATH[,PATH]  [DEFAULT [VALUES]]`.

    DEFAULT is a Python literal or a bare word (a string); `-` or none: the key is required.
    VALUES names one of `values`. `#` starts a comment.
    """
    fields = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#")[0].strip()
        if not line:
            continue
        hf, spec, *rest = line.split()
        default = REQUIRED if not rest or rest[0] == "-" else _literal(rest[0])
        if len(rest) > 1 and rest[1] not in values:
            raise ValueError(f"config table line {number} {line!r}: no values map {rest[1]!r}")
        mapping = values[rest[1]] if len(rest) > 1 else None
        fields.append(Field(hf, tuple(spec.split(",")), default, mapping))
    return tuple(fields)


def _literal(word: str) -> Any:
    try:
        return ast.literal_eval(word)
    except (ValueError, SyntaxError):
        return word


def spec_parts(*lines: str) -> dict[str, Any]:
    """Spec parts as YAML flow mappings without braces, one concern a line:
    `spec_parts("block: pre_ln, norm: layernorm", "attention: {kind: mha, bias: true}")`."""
    parts: dict[str, Any] = {}
    for line in lines:
        parsed = yaml.safe_load("{" + line + "}")
        if not isinstance(parsed, dict):
            raise ValueError(f"spec parts {line!r} are not a YAML mapping")
        parts.update(parsed)
    return parts


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """data['a']['b'] = value for path 'a.b' (a bare component name becomes {'kind': name})."""
    *parents, last = path.split(".")
    for key in parents:
        node = data.get(key)
        data[key] = node = {"kind": node} if isinstance(node, str) else dict(node or {})
        data = node
    data[last] = value


def name_of(config: dict[str, Any]) -> str:
    """The spec name: the checkpoint's directory name, or `<model_type>-import`."""
    path = str(config.get("_name_or_path") or "").rstrip("/").split("/")[-1]
    path = "".join(c for c in path if c.isprintable())  # config text: no control sequences
    return path or f"{config['model_type']}-import"


SPECIAL_TOKENS = ("bos_token_id", "eos_token_id", "decoder_start_token_id", "forced_eos_token_id")


def spec_header(config: dict[str, Any]) -> dict[str, Any]:
    """Name and the special token ids generation defaults to, shared by every type
    (ids past the vocabulary dropped: config defaults such as GPT-2's 50256 outlive a
    resized vocabulary, and no token can have them)."""
    vocab = config.get("vocab_size")

    def outside(t: Any) -> bool:
        return isinstance(vocab, int) and type(t) is int and t >= vocab

    out: dict[str, Any] = {"name": name_of(config)}
    for k in SPECIAL_TOKENS:
        value = config.get(k)
        if isinstance(value, list):
            value = [t for t in value if not outside(t)] or None
        if value is not None and not outside(value):
            out[k] = value
    return out


@dataclass(frozen=True)
class Task:
    """One HF architecture of a type (`...ForSequenceClassification`, `...Model`): the spec
    head it means, the tensors of that head, and what else it changes."""

    head: Mapping[str, Any]
    rules: tuple[Rule, ...] = ()  # the head's tensors (base=True rules sit under the prefix)
    fields: tuple[Field, ...] = ()  # config keys of this head only (head.tie, ...)
    family: str | None = None  # when the architecture changes it (T5EncoderModel: encoder)
    pooler: str | None = None  # an HF tensor whose presence turns the head's `pooler` on
    labels: bool = False  # num_labels, id2label (and problem_type) from config.json
    ignore: tuple[str, ...] = ()  # HF tensors this architecture has and does not use
    fixed: Mapping[str, Any] = field(default_factory=dict)  # spec path -> value it sets


def _labels(config: dict[str, Any], kind: str) -> dict[str, Any]:
    """num_labels, names (HF id2label) and, for sequences, problem_type of a task head."""
    id2label = config.get("id2label") or {}
    n = len(id2label) or get(config, "num_labels", 2)
    out: dict[str, Any] = {"num_labels": n}
    names = [str(id2label.get(str(i), id2label.get(i, i))) for i in range(n)] if id2label else []
    if names and names != [f"LABEL_{i}" for i in range(n)]:  # HF's placeholder names: none
        out["labels"] = names
    if kind == "classifier":
        out["problem_type"] = config.get("problem_type") or "auto"
    return out


class Converter:
    """Subclass per HF `model_type`; register with `registrar.add_converter(Converter())`.

    A table converter sets `family`, `fixed`, `fields`, `requires` and `tensors`; `adjust`
    says what a table cannot (a computed layer list). A legacy converter overrides
    `to_spec` and `convert` instead.
    """

    model_type: ClassVar[str] = ""
    family: ClassVar[str] = ""
    fixed: ClassVar[Mapping[str, Any]] = {}
    fields: ClassVar[tuple[Field, ...]] = ()
    requires: ClassVar[Mapping[str, Any]] = {}
    tensors: ClassVar[TensorTable | None] = None
    hf_prefix: ClassVar[str] = ""  # HF class names: hf_prefix + task key ("Bert" + "Model")
    tasks: ClassVar[Mapping[str, Task]] = {}  # architecture suffix -> task ("Model": headless)
    # without `architectures` and without head tensors (default: the first task but `Model`)
    default_task: ClassVar[str] = ""
    refused: ClassVar[Mapping[str, str]] = {}  # HF architecture suffix -> why it is not imported
    alias_of: ClassVar[str] = (
        ""  # an alias (archzoo.parts.hf_alias): the model_type whose table it is
    )
    # the attention kernel that gives transformers' numbers (archzoo.parts.kernels), None: auto
    attention_impl: ClassVar[str | None] = None
    # a type with its own tensor names for another type's architecture (EXAONE 3: llama):
    # a spec exports as it only when imported from it, as an alias does
    layout_of: ClassVar[str] = ""

    def __init_subclass__(cls, **declared: str) -> None:
        """Declare the type in the class line: `class X(Converter, model_type="x",
        hf_prefix="X", family="decoder"):` (the same as setting the attributes)."""
        super().__init_subclass__()
        for key, value in declared.items():
            if key not in ("model_type", "hf_prefix", "family", "default_task"):
                raise TypeError(
                    f"{cls.__qualname__}: unknown class-line key {key!r}; expected "
                    "model_type, hf_prefix, family or default_task"
                )
            setattr(cls, key, value)
        if "tasks" in vars(cls) and "default_task" not in vars(cls) and cls.tasks:
            # the type's own head: the first task but the headless `Model`
            cls.default_task = next((k for k in cls.tasks if k != "Model"), next(iter(cls.tasks)))

    def attention_kernel(self, config: dict[str, Any]) -> str | None:
        """The kernel `from_hf` runs by default: transformers' own order where it attends
        eagerly (`attention_impl`), else None (auto)."""
        return self.attention_impl

    def task_of(self, config: dict[str, Any], tensor_names: Sequence[str] = ()) -> str:
        """The task key: from `architectures`, else from the tensors present."""
        archs = config.get("architectures") or []
        if not self.tasks:  # one head only: the table's own rules
            return self.default_task
        if archs:
            arch = str(archs[0])
            for key in self.tasks:
                if arch == self.hf_prefix + key:
                    return key
            why = next((w for k, w in self.refused.items() if arch == self.hf_prefix + k), None)
            if not self.hf_prefix or not arch.startswith(self.hf_prefix):  # a subclass's type
                ends = [key for key in self.tasks if arch.endswith(key)]
                if ends:
                    return max(ends, key=len)
            raise ConversionError(
                f"config.json architectures={archs!r}: not supported for model_type "
                f"{self.model_type!r}{'' if why is None else f' ({why})'}; supported: "
                + ", ".join(self.hf_prefix + key for key in self.tasks)
            )
        names = set(tensor_names)
        if not names or self.tensors is None:
            return self.default_task
        for key, task in self.tasks.items():  # the first whose own head tensor is there
            probes = [a for r in task.rules if not r.base for a in r.hf[0].split("|")]
            if probes and probes[0] in names:
                return key
        base = any(p and n.startswith(p) for p in self.tensors.prefixes for n in names)
        return self.default_task if base or "Model" not in self.tasks else "Model"

    def base_table(self, spec: Mapping[str, Any] | None = None) -> TensorTable:
        """The base tensor table for a model of `spec` (a type whose tensor names depend on
        the architecture picks them here); `tensors` by default."""
        assert self.tensors is not None
        return self.tensors

    def task_table(self, task: str, spec: Mapping[str, Any] | None = None) -> TensorTable:
        """The tensor table of one task: the base rules (for `spec`) plus its head's."""
        base = self.base_table(spec)
        if task not in self.tasks:
            return base
        own = self.tasks[task]
        return _replace(base, rules=base.rules + own.rules, ignore=base.ignore + own.ignore)

    def export_prefix(self, task: str | None = None) -> str:
        """The prefix an export writes under: none for the headless `Model`, else the first
        base prefix."""
        assert self.tensors is not None
        return "" if (task or self.default_task) == "Model" else self.tensors.prefixes[0]

    def to_spec(self, config: dict[str, Any], tensor_names: Sequence[str] = ()) -> dict[str, Any]:
        """The archzoo spec (as a dict) equivalent to an HF config.json (and its tensors)."""
        if not self.family:
            raise NotImplementedError(f"{type(self).__name__} has no table and no to_spec()")
        for key, allowed in self.requires.items():
            value = config.get(key, allowed)
            if value != allowed:
                raise ConversionError(
                    f"config.json {key}={value!r} is not supported (only {allowed!r})"
                )
        spec = {**spec_header(config), "family": self.family, **copy.deepcopy(dict(self.fixed))}
        task = self.tasks.get(self.task_of(config, tensor_names)) if self.tasks else None
        if task is not None:
            spec["head"] = copy.deepcopy(dict(task.head))
            spec["family"] = task.family or self.family
            if task.pooler is not None:
                spec["head"]["pooler"] = not tensor_names or any(
                    n.endswith(task.pooler) for n in tensor_names
                )
            if task.labels:
                spec["head"].update(_labels(config, spec["head"]["kind"]))
            for path, value in task.fixed.items():
                set_path(spec, path, copy.deepcopy(value))
        for f in (*(task.fields if task else ()), *self.fields):  # the type's own win
            value = get(config, f.hf, f.default)
            if f.values is not None:
                value = f.values.read(value, f.hf.split("|")[0])
            for path in f.paths:
                set_path(spec, path, value)
        if spec["family"] != "encoder-decoder":  # per-stack sizes: the decoder's, if kept
            sizes = spec.pop("decoder", None) or {}
            if self._decoder_only(task):
                spec.update(sizes)
        self.adjust(spec, config)
        return spec

    def _decoder_only(self, task: Task | None) -> bool:
        """Whether `task` keeps only the decoder of an encoder-decoder type (...ForCausalLM)."""
        return task is not None and task.family == "decoder" and self.family == "encoder-decoder"

    def adjust(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Spec parts the table cannot state (computed from several keys); none by default."""

    def adjust_config(self, config: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The inverse of `adjust`: config keys for the spec parts `adjust` computes; none by
        default. Write what the spec allows; export compares `to_spec` of the result with
        the spec, so a part this type cannot express needs no error here."""

    def export_tasks(self, spec: Mapping[str, Any]) -> list[str]:
        """The task keys whose head (and family) a spec's head could be: those to try."""
        if not self.tasks:
            return [self.default_task]
        head, family = spec.get("head") or {}, spec.get("family")
        return [
            key
            for key, task in self.tasks.items()
            if contains(head, task.head) and (task.family or self.family) == family
        ]

    def hf_config(self, spec: Mapping[str, Any], task: str | None = None) -> dict[str, Any]:
        """config.json keys for a resolved spec, the table read backwards (export's start).

        A field whose spec value the table cannot spell is left out (the type's default
        then comes back on import, and export's round trip names the part)."""
        config: dict[str, Any] = {"model_type": self.model_type, **self.requires}
        config.update({k: spec.get(k) for k in (*SPECIAL_TOKENS, "pad_token_id")})
        chosen = self.tasks.get(task or self.default_task) if self.tasks else None
        if self._decoder_only(chosen):  # the decoder's sizes are the spec's own
            spec = {**spec, "decoder": spec}
        for f in (*(chosen.fields if chosen else ()), *self.fields):  # the type's own win
            try:
                value = read_path(spec, f.paths[0])
            except KeyError:
                continue
            value = value if f.values is None else f.values.write(value)
            if value is not UNWRITABLE:
                config[f.hf.split("|")[0]] = value
        if chosen is not None and chosen.labels:
            config.update(label_config(spec.get("head") or {}))
        self.adjust_config(config, spec)
        return config

    def import_state(
        self, src: TensorSource, config: dict[str, Any], names: ZooNames, ctx: dict[str, Any]
    ) -> dict[str, Tensor]:
        """archzoo tensors for a model with `names`, read from `src` through the table."""
        if self.tensors is None:
            return self.convert(src, config)
        return self.task_table(self.task_of(config, src.names()), ctx).to_zoo(src, names, ctx)

    def export_state(
        self,
        state: Mapping[str, Tensor],
        names: ZooNames,
        ctx: dict[str, Any],
        prefix: str | None = None,
        task: str | None = None,
    ) -> dict[str, Tensor]:
        """HF tensors from archzoo ones through the same table (default: the default task,
        under the first base prefix; a headless `Model` has none)."""
        if self.tensors is None:
            raise NotImplementedError(f"{type(self).__name__} has no tensor table to export")
        task = task or self.default_task
        prefix = self.export_prefix(task) if prefix is None else prefix
        return self.task_table(task, ctx).to_hf(state, names, ctx, prefix)

    def convert(self, src: TensorSource, config: dict[str, Any]) -> dict[str, Tensor]:
        """Legacy entry (no table): archzoo state-dict entries from HF tensors."""
        raise NotImplementedError(f"{type(self).__name__} imports through its tensor table")

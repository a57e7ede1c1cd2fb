"""What stays from before 0.1's kernel redesign, and the release that removes it: 0.3.0.

The attention kernel used to be written into specs (`attention.eager`, `attention.fused_bias`,
a sparse attention's `impl`). It is now the model's run-time choice (`attention_impl=`,
`set_attention_impl`, `--attn-impl`); these keys still load, with a DeprecationWarning, as
that choice.

Four attention options were named after the model that needed them (`bias_apart`,
`scale_query`, `kv_broadcast`, `clip_qkv`); they are now typed options that say what they do
(`bias_add`, `scale_at`, `kv_heads_reach_kernel`, `qkv_clamp`). The old names still load,
with a DeprecationWarning, as the new option.
"""

from __future__ import annotations

import warnings
from typing import Any

REMOVED_IN = "0.3.0"


# spec keys that chose a kernel before kernels were chosen at run time: key -> its meaning
DEPRECATED_KEYS = ("eager", "fused_bias", "impl")
_IMPL_NAMES = {"auto": "auto", "blocked": "blocked", "dense": "sdpa", "flex": "flex"}


def deprecated_choice(value: dict[str, Any], where: str) -> tuple[str | None, list[tuple]]:
    """The kernel that an attention mapping's old keys (`eager`, `fused_bias`, `impl`) chose,
    with a DeprecationWarning, and (key, problem) pairs for values that mean nothing."""
    old = {key: value[key] for key in DEPRECATED_KEYS if key in value}
    if not old:
        return None, []
    warnings.warn(
        f"{where}: {', '.join(old)} chose the attention kernel in the spec; the kernel is "
        f"now a run-time choice (attention_impl=, --attn-impl) and archzoo {REMOVED_IN} "
        "removes these keys",
        DeprecationWarning,
        stacklevel=4,
    )
    issues = []
    choice = None
    if old.get("impl") is not None:
        choice = _IMPL_NAMES.get(old["impl"])
        if choice is None:
            issues.append(("impl", f"must be one of {', '.join(_IMPL_NAMES)}, got {old['impl']!r}"))
    if old.get("eager") is True:
        choice = "baddbmm" if old.get("fused_bias") is True else "eager"
    elif old.get("fused_bias") is True:
        issues.append(("fused_bias", "is eager attention's baddbmm: set eager: true too"))
    return choice, issues


# options renamed to say what they do: old key -> (new key, old value -> new value)
RENAMED_KEYS: dict[str, tuple[str, Any]] = {
    "bias_apart": ("bias_add", lambda v: "after_matmul" if v is True else "fused"),
    "scale_query": ("scale_at", lambda v: "query" if v is True else "scores"),
    "kv_broadcast": ("kv_heads_reach_kernel", lambda v: "broadcast" if v is True else "grouped"),
    "clip_qkv": ("qkv_clamp", lambda v: v),
}


def renamed_options(
    value: dict[str, Any], fields: Any, where: str
) -> tuple[dict[str, Any], list[tuple]]:
    """The mapping with old option names (`bias_apart`, `scale_query`, `kv_broadcast`,
    `clip_qkv`) read as the new typed options the component has, with a DeprecationWarning;
    an old key wins over its new key (it is the one an override names). (key, problem)
    pairs for old values that are not booleans."""
    old = [
        k for k in RENAMED_KEYS if k in value and k not in fields and RENAMED_KEYS[k][0] in fields
    ]
    if not old:
        return value, []
    news = ", ".join(f"{k} -> {RENAMED_KEYS[k][0]}" for k in old)
    warnings.warn(
        f"{where}: renamed options ({news}); archzoo {REMOVED_IN} removes the old names",
        DeprecationWarning,
        stacklevel=4,
    )
    out = {k: v for k, v in value.items() if k not in old}
    issues = []
    for key in old:
        new, convert = RENAMED_KEYS[key]
        given = value[key]
        if key != "clip_qkv" and not isinstance(given, bool):
            issues.append((key, f"must be true or false, got {given!r}"))
            continue
        out[new] = convert(given)
    return out, issues

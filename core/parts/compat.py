"""What stays from before 0.1's kernel redesign, and the release that removes it: 0.3.0.

The attention kernel used to be written into specs (`attention.eager`, `attention.fused_bias`,
a sparse attention's `impl`). It is now the model's run-time choice (`attention_impl=`,
`set_attention_impl`, `--attn-impl`); these keys still load, with a DeprecationWarning, as
that choice.
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

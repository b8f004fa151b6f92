"""The checks of the modifications' options: one per kind of option, shared by the attention
layers (`convatt.layers.core.modifications`' table) and the standalone sublayers, each a ValueError
that names the option and what it takes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def is_int(value) -> bool:
    """An int (a NumPy integer too), not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_flag(name: str, value) -> bool:
    """A switch: True or False (a NumPy bool too), nothing else."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} takes True or False; received {value!r}.")
    return bool(value)


def check_optional_count(name: str, value) -> int | None:
    """None or an int >= 0 (a clipping distance); not a bool, not a float."""
    if value is None:
        return None
    if not is_int(value) or value < 0:
        raise ValueError(f"{name} takes None or an int >= 0 (the clipping distance k); received {value!r}.")
    return int(value)


def one_of(*allowed) -> Callable[[str, Any], Any]:
    """The check of an option that takes one of `allowed` (of the same type: True is not 1)."""

    def check(name: str, value):
        if not any(value == option and type(value) is type(option) for option in allowed):
            raise ValueError(f"{name} takes one of {', '.join(map(repr, allowed))}; received {value!r}.")
        return value

    return check


def check_kernel_size(name: str, value, pair_allowed: bool = True) -> int | tuple[int, int]:
    """An int >= 1, or (where `pair_allowed`) a pair `(query_taps, key_taps)` of them."""
    pair = isinstance(value, (list, tuple))
    taps = tuple(value) if pair else (value,)
    if (pair and not pair_allowed) or len(taps) != (2 if pair else 1) or not all(is_int(t) and t >= 1 for t in taps):
        pairs = ', or for attention_conv="2d" a pair (query_taps, key_taps) of them' if pair_allowed else ""
        raise ValueError(f"{name} takes an int >= 1{pairs}; received {value!r}.")
    return (int(taps[0]), int(taps[1])) if pair else int(value)


def check_max_len(max_len) -> int | None:
    """`max_len` as an int, or None; a ValueError naming it for anything else."""
    if max_len is None:
        return None
    if not is_int(max_len) or max_len < 1:
        raise ValueError(f"max_len takes None or an int >= 1 (the longest query / key); received {max_len!r}.")
    return int(max_len)

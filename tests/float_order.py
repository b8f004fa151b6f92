"""Comparing the outputs of two programs (see docs/contributing.md, "Floats in tests")."""

import numpy as np
import pytest

CLEAR_MARGIN = 1e-3  # far above what float order moves a logit by (1e-5 here), far below a real difference


def assert_clear_choices(logits: np.ndarray, margin: float = CLEAR_MARGIN) -> None:
    """Each row's largest logit leads its second by more than `margin`: an argmax that another
    program's float order (cached against whole-prefix decoding, other kernels or threads) cannot
    change, so the ids two programs choose from such logits may be compared exactly."""
    top_two = np.sort(np.asarray(logits).reshape(-1, np.shape(logits)[-1]), axis=-1)[:, -2:]
    gaps = top_two[:, 1] - top_two[:, 0]
    assert (gaps > margin).all(), f"a near tie ({gaps.min():.2g} <= {margin}): choose another seed or prompt"


def close_to(value, rel: float = 1e-4, abs_: float = 1e-6):
    """`value` with every float inside it (dicts, lists) a pytest.approx of itself."""
    if isinstance(value, float):
        return pytest.approx(value, rel=rel, abs=abs_, nan_ok=True)
    if isinstance(value, dict):
        return {k: close_to(v, rel, abs_) for k, v in value.items()}
    if isinstance(value, list):
        return [close_to(v, rel, abs_) for v in value]
    return value

"""Comparing the outputs of two programs (see docs/contributing.md, "Floats in tests")."""

import numpy as np

CLEAR_MARGIN = 1e-3  # far above what float order moves a logit by (1e-5 here), far below a real difference


def assert_clear_choices(logits: np.ndarray, margin: float = CLEAR_MARGIN) -> None:
    """Each row's largest logit leads its second by more than `margin`: an argmax that another
    program's float order (cached against whole-prefix decoding, other kernels or threads) cannot
    change, so the ids two programs choose from such logits may be compared exactly."""
    top_two = np.sort(np.asarray(logits).reshape(-1, np.shape(logits)[-1]), axis=-1)[:, -2:]
    gaps = top_two[:, 1] - top_two[:, 0]
    assert (gaps > margin).all(), f"a near tie ({gaps.min():.2g} <= {margin}): choose another seed or prompt"

import numpy as np
import pytest

from convatt.protocol.metrics import accuracy_report, token_accuracy

# Two sentences, PAD = 0. Hand count: 7 real tokens, 5 right.
GOLD = np.array([[2, 3, 4, 0], [3, 3, 2, 5]])
PRED = np.array([[2, 4, 4, 1], [3, 2, 2, 5]])
OOV = np.array([[0, 1, 0, 1], [0, 0, 1, 0]], bool)  # real OOV tokens: (0,1) wrong, (1,2) right
AMB = np.array([[1, 0, 1, 0], [1, 1, 0, 0]], bool)  # (0,0) right, (0,2) right, (1,0) right, (1,1) wrong


def test_accuracy_groups_by_hand():
    r = accuracy_report(PRED, GOLD, OOV, AMB, ["<PAD>", "<OOV>", "NN", "VB", "JJ", "DT"])
    assert r["n_all"] == 7 and r["all"] == pytest.approx(5 / 7)
    assert r["n_oov"] == 2 and r["oov"] == pytest.approx(1 / 2)  # the PAD at (0,3) is ignored
    assert r["n_ambiguous"] == 4 and r["ambiguous"] == pytest.approx(3 / 4)
    assert r["per_tag"] == {"NN": 1.0, "VB": pytest.approx(1 / 3), "JJ": 1.0, "DT": 1.0}
    assert token_accuracy(PRED, GOLD) == pytest.approx(5 / 7)


def test_empty_group_is_none_not_zero():
    r = accuracy_report(PRED, GOLD, np.zeros_like(OOV), AMB)
    assert r["oov"] is None and r["n_oov"] == 0 and "per_tag" not in r


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="shape"):
        accuracy_report(PRED[:1], GOLD, OOV, AMB)


def test_batch_mean_accuracy_is_the_originals_val_true_acc():
    from convatt.protocol.metrics import batch_mean_accuracy

    # batches of one sentence: (2/3 + 3/4) / 2, not 5/7
    assert batch_mean_accuracy(PRED, GOLD, batch_size=1) == pytest.approx((2 / 3 + 3 / 4) / 2)
    assert batch_mean_accuracy(PRED, GOLD, batch_size=2) == pytest.approx(5 / 7)
    gold3, pred3 = np.vstack([GOLD, [[2, 0, 0, 0]]]), np.vstack([PRED, [[3, 0, 0, 0]]])
    # batches of 2 then 1, weighted by their sentences: (5/7 * 2 + 0 * 1) / 3
    assert batch_mean_accuracy(pred3, gold3, batch_size=2) == pytest.approx(5 / 7 * 2 / 3)

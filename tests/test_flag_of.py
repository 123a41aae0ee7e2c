"""brrrtui.contract.model.flag_of: per-row flags of string ids, by comparison (a few flagged names) or by one gather."""

import numpy as np
import pytest

from brrrtui.contract.model import NONE, flag_of


def reference(flags: np.ndarray, ids: np.ndarray) -> np.ndarray:
    return np.array([bool(flags[i]) if i >= 0 else False for i in ids.tolist()], dtype=bool)


@pytest.mark.parametrize("flagged", [0, 1, 4, 5, 40])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_flags_per_row_match_the_flag_of_each_rows_name(flagged, dtype):
    rng = np.random.default_rng(flagged)
    flags = np.zeros(60, dtype=bool)
    flags[rng.choice(60, flagged, replace=False)] = True
    ids = rng.integers(NONE, 60, 5000).astype(dtype)  # NONE rows have no name: never flagged
    out = flag_of(flags, ids)
    assert out.dtype == bool and out.shape == ids.shape
    np.testing.assert_array_equal(out, reference(flags, ids))


def test_ids_below_none_and_empty_columns():
    flags = np.arange(10) % 2 == 0  # 5 flagged: the gather path
    ids = np.array([-3, 0, 1, 2, NONE], dtype=np.int32)
    np.testing.assert_array_equal(flag_of(flags, ids), [False, True, False, True, False])
    assert flag_of(flags, np.zeros(0, dtype=np.int32)).shape == (0,)
    assert flag_of(np.zeros(3, bool), np.zeros(0, dtype=np.int32)).shape == (0,)

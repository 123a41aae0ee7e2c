"""codec.decode_into writes a batch's column straight into its slice of the loaded column: the values, the
refusals and their messages are those of codec.decode followed by the old range check."""

import numpy as np
import pytest

from brrrtui.recording import codec
from brrrtui.recording.checks import RecordingError

WHERE = "run.brrr is damaged: gpu.x"


def _decode_then_check(blob: bytes, n: int, skip: int, take: int, dtype: np.dtype) -> np.ndarray:
    values = codec.decode(blob, n, skip, take, dtype.kind == "f", WHERE)
    if dtype.kind != "f" and take:
        info, lo, hi = np.iinfo(dtype), int(values.min()), int(values.max())
        if lo < info.min or hi > info.max:
            raise RecordingError(f"{WHERE} holds {lo if lo < info.min else hi}")
    return values.astype(dtype)


@pytest.mark.parametrize(
    "values",
    [
        np.full(7, 41),  # constant
        np.array([3, 0, 255, 17, 9, 200, 1]) + 10**12,  # 1 byte above a base
        np.array([-1, 60_000, 5, 7, 0, 1, 2]),  # 2 bytes
        np.array([-1, 4_000_000_000, 5, 7, 0, 1, 2]) + 1_700_000_000_000_000_000,  # 4 bytes
        np.array([-(2**62), 2**62, 0, 1, -1, 5, 6]),  # plain int64
        np.array([1.5, np.nan, -2.0, 0.0, 1e300, 3.0, 4.0]),  # float64
        np.full(7, np.nan),  # constant float
    ],
)
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.float64])
def test_decode_into_equals_decode_and_check(values: np.ndarray, dtype: type) -> None:
    dt = np.dtype(dtype)
    if (values.dtype.kind == "f") != (dt.kind == "f"):
        return
    blob = codec.encode(values)
    for skip, take in [(0, 7), (2, 3), (6, 1), (3, 0)]:
        try:
            want: np.ndarray | str = _decode_then_check(blob, 7, skip, take, dt)
        except RecordingError as e:
            want = str(e)
        out = np.full(take, 99, dtype=dt)
        try:
            bounds = codec.decode_into(out, blob, 7, skip, dt.kind == "f", WHERE)
        except RecordingError as e:
            assert str(e) == want
            continue
        assert isinstance(want, np.ndarray), f"decode_into took what the check refuses: {want}"
        np.testing.assert_array_equal(out, want)
        if dt.kind == "i" and take:
            assert bounds == (int(want.min()), int(want.max()))


def test_a_blob_whose_offsets_wrap_is_refused_with_the_wrapped_value() -> None:
    """A damaged base near the int64 limit: decode() wraps and the range check names the wrapped value."""
    blob = bytearray(codec.encode(np.array([0, 200, 5])))
    blob[1:9] = np.array([2**63 - 100], dtype="<i8").tobytes()
    with pytest.raises(RecordingError) as old:
        _decode_then_check(bytes(blob), 3, 0, 3, np.dtype(np.int32))
    with pytest.raises(RecordingError) as new:
        codec.decode_into(np.empty(3, np.int32), bytes(blob), 3, 0, False, WHERE)
    assert str(new.value) == str(old.value)
    out = np.empty(3, np.int64)  # an int64 column takes the wrapped values, as decode() gives them
    codec.decode_into(out, bytes(blob), 3, 0, False, WHERE)
    np.testing.assert_array_equal(out, codec.decode(bytes(blob), 3, 0, 3, False, WHERE))


def test_a_blob_of_the_wrong_length_is_refused() -> None:
    blob = codec.encode(np.array([1, 2, 300]))
    with pytest.raises(RecordingError, match="not the 4 values of its batch"):
        codec.decode_into(np.empty(4, np.int64), blob, 4, 0, False, WHERE)

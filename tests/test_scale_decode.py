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


def _every_decoder(blob: bytes, n: int, dtype: type) -> list[str]:
    """The error each way of decoding `blob` ends in (decode, decode_into, decode_many), "" where it took it."""
    errors = []
    for decoder in (
        lambda: codec.decode(blob, n, 0, n, False, WHERE),
        lambda: codec.decode_into(np.empty(n, dtype), blob, n, 0, False, WHERE),
        lambda: codec.decode_many(np.empty(n, dtype), [(blob, 0, n)], False, WHERE),
    ):
        try:
            decoder()
            errors.append("")
        except RecordingError as e:
            errors.append(str(e))
    return errors


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_a_blob_whose_offsets_pass_int64_is_refused_by_every_decoder(dtype: type) -> None:
    """A damaged base near the int64 limit: base + offset is a value no column holds; it is named, never
    wrapped into one an int64 column would take."""
    blob = bytearray(codec.encode(np.array([0, 200, 5])))
    blob[1:9] = np.array([2**63 - 100], dtype="<i8").tobytes()
    assert _every_decoder(bytes(blob), 3, dtype) == [f"{WHERE} holds {2**63 + 100}"] * 3


def test_a_plain_blob_with_a_base_is_refused_by_every_decoder() -> None:
    """Code 4 stores whole int64 values behind a zero base; a base there (damage) is refused, where the
    decoders used to disagree on whether to add it."""
    blob = b"\x04" + np.int64(1000).tobytes() + np.array([1, 2, 3], "<i8").tobytes()
    assert (
        _every_decoder(blob, 3, np.int64)
        == [f"{WHERE} holds plain values above a base, which no writer stores"] * 3
    )
    plain = codec.encode(np.array([-(2**62), 2**62, 7]))
    assert plain[0] == 4 and _every_decoder(plain, 3, np.int64) == [""] * 3


def test_a_blob_of_the_wrong_length_is_refused() -> None:
    blob = codec.encode(np.array([1, 2, 300]))
    with pytest.raises(RecordingError, match="not the 4 values of its batch"):
        codec.decode_into(np.empty(4, np.int64), blob, 4, 0, False, WHERE)

"""The blocked copy and streamed digest of strided views give numpy's bytes and XXH3 digest exactly."""
import numpy as np
import pytest
import xxhash
from hypothesis import given, settings, strategies as st

from mirage_lab.search import layout_copy
from mirage_lab.verify.field import PQ


@pytest.fixture(autouse=True)
def _small_sizes(monkeypatch):
    # small arrays must reach the compiled path, the chunking and the blocking of the middle axis
    monkeypatch.setattr(layout_copy, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(layout_copy, "CHUNK", 64)
    monkeypatch.setattr(layout_copy, "BLOCK", 3)
    monkeypatch.setattr(layout_copy, "TBLOCK", (2, 3))
    monkeypatch.setattr(layout_copy, "LONG_ROW", 4)   # both ways of copying a row


@st.composite
def strided_views(draw):
    """A random array seen through a random transpose, step slice and broadcast axis."""
    ndim = draw(st.integers(1, 6))
    shape = draw(st.lists(st.integers(1, 7), min_size=ndim, max_size=ndim))
    seed = draw(st.integers(0, 2**32 - 1))
    x = np.random.default_rng(seed).integers(0, PQ, size=shape, dtype=np.uint16)
    x = x.transpose(draw(st.permutations(range(ndim))))
    ax = draw(st.integers(0, ndim - 1))
    step = draw(st.integers(1, 3))
    x = x[(slice(None),) * ax + (slice(None, None, step),)]
    if draw(st.booleans()):   # a stride-0 axis, as a saved output broadcast over the grid
        x = np.broadcast_to(x[:, None], (x.shape[0], draw(st.integers(1, 4))) + x.shape[1:])
    return x


@settings(max_examples=300, deadline=None)
@given(strided_views())
def test_contiguous_and_digest_equal_numpy(x):
    ref = np.ascontiguousarray(x)
    got = layout_copy.contiguous(x)
    assert got.flags.c_contiguous and got.shape == ref.shape and got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)
    assert layout_copy.digest(x) == xxhash.xxh3_128_digest(ref)
    out, d = layout_copy.contiguous_digest(x)    # copied and hashed in one pass: the same
    assert out.flags.c_contiguous and out.shape == ref.shape
    np.testing.assert_array_equal(out, ref)
    assert d == xxhash.xxh3_128_digest(ref)


def test_a_transposed_tile_product_at_a_realistic_size():
    # the layout that dominated the profile: [blocks, m, n] read from a [m, blocks * n] product
    rng = np.random.default_rng(0)
    p = rng.integers(0, PQ, size=(256, 64 * 8), dtype=np.uint16)
    v = p.reshape(256, 64, 8).transpose(1, 0, 2)[None, :, None, None]
    np.testing.assert_array_equal(layout_copy.contiguous(v), np.ascontiguousarray(v))
    assert layout_copy.digest(v) == xxhash.xxh3_128_digest(np.ascontiguousarray(v))


def test_collapse_merges_axes_that_step_over_each_other():
    x = np.zeros((2, 3, 1, 4), np.uint16)
    assert layout_copy.collapse(x) == ((24,), (2,))
    assert layout_copy.collapse(x.transpose(1, 0, 2, 3)) == ((3, 2, 4), (8, 24, 2))


@pytest.mark.parametrize("row", [1, 2, 3, 4, 8, 12])
@pytest.mark.parametrize("offset", [0, 1, 2, 4])
def test_short_rows_moved_as_wide_words_keep_the_bytes(row, offset, monkeypatch):
    # rows of 2, 4, 8... uint16 are copied as uint32/uint64 words where aligned (layout_copy._widen);
    # odd rows, odd offsets and strides fall back to element copies: the bytes are numpy's either way
    monkeypatch.setattr(layout_copy, "LONG_ROW", 1 << 30)   # every contiguous row by the compiled loop
    rng = np.random.default_rng(row * 10 + offset)
    flat = rng.integers(0, PQ, size=offset + 24 * 16 * row, dtype=np.uint16)[offset:]
    base = flat.reshape(24, 16, row)
    for v in (base.transpose(1, 0, 2), base[:, ::2].transpose(1, 0, 2), base[:, :, :row - row // 2].transpose(1, 0, 2)):
        ref = np.ascontiguousarray(v)
        np.testing.assert_array_equal(layout_copy.contiguous(v), ref)
        assert layout_copy.digest(v) == xxhash.xxh3_128_digest(ref)
        out, d = layout_copy.contiguous_digest(v)
        np.testing.assert_array_equal(out, ref)
        assert d == xxhash.xxh3_128_digest(ref)
    if row > 1:   # (a row of one is no axis of its own)
        x3 = layout_copy._as3(base.transpose(1, 0, 2))
        wx, wo = layout_copy._widen(x3, np.empty(x3.shape, np.uint16))
        addr = flat.ctypes.data
        want = next(w for w in (8, 4, 2) if w == 2 or (row * 2 % w == 0 and addr % w == 0 and 2 * row % w == 0))
        assert wx.itemsize == want and wx.shape[-1] * want == row * 2 and wo.shape == wx.shape

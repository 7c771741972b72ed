"""Lazy block digests and kept view digests answer every comparison as the eager digest does."""
from __future__ import annotations

import gc

import numpy as np
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from mirage_lab.search import arrays, lazy_digest
from mirage_lab.search.lazy_digest import LazyDigest, block_digest


def _views(seed: int) -> list[np.ndarray]:
    """Arrays of one shape in several layouts, some equal in content, some one element apart."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 25000, (8, 64, 96), dtype=np.uint16)
    other = base.copy()
    other[3, 5, 7] ^= 1                                   # differs in one element only
    t = np.ascontiguousarray(base.transpose(2, 1, 0)).transpose(2, 1, 0)   # same content, transposed memory
    return [base, t, other, np.ascontiguousarray(other), base[::-1].copy()[::-1]]


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.sampled_from([1, 3, 2048]))
def test_lazy_equality_is_the_eager_digests_equality(seed, sample):
    old = lazy_digest.SAMPLE
    lazy_digest.SAMPLE = sample          # 1: samples collide, the full digests decide
    try:
        xs = _views(seed)
        lazy = [LazyDigest(x) for x in xs]
        eager = [xxhash.xxh3_128_digest(np.ascontiguousarray(x)) for x in xs]
    finally:
        lazy_digest.SAMPLE = old
    for i in range(len(xs)):
        for j in range(len(xs)):
            assert (lazy[i] == lazy[j]) == (eager[i] == eager[j])
            if eager[i] == eager[j]:
                assert hash(lazy[i]) == hash(lazy[j])
    # as set members (what dedup does): the same set of distinct tensors
    assert len(set(lazy)) == len(set(eager))


def test_full_digest_computed_only_on_a_sample_match():
    x = np.arange(1 << 16, dtype=np.uint16).reshape(256, 256)
    a, b = LazyDigest(x), LazyDigest(x + np.uint16(1))
    assert a != b
    assert a._full is None and b._full is None        # told apart by their samples
    c = LazyDigest(x.copy())
    assert a == c and a._full is not None and a._fp is None   # the array is let go once known


def test_small_arrays_get_the_eager_digest():
    x = np.arange(100, dtype=np.uint16)
    assert block_digest(x) == arrays.digest_any(x)
    assert isinstance(block_digest(np.zeros(1 << 16, np.uint16)), LazyDigest)


def test_view_digest_equals_the_digest_of_a_copy_and_dies_with_its_base():
    rng = np.random.default_rng(1)
    base = rng.integers(0, 25000, (64, 1024), dtype=np.uint16)
    views = [base.T, base[:, 512:], base.reshape(64, 16, 64).transpose(1, 0, 2), base[::2]]
    for v in views:
        for _ in range(2):   # the second time from the kept entry
            assert arrays.digest_any(v) == xxhash.xxh3_128_digest(np.ascontiguousarray(v))
    assert id(base) in arrays._VIEW_DIGESTS
    bid = id(base)
    del base, views, v
    gc.collect()
    assert bid not in arrays._VIEW_DIGESTS
    # a new base (maybe at the same address) with other bytes gets its own digests
    for seed in range(5):
        b2 = np.random.default_rng(seed + 10).integers(0, 25000, (64, 1024), dtype=np.uint16)
        assert arrays.digest_any(b2.T) == xxhash.xxh3_128_digest(np.ascontiguousarray(b2.T))
        del b2

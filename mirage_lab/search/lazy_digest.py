"""Block tensors' digests, computed only when another tensor may be equal to them.

A block tensor's fingerprint holds every block and iteration (16 M elements and more at full
shapes), and its key's digest was the search's largest cost: a C-order copy of a strided view
and an XXH3 pass over it, for every tensor (``benchmarks/RESULTS.md``, "Search profile").
Most of those digests only ever show that the tensor differs from the others of its root.

:class:`LazyDigest` stands in for that digest in a :class:`~.state.Node` key: it hashes (for
sets and dicts) by a few thousand elements sampled at fixed logical positions, and compares
equal exactly when the full digests are equal, computing them only then. Two tensors whose
samples differ are different; two whose samples agree (a duplicate, or rarely a chance match)
are told apart by their full digests, as before. So every ``==``, ``in`` and dict lookup over
keys answers as it did with the eager digest: the same dedup, states and candidates.

The tensor stays referenced until its full digest is computed, so it is meant for block
tensors, whose keys live in their root's dedup sets and ``fp_memo`` (which holds the arrays
anyway), not for kernel tensors, whose keys the continuation memo keeps for the whole search.

    >>> import numpy as np
    >>> x = np.arange(1 << 16, dtype=np.uint16).reshape(256, 256)
    >>> a, b = LazyDigest(x.T), LazyDigest(np.ascontiguousarray(x.T))
    >>> a == b, hash(a) == hash(b), a == LazyDigest(x)
    (True, True, False)
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import xxhash

from .arrays import digest_any

#: elements sampled for the hash (a gather of this many costs tens of µs, vs ms for a digest)
SAMPLE = 2048
#: arrays smaller than this get their full digest at once (cheaper than sampling)
MIN_ELEMENTS = 1 << 15


@lru_cache(maxsize=512)
def _positions(shape: tuple[int, ...], n: int) -> tuple[np.ndarray, ...]:
    """``n`` fixed pseudo-random C-order positions of ``shape`` (sorted), as index arrays."""
    size = int(np.prod(shape, dtype=np.int64))
    rng = np.random.default_rng(0x5EED ^ size)
    flat = np.unique(np.concatenate([rng.integers(0, size, n), [0, size - 1]]))
    return tuple(np.ascontiguousarray(i) for i in np.unravel_index(flat, shape))


def sample_digest(a: np.ndarray, n: int | None = None) -> int:
    """A 64-bit hash of ``a``'s shape and of its elements at fixed logical positions (any layout)."""
    n = SAMPLE if n is None else n
    s = np.ascontiguousarray(a[_positions(a.shape, n)])
    h = xxhash.xxh3_64(np.asarray(a.shape, np.int64).tobytes())
    h.update(s)
    return h.intdigest()


class LazyDigest:
    """A digest that is the sample's hash until an equality test needs the full one."""

    __slots__ = ("_fp", "_sample", "_full")

    def __init__(self, fp: np.ndarray) -> None:
        self._fp: Any = fp
        self._sample = sample_digest(fp)
        self._full: bytes | None = None

    def full(self) -> bytes:
        """The eager digest (:func:`.arrays.digest_any`); the array is let go once it is known."""
        if self._full is None:
            self._full = digest_any(self._fp)
            self._fp = None
        return self._full

    def __hash__(self) -> int:
        return hash(self._sample)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if isinstance(other, LazyDigest):
            return self._sample == other._sample and self.full() == other.full()
        return NotImplemented   # never equal to an eager digest: its hash would differ

    def __repr__(self) -> str:
        return f"LazyDigest({self._sample:016x}{'' if self._full is None else ', ' + self._full.hex()})"


def block_digest(fp: Any) -> Any:
    """The digest a block tensor's key holds: lazy for large numpy arrays, else the eager one."""
    if isinstance(fp, np.ndarray) and fp.size >= MIN_ELEMENTS:
        return LazyDigest(fp)
    return digest_any(fp)

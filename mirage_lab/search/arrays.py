"""Where the search keeps its fingerprint arrays: numpy on the CPU, or Numba-CUDA on a GPU.

The generator computes one fingerprint array per new tensor (:mod:`.tiles` explains the
layout) and names each array by a digest, for deduplication. Both backends compute the
same values bit for bit (the field ops of :mod:`mirage_lab.verify` on either side); only
the digest differs, and a process never mixes the two.

- ``NumpyArrays``: tiles are numpy views where possible; the field ops are the verifier's numpy
  ones with their hot passes compiled (:mod:`.cpu_ops`, same values); digests are XXH3-128.
- ``CudaArrays``: arrays live on the device (contiguous uint16); a loader's tiles and a
  saved output are materialised by one strided copy (the verifier's ``copy_view``),
  planned on a numpy stand-in so the layout is exactly the numpy backend's; digests are
  two 64-bit multilinear hashes computed on the device (only 16 bytes come back).

Which backend runs is the verifier's choice (:func:`mirage_lab.verify.resolve_backend`);
this module only adds a per-process cache and a check that CUDA works in the process.

    >>> arrays = get_arrays("numpy")
    >>> import numpy as np
    >>> arrays.digest(np.arange(4, dtype=np.uint16)) == arrays.digest(np.arange(4, dtype=np.uint16))
    True
"""
from __future__ import annotations

import os
import weakref
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

from ..errors import MirageLabError
from ..verify.backends import BACKENDS, get_ops, resolve_backend
from ..verify.field import FP_DTYPE, FieldError
from . import layout_copy, tiles
from .cpu_ops import SEARCH_OPS as numpy_ops


class NumpyArrays:
    """The CPU backend: numpy arrays and views.

    Large tile products are memoized by the digests of their two folded operands: tilings
    that differ only in how the grid cuts the rows or columns (X replicated, W split into 64
    or 128 column blocks, with the same loop) fold to the very same ``[R, m, k] x [R, k, N]``
    product (:func:`.tiles.matmul`), which at full shapes is most of a state's cost. A large
    operand's float64 copy is kept too (W looped in 16 or 64 chunks is the same bytes).
    A product is keyed by its whole operands, its batch read as chunks of the contracted
    dim, so a coarser loop range's product is derived from a finer one's by adding adjacent
    chunks (mod PQ) instead of a new BLAS product.
    """

    name = "numpy"
    #: products with fewer multiply-adds per operand element than this are not worth a digest
    MEMO_MIN_DEPTH = 8
    #: operands of at least this many elements keep their float64 copy (W [4096, 4096]: 128 MiB)
    MEMO_MIN_F64 = 1 << 20
    MEMO_BYTES = 512 << 20

    def __init__(self) -> None:
        # products (key: shapes and operand digests) and float64 operands ("f64", size, digest), LRU
        self._memo: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._memo_bytes = 0
        # product key (without the chunk count) -> the chunk counts held in the memo
        self._chunkings: dict[tuple, set[int]] = {}

    def put(self, a: np.ndarray) -> Any:
        return a

    def to_numpy(self, a: Any) -> np.ndarray:
        return np.asarray(a)

    def load_view(self, fp: Any, grid: Sequence[int], imap: Sequence[int], fmap: int, frange: int) -> Any:
        return tiles.load_view(fp, grid, imap, fmap, frange)

    def save_full(self, tile: Any, grid: Sequence[int], omap: Sequence[int], out_dims: Sequence[int]) -> Any:
        return tiles.save_full(tile, grid, omap, out_dims)

    def save_full_digest(self, tile: Any, grid: Sequence[int], omap: Sequence[int],
                         out_dims: Sequence[int]) -> tuple[Any, bytes | None]:
        """:meth:`save_full` and the output's digest (:func:`digest_any`), or None when it is not
        computed along (the GPU backend)."""
        return tiles.save_full_digest(tile, grid, omap, out_dims)

    def matmul(self, a: Any, b: Any) -> Any:
        return tiles.matmul(a, b, self._folded_matmul)

    def _folded_matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        m, n = a.shape[-2], b.shape[-1]
        if m * n < self.MEMO_MIN_DEPTH * (m + n):   # m·k·n multiply-adds, k·(m + n) elements
            return numpy_ops.matmul(a, b)
        a, b = layout_copy.contiguous(a), layout_copy.contiguous(b)
        # The batch (the axes both operands vary along: the loop's iterations, a grid axis
        # splitting the contracted dim) as chunks of one [m, K] x [K, n] product: its key is
        # the two whole operands, so every chunking of the same product shares one entry.
        kc = a.shape[-1]
        nb = a.size // (m * kc)
        whole_a = a.reshape(nb, m, kc).transpose(1, 0, 2)          # A = [a_0 | a_1 | ...], [m, nb, kc]
        base = ("mm", m, n, nb * kc, digest_any(whole_a), digest_any(b))
        out_shape = a.shape[:-2] + (m, n)
        hit = self._memo.get(base + (nb,))
        if hit is not None:
            self._memo.move_to_end(base + (nb,))
            return hit.reshape(out_shape)
        finer = [c for c in self._chunkings.get(base, ()) if c % nb == 0]
        if finer:
            # Σ_k over a chunk of nb is the sum of the finer chunks it is made of, in order
            # (mod PQ, exact): one pass over the finer product instead of a new BLAS product.
            c = min(finer)
            self._memo.move_to_end(base + (c,))
            r = numpy_ops.reduce_sum(self._memo[base + (c,)].reshape(nb, c // nb, m, n), 1)
            r = np.ascontiguousarray(r).reshape(nb, m, n)
        else:
            # a is converted a block at a time inside (no float64 copy of it); b's is kept
            r = numpy_ops.matmul_f64(a, self._float64(b, base[5])).reshape(nb, m, n)
        r.flags.writeable = False   # shared by every tiling that folds to this product
        self._remember(base + (nb,), r)
        self._chunkings.setdefault(base, set()).add(nb)
        return r.reshape(out_shape)

    def _float64(self, x: np.ndarray, digest: bytes) -> np.ndarray:
        """``x`` as float64 for BLAS; a large operand's conversion is kept, by content: a weight
        loaded with another loop range folds to the same bytes in another shape."""
        if x.size < self.MEMO_MIN_F64:
            return x.astype(np.float64)
        key = ("f64", x.size, digest)
        flat = self._memo.get(key)
        if flat is None:
            flat = x.astype(np.float64).ravel()
            flat.flags.writeable = False
            self._remember(key, flat)
        else:
            self._memo.move_to_end(key)
        return flat.reshape(x.shape)

    def _remember(self, key: tuple, value: np.ndarray) -> None:
        self._memo[key] = value
        self._memo_bytes += value.nbytes
        while self._memo_bytes > self.MEMO_BYTES and len(self._memo) > 1:
            old, v = self._memo.popitem(last=False)
            self._memo_bytes -= v.nbytes
            if old[0] == "mm":
                chunks = self._chunkings.get(old[:-1])
                if chunks is not None:
                    chunks.discard(old[-1])
                    if not chunks:
                        del self._chunkings[old[:-1]]

    def accum(self, kind: str | None, x: Any, axis: int, frange: int, w: int, dimx: int) -> Any:
        return numpy_ops.accum(kind, x, axis, frange, w, dimx)

    def unary(self, typ: str, x: Any, attrs: dict) -> Any:
        return numpy_ops.unary(typ, x, attrs)

    def binary(self, typ: str, a: Any, b: Any) -> Any:
        return numpy_ops.binary(typ, a, b)

    def rms_norm(self, x: Any) -> Any:
        return numpy_ops.rms_norm(x)

    @staticmethod
    def digest(a: Any) -> bytes:
        return digest_any(a)


def _stand_in(shape: Sequence[int]) -> np.ndarray:
    """A numpy array of ``shape`` with C-order strides and no memory: only for planning views.

    The tile functions only reshape, transpose and broadcast (never read or copy, see the
    callers), so the view they return describes, in its strides, how to gather the data.
    """
    item = np.dtype(FP_DTYPE).itemsize
    st = [item] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        st[d] = st[d + 1] * max(1, shape[d + 1])
    return np.lib.stride_tricks.as_strided(np.zeros(1, FP_DTYPE), shape=tuple(shape), strides=tuple(st),
                                           writeable=False)


class CudaArrays(NumpyArrays):
    """The GPU backend: Numba-CUDA device arrays and the verifier's CUDA field ops."""

    name = "cuda"

    def __init__(self) -> None:
        super().__init__()
        from ..gpu.numba_compat import quiet_occupancy_warnings

        quiet_occupancy_warnings()
        self.ops = get_ops("cuda")

    def put(self, a: np.ndarray) -> Any:
        return self.ops.asarray(a)

    def to_numpy(self, a: Any) -> np.ndarray:
        return self.ops.to_numpy(a)

    def _gather(self, src: Any, view: np.ndarray) -> Any:
        """``view`` (of a stand-in shaped like ``src``) copied out of ``src`` on the device."""
        item = view.itemsize
        return self.ops.copy_view(src, view.shape, [s // item for s in view.strides])

    def load_view(self, fp: Any, grid: Sequence[int], imap: Sequence[int], fmap: int, frange: int) -> Any:
        return self._gather(fp, tiles.load_view(_stand_in(fp.shape), grid, imap, fmap, frange))

    def save_full(self, tile: Any, grid: Sequence[int], omap: Sequence[int], out_dims: Sequence[int]) -> Any:
        out = self._gather(tile, tiles.save_view(_stand_in(tile.shape), grid, omap))
        return out.reshape((tile.shape[0],) + tuple(int(d) for d in out_dims))

    def save_full_digest(self, tile: Any, grid: Sequence[int], omap: Sequence[int],
                         out_dims: Sequence[int]) -> tuple[Any, bytes | None]:
        return self.save_full(tile, grid, omap, out_dims), None

    def matmul(self, a: Any, b: Any) -> Any:
        return self.ops.matmul(a, b)

    def accum(self, kind: str | None, x: Any, axis: int, frange: int, w: int, dimx: int) -> Any:
        return self.ops.accum(kind, x, axis, frange, w, dimx)

    def unary(self, typ: str, x: Any, attrs: dict) -> Any:
        return self.ops.unary(typ, x, attrs)

    def binary(self, typ: str, a: Any, b: Any) -> Any:
        return self.ops.binary(typ, a, b)

    def rms_norm(self, x: Any) -> Any:
        return self.ops.rms_norm(x)



def digest_any(a: Any) -> bytes:
    """The digest of a fingerprint array of either backend: XXH3-128 of a numpy array (tens of
    times faster than SHA-1 on the multi-MB arrays of full-shape searches; nothing adversarial
    to resist, and 128 bits make an accidental collision negligible), or the device digest of
    :mod:`.cuda_digest` for a device array."""
    if isinstance(a, np.ndarray):
        return _view_digest(a)
    from .cuda_digest import device_digest

    return device_digest(a)


#: views of at least this many elements have their digest kept by (base array, view geometry)
VIEW_MEMO_MIN = 1 << 15
# id(base) -> (weak reference to base, {(offset, shape, strides, dtype): digest})
_VIEW_DIGESTS: dict[int, tuple[Any, dict[tuple, bytes]]] = {}


def _view_digest(a: np.ndarray) -> bytes:
    """``layout_copy.digest(a)``, kept per view of a live base array.

    The tile products' memo names its operands by digest (``NumpyArrays._folded_matmul``), and
    most operands are the same views of the same arrays again (W's tiles, cut the same way in
    another state): their digest is a function of the base's bytes and of the view's offset,
    shape and strides. Fingerprint arrays are never written after they are made, and an entry
    lives only as long as its base (a weak reference), so a new array at a reused address
    cannot inherit one."""
    base = a.base
    if a.size < VIEW_MEMO_MIN or not isinstance(base, np.ndarray) or base.base is not None:
        return layout_copy.digest(a)   # == xxh3_128_digest(np.ascontiguousarray(a)), without the copy
    geom = (a.__array_interface__["data"][0] - base.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str)
    entry = _VIEW_DIGESTS.get(id(base))
    if entry is None or entry[0]() is not base:
        bid = id(base)
        try:
            ref = weakref.ref(base, lambda _r, bid=bid: _forget(bid, _r))
        except TypeError:
            return layout_copy.digest(a)
        entry = _VIEW_DIGESTS[bid] = (ref, {})
    d = entry[1].get(geom)
    if d is None:
        d = entry[1][geom] = layout_copy.digest(a)
    return d


def _forget(bid: int, ref: Any) -> None:
    entry = _VIEW_DIGESTS.get(bid)
    if entry is not None and entry[0] is ref:
        del _VIEW_DIGESTS[bid]




class ArrayBackendError(MirageLabError, ValueError):
    """The requested fingerprint backend cannot run here."""


_INSTANCES: dict[tuple[str, int], NumpyArrays] = {}

# Whether this process may take a CUDA context for "auto" fingerprints. Search pool workers are
# told at start (executors.CUDA_FINGERPRINT_WORKERS of them may); None elsewhere: no limit.
CUDA_FINGERPRINTS_ALLOWED: bool | None = None


def get_arrays(backend: str = "auto") -> NumpyArrays:
    """The search's array backend: ``"numpy"``, ``"cuda"`` or ``"auto"`` (cuda when a GPU is usable)."""
    requested = backend
    if backend not in BACKENDS:
        raise ArrayBackendError(f"fingerprint_backend={backend!r}: use one of {BACKENDS}")
    if backend == "auto" and CUDA_FINGERPRINTS_ALLOWED is False:
        # same fingerprints (results do not depend on the backend); and not even resolve_backend, whose
        # cuInit in every worker still held the first state to 8.4 s with 16 workers on an H200 host
        backend = "numpy"
    try:
        backend = resolve_backend(backend)
    except FieldError as e:   # the only name left that can fail: cuda where it cannot run
        raise ArrayBackendError("fingerprint_backend='cuda' needs a usable CUDA GPU; use 'numpy' or 'auto'") from e
    # Keyed by process too: a worker forked from a process that used CUDA inherits its
    # objects, but not a usable context; it must check for itself.
    key = (backend, os.getpid())
    if key not in _INSTANCES:
        if backend == "numpy":
            _INSTANCES[key] = NumpyArrays()
        else:
            try:
                arr = CudaArrays()
                arr.digest(arr.put(np.zeros(4, FP_DTYPE)))   # a CUDA context that works here
            except Exception as e:
                # e.g. a worker forked from a process that had already used CUDA: such a
                # child cannot. "auto" then runs on the CPU (same results); "cuda" says why.
                if requested == "cuda":
                    raise ArrayBackendError(f"fingerprint_backend='cuda': CUDA does not work in this process "
                                            f"({type(e).__name__}: {e})") from e
                return get_arrays("numpy")
            _INSTANCES[key] = arr
    return _INSTANCES[key]

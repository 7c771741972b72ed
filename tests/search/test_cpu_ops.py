"""The search's compiled CPU field ops and its product memo give the numpy backend's values exactly."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mirage_lab.search import arrays, cpu_ops, tiles
from mirage_lab.verify.field import PQ
from mirage_lab.verify.numpy_backend import FieldOps

REF = FieldOps()


def _rand(rng, shape):
    return rng.integers(0, PQ, size=shape, dtype=np.uint16)


@pytest.mark.parametrize("numba", [True, False])
def test_ops_equal_the_numpy_backend(numba, monkeypatch):
    if numba and not cpu_ops.HAVE_NUMBA:
        pytest.skip("numba does not import here")
    monkeypatch.setattr(cpu_ops, "HAVE_NUMBA", numba)
    ops = cpu_ops.SearchFieldOps()
    rng = np.random.default_rng(3)
    x = _rand(rng, (2, 3, 1, 4, 5, 6))
    for axis in range(-1, -6, -1):
        np.testing.assert_array_equal(ops.reduce_sum(x, axis), REF.reduce_sum(x, axis))
    # a strided view (a loader's tiles are views) and a stride-0 broadcast
    v = x[:, ::2, :, 1:, :, ::3]
    np.testing.assert_array_equal(ops.reduce_sum(v, -3), REF.reduce_sum(v, -3))
    t = x.transpose(0, 3, 1, 2, 5, 4)                # a transposed product: read in memory order
    for axis in range(6):
        np.testing.assert_array_equal(ops.reduce_sum(t, axis), REF.reduce_sum(t, axis))
    bx = np.broadcast_to(x[:, :1], x.shape)
    np.testing.assert_array_equal(ops.reduce_sum(bx, 1), REF.reduce_sum(bx, 1))
    # the extremes of the field: sums of PQ-1 do not overflow
    big = np.full((3, 70000), PQ - 1, np.uint16)
    np.testing.assert_array_equal(ops.reduce_sum(big, -1), REF.reduce_sum(big, -1))
    a, b = _rand(rng, (2, 1, 4, 6)), _rand(rng, (1, 3, 1, 6))
    b[0, 0, 0, :3] = 0
    a[0, 0, 0, :2] = [0, PQ - 1]
    for op in ("add", "sub", "mul", "div"):
        np.testing.assert_array_equal(ops.binary(op, a, b), REF.binary(op, a, b))
        np.testing.assert_array_equal(ops.binary(op, b, a), REF.binary(op, b, a))
    m1, m2 = _rand(rng, (2, 3, 5, 40)), _rand(rng, (1, 40, 7))
    np.testing.assert_array_equal(ops.matmul(m1, m2), REF.matmul(m1, m2))
    for kind in (None, "sum", "mean", "rms", "sum_todimx"):
        t = _rand(rng, (1, 2, 1, 1, 4, 3, 8))
        np.testing.assert_array_equal(ops.accum(kind, t, 4, 4, 8, 4), REF.accum(kind, t, 4, 4, 8, 4))


def _x_tiles(x):       # X [16, 128] replicated on the grid, its 128 columns looped over in 4 iterations
    return x.reshape(16, 4, 32).transpose(1, 0, 2)[None, None, None, None]


def _w_tiles(w, g):    # W [128, 64] looped over in 4 row chunks, its columns split into g blocks
    return w.reshape(4, 32, g, 64 // g).transpose(2, 0, 1, 3)[None, :, None, None]


def test_product_memo_returns_the_same_values_and_shares_equal_products():
    arr = arrays.NumpyArrays()
    arr.MEMO_MIN_F64 = 0                             # keep every operand's float64 copy too
    rng = np.random.default_rng(5)
    x, w = _x_tiles(_rand(rng, (16, 128))), _rand(rng, (128, 64))
    for g in (4, 2):
        # the grid's 4 or 2 column blocks fold to the same [4, 16, 32] x [4, 32, 64] product
        np.testing.assert_array_equal(arr.matmul(x, _w_tiles(w, g)), tiles.matmul(x, _w_tiles(w, g)))
    assert sum(k[0] != "f64" for k in arr._memo) == 1
    w[0, 0] = (int(w[0, 0]) + 1) % PQ                # another W: another entry, its own values
    np.testing.assert_array_equal(arr.matmul(x, _w_tiles(w, 4)), tiles.matmul(x, _w_tiles(w, 4)))
    assert sum(k[0] != "f64" for k in arr._memo) == 2


def _looped(x, w, r):   # X [16, 128] and W [128, 64], the contracted dim looped in r chunks
    xt = x.reshape(16, r, 128 // r).transpose(1, 0, 2)[None, None, None, None]
    wt = w.reshape(r, 128 // r, 64)[None, None, None, None]
    return xt, wt


@given(order=st.permutations([1, 2, 4, 8, 16]), seed=st.integers(0, 2**31))
@settings(max_examples=20, deadline=None)
def test_a_coarser_loop_range_is_derived_from_a_finer_product(order, seed):
    arr = arrays.NumpyArrays()
    blas = []
    real = cpu_ops.SEARCH_OPS.matmul_f64
    arr_ops = arrays.numpy_ops

    def counting(a, b):
        blas.append(a.shape)
        return real(a, b)

    rng = np.random.default_rng(seed)
    x, w = _rand(rng, (16, 128)), _rand(rng, (128, 64))
    finest = 0
    try:
        arr_ops.matmul_f64 = counting
        for r in order:
            xt, wt = _looped(x, w, r)
            before = len(blas)
            got = arr.matmul(xt, wt)
            np.testing.assert_array_equal(got, REF.matmul(xt, wt))
            # a BLAS product only for a loop range finer than every one seen (none to derive from)
            assert (len(blas) > before) == (r > finest)
            finest = max(finest, r)
    finally:
        del arr_ops.matmul_f64
    w2 = w.copy()
    w2[5, 7] = (int(w2[5, 7]) + 1) % PQ                 # another W is not derived from this one
    xt, wt = _looped(x, w2, 2)
    np.testing.assert_array_equal(arr.matmul(xt, wt), REF.matmul(xt, wt))


@pytest.mark.skipif(not cpu_ops.HAVE_NUMBA, reason="numba does not import here")
@settings(max_examples=60, deadline=None)
@given(m=st.sampled_from([1, 2, 4, 5, 9, 40]), k=st.sampled_from([1, 3, 8, 9, 70]), n=st.integers(1, 9), batch_a=st.sampled_from([(), (1,), (3,), (2, 3), (1, 3)]),
       batch_b=st.sampled_from([(), (1,), (3,), (2, 1), (2, 3)]), seed=st.integers(0, 2**31))
def test_few_row_products_equal_the_numpy_backend(m, k, n, batch_a, batch_b, seed):
    # products of at most FEW_ROWS rows or FEW_TERMS terms are summed in integers; broadcast
    # batches and the other products take the float64 path
    rng = np.random.default_rng(seed)
    a, b = _rand(rng, batch_a + (m, k)), _rand(rng, batch_b + (k, n))
    ops = cpu_ops.SearchFieldOps()
    ops.FEW_MIN_ELEMENTS = 0                         # small operands must reach the integer path
    np.testing.assert_array_equal(ops.matmul(a, b), REF.matmul(a, b))


def test_few_row_products_at_the_field_extremes():
    a = np.full((2, 1, 100000), PQ - 1, np.uint16)   # 10^5 terms of (PQ-1)^2: past 2^32, within uint64
    b = np.full((2, 100000, 3), PQ - 1, np.uint16)
    np.testing.assert_array_equal(cpu_ops.SEARCH_OPS.matmul(a, b), REF.matmul(a, b))


def test_large_products_are_memoized_by_content(monkeypatch):
    # a hit's confirmation multiplies the same random inputs again: served from the memo, same values
    ops = cpu_ops.SearchFieldOps()
    monkeypatch.setattr(ops, "MEMO_MIN_MACS", 0)
    rng = np.random.default_rng(5)
    a, b = _rand(rng, (2, 8, 40)), _rand(rng, (2, 40, 6))
    first = ops.matmul(a, b)
    again = ops.matmul(a.copy(), b.copy())          # equal operands, other arrays
    assert again is first and not again.flags.writeable
    np.testing.assert_array_equal(first, REF.matmul(a, b))
    b2 = b.copy()
    b2[1, 3, 2] = (int(b2[1, 3, 2]) + 1) % PQ       # one element differs: a new product
    np.testing.assert_array_equal(ops.matmul(a, b2), REF.matmul(a, b2))


@pytest.mark.skipif(not cpu_ops.HAVE_NUMBA, reason="numba does not import here")
def test_float_reduction_of_products_is_exact_up_to_its_bound():
    # the BLAS partial products are reduced mod PQ in floating point: check it against int64 %
    rng = np.random.default_rng(7)
    top = cpu_ops.F64_EXACT_MAX
    x = np.concatenate([rng.integers(0, top, 200000), np.arange(0, 5 * PQ),
                        np.arange(top - 5 * PQ, top + 1), np.arange(1, 3000) * PQ,
                        np.arange(1, 3000) * PQ - 1]).astype(np.int64)
    assert (x.astype(np.float64).astype(np.int64) == x).all()
    want = x % PQ
    np.testing.assert_array_equal(cpu_ops._mod_f64(x.astype(np.float64)), want)
    acc = rng.integers(0, PQ, x.size).astype(np.uint16)
    np.testing.assert_array_equal(cpu_ops._mod_f64_add(x.astype(np.float64), acc), (want + acc) % PQ)
    assert cpu_ops.F64_TERMS * (PQ - 1) ** 2 <= top    # a BLAS partial product stays within it


@pytest.mark.skipif(not cpu_ops.HAVE_NUMBA, reason="numba does not import here")
@pytest.mark.parametrize("extra", [0, 1])
def test_sums_at_the_uint32_accumulator_bound(extra):
    # up to SUM32_TERMS terms are summed in uint32, more in uint64: both exact at the field's top
    x = np.full((2, cpu_ops.SUM32_TERMS + extra, 3), PQ - 1, np.uint16)
    x[1, ::7, 1] = 5
    np.testing.assert_array_equal(cpu_ops.SEARCH_OPS.reduce_sum(x, 1), REF.reduce_sum(x, 1))


@settings(max_examples=40, deadline=None)
@given(st.integers(-2 * PQ, 2 * PQ), st.sampled_from([(64, 128), (2, 16, 8, 32), (3, 4096), (1, 5, 1024), (7, 9)]),
       st.sampled_from(["c", "transposed", "strided", "broadcast"]), st.integers(0, 2 ** 16))
def test_scale_equals_the_table_lookup(c, shape, layout, seed):
    """``scale`` (a compiled multiply in memory order) gives the numpy backend's table lookup, any layout."""
    if not cpu_ops.HAVE_NUMBA:
        pytest.skip("numba does not import here")
    ops = cpu_ops.SearchFieldOps()
    ops.SCALE_MIN_ELEMENTS = 1                       # the compiled path on small arrays too
    x = _rand(np.random.default_rng(seed), shape)
    x[(0,) * x.ndim] = PQ - 1
    if layout == "transposed":                        # a tile product's layout: axes reversed, a view
        x = np.ascontiguousarray(x.T).T
    elif layout == "strided":
        x = x[..., ::2]
    elif layout == "broadcast":
        x = np.broadcast_to(x[:1], (3,) + x.shape[1:])
    got, want = ops.scale(x, c), REF.scale(x, c)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_scale_takes_the_compiled_path_on_contiguous_and_transposed_arrays(monkeypatch):
    if not cpu_ops.HAVE_NUMBA:
        pytest.skip("numba does not import here")
    calls = []
    mul = cpu_ops._mul
    monkeypatch.setattr(cpu_ops, "_mul", lambda a, b: calls.append(a.shape) or mul(a, b))
    x = _rand(np.random.default_rng(5), (2, 64, 256))
    ops = cpu_ops.SearchFieldOps()
    for v in (x, np.ascontiguousarray(x.transpose(2, 0, 1)).transpose(1, 2, 0)):
        np.testing.assert_array_equal(ops.scale(v, 77), REF.scale(v, 77))
    assert calls == [(8, 4096), (8, 4096)]



@pytest.mark.skipif(not cpu_ops.HAVE_NUMBA, reason="numba does not import here")
@pytest.mark.parametrize("r, inner", [(2, 1), (4, 1), (8, 1), (3, 2), (64, 2), (cpu_ops.SUM32_TERMS, 2), (5, 1)])
@pytest.mark.parametrize("fill", ["random", "top"])
def test_short_row_sums_read_as_wide_words(r, inner, fill, monkeypatch):
    # rows of 2/4/8 elements and pairs of columns are summed lane by lane in wide words: exact,
    # also with every element at the field's top (the lanes of two summed words must not carry)
    monkeypatch.setattr(cpu_ops, "SHORT_ROWS_MIN", 1)
    rng = np.random.default_rng(r * 10 + inner)
    outer = 3000 if r < 100 else 3
    x = _rand(rng, (outer, r, inner)) if fill == "random" else np.full((outer, r, inner), PQ - 1, np.uint16)
    x[::5] = PQ - 1
    want = REF.reduce_sum(x, 1)
    applies = cpu_ops._sum_short_rows(x, outer, r, inner) is not None
    assert applies == ((inner == 1 and r in (2, 4, 8)) or inner == 2)
    np.testing.assert_array_equal(cpu_ops.SEARCH_OPS.reduce_sum(x, 1), want)
    # the same sums through a transposed view (read in its memory order) and a misaligned start
    np.testing.assert_array_equal(cpu_ops.SEARCH_OPS.reduce_sum(x.transpose(2, 1, 0), 1),
                                  REF.reduce_sum(x.transpose(2, 1, 0), 1))
    flat = np.empty(x.size + 1, np.uint16)[1:].reshape(x.shape)
    flat[...] = x
    np.testing.assert_array_equal(cpu_ops.SEARCH_OPS.reduce_sum(flat, 1), want)


@pytest.mark.skipif(not cpu_ops.HAVE_NUMBA, reason="numba does not import here")
@pytest.mark.parametrize("block", [1, 7, 64, 1 << 17])
@pytest.mark.parametrize("terms", [None, 3])
def test_float64_products_by_blocks_equal_the_numpy_backend(block, terms, monkeypatch):
    # matmul_f64 takes the product a block of output rows at a time (F64_CHUNK elements), several
    # batch entries at a time when they are small, with a uint16 or float64 a; MAX_EXACT_TERMS
    # lowered reaches the sums of partial products
    from mirage_lab.verify import field

    if terms is not None:
        monkeypatch.setattr(field, "MAX_EXACT_TERMS", terms)
    ops = cpu_ops.SearchFieldOps()
    monkeypatch.setattr(ops, "F64_CHUNK", block)
    monkeypatch.setattr(ops, "F64_MIN_ROWS", 1)   # the small shapes below reach the row blocks too
    rng = np.random.default_rng(block)
    for sa, sb in [((3, 5, 10), (3, 10, 4)), ((40, 10), (10, 3)), ((2, 3, 30, 6), (2, 3, 6, 2)),
                   ((2, 1, 9, 7), (1, 3, 7, 5)), ((1, 5, 8), (4, 8, 1))]:
        a, b = _rand(rng, sa), _rand(rng, sb)
        a[..., 0, :] = PQ - 1
        b[..., :, 0] = PQ - 1
        want = REF.matmul(a, b)
        for got in (ops.matmul_f64(a, b.astype(np.float64)), ops.matmul_f64(a.astype(np.float64), b)):
            assert got.dtype == np.uint16 and got.shape == want.shape
            np.testing.assert_array_equal(got, want)


@pytest.mark.skipif(not cpu_ops.HAVE_NUMBA, reason="numba does not import here")
def test_a_wide_product_is_not_cut_into_blocks_of_a_few_rows():
    # each row block streams all of b through BLAS: blocks of F64_CHUNK // n rows (5 rows for a
    # [256, 3072] x [3072, 24576] product) made Gemma 7B prefill's search 6x slower per product
    ops = cpu_ops.SearchFieldOps()
    seen = []
    real = cpu_ops._mm_reduce
    try:
        cpu_ops._mm_reduce = lambda a, b, out, chunk: (seen.append(a.shape), real(a, b, out, chunk))
        rng = np.random.default_rng(0)
        a, b = _rand(rng, (300, 8)), _rand(rng, (8, 4096))
        got = ops.matmul_f64(a, b.astype(np.float64))
    finally:
        cpu_ops._mm_reduce = real
    np.testing.assert_array_equal(got, REF.matmul(a, b))
    assert [s[0] for s in seen] == [ops.F64_MIN_ROWS, 300 - ops.F64_MIN_ROWS]

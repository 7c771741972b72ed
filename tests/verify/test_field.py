"""Op-level fingerprint arithmetic: the field laws the verifier relies on, exact integer
results, and tile gather/scatter/accumulate that agree with the reference interpreter."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import mirage_lab as mi
from mirage_lab.errors import MirageLabError
from mirage_lab.interp import reference as ref
from mirage_lab.verify import field as F
from mirage_lab.verify.fingerprint import fingerprint_graph

RNG = np.random.default_rng(1234)


def rand_fp(*shape):
    return RNG.integers(0, F.PQ, size=shape, dtype=np.uint16)


def _is_prime(n):
    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))


def test_field_constants():
    assert _is_prime(F.P) and _is_prime(F.Q)
    assert (F.P - 1) % F.Q == 0 and F.PQ == F.P * F.Q < 2 ** 16
    assert F.E_P % F.P == 1 and F.E_P % F.Q == 0 and F.E_Q % F.Q == 1 and F.E_Q % F.P == 0
    assert pow(F.EXP_BASE, F.Q, F.P) == 1 and F.EXP_BASE % F.P != 1
    assert F.MAX_EXACT_TERMS * (F.PQ - 1) ** 2 < 2 ** 53


def test_exp_is_a_homomorphism_and_exp0_is_1():
    a, b = rand_fp(5000).astype(np.int64), rand_fp(5000).astype(np.int64)
    e = F.unary_table("exp").astype(np.int64)
    assert np.array_equal(e[(a + b) % F.PQ], e[a] * e[b] % F.PQ)
    assert e[0] == 1
    # exponent lives in Z_q: values equal mod q have equal exp; p-part is a power of g.
    assert e[5] == e[5 + F.Q]
    assert e[7] % F.P == pow(F.EXP_BASE, 7, F.P) and e[7] % F.Q == 1


def test_division_is_multiplication_by_the_inverse():
    a = rand_fp(4000)
    b = rand_fp(4000)
    unit = (b % F.P != 0) & (b % F.Q != 0)
    ab = F.binary("mul", a, b)
    assert np.array_equal(F.binary("div", ab, b)[unit], a[unit])
    inv = F.unary_table("inv").astype(np.int64)
    assert inv[0] == 0  # x**(m-2) per residue: 0 -> 0, so 1/(bc) = (1/b)(1/c) always
    b2 = rand_fp(4000)
    assert np.array_equal(F.unary("inv", F.binary("mul", b, b2)), F.binary("mul", F.unary("inv", b), F.unary("inv", b2)))
    x = np.arange(F.PQ)
    u = (x % F.P != 0) & (x % F.Q != 0)
    assert np.all((x[u] * inv[x[u]]) % F.PQ == 1)


def test_sqrt_is_multiplicative_and_a_true_root_mod_p():
    s = F.unary_table("sqrt").astype(np.int64)
    a, b = rand_fp(3000).astype(np.int64), rand_fp(3000).astype(np.int64)
    assert np.array_equal(s[a * b % F.PQ], s[a] * s[b] % F.PQ)
    sq = (a * a) % F.P
    assert np.all((s[a * a % F.PQ] % F.P) ** 2 % F.P == sq)


def test_scalars_map_to_fractions():
    assert F.field_scalar(1 / 4096) == F.field_inverse(4096)
    assert F.field_scalar(0.5) * F.field_scalar(0.5) % F.PQ == F.field_scalar(0.25)
    assert F.field_scalar(-2.0) == F.PQ - 2
    x = rand_fp(100)
    half = F.unary("mul_scalar", x, {"scalar": 0.5})
    assert np.array_equal(F.binary("add", half, half), x)


def test_clamp_depends_on_bounds_and_is_idempotent():
    x = rand_fp(2000)
    c1 = F.unary("clamp", x, {"lo": 0.0, "hi": 1.0})
    c2 = F.unary("clamp", x, {"lo": -1.0, "hi": 1.0})
    assert not np.array_equal(c1, c2)
    assert np.array_equal(F.unary("clamp", c1, {"lo": 0.0, "hi": 1.0}), c1)
    r = F.unary("relu", x)
    assert np.array_equal(F.unary("relu", r), r)


def test_elementwise_ops_against_python_ints():
    a, b = rand_fp(3, 1, 7), rand_fp(1, 4, 7)
    A, B = np.broadcast_arrays(a.astype(object), b.astype(object))
    for op, fn in (("add", lambda x, y: (x + y) % F.PQ), ("sub", lambda x, y: (x - y) % F.PQ),
                   ("mul", lambda x, y: x * y % F.PQ), ("pow", lambda x, y: pow(int(x), int(y), F.PQ))):
        want = np.vectorize(fn, otypes=[object])(A, B).astype(np.int64)
        assert np.array_equal(F.binary(op, a, b), want), op
    sq = F.unary("square", a).astype(np.int64)
    assert np.array_equal(sq, a.astype(np.int64) ** 2 % F.PQ)
    silu = F.unary("silu", a).astype(np.int64)
    e = F.unary("exp", a).astype(np.int64)
    assert np.array_equal(silu % F.P, a.astype(np.int64) * e % F.P)   # x·e^x in the p-part
    # exp reads the q-residue: exp∘silu and exp∘gelu must not collapse to exp (or to each other)
    x = np.arange(F.PQ, dtype=np.uint16)
    ex, es, eg = (F.unary("exp", y) for y in (x, F.unary("silu", x), F.unary("gelu", x)))
    assert (ex != es).mean() > 0.9 and (ex != eg).mean() > 0.9 and (es != eg).mean() > 0.9


def test_matmul_is_exact_and_chunks_long_sums(monkeypatch):
    a, b = rand_fp(2, 3, 5, 70), rand_fp(2, 1, 70, 4)
    want = np.einsum("...ik,...kj->...ij", a.astype(object), b.astype(object)) % F.PQ
    assert np.array_equal(F.matmul(a, b), want.astype(np.int64))
    monkeypatch.setattr(F, "MAX_EXACT_TERMS", 7)  # force the chunked path
    assert np.array_equal(F.matmul(a, b), want.astype(np.int64))
    with pytest.raises(MirageLabError, match="do not chain"):
        F.matmul(a, a)


def test_reduce_sum_keeps_the_axis():
    x = rand_fp(2, 3, 9)
    r = F.reduce_sum(x, -2)
    assert r.shape == (2, 1, 9)
    assert np.array_equal(r, x.astype(np.int64).sum(1, keepdims=True) % F.PQ)


GATHER_CASES = [
    # dims, grid, imap, fmap, frange
    ((8, 64), (4, 1, 1), (1, -1, -1), 0, 2),
    ((8, 64), (4, 1, 1), (-1, -1, -1), 1, 4),         # replicated: B stays 1
    ((4, 8, 128), (2, 4, 1), (0, 2, -1), 2, 4),       # grid and loop on the same dim
    ((2, 16, 64), (2, 2, 4), (0, -1, 1), -1, 1),      # a replicated axis between mapped ones
    ((2, 64, 32), (2, 4, 2), (0, 2, -1), 2, 2),
]


@pytest.mark.parametrize("dims,grid,imap,fmap,frange", GATHER_CASES)
def test_gather_tiles_matches_the_interpreter(dims, grid, imap, fmap, frange):
    x = rand_fp(2, *dims)
    got = F.gather_tiles(x, grid, imap, fmap, frange)
    for t in range(2):
        want = ref.gather_tiles(torch.from_numpy(x[t].astype(np.int64)), grid, imap, fmap, frange).numpy()
        g = np.broadcast_to(got[t], want.shape)  # B == 1 stands for "the same tile in every block"
        assert np.array_equal(g, want)
    if all(grid[a] == 1 or imap[a] < 0 for a in range(3)):
        assert got.shape[1] == 1


@pytest.mark.parametrize("tile,grid,omap", [((4, 8), (4, 1, 1), (1, -1, -1)), ((2, 8, 8), (2, 2, 2), (0, 1, 2)),
                                            ((1, 16, 4), (2, 8, 1), (0, 2, -1))])
def test_scatter_tiles_matches_the_interpreter(tile, grid, omap):
    nb = grid[0] * grid[1] * grid[2]
    out_dims = list(tile)
    for a in range(3):
        if grid[a] > 1:
            out_dims[omap[a]] *= grid[a]
    x = rand_fp(2, nb, *tile)
    got = F.scatter_tiles(x, grid, omap, out_dims)
    for t in range(2):
        want = ref.scatter_tiles(torch.from_numpy(x[t].astype(np.int64)), grid, omap, out_dims).numpy()
        assert np.array_equal(got[t], want)
    one = F.scatter_tiles(x[:, :1], grid, omap, out_dims)  # a replicated tile is written by every block
    assert np.array_equal(one, F.scatter_tiles(np.broadcast_to(x[:, :1], x.shape), grid, omap, out_dims))


@pytest.mark.parametrize("kind", F.ACCUM_KINDS)
@pytest.mark.parametrize("replicated", [False, True])
def test_accumulators_against_a_literal_loop(kind, replicated):
    frange, dimx = 4, 4
    x = rand_fp(2, 3, 1 if replicated else frange, 5, 8).astype(np.int64)
    got = F.accum(kind, x, axis=2, frange=frange, dimx=dimx).astype(np.int64)
    acc = 0
    for i in range(frange):
        xi = x[:, :, 0 if replicated else i]
        if kind is None:
            inc = xi
        elif kind in ("sum", "mean"):
            inc = xi.sum(-1, keepdims=True)
        elif kind == "rms":
            inc = (xi * xi).sum(-1, keepdims=True)
        else:
            inc = xi.reshape(2, 3, 5, 8 // dimx, dimx).sum(-2)
        acc = acc + inc
    acc %= F.PQ
    if kind == "mean":
        acc = acc * F.field_inverse(frange * 8) % F.PQ
    if kind == "rms":
        acc = F.rms_table(frange * 8)[acc].astype(np.int64)
    assert np.array_equal(got, acc)


def test_kernel_rms_norm_and_block_rms_accumulator_agree():
    x = rand_fp(2, 3, 64)
    kernel = F.rms_norm(x)
    tiles = x.reshape(2, 3, 4, 16).transpose(0, 2, 1, 3)[:, None]   # [k, B=1, R=4, 3, 16]
    r = F.accum("rms", tiles, axis=2, frange=4)                       # [k, 1, 3, 1]
    block = F.binary("div", x[:, None], r)[:, 0]
    assert np.array_equal(kernel, block)


def _linear_graphs():
    """μGraphs of only +, ·, sums and accumulators: on small integer inputs the float
    interpreter is exact, so its result mod PQ must equal the fingerprint."""
    import verify_graphs as vg

    out = [vg.splitk_2d(4, 64, 32, 2, 2, 2), vg.two_linear_kernel_add(4, 64, 32, 4, 4),
           vg.lora_fused(4, 32, 32, 8, 4), vg.lora_concat(4, 32, 32, 8, 4)]
    g = mi.new_kernel_graph()
    X = g.new_input((4, 8, 128), dtype=mi.float32)
    bg = mi.new_threadblock_graph((2, 4, 1), forloop_range=4, reduction_dimx=4)
    x = bg.new_input(X, input_map=(0, 2, -1), forloop_dim=2)
    bg.new_output(bg.forloop_accum(x, "sum"), output_map=(0, 2, -1))
    bg.new_output(bg.sub(bg.forloop_accum(x), bg.forloop_accum(bg.mul(x, x))), output_map=(0, 2, -1))
    bg.new_output(bg.forloop_accum(x, "sum_todimx"), output_map=(0, 2, -1))
    for t in g.customized([X], bg):
        g.mark_output(t)
    out.append(g)
    g = mi.new_kernel_graph()
    X = g.new_input((2, 16, 64), dtype=mi.float32)
    bg = mi.new_threadblock_graph((2, 2, 2), forloop_range=2, reduction_dimx=8)
    x = bg.new_input(X, input_map=(0, 1, -1), forloop_dim=2)   # z replicated: blocks along z write copies
    bg.new_output(bg.forloop_accum(bg.reduction(x, 1), "sum_todimx"), output_map=(0, 1, 2))
    g.mark_output(g.customized([X], bg)[0])
    out.append(g)
    return out


@pytest.mark.parametrize("idx", range(6))
def test_linear_graphs_equal_the_interpreter_mod_pq(idx):
    g = _linear_graphs()[idx]
    ints = [RNG.integers(0, 4, size=(2,) + t.dims) for t in g.inputs]
    fp = fingerprint_graph(g, [a.astype(np.uint16) for a in ints])
    for t in range(2):
        outs = mi.run_reference(g, [torch.from_numpy(a[t].astype(np.float64)) for a in ints])
        for o, f in zip(outs, fp):
            assert np.array_equal(o.numpy().astype(np.int64) % F.PQ, f[t].astype(np.int64))


def test_bad_input_raises_mirage_errors():
    with pytest.raises(MirageLabError, match="unknown unary op"):
        F.unary("tanh", rand_fp(3))
    with pytest.raises(MirageLabError, match="unknown binary op"):
        F.binary("max", rand_fp(3), rand_fp(3))
    with pytest.raises(MirageLabError, match="unknown accumulator"):
        F.accum("max", rand_fp(1, 1, 2, 4))
    with pytest.raises(MirageLabError, match="forloop_range"):
        F.accum(None, rand_fp(1, 1, 3, 4), frange=4)
    with pytest.raises(MirageLabError, match="integer arrays"):
        F.unary("exp", np.ones(3, dtype=np.float32))
    with pytest.raises(MirageLabError, match="unknown backend"):
        F.get_ops("tpu")


def test_cuda_backend_needs_a_gpu_or_the_simulator():
    from mirage_lab.gpu.numba_compat import SIMULATOR, gpu_available

    if gpu_available() or SIMULATOR:
        pytest.skip("a CUDA device (or the simulator) is present here")
    with pytest.raises(MirageLabError, match="needs a CUDA GPU"):
        F.get_ops("cuda")
    assert F.get_ops("auto").name == "numpy"


def test_names_moved_out_of_field_still_resolve():
    from mirage_lab.verify import backends, numpy_backend, tile_plans

    assert F.FieldOps is numpy_backend.FieldOps and F.unary is numpy_backend.unary
    assert F.get_ops is backends.get_ops and F.gather_plan is tile_plans.gather_plan
    with pytest.raises(AttributeError):
        F.no_such_name  # noqa: B018


def test_copy_view_copies_a_strided_view():
    x = np.arange(12, dtype=np.uint16).reshape(3, 4)
    got = F.get_ops("numpy").copy_view(x, [2, 3], [1, 4])
    assert got.flags.c_contiguous and np.array_equal(got, x.T[:2])

"""Source text shared by every generated kernel module (and by exported modules).

A generated module is HEADER + PRELUDE + kernels + host code. The header differs between a
module cached by the runtime (it imports numba through ``mirage_lab.gpu.numba_compat``)
and an exported one (it carries the ``np.row_stack`` shim inline and depends on torch and
numba only). The prelude defines the few bit-level helpers numba lacks:

* ``ldg4(a, i)`` / ``ldg2(a, i)``: one 16- / 8-byte load of 4 / 2 int32 words from an int32
  view of a tensor (scalar fp16 loads cap a kernel near 1.3 TB/s; wide ones reach ~2.9);
* ``h2f(w)``: the low 16 bits of an integer read as an fp16, widened to float32;
* ``u2f(w)`` / ``f2u(x)``: float32 <-> int32 bit casts; ``bf2f(w)``: low 16 bits as a bf16;
* ``f2h(x)``: float32 rounded to fp16, returned as int16 bits (outputs are int16 views).
* ``sts4(a, i, x0..x3)`` / ``sts2(a, i, x0, x1)``: one 16- / 8-byte store of float32 values
  (staged tiles: a thread's 8 consecutive floats in scalar stores hit one bank 8 times per warp).
* tensor cores (``CodegenOptions(mma=True)``): ``pk16(lo, hi)`` packs two 16-bit values into
  one word; ``pkl(a, b)`` / ``pkh(a, b)`` pair the low / high halves of two words (a B
  fragment: two k rows of one column); ``mma_f16`` / ``mma_bf16(a0..a3, b0, b1, c0..c3)`` is
  one ``mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}`` returning the 4 float32 results;
  ``movt(w)`` is one ``movmatrix.sync.aligned.m8n8.trans.b16``: the warp's 32 words are an 8x8
  matrix of 16-bit values (lane L holds row L // 4, columns 2(L % 4) and 2(L % 4) + 1, low half
  first), and each lane gets its word of the transposed matrix (``mma_b16``'s B fragments).
* ``ldsm4(sm, i)`` / ``ldsm4t(sm, i)``: one ``ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16``: lane
  ``8m + r`` passes the word index of row ``r`` of 8x8 matrix ``m`` (8 16-bit values, 16-byte aligned); each
  lane gets 4 words, word ``L % 4`` of row ``L // 4`` of each matrix (an A fragment), or with ``.trans``
  rows ``2(L % 4)``, ``+ 1`` of column ``L // 4`` (B fragments of a tile kept k-major).
* ``cp16(sm, i, a, j)``: one ``cp.async.cg`` of 16 bytes, int32 words ``a[j:j+4]`` to shared ``sm[i:i+4]``
  (``async_stages``); ``cp_commit()`` closes a group of them, ``cp_waitN()`` waits until at most N groups
  are still in flight (under the simulator the copy is done at once and these do nothing).

On the GPU these are numba intrinsics emitting plain LLVM IR (a vector load, trunc, bitcast,
fpext; inline PTX for ``mma.sync``); under the CUDA simulator they are numpy functions with
the same results (the warp-wide ``mma`` exchanges the 32 lanes' registers through a barrier
of the simulator's threads).
"""
from __future__ import annotations

HEADER_PACKAGE = '''\
import math
import numpy as np
import torch
from mirage_lab.gpu.numba_compat import SIMULATOR, cuda, intrinsic, llvm_ir, numba, types
'''

HEADER_STANDALONE = '''\
import math
import os
import numpy as np
import torch

if not hasattr(np, "row_stack"):  # numba-cuda 0.30 still calls np.row_stack (removed in NumPy 2.5)
    np.row_stack = np.vstack
import numba  # noqa: E402
from numba import cuda, types  # noqa: E402
from numba.cuda.extending import intrinsic  # noqa: E402
from llvmlite import ir as llvm_ir  # noqa: E402

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
'''

PRELUDE = '''\
f32 = np.float32 if SIMULATOR else numba.float32
i32 = np.int32 if SIMULATOR else numba.int32
F32, I32 = numba.float32, numba.int32   # dynamic shared arrays: the simulator sizes them by a numba type's dtype

if SIMULATOR:
    def ldg4(a, i):
        return a[i], a[i + 1], a[i + 2], a[i + 3]

    def ldg2(a, i):
        return a[i], a[i + 1]

    def h2f(w):
        return np.float32(np.array([int(w) & 0xFFFF], dtype=np.uint16).view(np.float16)[0])

    def u2f(w):
        return np.array([int(w) & 0xFFFFFFFF], dtype=np.uint32).view(np.float32)[0]

    def bf2f(w):
        return np.array([(int(w) & 0xFFFF) << 16], dtype=np.uint32).view(np.float32)[0]

    def f2u(x):
        return np.array([x], dtype=np.float32).view(np.int32)[0]

    def f2h(x):
        return np.array([x], dtype=np.float16).view(np.int16)[0]

    def sts4(a, i, x0, x1, x2, x3):
        a[i], a[i + 1], a[i + 2], a[i + 3] = x0, x1, x2, x3

    def sts2(a, i, x0, x1):
        a[i], a[i + 1] = x0, x1
else:
    def _as_int(builder, v, width):
        w = v.type.width
        if w > width:
            return builder.trunc(v, llvm_ir.IntType(width))
        if w < width:
            return builder.zext(v, llvm_ir.IntType(width))
        return v

    def _vector_load(n):
        def typer(typingctx, arr, idx):
            sig = types.UniTuple(types.int32, n)(arr, idx)

            def codegen(context, builder, signature, args):
                ary = context.make_array(signature.args[0])(context, builder, args[0])
                ptr = builder.gep(ary.data, [args[1]])
                vty = llvm_ir.VectorType(llvm_ir.IntType(32), n)
                vec = builder.load(builder.bitcast(ptr, vty.as_pointer()), align=4 * n)
                parts = [builder.extract_element(vec, llvm_ir.Constant(llvm_ir.IntType(32), k)) for k in range(n)]
                return context.make_tuple(builder, signature.return_type, parts)

            return sig, codegen
        return typer

    ldg4 = intrinsic(_vector_load(4))
    ldg2 = intrinsic(_vector_load(2))

    def _vector_store(n):
        def typer(typingctx, arr, idx, *xs):
            sig = types.none(arr, idx, *xs)

            def codegen(context, builder, signature, args):
                ary = context.make_array(signature.args[0])(context, builder, args[0])
                ptr = builder.gep(ary.data, [args[1]])
                f32t = llvm_ir.FloatType()
                vty = llvm_ir.VectorType(f32t, n)
                vec = llvm_ir.Constant(vty, None)
                for k, v in enumerate(args[2:]):
                    v = v if v.type == f32t else builder.fptrunc(v, f32t)
                    vec = builder.insert_element(vec, v, llvm_ir.Constant(llvm_ir.IntType(32), k))
                builder.store(vec, builder.bitcast(ptr, vty.as_pointer()), align=4 * n)
                return context.get_dummy_value()

            return sig, codegen
        return typer

    @intrinsic
    def sts4(typingctx, arr, idx, x0, x1, x2, x3):
        return _vector_store(4)(typingctx, arr, idx, x0, x1, x2, x3)

    @intrinsic
    def sts2(typingctx, arr, idx, x0, x1):
        return _vector_store(2)(typingctx, arr, idx, x0, x1)

    @intrinsic
    def h2f(typingctx, w):
        def codegen(context, builder, signature, args):
            h = builder.bitcast(_as_int(builder, args[0], 16), llvm_ir.HalfType())
            return builder.fpext(h, llvm_ir.FloatType())
        return types.float32(w), codegen

    @intrinsic
    def u2f(typingctx, w):
        def codegen(context, builder, signature, args):
            return builder.bitcast(_as_int(builder, args[0], 32), llvm_ir.FloatType())
        return types.float32(w), codegen

    @intrinsic
    def bf2f(typingctx, w):
        def codegen(context, builder, signature, args):
            h = builder.zext(_as_int(builder, args[0], 16), llvm_ir.IntType(32))
            return builder.bitcast(builder.shl(h, llvm_ir.Constant(llvm_ir.IntType(32), 16)), llvm_ir.FloatType())
        return types.float32(w), codegen

    @intrinsic
    def f2u(typingctx, x):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], llvm_ir.IntType(32))
        return types.int32(x), codegen

    @intrinsic
    def f2h(typingctx, x):
        def codegen(context, builder, signature, args):
            h = builder.fptrunc(args[0], llvm_ir.HalfType())
            return builder.bitcast(h, llvm_ir.IntType(16))
        return types.int16(x), codegen

if SIMULATOR:
    def _w32(v):
        return np.array([int(v) & 0xFFFFFFFF], dtype=np.uint32).view(np.int32)[0]

    def pk16(lo, hi):
        return _w32((int(lo) & 0xFFFF) | ((int(hi) & 0xFFFF) << 16))

    def pkl(a, b):
        return _w32((int(a) & 0xFFFF) | ((int(b) & 0xFFFF) << 16))

    def pkh(a, b):
        return _w32(((int(a) >> 16) & 0xFFFF) | (int(b) & 0xFFFF0000))

    def _halves(w, bf):
        u = int(w) & 0xFFFFFFFF
        if bf:
            v = np.array([(u & 0xFFFF) << 16, u & 0xFFFF0000], dtype=np.uint32).view(np.float32)
        else:
            v = np.array([u], dtype=np.uint32).view(np.float16)
        return float(v[0]), float(v[1])

    def _warp_op(kind, value, compute):
        # one warp-wide instruction: every lane brings its value, one lane computes all 32 results
        th = _threading.current_thread()
        lane, warp = th.thread_id % 32, th.thread_id // 32
        with _MMA_LOCK:
            states = th._manager.__dict__.setdefault(kind, {})
            key = (th.blockIdx.x, th.blockIdx.y, th.blockIdx.z, warp)
            st = states.get(key)
            if st is None:
                st = states[key] = (_threading.Barrier(32), [None] * 32, [None] * 32)
        bar, slots, outs = st
        slots[lane] = value
        if bar.wait() == 0:
            outs[:] = compute(slots)
        bar.wait()
        return outs[lane]

    def _mma_sim(regs, bf):
        # mma.m16n8k16 (row.col, float32 accumulate) of the warp's registers
        def compute(slots):
            A = np.zeros((16, 16))
            B = np.zeros((16, 8))
            C = np.zeros((16, 8))
            for L in range(32):
                g, t = L // 4, L % 4
                a0, a1, a2, a3, b0, b1, c0, c1, c2, c3 = slots[L]
                A[g, 2 * t:2 * t + 2] = _halves(a0, bf)
                A[g + 8, 2 * t:2 * t + 2] = _halves(a1, bf)
                A[g, 2 * t + 8:2 * t + 10] = _halves(a2, bf)
                A[g + 8, 2 * t + 8:2 * t + 10] = _halves(a3, bf)
                B[2 * t:2 * t + 2, g] = _halves(b0, bf)
                B[2 * t + 8:2 * t + 10, g] = _halves(b1, bf)
                C[g, 2 * t:2 * t + 2] = (c0, c1)
                C[g + 8, 2 * t:2 * t + 2] = (c2, c3)
            D = (A @ B + C).astype(np.float32)
            return [(D[L // 4, 2 * (L % 4)], D[L // 4, 2 * (L % 4) + 1], D[L // 4 + 8, 2 * (L % 4)],
                     D[L // 4 + 8, 2 * (L % 4) + 1]) for L in range(32)]
        return _warp_op("_mma_states", regs, compute)

    def mma_f16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return _mma_sim((a0, a1, a2, a3, b0, b1, c0, c1, c2, c3), False)

    def movt(w):
        # movmatrix.m8n8.trans.b16: element (r, c) of the 8x8 matrix is half c % 2 of lane 4r + c // 2's word
        def compute(slots):
            def el(r, c):
                return (slots[4 * r + c // 2] >> (16 * (c % 2))) & 0xFFFF
            return [_w32(el(2 * (L % 4), L // 4) | (el(2 * (L % 4) + 1, L // 4) << 16)) for L in range(32)]
        return _warp_op("_movt_states", int(w) & 0xFFFFFFFF, compute)

    def mma_bf16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return _mma_sim((a0, a1, a2, a3, b0, b1, c0, c1, c2, c3), True)

    def _ldsm(sm, i, trans):
        # ldmatrix.m8n8.x4(.trans).b16: lane 8m + r names row r of 8x8 matrix m (4 words from sm[i]); lane
        # L = 4g + t gets word t of row g of each matrix, or (.trans) the pair of rows 2t, 2t + 1 in column g
        def compute(slots):
            def word(m, r, w):
                return int(f2u(sm[slots[8 * m + r] + w])) & 0xFFFFFFFF

            def half(m, r, c):
                return (word(m, r, c // 2) >> (16 * (c % 2))) & 0xFFFF
            out = []
            for L in range(32):
                g, t = L // 4, L % 4
                if trans:
                    out.append(tuple(_w32(half(m, 2 * t, g) | (half(m, 2 * t + 1, g) << 16)) for m in range(4)))
                else:
                    out.append(tuple(_w32(word(m, g, t)) for m in range(4)))
            return out
        return _warp_op("_ldsm_t_states" if trans else "_ldsm_states", int(i), compute)

    def ldsm4(sm, i):
        return _ldsm(sm, i, False)

    def ldsm4t(sm, i):
        return _ldsm(sm, i, True)

    def cp16(sm, i, a, j):
        # cp.async of 16 bytes, done at once: the waits below have nothing left to wait for
        sm[i], sm[i + 1], sm[i + 2], sm[i + 3] = u2f(a[j]), u2f(a[j + 1]), u2f(a[j + 2]), u2f(a[j + 3])

    def cp_commit():
        pass

    def cp_wait0():
        pass

    cp_wait1 = cp_wait2 = cp_wait0

    import threading as _threading
    _MMA_LOCK = _threading.Lock()
else:
    def _i32c(v):
        return llvm_ir.Constant(llvm_ir.IntType(32), v)

    @intrinsic
    def pk16(typingctx, lo, hi):
        def codegen(context, builder, signature, args):
            i32t = llvm_ir.IntType(32)
            lo32 = builder.zext(_as_int(builder, args[0], 16), i32t)
            hi32 = builder.zext(_as_int(builder, args[1], 16), i32t)
            return builder.or_(lo32, builder.shl(hi32, _i32c(16)))
        return types.int32(lo, hi), codegen

    @intrinsic
    def pkl(typingctx, a, b):
        def codegen(context, builder, signature, args):  # (a & 0xFFFF) | (b << 16)
            x = builder.and_(_as_int(builder, args[0], 32), _i32c(0xFFFF))
            return builder.or_(x, builder.shl(_as_int(builder, args[1], 32), _i32c(16)))
        return types.int32(a, b), codegen

    @intrinsic
    def pkh(typingctx, a, b):
        def codegen(context, builder, signature, args):  # (a >> 16) | (b & 0xFFFF0000)
            x = builder.lshr(_as_int(builder, args[0], 32), _i32c(16))
            return builder.or_(x, builder.and_(_as_int(builder, args[1], 32), _i32c(-65536)))
        return types.int32(a, b), codegen

    def _mma(ab):
        ptx = (f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32 "
               "{$0,$1,$2,$3}, {$4,$5,$6,$7}, {$8,$9}, {$10,$11,$12,$13};")

        def typer(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
            sig = types.UniTuple(types.float32, 4)(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)

            def codegen(context, builder, signature, args):
                f32t, i32t = llvm_ir.FloatType(), llvm_ir.IntType(32)
                ins = [_as_int(builder, v, 32) for v in args[:6]]
                for v in args[6:]:
                    ins.append(v if v.type == f32t else builder.fptrunc(v, f32t))
                fty = llvm_ir.FunctionType(llvm_ir.LiteralStructType([f32t] * 4), [i32t] * 6 + [f32t] * 4)
                asm = llvm_ir.InlineAsm(fty, ptx, "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", side_effect=True)
                res = builder.call(asm, ins)
                parts = [builder.extract_value(res, k) for k in range(4)]
                return context.make_tuple(builder, signature.return_type, parts)

            return sig, codegen
        return typer

    mma_f16 = intrinsic(_mma("f16"))
    mma_bf16 = intrinsic(_mma("bf16"))

    @intrinsic
    def cp16(typingctx, sm, i, a, j):
        # 16 bytes of int32 array a from word j to shared float32 array sm at word i, asynchronously
        # (cp.async.cg: through L2 only), both 16-byte aligned; done once a later cp_wait lets it be
        sig = types.none(sm, i, a, j)

        def codegen(context, builder, signature, args):
            i64 = llvm_ir.IntType(64)
            sary = context.make_array(signature.args[0])(context, builder, args[0])
            gary = context.make_array(signature.args[2])(context, builder, args[2])
            sp = builder.ptrtoint(builder.gep(sary.data, [args[1]]), i64)
            gp = builder.ptrtoint(builder.gep(gary.data, [args[3]]), i64)
            fty = llvm_ir.FunctionType(llvm_ir.VoidType(), [i64, i64])
            ptx = ("{ .reg .u64 sa, ga; .reg .u32 s32; cvta.to.shared.u64 sa, $0; cvt.u32.u64 s32, sa; "
                   "cvta.to.global.u64 ga, $1; cp.async.cg.shared.global [s32], [ga], 16; }")
            builder.call(llvm_ir.InlineAsm(fty, ptx, "l,l,~{memory}", side_effect=True), [sp, gp])
            return context.get_dummy_value()

        return sig, codegen

    def _ldsm(trans):
        ptx = ("{ .reg .u64 a; .reg .u32 s; cvta.to.shared.u64 a, $4; cvt.u32.u64 s, a; "
               f"ldmatrix.sync.aligned.m8n8.x4{'.trans' if trans else ''}.shared.b16 {{$0, $1, $2, $3}}, [s]; }}")

        def typer(typingctx, sm, i):
            sig = types.UniTuple(types.int32, 4)(sm, i)

            def codegen(context, builder, signature, args):
                i32t, i64 = llvm_ir.IntType(32), llvm_ir.IntType(64)
                ary = context.make_array(signature.args[0])(context, builder, args[0])
                sp = builder.ptrtoint(builder.gep(ary.data, [args[1]]), i64)
                fty = llvm_ir.FunctionType(llvm_ir.LiteralStructType([i32t] * 4), [i64])
                res = builder.call(llvm_ir.InlineAsm(fty, ptx, "=r,=r,=r,=r,l,~{memory}", side_effect=True), [sp])
                return context.make_tuple(builder, signature.return_type, [builder.extract_value(res, k) for k in range(4)])

            return sig, codegen
        return typer

    ldsm4 = intrinsic(_ldsm(False))
    ldsm4t = intrinsic(_ldsm(True))

    def _cp_op(ptx):
        def typer(typingctx):
            def codegen(context, builder, signature, args):
                fty = llvm_ir.FunctionType(llvm_ir.VoidType(), [])
                builder.call(llvm_ir.InlineAsm(fty, ptx, "~{memory}", side_effect=True), [])
                return context.get_dummy_value()
            return types.none(), codegen
        return typer

    cp_commit = intrinsic(_cp_op("cp.async.commit_group;"))
    cp_wait0 = intrinsic(_cp_op("cp.async.wait_group 0;"))
    cp_wait1 = intrinsic(_cp_op("cp.async.wait_group 1;"))
    cp_wait2 = intrinsic(_cp_op("cp.async.wait_group 2;"))

    @intrinsic
    def movt(typingctx, w):
        def codegen(context, builder, signature, args):  # the transpose of the warp's 8x8 b16 matrix
            i32t = llvm_ir.IntType(32)
            fty = llvm_ir.FunctionType(i32t, [i32t])
            asm = llvm_ir.InlineAsm(fty, "movmatrix.sync.aligned.m8n8.trans.b16 $0, $1;", "=r,r", side_effect=True)
            return builder.call(asm, [_as_int(builder, args[0], 32)])
        return types.int32(w), codegen

if SIMULATOR:
    fexp, fsqrt, fpow = np.exp, np.sqrt, np.power

    def ferf(x):
        return np.float32(math.erf(float(x)))

    def f2bf(x):
        u = int(np.array([x], dtype=np.float32).view(np.uint32)[0])
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        return np.array([u & 0xFFFF], dtype=np.uint16).view(np.int16)[0]
else:
    fexp, fsqrt, fpow, ferf = math.exp, math.sqrt, math.pow, math.erf

    @intrinsic
    def f2bf(typingctx, x):
        def codegen(context, builder, signature, args):  # round to nearest even, keep the high half
            i32 = llvm_ir.IntType(32)
            u = builder.bitcast(args[0], i32)
            lsb = builder.and_(builder.lshr(u, llvm_ir.Constant(i32, 16)), llvm_ir.Constant(i32, 1))
            r = builder.add(builder.add(u, llvm_ir.Constant(i32, 0x7FFF)), lsb)
            return builder.trunc(builder.lshr(r, llvm_ir.Constant(i32, 16)), llvm_ir.IntType(16))
        return types.int16(x), codegen


def _dev(t):
    """A torch tensor as the array a kernel takes (numpy under the simulator)."""
    if SIMULATOR:
        return t.numpy()
    return cuda.as_cuda_array(t, sync=False)


def _empty(dims, dtype, dev, poison):
    if poison:
        return torch.full(dims, float("nan"), dtype=dtype, device=dev)
    return torch.empty(dims, dtype=dtype, device=dev)


class _Launch:
    """Launch one generated kernel on contiguous torch tensors, each seen as a flat array of ``views[i]``.

    ``go(stream_ptr, tensors)`` launches. Its first call goes through numba's dispatcher
    (which compiles the kernel or loads it from numba's disk cache) and then replaces
    ``go`` by a direct driver launch: ``cuLaunchKernel`` through ctypes, with the kernel's
    parameters (numba's array layout: meminfo, parent, nitems, itemsize, data, shape,
    strides) and the call's other arguments built once as ctypes objects, so a call only
    writes the data pointers. Where that cannot be set up, ``cuda.core.launch`` is used.
    ``smem``: bytes of dynamic shared memory (a kernel whose pool is past the static 48 KB); the
    kernel is then compiled first and opted in to that much (``cuKernelSetAttribute`` on the
    ``CUkernel`` numba-cuda loads from a library, ``cuFuncSetAttribute`` on an older ``CUfunction``).
    """

    def __init__(self, kernel, grid, threads, views, smem=0):
        self.kernel = kernel
        self.grid = grid
        self.block = (threads, 1, 1)
        self.views = [getattr(torch, v) for v in views]
        self.smem = smem
        self.go = self._first

    def _flat(self, tensors):
        return [a.view(v).view(-1) for a, v in zip(tensors, self.views)]

    def _dispatch(self, sptr, tensors):
        arrays = self._flat(tensors)
        self.kernel[self.grid, self.block, _stream(sptr), self.smem](*[_dev(a) for a in arrays])
        return arrays

    def _opt_in(self, tensors):
        """Compile the kernel for these arguments and let it launch with ``self.smem`` bytes of shared memory."""
        import ctypes

        from numba import typeof

        ov = self.kernel.compile(tuple(typeof(_dev(a)) for a in self._flat(tensors)))
        cufunc = ov._codelibrary.get_cufunc()
        handle = ctypes.c_void_p(int(cufunc.handle))
        attr, size = ctypes.c_int(8), ctypes.c_int(self.smem)   # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        lib = _libcuda()
        if hasattr(cufunc, "kernel"):
            # numba-cuda on cuda.core loads a library: the handle is a CUkernel, which cuFuncSetAttribute
            # refuses (CUDA_ERROR_INVALID_HANDLE, 400); cuKernelSetAttribute takes it with the device
            dev = ctypes.c_int()
            lib["cuDeviceGet"](ctypes.byref(dev), ctypes.c_int(int(cufunc.device.id)))
            set_attr = lib["cuKernelSetAttribute"]
            set_attr.restype = ctypes.c_int
            r = set_attr(attr, size, handle, dev)
        else:
            set_attr = lib["cuFuncSetAttribute"]
            set_attr.restype = ctypes.c_int
            r = set_attr(handle, attr, size)
        if r:
            raise RuntimeError(f"{set_attr.__name__}(max dynamic shared memory = {self.smem} bytes) failed: CUresult {r}")

    def _first(self, sptr, tensors):
        if self.smem and not SIMULATOR:   # only a pool past the static 48 KB is dynamic
            self._opt_in(tensors)
        arrays = self._dispatch(sptr, tensors)
        if SIMULATOR:
            self.go = self._dispatch
            return
        (ov,) = self.kernel.overloads.values()
        tmpl = []
        for a in arrays:
            n, isz = a.numel(), a.element_size()
            tmpl += (0, 0, n, isz, 0, n, isz)
        cufunc = ov._codelibrary.get_cufunc()
        try:
            self.go = _driver_launcher(int(cufunc.handle), self.grid, self.block, tmpl, self.smem)
        except Exception:
            try:
                self.go = _core_launcher(cufunc.kernel, self.grid, self.block, tmpl, self.smem)
            except Exception:  # another numba-cuda layout: keep the dispatcher path
                self.go = self._dispatch


def _driver_launcher(handle, grid, block, tmpl, smem=0):
    import ctypes

    n = len(tmpl)
    vals = (ctypes.c_uint64 * n)(*tmpl)
    base = ctypes.addressof(vals)
    params = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
    # no argtypes: every argument is passed as a ready ctypes object (no per-call conversion)
    launch = _libcuda()["cuLaunchKernel"]
    launch.restype = ctypes.c_int
    args = [ctypes.c_void_p(handle), *[ctypes.c_uint(v) for v in (*grid, *block, smem)],
            ctypes.c_void_p(0), ctypes.c_void_p(ctypes.addressof(params)), ctypes.c_void_p(None)]
    streams = {}
    slots = range(4, n, 7)

    def go(sptr, tensors):
        for j, t in zip(slots, tensors):
            vals[j] = t.data_ptr()
        s = streams.get(sptr)
        if s is None:
            s = streams[sptr] = ctypes.c_void_p(sptr)
        args[8] = s
        r = launch(*args)
        if r:
            raise RuntimeError(f"cuLaunchKernel failed: CUresult {r}")

    go.keep = (vals, params, args)  # the parameter buffers live as long as the launcher
    return go


def _core_launcher(kernel, grid, block, tmpl, smem=0):
    from cuda.core import LaunchConfig, launch

    config = LaunchConfig(grid=grid, block=block, shmem_size=smem)
    tmpl = tuple(tmpl)

    def go(sptr, tensors):
        args = list(tmpl)
        j = 4
        for a in tensors:
            args[j] = a.data_ptr()
            j += 7
        launch(_stream(sptr), config, kernel, *args)

    return go


_PREFETCH_BYTES = 64 << 20
_capturing = (lambda: False) if SIMULATOR else torch.cuda.is_current_stream_capturing


class _Buffers:
    """The tensors a module's kernels write, kept per (device, stream) between calls.

    Intermediates and scratch are reused: calls on one stream run in order, so the next
    call's kernels write them only after this call's have read them. Outputs are fresh for
    every call, but allocated for the next call right after this call's launches, while
    its kernels run, so the way from a call to its first launch allocates nothing. The call
    allocates everything itself (``take`` returns fresh tensors) with ``poison``, under the
    simulator, during CUDA-graph capture (a graph keeps its own buffers), and when the
    tensors are over 64 MiB (an allocation is then cheap beside the kernels' time).
    """

    def __init__(self, temps, outs):
        self.temps = temps          # [(dims, dtype) | None (a kernel without scratch)]
        self.outs = outs
        size = sum(math.prod(d) * t.itemsize for d, t in [*filter(None, temps), *outs])
        self.keep = not SIMULATOR and size <= _PREFETCH_BYTES
        self.sets = {}              # (device index, stream) -> [intermediates, next outputs]

    def _alloc(self, specs, dev, poison):
        return [_no_scratch(dev) if sp is None else _empty(sp[0], sp[1], dev, poison) for sp in specs]

    def take(self, dev, sp, poison):
        """(intermediates, outputs) for one call on stream ``sp`` of ``dev``."""
        st = None
        if not poison and self.keep and not _capturing():
            st = self.sets.get((dev.index, sp))
            if st is None:
                st = self.sets[(dev.index, sp)] = [self._alloc(self.temps, dev, False), None, False]
        if st is None or st[2]:  # fresh tensors; also for a call that interleaves with another (threads)
            return self._alloc(self.temps, dev, poison), self._alloc(self.outs, dev, poison)
        outs = st[1]
        st[1] = None
        st[2] = True
        return st[0], outs if outs is not None else self._alloc(self.outs, dev, False)

    def refill(self, dev, sp, bufs):
        """After the launches: the next call's outputs (when this call used the kept buffers)."""
        st = self.sets.get((dev.index, sp))
        if st is not None and st[0] is bufs[0]:
            st[1] = self._alloc(self.outs, dev, False)
            st[2] = False


class _Counters:
    """The arrival counters of a split-K kernel's tiles (int32, one a tile), kept per (device, stream).

    Zeroed when made; the last block of a tile resets its counter, so every launch finds them zero.
    Launches on one stream run in order; another stream gets its own counters, so calls running at once
    on two streams never share them. Made during CUDA-graph capture, they belong to the graph's pool and
    the graph zeroes them at the start of each replay.
    """

    def __init__(self, n):
        self.n = n
        self.sets = {}

    def get(self, dev, sp):
        t = self.sets.get((dev.index, sp))
        if t is None:
            t = self.sets[(dev.index, sp)] = torch.zeros(self.n, dtype=torch.int32, device=dev)
        return t


_LIBCUDA = []


def _libcuda():
    if not _LIBCUDA:
        import ctypes

        _LIBCUDA.append(ctypes.CDLL("libcuda.so.1"))
    return _LIBCUDA[0]


def _bounds(threads):
    """``launch_bounds`` for ``cuda.jit`` where numba-cuda has it: ptxas then caps registers so the block launches."""
    if SIMULATOR:
        return {}
    import inspect

    return {"launch_bounds": (threads,)} if "launch_bounds" in inspect.signature(cuda.jit).parameters else {}


def _stream_ptr(dev):
    """The raw handle of torch's current stream on ``dev`` (0 under the simulator)."""
    if SIMULATOR:
        return 0
    try:
        return _raw_stream(dev.index)
    except Exception:
        return torch.cuda.current_stream(dev).cuda_stream


def _stream(ptr):
    """numba's view of the stream with raw handle ``ptr`` (the dispatcher path)."""
    if SIMULATOR:
        return 0
    s = _STREAMS.get(ptr)
    if s is None:
        s = _STREAMS[ptr] = cuda.external_stream(ptr)
    return s


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_NO_SCRATCH = {}


def _no_scratch(dev):
    """A kernel without global scratch still takes the argument: one cached, never-written float."""
    t = _NO_SCRATCH.get(dev)
    if t is None:
        t = _NO_SCRATCH[dev] = torch.zeros(1, dtype=torch.float32, device=dev)
    return t


_STREAMS = {}
'''

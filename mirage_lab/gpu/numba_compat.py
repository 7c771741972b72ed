"""The one place mirage_lab imports numba from.

numba-cuda 0.30.x still calls ``np.row_stack``, which NumPy 2.5 removed, so every kernel
compile fails there. Restoring the alias before numba is imported fixes it. Keeping all
kernel code behind this module also lets the backend be swapped later (numba-cuda is in
maintenance; its successor is numba-cuda-mlir).

    >>> from mirage_lab.gpu.numba_compat import cuda, gpu_available
"""
from __future__ import annotations

import os

import numpy as np

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack  # type: ignore[attr-defined]

import numba  # noqa: E402
from numba import cuda  # noqa: E402

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def gpu_available() -> bool:
    """True when a real CUDA GPU is usable (the simulator does not count)."""
    if SIMULATOR:
        return False
    try:
        return bool(cuda.is_available())
    except Exception:  # a broken driver counts as no GPU
        return False


def quiet_occupancy_warnings() -> None:
    """Silence numba's "grid size N will likely result in GPU under-utilization" warnings.

    Fingerprint kernels over small tiles launch small grids on purpose; one warning per
    launch would drown a log or a benchmark table.
    """
    import warnings

    warnings.filterwarnings("ignore", message=".*will likely result in GPU under-utilization")


__all__ = ["numba", "cuda", "gpu_available", "SIMULATOR", "quiet_occupancy_warnings"]

# Names generated kernel modules need (see codegen/prelude.py).
from numba import types  # noqa: E402
from numba.cuda.extending import intrinsic  # noqa: E402
from llvmlite import ir as llvm_ir  # noqa: E402

__all__ += ["types", "intrinsic", "llvm_ir"]


def _fast_singly_assigned_variables() -> bool:
    """Replace numba-cuda's quadratic ``Lower._find_singly_assigned_variable`` with a linear one.

    For every block-local variable the original scans the whole block's instructions again,
    so lowering a generated kernel with long unrolled blocks took tens of seconds. The
    replacement counts each block's assignment targets once; the resulting set is the same.
    Applied only to the numba-cuda versions whose method this was checked against.
    """
    try:
        from collections import Counter, defaultdict

        import numba_cuda
        from numba.cuda import lowering as _lw
    except Exception:  # pragma: no cover - another numba layout: keep its own method
        return False
    if not getattr(numba_cuda, "__version__", "").startswith("0.30."):
        return False
    needed = ("compute_use_defs", "must_use_alloca", "ir")
    if not all(hasattr(_lw, n) for n in needed) or not hasattr(_lw.Lower, "_find_singly_assigned_variable"):
        return False

    def _find_singly_assigned_variable(self):  # same result as numba's, in linear time
        blocks = self.func_ir.blocks
        sav = set()
        if not self.func_ir.func_id.is_generator:
            use_defs = _lw.compute_use_defs(blocks)
            alloca_vars = _lw.must_use_alloca(blocks)
            var_assign_map = defaultdict(set)
            for blk, vl in use_defs.defmap.items():
                for var in vl:
                    var_assign_map[var].add(blk)
            var_use_map = defaultdict(set)
            for blk, vl in use_defs.usemap.items():
                for var in vl:
                    var_use_map[var].add(blk)
            counts = {}
            for var, blks in var_assign_map.items():
                if var in alloca_vars or len(blks) != 1 or var_use_map[var]:
                    continue
                (defblk,) = blks
                c = counts.get(defblk)
                if c is None:
                    c = counts[defblk] = Counter(
                        stmt.target.name for stmt in blocks[defblk].find_insts(_lw.ir.assign_types))
                if c[var] == 1:
                    sav.add(var)
        self._singly_assigned_vars = sav
        self._blk_local_varmap = {}

    _lw.Lower._find_singly_assigned_variable = _find_singly_assigned_variable
    return True


FAST_LOWERING = _fast_singly_assigned_variables()


_TYPING_MEMOS = 4   # compiles (flag sets) whose call-typing results are kept: the current one and its nested ones


def _checked_numba_cuda() -> bool:
    """A real CUDA target (not the simulator) on numba-cuda 0.30.x, the versions the patches below were checked on."""
    if SIMULATOR:
        return False
    try:
        import numba_cuda
    except Exception:  # pragma: no cover - numba-cuda absent: nothing to patch
        return False
    return getattr(numba_cuda, "__version__", "").startswith("0.30.")


def _compile_memo(slots: list, outside: bool = False) -> dict | None:
    """The memo of the compile running now (its ``ConfigStack`` flags object), made on first use.

    ``slots``: ``[(flags, memo)]``, newest last, at most :data:`_TYPING_MEMOS`. Outside a compile (no
    flags): ``None``, or with ``outside`` one memo for all such calls (the call typing's rule)."""
    from numba.cuda.core.targetconfig import ConfigStack

    flags = ConfigStack.top_or_none()
    if flags is None and not outside:
        return None
    for f, m in reversed(slots):
        if f is flags:
            return m
    memo: dict = {}
    slots.append((flags, memo))   # holds the flags, so its id is not reused while the memo lives
    del slots[:-_TYPING_MEMOS]
    return memo


def _memoized_call_typing() -> bool:
    """Type each (function, argument types) call once per compile, not once per call site and pass.

    numba-cuda types a call by trying every template of the callee again (``resolve_function_type``),
    for every call site and again in each round of type propagation. A generated kernel is long
    unrolled code with a few hundred distinct calls repeated thousands of times (``pa[k] += a * w``),
    so its typing took about 40 % of a variant's compile (``benchmarks/compile_time_bench.py``). The
    answer for equal arguments is the same signature, so it is kept per compile (per ``ConfigStack``
    flags object: a nested compile's flags get their own memo, so results never cross option sets).
    Not under the simulator (it compiles nothing). Only template-typed callees are memoized (functions, bound methods, number classes), only
    successful answers with a precise return type; anything else (a device-function dispatcher, a
    request for literal arguments, an error) takes numba's own path every time. Applied only to the
    numba-cuda versions this was checked against; ``tests/gpu/test_numba_compat.py`` checks that the
    LLVM IR of generated kernels is unchanged.
    """
    if not _checked_numba_cuda():
        return False
    try:
        from numba.cuda import types as _t
        from numba.cuda.core.targetconfig import ConfigStack  # noqa: F401  (the layout _compile_memo reads)
        from numba.cuda.typing.context import BaseContext
    except Exception:  # pragma: no cover - another numba layout: keep its own method
        return False
    if getattr(BaseContext.resolve_function_type, "_mirage_memo", False):
        return True
    original = BaseContext.resolve_function_type
    memoized = (_t.Function, _t.BoundFunction, _t.NumberClass)
    slots: list[tuple[object, dict]] = []   # [(flags object, memo)], newest last
    miss = object()

    def resolve_function_type(self, func, args, kws):  # same answers as numba's, once per compile
        if not isinstance(func, memoized):
            return original(self, func, args, kws)
        memo = _compile_memo(slots, outside=True)
        try:
            key = (self, func, tuple(args), tuple(sorted(kws.items())) if kws else ())
            hit = memo.get(key, miss)
        except TypeError:  # an unhashable argument type
            return original(self, func, args, kws)
        if hit is not miss:
            return hit
        res = original(self, func, args, kws)
        if res is not None and res.return_type is not None and res.return_type.is_precise():
            memo[key] = res
        return res

    resolve_function_type._mirage_memo = True  # type: ignore[attr-defined]
    resolve_function_type.__wrapped__ = original  # type: ignore[attr-defined]
    BaseContext.resolve_function_type = resolve_function_type
    global _MEMOIZED_RESOLVE
    _MEMOIZED_RESOLVE = resolve_function_type
    return True


_MEMOIZED_RESOLVE = None   # the memoized method, for benchmarks/compile_time_bench.py --typing-memo ab


MEMO_TYPING = _memoized_call_typing()


def _fast_flag_values() -> bool:
    """numba-cuda's compile flags' ``values()`` without a property call per option.

    Template typing keys its overload cache on the compile's flags, and comparing two flag sets
    builds ``values()``, a dict of every option read through its property: about 10 % of a
    generated kernel's compile went there (80,000 calls, two million property reads, for one
    kernel). The properties are numba's own generated getters, ``self._values.get(name,
    option.default)`` (and ``_values`` holds only options, set through them): the defaults
    overlaid with ``_values`` are the same dict.
    """
    if not _checked_numba_cuda():
        return False
    try:
        from numba.cuda.core.targetconfig import TargetConfig
    except Exception:  # pragma: no cover - another numba layout: keep its own method
        return False
    original = TargetConfig.values
    if getattr(original, "_mirage_fast", False):
        return True

    defaults: dict[type, dict] = {}   # per flags class: every option's default

    def values(self):  # same dict as numba's: the set options over the defaults
        d = defaults.get(type(self))
        if d is None:
            d = defaults[type(self)] = {k: opt.default for k, opt in self.options.items()}
        return {**d, **self._values}

    values._mirage_fast = True  # type: ignore[attr-defined]
    values.__wrapped__ = original  # type: ignore[attr-defined]
    TargetConfig.values = values
    return True


FAST_FLAG_VALUES = _fast_flag_values()


def _memoized_lowering_lookups() -> bool:
    """The lowering's lookups answered once per compile: a call's type, and its implementation.

    Lowering a generated kernel asks, for every one of its ~10^4 statements, the callee's type again
    (``Function.get_call_type``, every template tried: 110,602 calls and 21 % of four FMA variants'
    compile under cProfile, 2026-11-28) and its implementation (``BaseContext.get_function``, which
    reloads every registry, ``refresh``, whenever its first look fails: 1.3 million registry installs,
    about 14 %). For equal arguments the answers are equal within a compile (its registries do not
    change), so they are kept per compile like the call typing above: only successful answers, only
    hashable keys. ``tests/gpu/test_numba_compat.py`` checks the LLVM IR is unchanged.
    """
    if not _checked_numba_cuda():
        return False
    try:
        from numba.core.types.functions import Function
        from numba.cuda.core.base import BaseContext as TargetContext
    except Exception:  # pragma: no cover - another numba layout: keep its own methods
        return False
    if getattr(Function.get_call_type, "_mirage_memo", False):
        return True
    call_type, get_function = Function.get_call_type, TargetContext.get_function
    type_slots: list = []
    impl_slots: list = []
    miss = object()

    def memo_call_type(self, context, args, kws):  # same answers as numba's, once per compile
        memo = _compile_memo(type_slots)
        try:
            key = (self, context, tuple(args), tuple(sorted(kws.items())) if kws else ())
            hit = miss if memo is None else memo.get(key, miss)
        except TypeError:  # an unhashable argument type
            return call_type(self, context, args, kws)
        if hit is not miss:
            return hit
        sig = call_type(self, context, args, kws)
        if memo is not None and sig is not None and sig.return_type is not None and sig.return_type.is_precise():
            memo[key] = sig
        return sig

    def memo_get_function(self, fn, sig, _firstcall=True):  # same implementation as numba's, once per compile
        memo = _compile_memo(impl_slots)
        try:
            key = (self, fn, sig)
            hit = miss if memo is None else memo.get(key, miss)
        except TypeError:
            return get_function(self, fn, sig, _firstcall)
        if hit is not miss:
            return hit
        impl = get_function(self, fn, sig, _firstcall)
        if memo is not None:
            memo[key] = impl
        return impl

    for new, old in ((memo_call_type, call_type), (memo_get_function, get_function)):
        new._mirage_memo = True  # type: ignore[attr-defined]
        new.__wrapped__ = old  # type: ignore[attr-defined]
    Function.get_call_type = memo_call_type
    TargetContext.get_function = memo_get_function
    return True


MEMO_LOWERING = _memoized_lowering_lookups()

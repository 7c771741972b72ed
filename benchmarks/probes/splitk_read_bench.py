"""Which launch shape reads a 4096 x 4096 fp16 weight (32 MB) at the HBM rate, split-K included?

The generated skinny-matmul kernels run one block per W column strip (128 blocks, one per SM)
and read W at ~1.9 TB/s (benchmarks/RESULTS.md), while a device copy of the same bytes runs at
~2.6 TB/s. This sweeps the launch shape of a plain read of W: strip width (bytes of each row a
block reads), threads per block, ``S`` blocks sharing a strip's rows (split-K), and the load
width (8 or 16 bytes). With ``--combine`` each block also writes a 16 x strip float32 partial to
a workspace and the last block of each strip (an atomic counter, reset by that block) sums the
``S`` partials -- the cross-block reduction a split-K lowering adds.

Device time per launch by ``runtime.profile.time_calls`` (CUDA events, launches queued behind
a sleep), W rotated over copies (> 2 x L2) so reads come from HBM, median of 300.
Run on a GPU:  python benchmarks/probes/splitk_read_bench.py [--combine] [--flat] [--shape ROWSxCOLS]
``--shape`` sets W's fp16 shape (default 4096x4096; LLaMA-3 70B's QKV is 8192x10240), ``--quick`` sweeps
16-byte loads of 128- and 256-byte strips only.
"""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository (mirage_lab)
from mirage_lab.codegen.prelude import HEADER_PACKAGE, PRELUDE  # noqa: E402
from mirage_lab.gpu.numba_compat import cuda  # noqa: E402  (numba-cuda needs its NumPy shim)
from mirage_lab.runtime import profile as prof  # noqa: E402

ROWS, WORDS = 4096, 2048          # int32 view of a 4096 x 4096 fp16 matrix (--shape changes it)
for _a in sys.argv:
    if _a.startswith("--shape="):
        ROWS, WORDS = (int(v) for v in _a.split("=", 1)[1].lower().split("x"))
        WORDS //= 2
M = 16                            # rows of X: the partial a block writes is M x strip floats


def kernel_source(width: int, T: int, S: int, vec: int, combine: bool) -> str | None:
    """``width`` int32 words of each row per block; ``vec`` words per load (2: 8 B, 4: 16 B)."""
    per_row = width // vec
    if T % per_row:
        return None
    rows = ROWS // S
    pass_rows = T // per_row
    L = 4
    while L > 1 and rows % (pass_rows * L):
        L //= 2
    if rows % (pass_rows * L):
        return None
    iters = rows // (pass_rows * L)
    ld = "ldg4" if vec == 4 else "ldg2"
    lines = ["@cuda.jit(fastmath=True)", "def k(w, ws, cnt, out):", "    tid = cuda.threadIdx.x",
             "    bx = cuda.blockIdx.x", "    by = cuda.blockIdx.y",
             f"    b = (by * {rows} + tid // {per_row}) * {WORDS} + bx * {width} + (tid % {per_row}) * {vec}",
             "    acc = 0", f"    for it in range({iters}):", f"        p = b + it * {pass_rows * L * WORDS}"]
    for q in range(L):
        lines.append(f"        v{q} = {ld}(w, p + {q * pass_rows * WORDS})")
    lines.append("        acc ^= " + " ^ ".join(f"v{q}[{e}]" for q in range(L) for e in range(vec)))
    part = M * width * 2   # floats of a block's partial (M rows x 2*width fp16 columns)
    if not combine or S == 1:
        lines.append(f"    out[(bx * {S} + by) * {T} + tid] = acc")
        return "\n".join(lines) + "\n"
    lines += [
        f"    base = (bx * {S} + by) * {part}",
        f"    for e in range(tid, {part}, {T}):",
        "        ws[base + e] = f32(acc + e)",
        "    cuda.threadfence()",
        "    last = cuda.shared.array(1, dtype=i32)",
        "    cuda.syncthreads()",
        "    if tid == 0:",
        f"        last[0] = cuda.atomic.add(cnt, bx, 1) == {S - 1}",
        "    cuda.syncthreads()",
        "    if last[0]:",
        "        cuda.threadfence()",
        f"        for e in range(tid, {part}, {T}):",
        "            s = f32(0.0)",
        f"            for j in range({S}):",
        f"                s += ws[bx * {S * part} + j * {part} + e]",
        f"            out[bx * {part} + e] = i32(s)",
        "        if tid == 0:",
        "            cnt[bx] = 0",
    ]
    return "\n".join(lines) + "\n"


def compiled(src: str, name: str):
    """The kernel ``k`` of ``src``, with the generated modules' prelude (``ldg4``, ``ldg2``, ``f32``)."""
    ns: dict = {}
    exec(HEADER_PACKAGE + PRELUDE, ns)
    exec(compile(src, name, "exec"), ns)
    return ns["k"]


def flat_source(T: int, blocks: int, L: int) -> str | None:
    """The copy kernel's pattern: the whole 32 MB read contiguously, 16-byte loads, grid-strided."""
    step = blocks * T * 4
    if (ROWS * WORDS) % (step * L):
        return None
    lines = ["@cuda.jit(fastmath=True)", "def k(w, ws, cnt, out):", "    tid = cuda.threadIdx.x",
             f"    b = (cuda.blockIdx.x * {T} + tid) * 4", "    acc = 0",
             f"    for it in range({ROWS * WORDS // (step * L)}):", f"        p = b + it * {step * L}"]
    for q in range(L):
        lines.append(f"        v{q} = ldg4(w, p + {q * step})")
    lines.append("        acc ^= " + " ^ ".join(f"v{q}[{e}]" for q in range(L) for e in range(4)))
    lines.append(f"    out[cuda.blockIdx.x * {T} + tid] = acc")
    return "\n".join(lines) + "\n"


def flat_table(views, wsv, cntv, ov) -> None:
    print("| contiguous read: blocks | threads | 16-byte loads in flight per thread | µs | TB/s |")
    print("|---|---|---|---|---|")
    for blocks, T, L in itertools.product((128, 256, 512, 1024, 2048), (256, 512, 1024), (1, 4, 8)):
        if blocks * T > 2048 * 512:
            continue
        src = flat_source(T, blocks, L)
        if src is None:
            continue
        k = compiled(src, f"<flat{blocks}t{T}L{L}>")
        us = prof.time_calls([lambda v=v: k[blocks, T](v, wsv, cntv, ov) for v in views], repeats=300).median_us
        print(f"| {blocks} | {T} | {L} | {us:.1f} | {ROWS * WORDS * 4 / us / 1e6:.2f} |", flush=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("splitk_read_bench needs a CUDA GPU")
        return 2
    combine = "--combine" in sys.argv
    copies = [torch.randint(-2 ** 31, 2 ** 31 - 1, (ROWS * WORDS,), dtype=torch.int32, device="cuda")
              for _ in range(5)]
    ws = torch.zeros(1 << 22, dtype=torch.float32, device="cuda")
    cnt = torch.zeros(4096, dtype=torch.int32, device="cuda")
    out = torch.zeros(1 << 20, dtype=torch.int32, device="cuda")
    views = [cuda.as_cuda_array(c) for c in copies]
    wsv, cntv, ov = cuda.as_cuda_array(ws), cuda.as_cuda_array(cnt), cuda.as_cuda_array(out)
    print(f"{torch.cuda.get_device_name()}: reading {ROWS * WORDS * 4 / 1e6:.0f} MB of W ({ROWS}x{2 * WORDS} fp16){' + split-K combine' if combine else ''}")
    if "--flat" in sys.argv:
        flat_table(views, wsv, cntv, ov)
        halves = [c.view(torch.float16).view(ROWS, 2 * WORDS) for c in copies]
        for m in (1, 16):
            x = torch.randn(m, ROWS, dtype=torch.float16, device="cuda")
            us = prof.time_calls([lambda h=h: torch.matmul(x, h) for h in halves], repeats=300).median_us
            print(f"| torch.matmul X[{m},{ROWS}] @ W (cuBLAS) | | | {us:.1f} | {ROWS * WORDS * 4 / us / 1e6:.2f} |")
        return 0
    print("| row bytes per block | threads | S (split-K) | load bytes | blocks | µs | TB/s |")
    print("|---|---|---|---|---|---|---|")
    best = []
    sweep = (((32, 64), (256, 512), (1, 2, 4, 8), (4,)) if "--quick" in sys.argv
             else ((16, 32, 64), (256, 512, 1024), (1, 2, 4, 8), (2, 4)))
    for width, T, S, vec in itertools.product(*sweep):
        src = kernel_source(width, T, S, vec, combine)
        if src is None:
            continue
        k = compiled(src, f"<w{width}t{T}s{S}v{vec}>")
        grid = (WORDS // width, S)
        us = prof.time_calls([lambda v=v: k[grid, T](v, wsv, cntv, ov) for v in views], repeats=300).median_us
        best.append((us, width, T, S, vec))
        print(f"| {4 * width} | {T} | {S} | {4 * vec} | {grid[0] * grid[1]} | {us:.1f} | "
              f"{ROWS * WORDS * 4 / us / 1e6:.2f} |", flush=True)
    halves = [c.view(torch.float16) for c in copies]
    dst = torch.empty(ROWS * WORDS // 2, dtype=torch.int32, device="cuda")
    us = prof.time_calls([lambda c=c: dst.copy_(c[: ROWS * WORDS // 2]) for c in copies], repeats=300).median_us
    print(f"| device copy {ROWS * WORDS * 2 / 1e6:.0f} MB -> same | | | | | {us:.1f} | {ROWS * WORDS * 4 / us / 1e6:.2f} |")
    us = prof.time_calls([lambda h=h: torch.sum(h) for h in halves], repeats=300).median_us
    print(f"| torch.sum of W | | | | | {us:.1f} | {ROWS * WORDS * 4 / us / 1e6:.2f} |")
    print("fastest:", sorted(best)[:5])
    return 0


if __name__ == "__main__":
    sys.exit(main())

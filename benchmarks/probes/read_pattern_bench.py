"""How fast can a kernel read a 4096 x 4096 fp16 weight (32 MB) from HBM, by access pattern?

The generated skinny-matmul kernels (RMSNorm+Linear, gated MLP) stream W in column strips:
each of 128 blocks owns 32 columns (64 bytes of every row) and walks all 4096 rows. This
measures that pattern against wider strips, where each block reads ``width`` bytes of each
row and the rows are split over ``4096 / width * 64 / 128`` blocks (split-K) so that every
variant runs 128 blocks of 512 threads, 16 loop iterations of four 8-byte loads per thread,
``U`` iterations' loads issued before any is used.

Device time per launch by ``runtime.profile.time_calls`` (CUDA events, launches queued behind
a sleep so host time is not counted), W rotated over copies (> 2 x L2) so every read comes
from HBM, median of 300. Run on a GPU:  python benchmarks/probes/read_pattern_bench.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository (mirage_lab)
from mirage_lab.gpu.numba_compat import cuda  # noqa: E402  (numba-cuda needs its NumPy shim)
from mirage_lab.runtime import profile as prof  # noqa: E402

ROWS, COLS = 4096, 1024            # int64 view of a 4096 x 4096 fp16 matrix
T, BLOCKS, ITERS = 512, 128, 16

WIDTHS = (8, 16, 32, 64, 128)      # int64 words of each row a block reads: 64 B .. 1 KB


def kernel_source(width: int, unroll: int) -> str:
    """Block (strip, ks): rows ks*R .. of columns strip*width ..; R = 4096 / splits."""
    splits = BLOCKS * width // COLS
    rows = ROWS // splits
    it_step = (T * 4 // width) * COLS
    lines = ["@cuda.jit", "def k(w, out):", "    tid = cuda.threadIdx.x", "    bx = cuda.blockIdx.x",
             "    by = cuda.blockIdx.y", f"    b = (by * {rows} + tid // {width}) * {COLS} + bx * {width} + tid % {width}",
             "    acc = 0", f"    for it0 in range(0, {ITERS}, {unroll}):", f"        p = b + it0 * {it_step}"]
    for u in range(unroll):
        for q in range(4):
            lines.append(f"        v{u}_{q} = w[p + {u * it_step + (T * q // width) * COLS}]")
    for u in range(unroll):
        lines.append("        acc ^= " + " ^ ".join(f"v{u}_{q}" for q in range(4)))
    lines.append(f"    out[(bx + by * {COLS // width}) * {T} + tid] = acc")
    return "\n".join(lines) + "\n"


def main() -> int:
    if not torch.cuda.is_available():
        print("read_pattern_bench needs a CUDA GPU")
        return 2
    copies = [torch.randint(0, 2 ** 62, (ROWS * COLS,), dtype=torch.int64, device="cuda") for _ in range(5)]
    out = torch.zeros(BLOCKS * T, dtype=torch.int64, device="cuda")
    views = [cuda.as_cuda_array(c) for c in copies]
    o = cuda.as_cuda_array(out)
    print(f"{torch.cuda.get_device_name()}: reading 32 MB, {T} threads x {BLOCKS} blocks, 8-byte loads")
    print("| bytes of a row per block | blocks along K | loads in flight (iterations) | µs | TB/s |")
    print("|---|---|---|---|---|")
    for width in WIDTHS:
        grid = (COLS // width, BLOCKS * width // COLS)
        for unroll in (1, 2, 4):
            ns: dict = {"cuda": cuda}
            exec(compile(kernel_source(width, unroll), f"<w{width}u{unroll}>", "exec"), ns)
            k = ns["k"]
            us = prof.time_calls([lambda v=v: k[grid, T](v, o) for v in views], repeats=300).median_us
            print(f"| {8 * width} | {grid[1]} | {unroll} | {us:.1f} | {ROWS * COLS * 8 / us / 1e6:.2f} |", flush=True)
    halves = [c.view(torch.float16) for c in copies]
    us = prof.time_calls([lambda h=h: torch.sum(h) for h in halves], repeats=300).median_us
    print(f"| torch.sum of the 32 MB | — | — | {us:.1f} | {ROWS * COLS * 8 / us / 1e6:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

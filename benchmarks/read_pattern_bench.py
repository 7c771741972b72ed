"""How fast can a kernel read a 4096 x 4096 fp16 weight (32 MB) from HBM, by access pattern?

The generated skinny-matmul kernels (RMSNorm+Linear, gated MLP) stream W in column strips:
each of 128 blocks owns 32 columns (64 bytes of every row) and walks all 4096 rows. This
measures that pattern against others with the same loads (8-byte, 512 threads, 128 blocks,
16 loop iterations, ``U`` iterations' loads issued before any is used):

* ``strip64``  — the generated kernels' pattern: 64 bytes of each row per block;
* ``contig``   — each block reads 32 whole consecutive rows (256 KB contiguous);
* ``splitk512`` — 16 column strips of 512 bytes x 8 splits of the rows (split-K).

Device time by CUDA events, W rotated over copies (> 2 x L2) so every read comes from HBM,
median of 200. Run on a GPU:  python benchmarks/read_pattern_bench.py
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mirage_lab.gpu.numba_compat import cuda  # noqa: E402  (numba-cuda needs its NumPy shim)

ROWS, COLS = 4096, 1024            # int64 view of a 4096 x 4096 fp16 matrix
T, BLOCKS, ITERS = 512, 128, 16

# thread's first int64 word, word step per iteration, word step per load q (all constants in
# the loop: no index arithmetic left there), grid
PATTERNS = {
    "strip64": ("bx * 8 + (tid % 32) // 4 + (16 * (tid // 32) + 4 * (tid % 4)) * 1024", 256 * 1024, 1024, (128, 1)),
    "contig": ("bx * 32 * 1024 + tid", 2 * 1024, 512, (128, 1)),
    "splitk512": ("by * 512 * 1024 + bx * 64 + (tid // 64) * 1024 + tid % 64", 32 * 1024, 8 * 1024, (16, 8)),
}


def kernel_source(pattern: str, unroll: int) -> str:
    base, it_step, q_step, _ = PATTERNS[pattern]
    lines = ["@cuda.jit", "def k(w, out):", "    tid = cuda.threadIdx.x", "    bx = cuda.blockIdx.x",
             "    by = cuda.blockIdx.y", f"    b = {base}", "    acc = 0",
             f"    for it0 in range(0, {ITERS}, {unroll}):", f"        p = b + it0 * {it_step}"]
    for u in range(unroll):
        for q in range(4):
            lines.append(f"        v{u}_{q} = w[p + {u * it_step + q * q_step}]")
    for u in range(unroll):
        lines.append("        acc ^= " + " ^ ".join(f"v{u}_{q}" for q in range(4)))
    lines.append("    out[(bx + by * 128) * 512 + tid] = acc")
    return "\n".join(lines) + "\n"


def main() -> int:
    if not torch.cuda.is_available():
        print("read_pattern_bench needs a CUDA GPU")
        return 2
    copies = [torch.randint(0, 2 ** 62, (ROWS * COLS,), dtype=torch.int64, device="cuda") for _ in range(5)]
    out = torch.zeros(128 * 8 * 512, dtype=torch.int64, device="cuda")
    views = [cuda.as_cuda_array(c) for c in copies]
    o = cuda.as_cuda_array(out)
    print(f"{torch.cuda.get_device_name()}: reading 32 MB, 512 threads x 128 blocks, 8-byte loads")
    print("| pattern | loads in flight (iterations) | µs | TB/s |")
    print("|---|---|---|---|")
    for name, (_, _, _, grid) in PATTERNS.items():
        for unroll in (1, 2, 4):
            ns: dict = {"cuda": cuda}
            exec(compile(kernel_source(name, unroll), f"<{name}{unroll}>", "exec"), ns)
            k = ns["k"]
            for v in views:
                k[grid, T](v, o)
            torch.cuda.synchronize()
            times = []
            for i in range(200):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(50_000)  # the GPU is busy while the host launches: device time only
                a.record()
                k[grid, T](views[i % len(views)], o)
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) * 1e3)
            us = statistics.median(times)
            print(f"| {name} | {unroll} | {us:.1f} | {ROWS * COLS * 8 / us / 1e6:.2f} |", flush=True)
    halves = [c.view(torch.float16).view(4096, 4096) for c in copies]
    times = []
    for i in range(200):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(50_000)
        a.record()
        torch.sum(halves[i % len(halves)])
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    us = statistics.median(times)
    print(f"| torch.sum (fp16, its own pattern) | — | {us:.1f} | {ROWS * COLS * 8 / us / 1e6:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

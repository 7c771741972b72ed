"""Probe (a lead for codegen, not a lowering the code generator makes): how much of the GQA 2x256
kernel's time is its third barrier per iteration.

The searched GQA μGraph's kernel 0 has three barriers per iteration of 16 keys: after the K/V tiles
are stored (A), after exp(QK) is stored (B), and at the end (C), which only keeps the next
iteration's K/V stores off tiles still being read. K and exp(QK) are safe without C (their last
readers finished before B, resp. before the next A); V is read after B, so with V in two buffers by
iteration parity, C can go. The probe edits the generated source that way (the second V buffer
lives where the output accumulator s7 goes after the loop: s7 is in registers during it; one
barrier after the loop guards that reuse), checks it against float64, and times both.

    python benchmarks/probes/attention_barrier_probe.py
"""
from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository (mirage_lab)

import mirage_lab as mi  # noqa: E402
from mirage_lab.codegen import CodegenOptions  # noqa: E402
from mirage_lab.pipeline import with_block_dim  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from codegen_ab_probe import measure, source  # noqa: E402

FOUND = Path(__file__).resolve().parents[1] / "found"  # benchmarks/found


def double_buffer_v(src: str, v_base: int, spare: int) -> str:
    """Kernel 0 of the GQA module with V ringed over two buffers and the loop's last barrier gone."""
    head, k0 = src.split("def kernel_0(", 1)
    k0, tail = k0.split("\n\n\n@cuda.jit", 1)
    lines = k0.split("\n")
    loop = next(i for i, ln in enumerate(lines) if ln.strip() == "for it in range(16):")
    end = next(i for i in range(loop + 1, len(lines)) if lines[i] and not lines[i].startswith("        "))
    body = lines[loop + 1:end]
    last_sync = max(i for i, ln in enumerate(body) if ln.strip() == "cuda.syncthreads()")
    assert body[last_sync] == "        cuda.syncthreads()"
    body = body[:last_sync] + body[last_sync + 1:]
    body = [re.sub(rf"\b{v_base} \+ ", "vb + ", ln) for ln in body]
    new_loop = ([lines[loop], f"        vb = {v_base} if (it & 1) == 0 else {spare}"] + body +
                ["    cuda.syncthreads()  # the last V buffer may be the spare region the output uses next"])
    k0 = "\n".join(lines[:loop] + new_loop + lines[end:])
    return head + "def kernel_0(" + k0 + "\n\n\n@cuda.jit" + tail


def main() -> int:
    g = with_block_dim(mi.load(str(FOUND / "gqa_2x256x64x4096__searched_cand0.json")), 256)
    # the kernel as it was generated when this was measured: float32 K/V tiles, // and % (codegen_ab_probe)
    src = source(g, 0, CodegenOptions(mma=True))
    loop = src.index("for it in range(16):")                              # the V tile's staging store
    m = re.search(r"sts4\(sm, (\d+) \+ \(tid \* 8\) // 64 \* 68", src[loop:])
    v_base = int(m.group(1))
    variants = {"generated": src, "V double-buffered, 2 barriers / iteration": double_buffer_v(src, v_base, 0)}
    tmp = Path(tempfile.mkdtemp())
    print(torch.cuda.get_device_name(), f"V tile at sm[{v_base}]", flush=True)
    for i, (name, text) in enumerate(variants.items()):
        err, dev, gdev = measure(f"gqa_probe_{i}", text, g, tmp)  # checked against float64, then timed
        print(f"| {name} | rel err {err:.1e} | call {dev:.2f} µs | graph {gdev:.2f} µs |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where does a generated kernel's time go? Time it with one stage left out at a time.

Exports one hand-built μGraph lowering as a standalone module, then writes edited copies of
it and times each the same way (CUDA events, inputs rotated over copies > 2 x L2, median of
300). The edited kernels compute wrong results on purpose: each says what the kernel costs
without one of its parts (METHOD: "time variants that leave one stage out and take
differences").

* ``as generated``   — the kernel itself
* ``no loop barriers`` — every ``cuda.syncthreads()`` inside the for-loop removed
* ``no mma``         — each tensor-core instruction replaced by an add that still consumes
                        the streamed registers (so the W loads stay)
* ``W loads only``   — no mma and no staging of X into fragments / shared memory

    python benchmarks/probes/kernel_ablation.py rmsnorm 128 16 512 --mma --pw 64
"""
from __future__ import annotations

import importlib.util
import re
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository (mirage_lab)

from mirage_lab.runtime import profile as prof  # noqa: E402
from mirage_lab.runtime.export import export  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: profile_kernel
from profile_kernel import lowering, lowering_args  # noqa: E402

FAKE_MMA = '''

@cuda.jit(device=True, inline=True)
def fake_pk(a, b):  # every bit of both words stays live: no load of W is dead code
    return a ^ b


@cuda.jit(device=True, inline=True)
def fake_mma(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    return c0 + f32(b0 ^ b1), c1, c2, c3
'''


def loop_lines(text: str) -> tuple[int, int]:
    """First and last line index of the kernel's for-loop body (8+ spaces of indent)."""
    lines = text.split("\n")
    start = next(i for i, ln in enumerate(lines) if re.match(r"    for it0? in range|    it0 = 0", ln))
    end = start + 1
    while end < len(lines) and (lines[end].startswith("        ") or not lines[end].strip()):
        end += 1
    return start, end


def ablate(text: str, what: str) -> str:
    if what == "as generated":
        return text
    lines = text.split("\n")
    a, b = loop_lines(text)
    body = lines[a:b]
    if what in ("no loop barriers",):
        body = [ln for ln in body if ln.strip() != "cuda.syncthreads()"]
    if what in ("no mma", "W loads only"):
        body = [ln.replace("mma_f16(", "fake_mma(").replace("mma_bf16(", "fake_mma(").replace("pkl(", "fake_pk(")
                .replace("pkh(", "fake_pk(") for ln in body]
    if what == "W loads only":
        body = [ln for ln in body if not re.match(r"\s*(smi\[|xh\d|qf\d|fa\d)", ln) and ln.strip() != "cuda.syncthreads()"]
        body = [re.sub(r"fake_mma\(fa\d+_\d+_\d, fa\d+_\d+_\d, fa\d+_\d+_\d, fa\d+_\d+_\d,", "fake_mma(0, 0, 0, 0,", ln)
                for ln in body]
    lines[a:b] = body
    out = "\n".join(lines)
    return out.replace("\n@cuda.jit", FAKE_MMA + "\n@cuda.jit", 1) if "fake_mma" in out else out


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = lowering_args(__doc__)
    ap.add_argument("--show", default="", help="print the kernel of this ablation")
    a = ap.parse_args()
    g, opts = lowering(a)
    tmp = Path(tempfile.mkdtemp(prefix="ablate_"))
    text = export(g, tmp / "k_as_generated.py", options=opts).read_text()
    xs = [(torch.randn(t.dims, device="cuda") * (1.0 if i == 0 else 1 / 64)).to(t.dtype.torch)
          for i, t in enumerate(g.inputs)]
    sets = prof.make_copies(xs, prof.rotation_copies(xs))
    print(f"{torch.cuda.get_device_name()}: {a.program} {a.shape} grid {a.grid} frange {a.frange} t{a.threads} {opts.tag()}")
    print("| variant | µs | Δ vs as generated |")
    print("|---|---|---|")
    base = None
    for i, what in enumerate(("as generated", "no loop barriers", "no mma", "W loads only")):
        src = ablate(text, what)
        if what == a.show:
            print(src[src.index("def kernel_0"):][:6000])
        p = tmp / f"k{i}.py"
        p.write_text(src)
        try:
            mod = load(p)
            fwd = mod.forward if hasattr(mod, "forward") else mod.run
            us = prof.time_calls([lambda s=s: fwd(*s) for s in sets], repeats=300).median_us
        except Exception as e:  # an ablation the kernel's shape does not allow
            print(f"| {what} | failed: {type(e).__name__}: {str(e)[:200]} | |")
            continue
        base = us if base is None else base
        print(f"| {what} | {us:.1f} | {us - base:+.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

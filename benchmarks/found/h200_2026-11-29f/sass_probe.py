"""Device-side: registers, local memory and SASS of Phi-3-mini's SwiGLU lowering (cand 0, 256 threads) as the
runtime compiles it here, staged vs cp.async rings; plus cuobjdump of the CPU box's cubins (devjobs/cubins)."""
import os, re, subprocess, sys, glob
from pathlib import Path
sys.path.insert(0, "benchmarks")
import torch
import mirage_lab as mi
from mirage_lab.pipeline import with_block_dim
from rank_quality import options_from_tag
out = Path(os.environ.get("OUT", "/tmp"))
g = with_block_dim(mi.load("devjobs/phi3_c0.json"), 256)
xs = [(torch.randn(t.dims, device="cuda") * (1.0 if i == 0 else 1 / 64)).to(t.dtype.torch) for i, t in enumerate(g.inputs)]
for tag in ["pw0-regNone-acc128-smem152-mma", "pw0-regNone-acc128-smem152-ldsm-mma",
            "pw0-regNone-acc128-smem227-cp2-ldsm-mma", "pw0-regNone-acc128-smem227-cp3-ldsm-mma"]:
    k = mi.runtime.compile(g, options=options_from_tag(tag))
    k(inputs=xs); torch.cuda.synchronize()
    for info in k.kernels:
        d = getattr(k.module, info.name)
        try:
            regs = d.get_regs_per_thread(); lmem = d.get_local_mem_per_thread()
        except Exception as e:  # noqa: BLE001
            regs = lmem = f"? {e}"
        line = f"{tag} {info.name}: regs {regs} local bytes/thread {lmem}"
        try:
            sass = d.inspect_sass()
            if isinstance(sass, dict):
                sass = "\n".join(sass.values())
            (out / f"sass_{tag}.txt").write_text(sass)
            ins = [l for l in sass.splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", l)]
            ops = {}
            for l in ins:
                m = re.search(r"\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", l)
                if m:
                    op = m.group(2).split(".")[0]
                    ops[op] = ops.get(op, 0) + 1
            top = sorted(ops.items(), key=lambda kv: -kv[1])[:14]
            line += f"; SASS {len(ins)} instr; LDL/STL {ops.get('LDL', 0)}/{ops.get('STL', 0)}; top {top}"
        except Exception as e:  # noqa: BLE001
            line += f"; no SASS: {type(e).__name__}: {str(e)[:120]}"
        print(line, flush=True)
for cub in sorted(glob.glob("devjobs/cubins/*/*.cubin")):
    tag = Path(cub).parent.name
    r = subprocess.run(["cuobjdump", "-sass", cub], capture_output=True, text=True)
    if r.returncode != 0:
        r = subprocess.run(["/usr/local/cuda/bin/cuobjdump", "-sass", cub], capture_output=True, text=True)
    (out / f"cubin_sass_{tag}.txt").write_text(r.stdout + r.stderr)
    print("cubin", tag, len(r.stdout.splitlines()), "lines", r.stderr[:100], flush=True)

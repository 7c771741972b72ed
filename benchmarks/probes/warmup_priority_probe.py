"""How long torch.compile's warm-up build takes beside a running search, niced (nice 10) or not.

The search of the README program (RMSNorm+Linear 16x4096x4096, 2 numpy-fingerprint workers) runs; at its
first state a thread builds torch.compile of a small RMSNorm+Linear (8x256x512) on CPU tensors, with
``lower_priority(thread=True)`` ("nice") or at the search's priority ("plain"). torch is imported before
the search, as ``superoptimize`` does on a GPU host. Each run in a new process with an empty inductor
cache (pass ``TORCHINDUCTOR_CACHE_DIR``); "plain" stops the search when its build ends.

    for m in nice plain; do TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) python benchmarks/probes/warmup_priority_probe.py $m; done
"""
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402,F401  (imported before the search, as superoptimize does on a GPU host)

from mirage_lab import examples as ex  # noqa: E402
from mirage_lab.pipeline.compile_pool import lower_priority  # noqa: E402
from mirage_lab.pipeline.contenders import build_program_lowering  # noqa: E402
from mirage_lab.search import CancelToken, search  # noqa: E402


def main() -> None:
    niced = sys.argv[1] == "nice"
    g = ex.rms_norm_linear_program(16, 4096, 4096)
    small = ex.rms_norm_linear_program(8, 256, 512)
    tok = CancelToken()
    out: dict = {}

    def build() -> None:
        if niced:
            lower_priority(thread=True)
        t0 = time.time()
        xs = [torch.randn(tuple(t.dims)).to(t.dtype.torch) for t in small.inputs]
        r = build_program_lowering(small, "torch.compile", SimpleNamespace(inputs=xs))
        out["build_s"] = round(time.time() - t0, 1)
        out["err"] = r.error
        if not niced:
            tok.cancel()

    th = None
    states = 0
    t0 = time.time()
    for ev in search(g, None, workers=2, cancel=tok, fingerprint_backend="numpy"):
        st = getattr(ev, "stats", None)
        if st is not None:
            states = st.states
        if th is None and st is not None and st.states:
            th = threading.Thread(target=build, daemon=True)
            th.start()
        if time.time() - t0 > 240:
            tok.cancel()
    ended = round(time.time() - t0, 1)
    if th is not None:
        th.join()
    print(sys.argv[1], out, "search ended at", ended, "s, states", states)


if __name__ == "__main__":
    main()

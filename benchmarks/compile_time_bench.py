"""Where a lowering variant's compile seconds go: code generation, numba typing + lowering, NVVM, ptxas.

The tuner compiles each lowering variant of each candidate μGraph (``pipeline.autotune.plan_variants``)
to Numba-CUDA kernels before it can time it, so compile seconds decide how many variants a
``tune_seconds`` budget measures (issues 19/20). This harness needs no GPU: it runs numba-cuda's own
compile steps for sm_90 on the CPU, per generated kernel:

- ``gen``: ``codegen.generate_module`` (the Python source), and importing the module;
- ``numba``: numba's front end to LLVM IR (``compile_cuda``, as a kernel launch does), of which ``typing``
  (type inference), ``lowering`` (numba IR -> LLVM IR) and ``SSA`` (its SSA reconstruction) are numba's own
  pass timings;
- ``nvvm``: NVVM, LLVM IR -> PTX (``get_asm_strs``); ``ptx_kb``: its size;
- ``ptxas``: PTX -> SASS with the CUDA toolkit's ``ptxas -arch=sm_90`` where one is installed (the driver
  runs the same assembler when it loads numba's PTX on the GPU); registers and spills from ``-v``.

Candidates come from stored μGraphs (``--found``, default ``benchmarks/found/*cand*.json``, the seed
programs at full shape) and/or a search of suite programs on this machine (``--suite NAMES
--search-seconds S``). ``--profile`` prints the cProfile of the slowest variant's lowering.

    python benchmarks/compile_time_bench.py --max-variants 6
    python benchmarks/compile_time_bench.py --found none --suite rmsnorm_linear_llama3_8b_qkv_b1 --search-seconds 30
    python benchmarks/compile_time_bench.py --json /tmp/ct.json --profile
"""
from __future__ import annotations

import argparse
import cProfile
import glob
import hashlib
import io
import json
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.pop("NUMBA_ENABLE_CUDASIM", None)   # the real CUDA target's compiler, not the simulator's


def _without_nvrtc() -> None:
    """numba-cuda 0.30 asks libNVRTC which archs exist; where it is missing (a CPU box with libNVVM only) answer
    for it, as tests/codegen/codegen_ptx.py does."""
    from numba.cuda import cuda_paths
    from numba.cuda.cudadrv import nvrtc

    try:
        nvrtc.get_supported_ccs()
    except Exception:
        nvrtc.get_supported_ccs = lambda: [CC]
        nvrtc.get_arch_option = lambda major, minor: f"compute_{major}{minor}"
        cuda_paths._get_nvrtc_path = lambda: None

CC = (9, 0)   # H100


def kernel_signature(views: list[str]) -> tuple:
    """The argument types a launch compiles for: each tensor a flat C-contiguous array of its view dtype."""
    from mirage_lab.gpu.numba_compat import types

    return tuple(types.Array(getattr(types, v), 1, "C") for v in views)


def load_generated(source: str, tag: str, workdir: Path) -> Any:
    """Import a generated module from a file (numba's ``cache=True`` needs one)."""
    from mirage_lab.runtime.kernel import _import_file

    path = workdir / f"ct_{tag}.py"
    path.write_text(source)
    return _import_file(path, f"ct_{tag}")


def ptxas(ptx: str, workdir: Path) -> dict[str, Any]:
    """Assemble ``ptx`` for sm_90 with the toolkit's ptxas: seconds, registers, spill bytes."""
    exe = shutil.which("ptxas")
    if exe is None:
        return {}
    src = workdir / "k.ptx"
    src.write_text(ptx)
    t0 = time.perf_counter()
    r = subprocess.run([exe, "-arch=sm_90", "-O3", "-v", str(src), "-o", str(workdir / "k.cubin")],
                       capture_output=True, text=True)
    out: dict[str, Any] = {"ptxas_s": time.perf_counter() - t0}
    if r.returncode:
        out["ptxas_error"] = r.stderr[-300:]
        return out
    m = re.search(r"Used (\d+) registers", r.stderr)
    s = re.search(r"(\d+) bytes spill stores", r.stderr)
    out["regs"] = int(m.group(1)) if m else None
    out["spill_b"] = int(s.group(1)) if s else None
    return out


def normalized(code: str) -> str:
    """PTX or LLVM IR without what differs between two compiles of one kernel in one process: numba's
    per-compile counters in mangled names (``B2v7B``), shared-memory globals and module ids, and comments.
    Equal normalized text, equal kernels."""
    code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith("//"))
    code = re.sub(r"B\d+v\d+B", "BvB", code)
    code = re.sub(r"(_cudapy_[a-z]+_)\d+", r"\1N", code)
    return re.sub(r"\$\d+", "$N", code)


def compile_kernel(kern: Any, views: list[str], workdir: Path, profile: cProfile.Profile | None = None,
                   run_ptxas: bool = True) -> dict[str, Any]:
    """numba-cuda's kernel compile steps for one generated ``@cuda.jit`` kernel, timed one by one.

    The same calls as numba-cuda's ``_Kernel`` (``compile_cuda``, the kernel fix-up, launch bounds,
    ``get_asm_str``), with the compute capability named instead of read from a device.
    """
    from numba.cuda.compiler import compile_cuda, kernel_fixup
    from numba.cuda.cudadrv import nvvm

    from mirage_lab.gpu.numba_compat import types

    _without_nvrtc()
    opts = kern.targetoptions
    fastmath = opts.get("fastmath", False)
    t0 = time.perf_counter()
    if profile is not None:
        profile.enable()
    cres = compile_cuda(kern.py_func, types.void, kernel_signature(views), fastmath=fastmath,
                        nvvm_options={"fastmath": fastmath, "opt": 3}, cc=CC)
    lib = cres.library
    kernel = lib.get_function(cres.fndesc.llvm_func_name)
    lib._entry_name = cres.fndesc.llvm_func_name
    kernel_fixup(kernel, False)
    nvvm.set_launch_bounds(kernel, opts.get("launch_bounds"))
    if profile is not None:
        profile.disable()
    t1 = time.perf_counter()
    ptx = lib.get_asm_str(cc=CC)
    t2 = time.perf_counter()
    # numba's own per-pass times ("<index>_<pass name>": (init, run, finalize)) of the pipeline that ran
    run = {name.split("_", 1)[-1]: t.run for times in cres.metadata.get("pipeline_times", {}).values()
           for name, t in times.items()}
    typing_s = sum(v for k, v in run.items() if "type_inference" in k)
    lowering_s = sum(v for k, v in run.items() if k.endswith("native_lowering"))
    ssa_s = sum(v for k, v in run.items() if "ssa" in k)
    row = {"lower_s": t1 - t0, "typing_s": typing_s, "lowering_s": lowering_s, "ssa_s": ssa_s, "nvvm_s": t2 - t1,
           "ptx_kb": len(ptx) / 1024,
           "ptx_sha": hashlib.sha1(normalized(ptx).encode()).hexdigest()[:12], "ptx": ptx}
    if run_ptxas:
        row.update(ptxas(ptx, workdir))
    return row


def measure_variant(v: Any, workdir: Path, profile: cProfile.Profile | None = None,
                    run_ptxas: bool = True, dump: Path | None = None) -> dict[str, Any]:
    """One variant: generate, import, then compile each of its kernels (sums over the kernels)."""
    from mirage_lab.codegen import generate_module

    t0 = time.perf_counter()
    gen = generate_module(v.graph, options=v.options)
    t1 = time.perf_counter()
    # the module's name is in every mangled kernel name: the same for a variant in every process
    tag = hashlib.sha1(f"{v.graph.content_hash()}/{v.threads}/{v.options.tag()}".encode()).hexdigest()[:16]
    mod = load_generated(gen.source, tag, workdir)
    t2 = time.perf_counter()
    row: dict[str, Any] = {"variant": v.tag, "gen_s": t1 - t0, "import_s": t2 - t1, "kernels": len(gen.kernels),
                           "src_lines": sum(s.count("\n") for s in gen.kernel_sources.values()),
                           "estimate_us": v.estimate_us}
    for info in gen.kernels:
        launch = getattr(mod, f"_launch_{info.name}")
        views = [str(t).replace("torch.", "") for t in launch.views]
        k = compile_kernel(getattr(mod, info.name), views, workdir, profile, run_ptxas)
        if dump is not None:   # normalized PTX per kernel, to diff two code generators' output
            dump.mkdir(parents=True, exist_ok=True)
            (dump / f"{v.tag.replace('/', '_')}_{info.name}.ptx").write_text(normalized(k.pop("ptx")))
        else:
            k.pop("ptx")
        for key, val in k.items():
            if isinstance(val, (int, float)) and val is not None:
                row[key] = row.get(key, 0) + val
            elif isinstance(val, str):
                row[key] = (row[key] + "+" + val) if key in row else val
    row["total_s"] = sum(row.get(k, 0.0) for k in ("gen_s", "import_s", "lower_s", "nvvm_s", "ptxas_s"))
    return row


_PATCHES: dict[str, tuple[Any, Any]] = {}


def typing_memo(on: bool) -> None:
    """Switch mirage_lab's compile speed-ups of numba-cuda (``gpu.numba_compat``: the call-typing memo, the
    flags' ``values()``, the lowering's call-type and implementation memos) on or off in this process."""
    from numba.core.types.functions import Function
    from numba.cuda.core.base import BaseContext as TargetContext
    from numba.cuda.core.targetconfig import TargetConfig
    from numba.cuda.typing.context import BaseContext

    from mirage_lab.gpu import numba_compat  # noqa: F401  (applies them)

    for cls, name in ((BaseContext, "resolve_function_type"), (TargetConfig, "values"),
                      (Function, "get_call_type"), (TargetContext, "get_function")):
        if name not in _PATCHES:
            patched = getattr(cls, name)
            _PATCHES[name] = (patched, getattr(patched, "__wrapped__", patched))
        setattr(cls, name, _PATCHES[name][0] if on else _PATCHES[name][1])


def found_candidates(pattern: str) -> list[tuple[str, Any]]:
    from mirage_lab.ir.serialize import from_json

    if pattern == "none":
        return []
    out = []
    for f in sorted(glob.glob(str(ROOT / pattern))):
        out.append((Path(f).stem, from_json(Path(f).read_text())))
    return out


def searched_candidates(names: list[str], seconds: float) -> list[tuple[str, Any]]:
    """Search each suite program on this machine (tune=False) for ``seconds``; every candidate found."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from suite import programs as suite

    from mirage_lab.search.events import CandidateFound

    out = []
    for name in names:
        p = suite.by_name(name)
        found: list[Any] = []

        def on_event(ev: Any, found=found) -> None:
            if isinstance(ev, CandidateFound):
                found.append(ev.graph)

        try:
            p.build().superoptimize(p.config, tune=False, search_seconds=seconds, on_event=on_event, cache=False,
                                    progress=False)
        except Exception as e:  # NoCandidateError: nothing within the budget
            print(f"# {name}: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
        out += [(f"{name}__cand{i}", g) for i, g in enumerate(found)]
        print(f"# {name}: {len(found)} candidates in {seconds:.0f} s", file=sys.stderr)
    return out


def fmt_row(prog: str, r: dict[str, Any]) -> str:
    def f(k: str, spec: str = ".2f") -> str:
        v = r.get(k)
        return "—" if v is None else format(v, spec)

    return (f"| {prog} | {r['variant']} | {r['kernels']} | {r['src_lines']} | {f('gen_s')} | {f('import_s')} | "
            f"{f('typing_s')} | {f('lowering_s')} | {f('ssa_s')} | {f('lower_s')} | {f('nvvm_s')} | {f('ptxas_s')} | {f('total_s')} | {f('ptx_kb', '.0f')} | "
            f"{f('regs', 'd')} | {f('spill_b', 'd')} | {r.get('ptx_sha', '—')} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--found", default="benchmarks/found/*cand*.json", help="stored candidates (glob), or 'none'")
    ap.add_argument("--suite", default="", help="comma-separated suite programs to search here")
    ap.add_argument("--search-seconds", type=float, default=30.0)
    ap.add_argument("--max-variants", type=int, default=0, help="per candidate, in the tuner's order (0: all)")
    ap.add_argument("--only", default="", help="substring a candidate's name must contain")
    ap.add_argument("--variants", default="", help="regular expression a variant's tag must match (e.g. '^(?!.*mma)': "
                                                    "FMA lowerings only)")
    ap.add_argument("--no-ptxas", action="store_true")
    ap.add_argument("--profile", action="store_true", help="cProfile of the lowering of every variant, top 25")
    ap.add_argument("--json", default="", help="write the rows here")
    ap.add_argument("--dump-ptx", default="", help="write each kernel's normalized PTX into this folder")
    ap.add_argument("--typing-memo", choices=("on", "off", "ab"), default="on",
                    help="mirage_lab's numba-cuda compile speed-ups (gpu/numba_compat.py: call-typing memo, flag "
                         "values): on, off, or each variant "
                         "compiled both ways (off first), same load, with the PTX compared")
    a = ap.parse_args(argv)

    from mirage_lab.gpu.numba_compat import quiet_occupancy_warnings
    from mirage_lab.pipeline.autotune import plan_variants

    _without_nvrtc()
    quiet_occupancy_warnings()
    cands = found_candidates(a.found)
    if a.suite:
        cands += searched_candidates([s for s in a.suite.split(",") if s], a.search_seconds)
    cands = [(n, g) for n, g in cands if a.only in n]
    prof = cProfile.Profile() if a.profile else None
    rows: list[dict[str, Any]] = []
    print(f"# load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; sm_{CC[0]}{CC[1]}; ptxas "
          f"{'off' if a.no_ptxas else shutil.which('ptxas')}")
    print("| candidate | variant | kernels | kernel lines | gen s | import s | typing s | lowering s | SSA s | numba s "
          "| nvvm s | ptxas s | total s | PTX KiB | regs | spill B | PTX sha1 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="mirage_ct_") as tmp:
        work = Path(tmp)
        # one throwaway compile first: numba's first kernel in a process pays its target's start-up
        if cands:
            t0 = time.perf_counter()
            first = plan_variants([cands[0][1]])[0][0]
            measure_variant(first, work, None, False)
            print(f"# warm-up (first compile in this process, not in the table): {time.perf_counter() - t0:.1f} s")
        for name, g in cands:
            t0 = time.perf_counter()
            planned = plan_variants([g])
            plan_s = time.perf_counter() - t0
            print(f"# {name}: {len(planned)} variants planned in {plan_s:.2f} s")
            planned = [p for p in planned if re.search(a.variants, p[0].tag)]
            for v, _ in planned[: a.max_variants or None]:
                for memo in (("off", "on") if a.typing_memo == "ab" else (a.typing_memo,)):
                    typing_memo(memo == "on")
                    try:
                        r = measure_variant(v, work, prof, not a.no_ptxas,
                                            Path(a.dump_ptx) / name if a.dump_ptx else None)
                    except Exception as e:
                        print(f"| {name} | {v.tag} | error: {type(e).__name__}: {str(e)[:150]} |")
                        continue
                    r.update(candidate=name, typing_memo=memo)
                    if a.typing_memo == "ab":
                        r["variant"] += f" memo {memo}"
                    rows.append(r)
                    print(fmt_row(name, r), flush=True)
    if rows:
        tot = {k: sum(r.get(k, 0.0) or 0.0 for r in rows) for k in ("gen_s", "import_s", "typing_s", "lowering_s",
                                                                     "ssa_s", "lower_s", "nvvm_s", "ptxas_s", "total_s")}
        print("# sums over " + str(len(rows)) + " variants: " + ", ".join(f"{k} {v:.1f}" for k, v in tot.items()))
    if prof is not None:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
        s.write("\n--- by own time ---\n")
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
        if os.environ.get("COMPILE_BENCH_CALLERS"):   # who calls a function, e.g. COMPILE_BENCH_CALLERS=refresh
            pstats.Stats(prof, stream=s).sort_stats("cumulative").print_callers(os.environ["COMPILE_BENCH_CALLERS"])
        print(s.getvalue())
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

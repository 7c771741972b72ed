"""The ``mirage-lab`` command.

``mirage-lab demo [--out reports/] [--full]`` builds the Mirage README's RMSNorm + Linear
program, takes candidate μGraphs for it (today: the hand-written fused μGraph of
MIRAGE_SPEC §7; later: the search's results), checks each against the program with the
reference interpreter on random inputs, and writes ``<out>/demo.html`` with the drawings.
It prints one progress line per step and exits non-zero when a check fails.

    $ mirage-lab demo --out reports/
    [  0.0s] program: rms_norm(X[16,4096]) @ W[4096,4096] (float16), 2 inputs, 4 ops
    ...
"""
from __future__ import annotations

import argparse
import inspect
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import torch

from . import __version__
from . import examples
from .errors import MirageLabError
from .interp import run_reference
from .ir import KernelGraph, float16, new_kernel_graph
from .ir.shapes import fmt
from .report import CandidateSection, CheckResult, MeasurementsSection, ProgramSection, write_report

Log = Callable[[str], None]


def seed_program(batch_size: int = 16, output_dim: int = 4096, hidden: int = 4096) -> KernelGraph:
    """RMSNorm + Linear, written as in the Mirage README (its output is the matmul's result)."""
    graph = new_kernel_graph()
    X = graph.new_input(dims=(batch_size, hidden), dtype=float16)
    W = graph.new_input(dims=(hidden, output_dim), dtype=float16)
    O = graph.matmul(graph.rms_norm(X, normalized_shape=(hidden,)), W)
    graph.mark_output(O)
    return graph


@dataclass(frozen=True)
class DemoShape:
    """One benchmark configuration of MIRAGE_SPEC §7."""

    batch_size: int
    output_dim: int
    why: str
    hidden: int = 4096


QUICK_SHAPES = (DemoShape(16, 4096, "the Mirage README's X[16,4096]·W[4096,4096]"),)
FULL_SHAPES = QUICK_SHAPES + (DemoShape(2, 6144, "Mirage's rmsnorm benchmark, bs=1: X[2,4096]·W[4096,6144]"),)


def _rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    return float((out - ref).norm() / ref.norm())


def _inputs(graph: KernelGraph, dtype: torch.dtype, gen: torch.Generator) -> list[torch.Tensor]:
    # Weights scaled by 1/sqrt(fan-in) keep outputs O(1), as in a real layer.
    xs = []
    for i, t in enumerate(graph.inputs):
        x = torch.randn(t.dims, generator=gen, dtype=torch.float32)
        if i > 0:
            x /= t.dims[-2] ** 0.5
        xs.append(x.to(dtype))
    return xs


def check_candidate(program: KernelGraph, candidate: KernelGraph, *, seed: int = 0,
                    per_block: bool = False) -> list[CheckResult]:
    """Run ``candidate`` and ``program`` with the reference interpreter on the same random inputs.

    >>> from mirage_lab.examples import rms_norm_linear_fused
    >>> [c.passed for c in check_candidate(seed_program(), rms_norm_linear_fused())]
    [True, True]
    """
    gen = torch.Generator().manual_seed(seed)
    checks = []
    x32 = _inputs(program, torch.float32, gen)
    (ref32,) = run_reference(program, x32)
    (out32,) = run_reference(candidate, x32)
    checks.append(CheckResult("float32 inputs: candidate vs program", _rel_err(out32, ref32), 1e-4,
                              "both run by the reference interpreter on the same random inputs"))
    x16 = [x.half() for x in _inputs(program, torch.float32, gen)]
    (ref64,) = run_reference(program, [x.double() for x in x16])
    (out16,) = run_reference(candidate, x16)
    checks.append(CheckResult("float16 inputs: candidate (float16 out) vs program in float64", _rel_err(out16, ref64),
                              1e-2, "fp16 results land near 1e-3"))
    if per_block:
        (lit,) = run_reference(candidate, x32, per_block=True)
        checks.append(CheckResult("literal per-block run vs batched run", _rel_err(lit, out32), 1e-6,
                                  "the block-by-block interpreter, with the spec's tile-index formulas"))
    return checks


def searched_candidates(shape: DemoShape, log: Log, *, seconds: float, workers: int | None,
                        full_search: bool, keep: int = 3) -> tuple[KernelGraph, list[CandidateSection], object]:
    """Run the real search and turn its best candidates (by static cost) into report sections.

    The search runs on a CPU-sized version of the program (X[4,256]·W[256,256]) unless
    ``full_search``: the full shape's search takes minutes even on 16 cores. It prints
    progress while it runs and stops at ``seconds`` (candidates found so far are kept).
    """
    from .search import CancelToken, CandidateFound, Progress, run_search, static_cost

    prog = seed_program(shape.batch_size, shape.output_dim, shape.hidden) if full_search else seed_program(4, 256, 256)
    x, w = (t.dims for t in prog.inputs)
    log(f"search: rms_norm(X{fmt(x)}) @ W{fmt(w)} from scratch, default settings"
        f"{'' if full_search else ' (CPU-sized shapes; --full-search for the seed shapes)'}, stop after {seconds:.0f}s")
    token = CancelToken()
    t0 = time.perf_counter()
    last = -10.0

    def on_event(ev: object) -> None:
        nonlocal last
        now = time.perf_counter() - t0
        if isinstance(ev, Progress) and now - last >= 5:
            last = now
            st = ev.stats
            log(f"search: {st.states} states, pruned {st.pruned_expr} by expression and {st.pruned_dedup} as duplicates, "
                f"{st.fingerprint_tests} fingerprint tests, {st.candidates} candidates, "
                f"{st.subtrees_done}/{st.subtrees_total} subtrees")
        elif isinstance(ev, CandidateFound):
            c = static_cost(ev.graph)
            log(f"search: candidate {ev.index}: {c.kernels} kernel(s), ~{c.bytes / 1e6:.2f} MB moved")
        if now > seconds and not token.is_set():
            token.cancel(finish_confirmations=True)   # a time limit: a hit being confirmed is still reported

    result = run_search(prog, workers=workers, cancel=token, on_event=on_event)
    st = result.stats
    log(f"search: {'stopped' if result.cancelled else 'finished'} after {time.perf_counter() - t0:.1f}s: "
        f"{st.states} states, {len(result.candidates)} candidates")
    sections = []
    for rank, g in enumerate(result.ranked()[:keep]):
        c = static_cost(g)
        bgs = [op.block_graph for op in g.customized_ops]
        sections.append(CandidateSection(
            title=f"search candidate #{rank + 1} by static cost, X{fmt(x)}·W{fmt(w)}",
            graph=g,
            description="Found by mirage_lab's search from the plain program, verified by finite-field "
                        "fingerprints; ranked by (kernels, estimated bytes moved).",
            info={"source": "mi.search.search (default settings)", "kernels": c.kernels,
                  "estimated bytes moved": c.bytes, "grids": [b.grid_dim for b in bgs],
                  "forloop ranges": [b.forloop_range for b in bgs],
                  "search": f"{st.states} states, {st.pruned_expr} pruned by expression, {st.pruned_dedup} as "
                            f"duplicates, {st.fingerprint_tests} fingerprint tests"}))
    return prog, sections, result


def candidates_for(program: KernelGraph, shape: DemoShape, log: Log) -> Iterator[CandidateSection]:
    """The hand-written μGraph Mirage found (MIRAGE_SPEC §7), as a reference section."""
    fused = examples.rms_norm_linear_fused(shape.batch_size, shape.hidden, shape.output_dim)
    bg = fused.customized_ops[0].block_graph
    log(f"candidate: hand-written fused μGraph, 1 customized op, grid {bg.grid_dim}, "
        f"forloop_range {bg.forloop_range}, {len(bg.thread_graph().chains)} thread chains")
    yield CandidateSection(
        title=f"hand-written fused μGraph, X{fmt((shape.batch_size, shape.hidden))}·W{fmt((shape.hidden, shape.output_dim))}",
        graph=fused,
        description=("One kernel. Each block loads its slice of W and the whole X, one tile per for-loop "
                     "iteration, accumulating both sum(x²) (the RMS) and X·W; after the loop it divides. "
                     "The division of RMSNorm is moved past the matmul, so X is read once (MIRAGE_SPEC §7)."),
        info={"source": "hand-written (mirage_lab.examples.rms_norm_linear_fused)",
              "kernels": len(fused.customized_ops), "grid": bg.grid_dim, "forloop_range": bg.forloop_range,
              "shared memory (heuristic)": f"{bg.smem_bytes()} B"},
    )


def gpu_measurements(result: object, out_dir: Path, log: Log) -> MeasurementsSection:
    """On a CUDA machine: compile, check and time the candidates and the torch baselines; export the fastest."""
    from .runtime import export

    if not torch.cuda.is_available():
        log("gpu: no CUDA GPU here: kernels are not compiled or timed (the report says so)")
        return MeasurementsSection("no GPU", ["contender", "median µs"], [],
                                   notes="No CUDA GPU on this machine: generated kernels are compiled and timed "
                                         "only on a GPU (see benchmarks/RESULTS.md for recorded H100/H200 runs).")
    log("gpu: tuning the candidates' lowerings (pipeline.autotune) and timing the torch baselines")
    from .pipeline import autotune, shortlist

    picks = shortlist(result.candidates, 4)
    rep = autotune(result.program, [result.candidates[i] for i in picks], tune_seconds=60, baselines="all")
    failures = [(f"candidate {picks[r.variant.candidate]} [t{r.variant.threads}/{r.variant.options.tag()}]", r.error)
                for r in rep.results if r.error]
    if rep.best is not None:
        v = rep.best.variant
        path = export(v.graph, out_dir / "fastest_kernel.py", latency_us=rep.best.median_us, options=v.options,
                      device=rep.device)
        log(f"gpu: fastest {rep.best.median_us:.1f} µs ({v.tag}); exported to {path}")
    return MeasurementsSection.from_latency_rows(
        rep.latency_rows(picks, every_variant=True), device=rep.device, floor_us=rep.floor_us, failures=failures,
        notes="CUDA events after warm-up, median, inputs rotated so weights come from HBM; "
              "memory floor: every input read and every output written once at 3.0 TB/s.")


def run_demo(out_dir: str | Path = "reports", *, full: bool = False, seed: int = 0, log: Log = print,
             shapes: Sequence[DemoShape] | None = None, search_seconds: float = 0.0, workers: int | None = None,
             full_search: bool = False) -> tuple[Path, bool]:
    """The demo job; returns the report's path and whether every check passed.

    ``shapes`` overrides the benchmark shapes (``QUICK_SHAPES``, or ``FULL_SHAPES`` with ``full``).
    """
    t0 = time.perf_counter()

    def say(msg: str) -> None:
        log(f"[{time.perf_counter() - t0:6.1f}s] {msg}")

    shapes = shapes or (FULL_SHAPES if full else QUICK_SHAPES)
    source = inspect.getsource(seed_program)
    program_section = None
    sections: list[CandidateSection] = []
    for shape in shapes:
        program = seed_program(shape.batch_size, shape.output_dim, shape.hidden)
        x, w = (t.dims for t in program.inputs)
        say(f"program: rms_norm(X{fmt(x)}) @ W{fmt(w)} (float16), {len(program.inputs)} inputs, "
            f"{len(program.ops)} ops  [{shape.why}]")
        if program_section is None:
            program_section = ProgramSection(
                "RMSNorm + Linear (the Mirage README's seed program)", program, source,
                f"Built with seed_program(batch_size={shape.batch_size}, output_dim={shape.output_dim}, "
                f"hidden={shape.hidden}).")
        for cand in candidates_for(program, shape, say):
            t1 = time.perf_counter()
            cand.checks = check_candidate(program, cand.graph, seed=seed, per_block=full)
            for c in cand.checks:
                say(f"check: {c.name}: rel. error {c.rel_err:.2e} (tol {c.tol:.0e}) "
                    f"{'ok' if c.passed else 'FAILED'}")
            say(f"checked in {time.perf_counter() - t1:.1f}s")
            sections.append(cand)
    assert program_section is not None
    measurements = None
    if search_seconds > 0:
        prog, found, result = searched_candidates(shapes[0], say, seconds=search_seconds, workers=workers,
                                                  full_search=full_search)
        for cand in found:
            cand.checks = check_candidate(prog, cand.graph, seed=seed)
            for c in cand.checks:
                say(f"check {cand.title[:24]}: {c.name}: rel. error {c.rel_err:.2e} {'ok' if c.passed else 'FAILED'}")
        sections.extend(found)
        if found:
            measurements = gpu_measurements(result, Path(out_dir), say)
    say("drawing the μGraphs at the kernel, block and thread levels (Graphviz)")
    path = write_report(Path(out_dir) / "demo.html", "mirage_lab demo: RMSNorm + Linear", program_section, sections,
                        measurements, subtitle="full" if full else "quick")
    ok = all(c.passed for s in sections for c in s.checks)
    say(f"wrote {path} ({path.stat().st_size / 1024:.0f} KB); "
        f"{'all checks pass' if ok else 'SOME CHECKS FAILED'}")
    return path, ok


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mirage-lab", description="mirage_lab: a Jupyter-first Mirage superoptimizer.")
    p.add_argument("--version", action="version", version=f"mirage-lab {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    d = sub.add_parser("demo", help="search the RMSNorm+Linear program, check the candidates (on a GPU: tune and "
                                    "time them), write an HTML report",
                       description="Build the Mirage README's RMSNorm + Linear program and its hand-written fused "
                                   "μGraph, run the real search on it (CPU-sized shapes unless --full-search), check the "
                                   "candidates against the program with the reference interpreter on random inputs; "
                                   "on a CUDA GPU also tune their lowering (mirage_lab.pipeline), time them beside the "
                                   "torch baselines and export the fastest; write <out>/demo.html with the drawings.")
    d.add_argument("--out", default="reports", type=Path, help="folder for demo.html (default: reports/)")
    d.add_argument("--full", action="store_true",
                   help="also check the X[2,4096]·W[4096,6144] benchmark shape, and run the literal "
                        "block-by-block interpreter (a few seconds more)")
    d.add_argument("--seed", type=int, default=0, help="random seed of the test inputs (default 0)")
    d.add_argument("--search-seconds", type=float, default=120.0,
                   help="run the μGraph search for at most this long (0: skip the search; default 120)")
    d.add_argument("--workers", type=int, default=None, help="search worker processes (default: all cores)")
    d.add_argument("--full-search", action="store_true",
                   help="search at the seed's full shapes (minutes even on 16 cores) instead of X[4,256]·W[256,256]")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mirage-lab`` console script; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        if args.command == "demo":
            _, ok = run_demo(args.out, full=args.full, seed=args.seed, log=lambda m: print(m, flush=True),
                             search_seconds=args.search_seconds, workers=args.workers, full_search=args.full_search)
            return 0 if ok else 1
    except MirageLabError as e:
        print(f"mirage-lab: error: {e}", file=sys.stderr)
        return 1
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover - argparse rejects it first
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""torch.compile of a program in a child process, so that the tuner's own build of it hits inductor's caches.

Opt-in (``MIRAGE_LAB_PREWARM=1``; :func:`enabled` says why it is off by default). torch.compile's first
build of a program is 10-40 s of dynamo, AOT autograd and inductor, most of it Python holding the GIL.
Built in a thread of the process that searches and tunes (:class:`~.contenders.ProgramWarmup`), it
shares that process with the search's coordinator and the tuner's timings. Here the build runs in a
separate interpreter, started before the search (at the search's priority: the tuner waits for
torch.compile, so its build is on the critical path); it fills inductor's on-disk caches (FX graph,
AOT autograd, Triton, autotuning), and the build in the tuner's process that follows finds its
compiled code there. The child gets the program as JSON in a file and exits when its parent does.

    >>> seconds, error = Prewarm(program).wait()      # doctest: +SKIP
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..ir.kernel_graph import KernelGraph

PREWARM_TIMEOUT_S = 600.0   # a build that takes longer is abandoned: the tuner's process builds it itself
_ENV = "MIRAGE_LAB_PREWARM"   # "1": build torch.compile in a child process first


def enabled() -> bool:
    """Whether torch.compile is prewarmed in a child process: off unless ``MIRAGE_LAB_PREWARM=1``.

    Off by default since measured: on the H200 host the child took 44-64 s under the search's load
    (its own imports of torch, CUDA and inductor included), then 1-11 s more in the tuner's process,
    where the thread alone took 12-37 s for the same programs (2026-11-28, night). The timings the
    thread's GIL once inflated are now thrown away or taken again (``runtime.profile.time_calls``,
    ``pipeline.autotune._time``). Kept for a machine where a child pays off (more cores than workers).
    """
    return os.environ.get(_ENV, "0") == "1"


class Prewarm:
    """The child process building torch.compile of ``program`` on ``device``; :meth:`wait` for it."""

    def __init__(self, program: KernelGraph, device: str = "cuda") -> None:
        self.t0 = time.perf_counter()
        fd, self._path = tempfile.mkstemp(prefix="mirage_lab-prewarm-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            f.write(program.to_json())
        self._err = tempfile.TemporaryFile()   # not a pipe: inductor's warnings could fill one and block the child
        root = str(Path(__file__).resolve().parents[2])   # this mirage_lab, wherever the caller imported it from
        env = child_env(root)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mirage_lab.pipeline.prewarm", self._path, device, str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._err, env=env)

    def wait(self, timeout: float = PREWARM_TIMEOUT_S) -> tuple[float, str | None]:
        """Seconds the build took and why it failed (``None``: built)."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.cancel()
            return time.perf_counter() - self.t0, f"prewarm: no build within {timeout:g} s"
        finally:
            self._remove()
        secs = time.perf_counter() - self.t0
        if self.proc.returncode != 0:
            self._err.seek(0)
            tail = self._err.read()[-4000:].decode(errors="replace").strip().splitlines()[-3:]
            self._err.close()
            return secs, f"prewarm exited {self.proc.returncode}: {' | '.join(tail)}"[:500]
        self._err.close()
        return secs, None

    def cancel(self) -> None:
        """Stop the child (the tuning no longer needs it)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._remove()
        self._err.close()

    def _remove(self) -> None:
        try:
            os.unlink(self._path)
        except OSError:
            pass


def child_env(root: str) -> dict[str, str]:
    """The child's environment: this mirage_lab importable, and inductor compiling in the child itself.

    Inductor's default compiles Triton kernels in a pool of up to one process per core, each importing
    torch: on a 16-core host, 16 more interpreters starting while the search's 16 workers and the tuner's
    16 compile processes run. The programs here lower to a few kernels, which one process compiles in a
    few seconds. (Not measured on the GPU host yet; a user's own setting is kept.)
    """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    return env


def _build(path: str, device: str) -> None:
    from ..ir.serialize import from_json

    program = from_json(Path(path).read_text())
    import torch

    from ..runtime.program import ProgramFunction

    xs = [torch.randn(tuple(t.dims), device=device).to(t.dtype.torch) for t in program.inputs]
    ProgramFunction(program, compiled=True)(xs)
    if device == "cuda":
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> Any:
    path, device, parent = (argv if argv is not None else sys.argv[1:])[:3]
    from ..search.lifetime import exit_with_parent

    exit_with_parent(int(parent))
    _build(path, device)


if __name__ == "__main__":
    main()

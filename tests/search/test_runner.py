"""Streaming, cancel, executors (local pool, Dask) and checkpoints of a running search."""
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from mirage_lab import examples as ex
from mirage_lab.search import (CancelToken, CandidateFound, CheckpointError, Finished, Progress, run_search,
                               search)

from .helpers import SMALL, small_program

ROOT = Path(__file__).resolve().parents[2]


def _hashes(cands):
    return sorted(c.content_hash() for c in cands)


def test_events_arrive_while_the_search_runs():
    g = ex.rms_norm_linear_program(4, 64, 64)
    t0 = time.monotonic()
    seen = []
    for ev in search(g, workers=2, progress_interval=0.05, max_kernel_ops=4):
        seen.append((time.monotonic() - t0, ev))
    end = seen[-1][0]
    assert isinstance(seen[-1][1], Finished)
    progress = [(t, e) for t, e in seen if isinstance(e, Progress)]
    first_cand = next(t for t, e in seen if isinstance(e, CandidateFound))
    assert first_cand < end * 0.8, "candidates must stream as found, not at the end"
    states = [e.stats.states for _, e in progress]
    assert len(progress) >= 5 and states == sorted(states) and states[-1] > states[0]
    assert progress[len(progress) // 2][1].stats.states < seen[-1][1].stats.states


def test_same_candidates_with_one_worker_many_workers_and_dask():
    distributed = pytest.importorskip("distributed")
    g = small_program()
    one = run_search(g, workers=1, **SMALL)
    two = run_search(g, workers=2, **SMALL)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
            distributed.Client(cl) as client:
        dask = run_search(g, executor=client, **SMALL)
    assert one.candidates and _hashes(one.candidates) == _hashes(two.candidates) == _hashes(dask.candidates)


def test_cancel_ends_within_a_second_and_keeps_candidates():
    g = ex.rms_norm_linear_program(4, 256, 256)   # a search of ~40 s
    token = CancelToken()
    cands, final, t_cancel = [], None, None
    for ev in search(g, workers=2, cancel=token):
        if isinstance(ev, CandidateFound):
            cands.append(ev.graph)
            if t_cancel is None:
                token.cancel()
                t_cancel = time.monotonic()
        elif isinstance(ev, Finished):
            final = ev
    assert final is not None and final.cancelled
    assert time.monotonic() - t_cancel < 1.5
    assert final.candidates and _hashes(final.candidates) == _hashes(cands)


def test_cancel_from_another_thread():
    g = ex.rms_norm_linear_program(4, 256, 256)
    token = CancelToken()
    threading.Timer(2.0, token.cancel).start()
    t0 = time.monotonic()
    events = list(search(g, workers=1, cancel=token))
    assert isinstance(events[-1], Finished) and events[-1].cancelled
    assert time.monotonic() - t0 < 4.0


RESUME_SCRIPT = textwrap.dedent("""
    import sys
    from mirage_lab import examples as ex
    from mirage_lab.search import run_search
    g = ex.rms_norm_linear_program(4, 64, 64)
    run_search(g, workers=2, checkpoint=sys.argv[1], max_kernel_ops=4)
""")


def _checkpoint_records(path):
    recs = []
    for ln in Path(path).read_text().split("\n")[1:]:
        try:
            recs.append(json.loads(ln))
        except json.JSONDecodeError:
            pass
    return recs


def test_resume_after_sigkill_redoes_nothing_and_loses_nothing(tmp_path):
    cp = tmp_path / "search.ckpt"
    proc = subprocess.Popen([sys.executable, "-c", RESUME_SCRIPT, str(cp)], cwd=ROOT, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))})
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if cp.exists():
            recs = _checkpoint_records(cp)
            if sum("candidate" in r for r in recs) >= 2 and sum("done" in r for r in recs) >= 100:
                break
        assert proc.poll() is None, "the search ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)   # the search and its workers, at once
    proc.wait()
    before = _checkpoint_records(cp)
    done_before = {r["done"] for r in before if "done" in r}
    cands_before = {json.loads(r["candidate"])["kernel_graph"]["ops"].__repr__() for r in before if "candidate" in r}
    assert done_before and cands_before

    g = ex.rms_norm_linear_program(4, 64, 64)
    events = list(search(g, workers=2, checkpoint=cp, max_kernel_ops=4))
    fin = events[-1]
    assert isinstance(fin, Finished) and not fin.cancelled
    assert fin.resumed_subtrees == len(done_before)
    resumed = [e for e in events if isinstance(e, CandidateFound) and e.info.get("resumed")]
    assert len(resumed) >= 1
    # Nothing finished is run again: the new run's done records are exactly the rest.
    after = _checkpoint_records(cp)
    done_after = [r["done"] for r in after if "done" in r]
    assert len(done_after) == len(set(done_after)) == fin.stats.subtrees_total
    # And nothing is lost: the same candidates as a search that was never interrupted.
    fresh = run_search(g, workers=2, max_kernel_ops=4)
    assert _hashes(fin.candidates) == _hashes(fresh.candidates)


def test_checkpoint_of_another_program_or_corrupt_is_refused(tmp_path):
    cp = tmp_path / "a.ckpt"
    g = small_program()
    list(search(g, workers=1, checkpoint=cp, **SMALL))
    other = ex.rms_norm_linear_program(4, 64, 128)
    with pytest.raises(CheckpointError, match="another program"):
        list(search(other, workers=1, checkpoint=cp, **SMALL))
    with pytest.raises(CheckpointError, match="other settings"):
        list(search(g, workers=1, checkpoint=cp, max_kernel_ops=4))
    bad = tmp_path / "bad.ckpt"
    bad.write_text("not json at all\n")
    with pytest.raises(CheckpointError, match="not a mirage_lab search checkpoint"):
        list(search(g, workers=1, checkpoint=bad, **SMALL))
    lines = cp.read_text().split("\n")
    lines[2] = "{garbage"
    bad.write_text("\n".join(lines))
    with pytest.raises(CheckpointError, match="corrupt"):
        list(search(g, workers=1, checkpoint=bad, **SMALL))


def test_a_finished_checkpoint_replays_without_searching(tmp_path):
    cp = tmp_path / "done.ckpt"
    g = small_program()
    first = run_search(g, workers=1, checkpoint=cp, **SMALL)
    again = list(search(g, workers=1, checkpoint=cp, **SMALL))
    fin = again[-1]
    assert fin.resumed_subtrees == first.stats.subtrees_total
    assert _hashes(fin.candidates) == _hashes(first.candidates)


def test_a_lost_worker_is_reported_and_the_search_is_not_complete():
    from concurrent.futures import ThreadPoolExecutor

    from mirage_lab.search.events import SearchError

    class LosesItsFirstChunk(ThreadPoolExecutor):
        calls = 0

        def submit(self, fn, *args, **kw):
            LosesItsFirstChunk.calls += 1
            if LosesItsFirstChunk.calls == 1:
                def lost(*a, **k):
                    raise RuntimeError("worker killed")
                return super().submit(lost)
            return super().submit(fn, *args, **kw)

    g = ex.rms_norm_linear_program(4, 64, 64)
    with LosesItsFirstChunk(max_workers=1) as pool:
        events = list(search(g, executor=pool, max_kernel_ops=4))
    errors = [e for e in events if isinstance(e, SearchError)]
    final = events[-1]
    assert isinstance(final, Finished) and not final.cancelled
    assert len(errors) == 1 and "worker killed" in errors[0].message
    assert final.worker_errors == 1 and not final.complete
    assert final.stats.subtrees_done < final.stats.subtrees_total


def test_a_finished_search_is_complete():
    events = list(search(ex.rms_norm_linear_program(4, 64, 64), workers=1, max_kernel_ops=4))
    assert events[-1].complete and events[-1].worker_errors == 0


def _search_folders_left(folder, wait=10.0):
    """The search's temporary folders still in ``folder`` after up to ``wait`` seconds (workers may
    still be stopping: the cancel flag's folder goes once none can poll it)."""
    deadline = time.monotonic() + wait
    while True:
        left = sorted(p.name for p in Path(folder).iterdir() if p.name.startswith("mirage_lab"))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


@pytest.mark.parametrize("how", ["finished, one worker", "finished, two workers", "cancelled", "abandoned"])
def test_no_temporary_folder_is_left_behind(how, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # where the search makes its folder
    made = []
    real_mkdtemp = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda *a, **k: made.append(real_mkdtemp(*a, **k)) or made[-1])
    g = small_program()
    if how.startswith("finished"):
        final = run_search(g, workers=1 if "one" in how else 2, **SMALL)
        assert final.candidates
    elif how == "cancelled":
        token = CancelToken()
        token.cancel()
        events = list(search(g, workers=2, cancel=token, **SMALL))
        assert events[-1].cancelled
    else:  # the caller stops iterating half-way
        it = search(g, workers=2, progress_interval=0.05, **SMALL)
        next(ev for ev in it if isinstance(ev, Progress))
        it.close()
    assert made and all(Path(m).parent == tmp_path for m in made), made   # the check below looks in the right place
    assert _search_folders_left(tmp_path) == []


def test_a_broken_progress_channel_is_reported_and_loses_nothing(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from mirage_lab.search import executors
    from mirage_lab.search.events import SearchError

    class Broken:
        """A channel whose other end is gone (as a shut-down Manager's queue)."""

        def put(self, msg):
            raise BrokenPipeError("gone")

        def get_nowait(self):
            raise BrokenPipeError("gone")

    monkeypatch.setattr(executors.Pool, "make_channel", lambda self: Broken())
    g = small_program()
    with ThreadPoolExecutor(max_workers=1) as pool:
        events = list(search(g, executor=pool, **SMALL))
    errors = [e for e in events if isinstance(e, SearchError)]
    assert len(errors) == 1 and "BrokenPipeError: gone" in errors[0].message
    final = events[-1]
    assert isinstance(final, Finished) and final.complete
    assert _hashes(final.candidates) == _hashes(run_search(g, workers=1, **SMALL).candidates)


@pytest.mark.parametrize("n_tasks,workers", [(1, 1), (10, 2), (11469, 2), (11469, 16), (300, 3), (5000, 1)])
def test_chunks_keep_the_tasks_order_and_deal_the_first_ones_to_every_worker(n_tasks, workers):
    """Tasks come most promising first: chunks handed out in order must not put far-down tasks ahead of the
    first ones (the strided chunks did: nTrans 4096's candidate, at state 108,310 in order, was not reached in
    400,000 states on two workers), and the first tasks start at once on different workers."""
    from mirage_lab.search.runner import task_chunks

    todo = list(range(n_tasks))
    chunks = task_chunks(todo, workers)
    assert sorted(t for c in chunks for t in c) == todo                     # every task once
    assert all(c for c in chunks) and max(len(c) for c in chunks) <= 64
    window = len(chunks[0]) * workers                                       # chunks in order cover windows in order
    for i, c in enumerate(chunks):
        assert max(c) - min(c) < window and (i == 0 or max(chunks[i - 1]) < max(c) + window)
    firsts = [c[0] for c in chunks[:workers]]
    assert firsts == list(range(min(workers, n_tasks)))                     # task k starts on chunk k
    # a task is handed out no later than the window after its own
    for i, c in enumerate(chunks):
        assert min(c) >= (i // workers) * window - window


@pytest.mark.parametrize("budget, grace", [(True, True), (True, False), (False, True)],
                         ids=["budget-stop", "budget-stop-without-grace", "stop-button"])
def test_a_stopped_search_keeps_the_hit_it_was_confirming(monkeypatch, budget, grace):
    """A search stopped by a budget (``search_seconds``, the quiet rule) while a worker confirms its first hit waits
    for that confirmation: at full shapes one takes seconds, and a 30 s search on 16 cores that dropped them
    returned no candidate (Mistral-7B GQA decode, 2026-12-07). Without the grace the hit is lost, as it was; a Stop
    button (a plain ``cancel()``) does not wait."""
    keep = budget and grace
    from mirage_lab.search import runner, worker

    real = worker._confirm
    started = threading.Event()

    def slow_confirm(gen, hit):
        started.set()
        time.sleep(2.0)
        return real(gen, hit)

    monkeypatch.setattr(worker, "_confirm", slow_confirm)
    if not grace:
        monkeypatch.setattr(runner, "CONFIRM_GRACE_S", 0.0)
    token = CancelToken()
    events, t_cancel = [], None
    for ev in search(small_program(), workers=1, cancel=token, progress_interval=0.05, **SMALL):
        events.append(ev)
        if started.is_set() and t_cancel is None:
            token.cancel(finish_confirmations=budget)
            t_cancel = time.monotonic()
    final = events[-1]
    assert isinstance(final, Finished) and final.cancelled and t_cancel is not None
    assert len(final.candidates) == (1 if keep else 0)
    assert time.monotonic() - t_cancel < (runner.CONFIRM_GRACE_S if keep else 1.5)
    # while it waits, its progress says so (the bars show "stopped, confirming 1 hit(s)")
    waited = [ev for ev in events if isinstance(ev, Progress) and ev.stats.confirming]
    assert bool(waited) is keep and all(ev.stats.confirming == 1 for ev in waited)
    if keep:
        from mirage_lab.pipeline.progress import ProgressBars

        lines = io.StringIO()
        bars = ProgressBars(file=lines)
        bars(waited[-1])
        bars.close()
        assert "stopped, confirming 1 hit(s)" in lines.getvalue()

"""The checkpoint reader: any corruption is repaired (a torn tail) or a CheckpointError naming the line.

Property-based over corruptions of a real checkpoint file (cut anywhere, bytes flipped,
inserted or appended, NUL tails, a line replaced by any JSON value); plus the records of
issue 21 one by one, and a resumed search that re-verifies its candidates.
``benchmarks/reliability_fuzz.py`` runs the property with more examples.
"""
from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mirage_lab as mi
from mirage_lab.search import CandidateFound, Finished, search
from mirage_lab.search.checkpoint import Checkpoint, CheckpointError, CheckpointRepaired
from mirage_lab.search.events import SearchError

from .helpers import SMALL, small_program

CI_EXAMPLES = 100    # the benchmark script runs >= 1,000
N_TASKS = 6


def _valid_file() -> bytes:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "c.ckpt"
        cp = Checkpoint.open(p, "P", "C", N_TASKS)
        for t in (0, 3, 5):
            cp.mark_done(t, {"states": 10 * t, "elapsed": 0.5})
        cp.add_candidate(3, small_program().to_json(), {"kernels": 1, "hash": "abc"})
        return p.read_bytes()


VALID = _valid_file()
LINE_STARTS = [0] + [i + 1 for i, b in enumerate(VALID) if b == 10][:-1]

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
                           lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                           max_leaves=8)
pos = st.integers(0, len(VALID))


def _replace_line(data: bytes, i: int, new: bytes) -> bytes:
    lines = data.split(b"\n")
    lines[i % (len(lines) - 1)] = new
    return b"\n".join(lines)


CORRUPTIONS = st.one_of(
    pos.map(lambda n: ("cut", VALID[:n])),
    st.tuples(pos, st.integers(1, 4096)).map(lambda a: ("nul tail", VALID[:a[0]] + b"\0" * a[1])),
    st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)).map(
        lambda a: ("flip", VALID[:a[0]] + bytes([a[1]]) + VALID[a[0] + 1:])),
    st.tuples(pos, st.binary(min_size=1, max_size=40)).map(lambda a: ("insert", VALID[:a[0]] + a[1] + VALID[a[0]:])),
    st.binary(max_size=80).map(lambda b: ("append", VALID + b)),
    st.tuples(st.integers(0, 10), json_values).map(
        lambda a: ("line", _replace_line(VALID, a[0], json.dumps(a[1]).encode()))),
    st.tuples(st.integers(1, 10), st.sampled_from([b"5", b"null", b'"done"', b'{"done": "abc"}', b'{"done": 99}',
                                                   b'{"done": -1}', b'{"done": true}', b"[" * 3000 + b"]" * 3000,
                                                   b'{"done": 1, "stats": {"a": NaN}}', b'{"candidate": 5}',
                                                   b'{"done": 1e400}', b"\xff\xfe", b'{"done": 1, "candidate": ""}'])
              ).map(lambda a: ("record", _replace_line(VALID, a[0], a[1]))),
)


def check_corruption(kind: str, data: bytes, folder: Path) -> str:
    """Open a corrupted file: 'repaired', 'clean' or 'refused'; a raw exception or a lie fails."""
    p = folder / "c.ckpt"
    p.write_bytes(data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            cp = Checkpoint.open(p, "P", "C", N_TASKS)
        except CheckpointError as e:
            assert str(p) in str(e), f"the error must name the file: {e}"
            assert kind != "cut", f"a file cut short must open (it is a kill mid-write): {e}"
            return "refused"
    assert all(0 <= t < N_TASKS for t in cp.done)
    assert all(isinstance(v, (int, float)) for st_ in cp.done.values() for v in st_.values())
    assert p.read_bytes().endswith(b"\n") and b"\0" not in p.read_bytes()
    if kind == "cut":   # what survives is a prefix of what was written
        kept = p.read_bytes()
        assert VALID.startswith(kept) or kept == VALID[:VALID.index(b"\n") + 1] or len(data) <= VALID.index(b"\n")
        assert set(cp.done) <= {0, 3, 5}
    again = Checkpoint.open(p, "P", "C", N_TASKS)   # a repaired file stays repaired
    assert again.done == cp.done and again.candidates == cp.candidates and again.repaired_bytes == 0
    repaired = [w for w in caught if issubclass(w.category, CheckpointRepaired)]
    assert bool(repaired) == (cp.repaired_bytes > 0)
    return "repaired" if repaired else "clean"


@settings(max_examples=CI_EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(CORRUPTIONS)
def test_any_corruption_is_repaired_or_a_clean_error(case):
    with tempfile.TemporaryDirectory() as d:
        check_corruption(*case, Path(d))


@pytest.mark.parametrize("record", ["5", "null", '"done"', '{"done": "abc"}', "[" * 2000 + "]" * 2000,
                                    '{"done": 6}', '{"done": -1}'])
def test_the_records_of_issue_21_name_file_and_line(record, tmp_path):
    p = tmp_path / "c.ckpt"
    p.write_bytes(VALID + record.encode() + b"\n")
    with pytest.raises(CheckpointError, match=rf"{p}: line 6"):
        Checkpoint.open(p, "P", "C", N_TASKS)


def test_bad_paths_and_headers(tmp_path):
    with pytest.raises(CheckpointError, match="is a folder"):
        Checkpoint.open(tmp_path, "P", "C", N_TASKS)
    with pytest.raises(CheckpointError, match="does not exist"):
        Checkpoint.open(tmp_path / "no" / "c.ckpt", "P", "C", N_TASKS)
    p = tmp_path / "c.ckpt"
    p.write_bytes(VALID.replace(b'"version": 1', b'"version": "1"'))
    with pytest.raises(CheckpointError, match="line 1: 'version' should be a positive int"):
        Checkpoint.open(p, "P", "C", N_TASKS)
    p.write_bytes(b"\xff\xfe\n")
    with pytest.raises(CheckpointError, match="line 1 is not a mirage_lab search checkpoint"):
        Checkpoint.open(p, "P", "C", N_TASKS)


def test_a_torn_tail_survives_any_number_of_opens_and_appends(tmp_path):
    p = tmp_path / "c.ckpt"
    for k in range(3):   # a kill mid-write, then a resume that appends, three times over
        p.write_bytes(p.read_bytes()[:-7] + b"\0" * 9 if k else VALID[:-7])
        with pytest.warns(CheckpointRepaired, match="torn last line"):
            cp = Checkpoint.open(p, "P", "C", N_TASKS)
        cp.mark_done(1, {"states": 1})
        cp.add_candidate(1, small_program().to_json(), {"hash": "h"})
    cp = Checkpoint.open(p, "P", "C", N_TASKS)
    assert set(cp.done) == {0, 1, 3, 5} and cp.repaired_bytes == 0


def test_resumed_candidates_are_verified_again(tmp_path):
    """A checkpoint with every task done replays its candidates; a forged one is dropped, by line."""
    from mirage_lab.search.config import SearchConfig
    from mirage_lab.search.generator import Generator, Target

    g = small_program()
    cfg = SearchConfig.from_args(None, **SMALL).with_program_ops(g)
    n = len(Generator(Target(g, cfg), cfg, fingerprint_backend="numpy").all_tasks())
    wrong = mi.new_kernel_graph()   # the same inputs, without the RMSNorm
    x, w = (wrong.new_input(t.dims, dtype=t.dtype) for t in g.inputs)
    wrong.mark_output(wrong.matmul(x, w))
    p = tmp_path / "forged.ckpt"
    cp = Checkpoint.open(p, g.content_hash(), cfg.fingerprint(), n)
    cp.add_candidate(0, wrong.to_json(), {"kernels": 1, "hash": g.content_hash()})   # line 2, hash forged too
    cp.add_candidate(0, g.to_json(), {"kernels": 1, "hash": "anything"})             # line 3
    for t in range(n):
        cp.mark_done(t, {"states": 1})
    events = list(search(g, workers=1, checkpoint=p, **SMALL))
    errors = [e for e in events if isinstance(e, SearchError)]
    cands = [e for e in events if isinstance(e, CandidateFound)]
    assert len(errors) == 1 and f"{p}: line 2: the candidate is not equivalent" in errors[0].message
    assert [c.graph.content_hash() for c in cands] == [g.content_hash()]
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.stats.subtrees_done == fin.stats.subtrees_total == n

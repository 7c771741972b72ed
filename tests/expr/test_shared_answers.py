"""z3 answers shared between a search's worker processes through one append-only file."""
from __future__ import annotations

import multiprocessing as mp
import os

from mirage_lab import examples
from mirage_lab.expr import SubexprOracle, abstract
from mirage_lab.expr import terms as T
from mirage_lab.expr.shared_answers import SharedAnswers, expr_key

x0, x1 = T.var(0), T.var(1)
TARGET = abstract(examples.rms_norm_linear_program(4, 256, 256).outputs[0])
# Expressions that pass the oracle's shortcuts, so only z3 (or a shared answer) decides them.
PARTIAL = T.red(32, T.mul(x1, x0))          # yes: a partial sum of the matmul, commuted
WRONG = T.div(T.red(256, T.mul(x0, x1)), T.red(256, T.mul(x0, x0)))   # no: a sum where rms is


def test_a_second_oracle_takes_the_first_ones_z3_answers(tmp_path):
    path = tmp_path / "answers"
    a, b = SubexprOracle([TARGET]), SubexprOracle([TARGET])
    a.shared, b.shared = SharedAnswers(path), SharedAnswers(path)
    assert a.check(PARTIAL) is True and a.check(WRONG) is False
    assert a.z3_calls == 2
    assert b.check(PARTIAL) is True and b.check(WRONG) is False
    assert b.z3_calls == 0 and b.shared_hits == 2 and b.stats()["shared_hits"] == 2


def test_answers_from_another_process(tmp_path):
    path = str(tmp_path / "answers")
    ctx = mp.get_context("spawn")     # no memory shared: only the file
    p = ctx.Process(target=_decide_in_child, args=(path,))
    p.start()
    p.join(120)
    assert p.exitcode == 0
    o = SubexprOracle([TARGET])
    o.shared = SharedAnswers(path)
    assert o.check(PARTIAL) is True and o.check(WRONG) is False and o.z3_calls == 0


def _decide_in_child(path: str) -> None:
    o = SubexprOracle([TARGET])
    o.shared = SharedAnswers(path)
    assert o.check(PARTIAL) and not o.check(WRONG) and o.z3_calls == 2


def test_partial_and_garbled_lines_are_not_read(tmp_path):
    path = tmp_path / "answers"
    reader = SharedAnswers(path)
    key = expr_key(PARTIAL)
    with open(path, "ab") as f:
        f.write(b"not a line\n" + expr_key(WRONG) + b" 7\n" + key[:10])   # junk, a bad answer, half a line
    assert reader.get(PARTIAL) is None and reader.get(WRONG) is None
    with open(path, "ab") as f:
        f.write(key[10:] + b" 1\n")                                        # the rest of the line arrives
    assert reader.get(PARTIAL) is True


def test_keys_do_not_depend_on_the_process():
    # str(expr) is canonical; hash() of a str differs between processes (PYTHONHASHSEED).
    assert expr_key(T.red(32, T.mul(x1, x0))) == expr_key(T.red(32, T.mul(x1, x0)))
    assert expr_key(PARTIAL) != expr_key(WRONG) and len(expr_key(PARTIAL)) == 32


def test_an_oracle_without_a_file_goes_on_alone(tmp_path):
    from mirage_lab.search.worker import _share_answers

    class Gen:
        class t:
            oracle = SubexprOracle([TARGET])

    _share_answers(Gen, str(tmp_path / "gone" / "cancel"))   # no such folder (a remote Dask worker)
    assert Gen.t.oracle.shared is None and Gen.t.oracle.check(PARTIAL)
    _share_answers(Gen, str(tmp_path / "cancel"))
    assert Gen.t.oracle.shared.path == os.path.join(tmp_path, "oracle_answers")

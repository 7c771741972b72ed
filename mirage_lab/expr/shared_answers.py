"""The oracle's z3 answers shared by a search's worker processes, through one append-only file.

Each worker process has its own :class:`~.oracle.SubexprOracle`, and so its own memo of z3
answers. The search's subtrees ask largely the same questions, so with 16 workers the README
example's complete search called z3 3,619 times where one process called it 371 times: 21 s of
its 85 CPU seconds (cProfile, the 2-core CPU box, 2026-11-29). Here a worker that has had z3
decide an expression appends the answer to a file in the search's own temporary folder, and a
worker about to call z3 first reads what the others have appended since it last looked.

A file, not a Manager dict: no server process, no round trip per lookup (one ``pread`` of the
new bytes), and it works for forked, forkserver and spawned workers alike. Lines are
``<32 hex digits of the expression's digest> <0|1>``; each is written by one ``write`` to a
descriptor opened ``O_APPEND``, so concurrent writers do not interleave, and a reader keeps a
partial last line for its next read. A line that does not parse is skipped: a wrong answer can
only come from a line a worker wrote.

    >>> import os, tempfile
    >>> from mirage_lab.expr.terms import var, exp
    >>> path = os.path.join(tempfile.mkdtemp(), "answers")
    >>> a, b = SharedAnswers(path), SharedAnswers(path)      # two workers
    >>> a.put(exp(var(0)), False)
    >>> b.get(exp(var(0))), b.get(var(1))
    (False, None)
"""
from __future__ import annotations

import hashlib
import os

from .terms import Expr

_LINE = 32 + 1 + 1 + 1   # digest, space, answer, newline
READ_CHUNK = 1 << 20


def expr_key(e: Expr) -> bytes:
    """A digest of the expression's printed form: the same in every process (``hash()`` is not)."""
    return hashlib.blake2b(str(e).encode(), digest_size=16).hexdigest().encode()


class SharedAnswers:
    """Answers read from, and appended to, the file at ``path`` (created if missing).

    Raises ``OSError`` if the file cannot be opened (a folder that is not on this machine);
    the caller then goes on without sharing.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        self._known: dict[bytes, bool] = {}
        self._offset = 0
        self._tail = b""

    def get(self, e: Expr) -> bool | None:
        """The answer another worker (or this one) appended for ``e``, or None."""
        key = expr_key(e)
        got = self._known.get(key)
        if got is None:
            self._catch_up()
            got = self._known.get(key)
        return got

    def put(self, e: Expr, answer: bool) -> None:
        """Append ``answer`` for ``e`` (best effort: a failed write only loses the sharing)."""
        key = expr_key(e)
        self._known[key] = answer
        try:
            os.write(self._fd, key + (b" 1\n" if answer else b" 0\n"))
        except OSError:
            pass

    def _catch_up(self) -> None:
        try:
            while True:
                data = os.pread(self._fd, READ_CHUNK, self._offset)
                if not data:
                    break
                self._offset += len(data)
                lines = (self._tail + data).split(b"\n")
                self._tail = lines.pop()          # b"" after a complete last line
                for line in lines:
                    if len(line) == _LINE - 1 and line[32:33] == b" " and line[33:] in (b"0", b"1"):
                        self._known[line[:32]] = line[33:] == b"1"
                if len(data) < READ_CHUNK:
                    break
        except OSError:
            pass

    def close(self) -> None:
        try:
            os.close(self._fd)
        except OSError:
            pass

    def __getstate__(self) -> dict:   # never shipped to another process: each opens its own
        raise TypeError("SharedAnswers is per process: open one with the same path in each worker")

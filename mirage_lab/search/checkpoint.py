"""The checkpoint file of a search: a JSON header, then one line per candidate and per finished task.

Lines are appended and fsynced as the search goes, so a search killed at any moment leaves
at most a torn last line (part of a record, or NUL bytes where the file system had reserved
room). :meth:`Checkpoint.open` cuts such a tail back to the last complete line (truncate,
fsync) with a warning, so the file stays line-aligned through any number of kills; it
checks that the file belongs to this program and these settings, and refuses anything
else that is malformed with a :class:`CheckpointError` naming the file and the line.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "s.ckpt")
    >>> cp = Checkpoint.open(path, "prog", "cfg", n_tasks=3)
    >>> cp.mark_done(1, {"states": 5})
    >>> Checkpoint.open(path, "prog", "cfg", n_tasks=3).done
    {1: {'states': 5}}
"""
from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import MirageLabError
from ..ir.serialize import json_depth

CHECKPOINT_FORMAT = "mirage_lab.search_checkpoint"
CHECKPOINT_VERSION = 1
MAX_RECORD_DEPTH = 8        # a record nests 3 levels (its stats or info); deeper is not ours
MAX_LINE_BYTES = 64 << 20   # one candidate's μGraph JSON is a few kB


class CheckpointError(MirageLabError, ValueError):
    """A checkpoint file is corrupt or belongs to another program or configuration."""


class CheckpointRepaired(UserWarning):
    """A checkpoint's torn last line (a search killed mid-write) was cut off on open."""


@dataclass
class Checkpoint:
    """An open checkpoint: the tasks it records as done (with their stats) and its candidates.

    ``candidates`` holds ``(line, graph json, info)``: the line number lets the caller name
    the line of a candidate that fails its re-verification.
    """

    path: Path
    done: dict[int, dict] = field(default_factory=dict)
    candidates: list[tuple[int, str, dict]] = field(default_factory=list)
    repaired_bytes: int = 0     # bytes of a torn tail cut off on open

    @classmethod
    def open(cls, path: str | os.PathLike, program_hash: str, cfg_hash: str, n_tasks: int) -> "Checkpoint":
        """Open (or create) the checkpoint at ``path`` for this program, settings and task count."""
        if not isinstance(path, (str, os.PathLike)):
            raise CheckpointError(f"checkpoint={path!r}: pass a file path (a str or pathlib.Path) such as "
                                  "'search.ckpt'")
        p = Path(path)
        cp = cls(p)
        header = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "program": program_hash,
                  "config": cfg_hash, "tasks": n_tasks}
        raw = _read(p)
        keep = _complete_part(raw)
        if keep < len(raw):
            cp.repaired_bytes = len(raw) - keep
            _truncate(p, keep)
            warnings.warn(f"checkpoint {p}: cut off a torn last line ({cp.repaired_bytes} bytes, a search "
                          "killed while writing); the search resumes from the last complete record",
                          CheckpointRepaired, stacklevel=3)
            raw = raw[:keep]
        if not raw:
            _write_new(p, json.dumps(header) + "\n")
            return cp
        lines = raw.split(b"\n")[:-1]   # raw ends with a newline now
        head = _decode(p, 1, lines[0], "is not a mirage_lab search checkpoint (its first line is not JSON)")
        _check_header(p, head, program_hash, cfg_hash, n_tasks)
        for i, ln in enumerate(lines[1:], start=2):
            rec = _decode(p, i, ln, "is corrupt")
            cp._read_record(i, rec, n_tasks)
        return cp

    def _read_record(self, line: int, rec: Any, n_tasks: int) -> None:
        where = f"{self.path}: line {line}"
        if not isinstance(rec, dict) or ("done" in rec) == ("candidate" in rec):
            raise CheckpointError(f"{where} is not a checkpoint record (got {_short(rec)}); the checkpoint "
                                  "cannot be trusted: delete it or use another path")
        if "done" in rec:
            ti = _task_id(where, rec["done"], n_tasks, "done")
            stats = rec.get("stats", {})
            if not isinstance(stats, dict) or not all(isinstance(k, str) and _is_number(v) for k, v in stats.items()):
                raise CheckpointError(f"{where}: 'stats' should map counter names to numbers, got {_short(stats)}")
            self.done[ti] = stats
        else:
            _task_id(where, rec.get("task", 0), n_tasks, "task")
            gjson, info = rec["candidate"], rec.get("info", {})
            if not isinstance(gjson, str) or not isinstance(info, dict) or \
                    not isinstance(info.get("hash", ""), str):
                raise CheckpointError(f"{where}: a candidate record holds a μGraph's JSON text and an info object "
                                      f"with a string 'hash', got {_short(rec)}")
            self.candidates.append((line, gjson, info))

    def _append(self, rec: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def add_candidate(self, task: int, graph_json: str, info: dict) -> None:
        """Record a candidate found in ``task`` (durable once this returns)."""
        self._append({"task": task, "candidate": graph_json, "info": info})

    def mark_done(self, task: int, stats: dict) -> None:
        """Record ``task`` as finished with its ``stats`` (durable once this returns)."""
        self.done[task] = stats
        self._append({"done": task, "stats": stats})


# --------------------------------------------------------------------------- reading
def _read(p: Path) -> bytes:
    if p.is_dir():
        raise CheckpointError(f"checkpoint path {p} is a folder; pass a file path such as {p / 'search.ckpt'}")
    if not p.parent.is_dir():
        raise CheckpointError(f"checkpoint path {p}: the folder {p.parent} does not exist; create it or pass "
                              "a path in an existing folder")
    try:
        return p.read_bytes()
    except FileNotFoundError:
        return b""
    except OSError as e:
        raise CheckpointError(f"cannot read checkpoint {p} ({type(e).__name__}: {e}); check its permissions "
                              "or pass another path") from None


def _complete_part(raw: bytes) -> int:
    """The length of ``raw`` up to its last complete line, less trailing lines of a torn write.

    A complete line ends with a newline; a line holding a NUL byte was never fully written
    (``json.dumps`` escapes NUL), so trailing ones go too. Blank trailing lines are dropped.
    """
    end = raw.rfind(b"\n") + 1
    while end > 0:
        start = raw.rfind(b"\n", 0, end - 1) + 1
        line = raw[start:end - 1]
        if b"\0" in line or not line.strip():
            end = start
        else:
            break
    return end


def _truncate(p: Path, size: int) -> None:
    with open(p, "r+b") as f:
        f.truncate(size)
        f.flush()
        os.fsync(f.fileno())


def _write_new(p: Path, text: str) -> None:
    try:
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise CheckpointError(f"cannot write checkpoint {p} ({type(e).__name__}: {e}); pass a writable path") from None


def _decode(p: Path, line: int, raw: bytes, what: str) -> Any:
    where = f"{p}: line {line}"
    if len(raw) > MAX_LINE_BYTES:
        raise CheckpointError(f"{where} {what} (a line of {len(raw)} bytes); delete the file or use another path")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{where} {what} (not UTF-8: {e}); delete the file or use another path") from None
    if b"\0" in raw:
        raise CheckpointError(f"{where} {what} (it holds NUL bytes); delete the file or use another path")
    if json_depth(text, MAX_RECORD_DEPTH) > MAX_RECORD_DEPTH:
        raise CheckpointError(f"{where} {what} (nested deeper than a checkpoint record); delete the file or "
                              "use another path")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except (json.JSONDecodeError, ValueError) as e:
        raise CheckpointError(f"{where} {what} ({e}); the checkpoint cannot be trusted: delete it or use "
                              "another path") from None


def _no_constant(s: str) -> Any:
    raise ValueError(f"{s} is not a number a checkpoint holds")


def _check_header(p: Path, head: Any, program_hash: str, cfg_hash: str, n_tasks: int) -> None:
    if not isinstance(head, dict) or head.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{p} is not a mirage_lab search checkpoint (line 1 is {_short(head)}); "
                              "use another path or delete the file")
    version = head.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointError(f"{p}: line 1: 'version' should be a positive int, got {_short(version)}; "
                              "the header is corrupt: delete the file or use another path")
    if version > CHECKPOINT_VERSION:
        raise CheckpointError(f"{p} was written by a newer mirage_lab (version {version}); upgrade mirage_lab "
                              "or use another path")
    if head.get("program") != program_hash:
        raise CheckpointError(
            f"{p} belongs to another program (hash {str(head.get('program'))[:12]}…, this one is "
            f"{program_hash[:12]}…); use another checkpoint path or delete the file"
        )
    if head.get("config") != cfg_hash or head.get("tasks") != n_tasks:
        raise CheckpointError(
            f"{p} was written by a search with other settings; resume with the same settings, "
            "or use another checkpoint path"
        )


def _task_id(where: str, value: Any, n_tasks: int, key: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise CheckpointError(f"{where}: '{key}' should be a task number, got {_short(value)}; the checkpoint "
                              "cannot be trusted: delete it or use another path")
    if not 0 <= value < n_tasks:
        raise CheckpointError(f"{where}: '{key}' names task {value}, but this search has tasks 0..{n_tasks - 1}; "
                              "the checkpoint cannot be trusted: delete it or use another path")
    return value


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."

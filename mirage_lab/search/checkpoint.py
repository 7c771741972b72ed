"""The checkpoint file of a search: a JSON header, then one line per candidate and per finished task.

Lines are appended and fsynced as the search goes, so a search killed at any moment leaves
at most a torn last line; :meth:`Checkpoint.open` checks that the file belongs to this
program and these settings, and a resumed search skips the tasks it lists as done.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MirageLabError

CHECKPOINT_FORMAT = "mirage_lab.search_checkpoint"
CHECKPOINT_VERSION = 1


class CheckpointError(MirageLabError, ValueError):
    """A checkpoint file is corrupt or belongs to another program or configuration."""


@dataclass
class Checkpoint:
    """An open checkpoint: the tasks it records as done (with their stats) and its candidates."""

    path: Path
    done: dict[int, dict] = field(default_factory=dict)
    candidates: list[tuple[str, dict]] = field(default_factory=list)

    @classmethod
    def open(cls, path: str | os.PathLike, program_hash: str, cfg_hash: str, n_tasks: int) -> "Checkpoint":
        p = Path(path)
        cp = cls(p)
        header = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "program": program_hash,
                  "config": cfg_hash, "tasks": n_tasks}
        if not p.exists() or p.stat().st_size == 0:
            with open(p, "w") as f:
                f.write(json.dumps(header) + "\n")
                f.flush()
                os.fsync(f.fileno())
            return cp
        lines = p.read_text().split("\n")
        try:
            head = json.loads(lines[0])
        except json.JSONDecodeError as e:
            raise CheckpointError(f"{p} is not a mirage_lab search checkpoint (first line is not JSON)") from e
        if not isinstance(head, dict) or head.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError(f"{p} is not a mirage_lab search checkpoint")
        if head.get("version", 0) > CHECKPOINT_VERSION:
            raise CheckpointError(f"{p} was written by a newer mirage_lab (version {head.get('version')})")
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
        body = [ln for ln in lines[1:]]
        # A search killed mid-write leaves at most a partial last line; anything else is corruption.
        while body and body[-1] == "":
            body.pop()
        for i, ln in enumerate(body):
            try:
                rec = json.loads(ln)
            except json.JSONDecodeError as e:
                if i == len(body) - 1:
                    break
                raise CheckpointError(f"{p}: line {i + 2} is corrupt ({e}); the checkpoint cannot be trusted") from e
            if "done" in rec:
                cp.done[int(rec["done"])] = rec.get("stats", {})
            elif "candidate" in rec:
                cp.candidates.append((rec["candidate"], rec.get("info", {})))
            else:
                raise CheckpointError(f"{p}: line {i + 2} is not a checkpoint record")
        # Re-write without a torn tail so that later appends stay line-aligned.
        if lines and not p.read_text().endswith("\n"):
            with open(p, "a") as f:
                f.write("\n")
        return cp

    def _append(self, rec: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(rec) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def add_candidate(self, task: int, graph_json: str, info: dict) -> None:
        self._append({"task": task, "candidate": graph_json, "info": info})

    def mark_done(self, task: int, stats: dict) -> None:
        self.done[task] = stats
        self._append({"done": task, "stats": stats})

"""A search run as its own process by the kill and lifetime tests (not a test module).

    python search_script.py CHECKPOINT|- HIDDEN [TEAR_AFTER MARKER]

Runs a 2-worker search of RMSNorm+Linear X[4,HIDDEN]·W[HIDDEN,HIDDEN] (``max_kernel_ops=3``),
printing ``progress`` once per Progress event (with ``SEARCH_SCRIPT_REPEAT=1``, searching again until
interrupted). With TEAR_AFTER >= 0 the checkpoint's
record number TEAR_AFTER+1 is written only half (flushed, fsynced), MARKER is created, and
the process waits to be killed: a kill in the middle of a write, made certain.
"""
import json
import os
import signal
import sys
import time

# Ctrl-C as in a terminal, whatever this process inherited: a SIGINT ignored by the process that started
# it stays ignored through exec, and Python then installs no KeyboardInterrupt handler (the lifetime test's
# Ctrl-C had no effect in 3 fresh-clone CI runs under pytest-xdist)
signal.signal(signal.SIGINT, signal.default_int_handler)

from mirage_lab import examples as ex
from mirage_lab.search import Progress, search
from mirage_lab.search import checkpoint as ck


def main() -> None:
    path, hidden = sys.argv[1], int(sys.argv[2])
    tear_after = int(sys.argv[3]) if len(sys.argv) > 3 else -1
    if tear_after >= 0:
        real_append, written = ck.Checkpoint._append, [0]

        def torn_append(self, rec):
            written[0] += 1
            if written[0] <= tear_after:
                return real_append(self, rec)
            line = (json.dumps(rec) + "\n").encode()
            with open(self.path, "ab") as f:
                f.write(line[: len(line) // 2])
                f.flush()
                os.fsync(f.fileno())
            open(sys.argv[4], "w").close()
            time.sleep(600)

        ck.Checkpoint._append = torn_append
    g = ex.rms_norm_linear_program(4, hidden, hidden)
    # SEARCH_SCRIPT_REPEAT=1: search again each time it ends, until interrupted (the lifetime tests signal it
    # after its first progress line; a lone search ends in ~10 s, which a loaded test process could miss)
    repeat = os.environ.get("SEARCH_SCRIPT_REPEAT") == "1"
    while True:
        for ev in search(g, workers=2, checkpoint=None if path == "-" else path, progress_interval=0.05, max_kernel_ops=3):
            if isinstance(ev, Progress):
                print("progress", flush=True)
        if not repeat:
            break


if __name__ == "__main__":   # a forkserver's or spawn's children import this file again
    main()

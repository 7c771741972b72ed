"""The default number of worker processes follows the CPUs this process may use, not the host's."""
from __future__ import annotations

import os
import pytest

from mirage_lab.cpus import usable_cpus
from proc_helpers import run_python


def test_usable_cpus_is_the_affinity_mask_not_the_host():
    assert 1 <= usable_cpus() <= (os.cpu_count() or 1)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux affinity")
def test_a_search_pinned_to_one_cpu_starts_one_worker(tmp_path):
    # under taskset / a Slurm CPU set the search used to start one worker per CPU of the whole host
    out = run_python("""
import json, os
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
from mirage_lab.search import executors
from mirage_lab.cpus import usable_cpus
print("RESULTS " + json.dumps([usable_cpus(), type(executors.make_executor(None, None)).__name__]))
""", tmp_path, timeout=120)
    assert out == [1, "Inline"]

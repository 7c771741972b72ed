"""The explorer answers clicks while the next cell blocks in ``wait()``: driven through a real ipykernel.

A comm message like the one JupyterLab sends for a click on Stop arrives while ``w.wait()`` runs in
the kernel's main thread; the search must end within a second of it, and ``wait`` return.
"""
from __future__ import annotations

import os
import time

import pytest

from mirage_lab.widgets.ui_wait import wait_until

pytestmark = pytest.mark.timeout(180)

SETUP = """
import time, mirage_lab as mi
prog = mi.new_kernel_graph()
Q = prog.new_input(dims=(2, 16, 16), dtype=mi.float16)
K = prog.new_input(dims=(2, 16, 64), dtype=mi.float16)
V = prog.new_input(dims=(2, 64, 16), dtype=mi.float16)
E = prog.exp(prog.matmul(Q, K))
prog.mark_output(prog.matmul(prog.div(E, prog.reduction(E, 2)), V))
w = mi.lab.explore(prog, "attention", workers=1)   # the full preset: minutes on 2 cores
print(w.stop_button.model_id)
"""


def _run(kc, code, timeout=120):
    msg_id = kc.execute(code)
    out = []
    while True:
        m = kc.get_iopub_msg(timeout=timeout)
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if m["msg_type"] == "stream":
            out.append(m["content"]["text"])
        elif m["msg_type"] == "error":
            raise AssertionError("\n".join(m["content"]["traceback"]))
        elif m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            return "".join(out)


def test_stop_clicked_while_the_next_cell_waits_ends_the_search():
    from jupyter_client.manager import start_new_kernel

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=repo + os.pathsep + os.environ.get("PYTHONPATH", ""))
    km, kc = start_new_kernel(kernel_name="python3", env=env)
    try:
        stop_id = _run(kc, SETUP).strip().splitlines()[-1]
        wait_id = kc.execute("r = w.wait(120); print('waited', r, w.state)")
        time.sleep(2.0)
        kc.shell_channel.send(kc.session.msg("comm_msg", {
            "comm_id": stop_id, "data": {"method": "custom", "content": {"event": "click"}}}))
        clicked = time.monotonic()
        while True:
            m = kc.get_iopub_msg(timeout=60)
            if m["parent_header"].get("msg_id") == wait_id and m["msg_type"] == "stream":
                took = time.monotonic() - clicked
                assert m["content"]["text"].split() == ["waited", "True", "stopped"]
                break
        assert took < 2.0, f"the search ended {took:.2f} s after the click"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_outside_a_kernel_it_is_a_plain_wait():
    t0 = time.monotonic()
    assert wait_until(lambda: time.monotonic() - t0 > 0.2, timeout=5)
    assert not wait_until(lambda: False, timeout=0.2)

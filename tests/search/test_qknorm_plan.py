"""The attention preset searches a QK-norm's ``rms_norm(Q)·Gq`` as plain kernel ops, then plain FlashAttention."""
import time

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.interp import run_reference
from mirage_lab.search.build import build_graph
from mirage_lab.search.config import SearchConfig
from mirage_lab.search.generator import Generator, Target
from mirage_lab.search.state import BlockRoot, Then

import torch


def _qknorm_decode(groups: int = 2, q_rows: int = 4, head_dim: int = 16, kv_len: int = 64):
    """Qwen3-style decode attention: the queries RMS-normed (weight ``Gq``) over the head dim."""
    g = mi.new_kernel_graph()
    Q = g.new_input(dims=(groups, q_rows, head_dim), dtype=mi.float16)
    Gq = g.new_input(dims=(1, 1, head_dim), dtype=mi.float16)
    K = g.new_input(dims=(groups, head_dim, kv_len), dtype=mi.float16)
    V = g.new_input(dims=(groups, kv_len, head_dim), dtype=mi.float16)
    E = g.exp(g.matmul(g.rms_norm(Q, Gq), K))
    g.mark_output(g.matmul(g.div(E, g.reduction(E, 2)), V))
    return g


def _cfg(g, config="attention"):
    return SearchConfig.from_args(config).with_program_ops(g).resolved(g)


def test_attention_preset_adds_the_programs_norm_as_a_kernel_op_and_a_slot_for_it():
    g = _qknorm_decode()
    cfg = _cfg(g)
    assert "rms_norm" in cfg.kernel_ops
    assert cfg.max_kernel_ops == len(g.inputs) + 3      # rms_norm, its weight's mul, the customized op
    # elsewhere the norm is what a customized op fuses: norm + linear's space is unchanged
    nl = ex.rms_norm_linear_program(4, 64, 64)
    assert "rms_norm" not in _cfg(nl, None).kernel_ops
    assert _cfg(nl, None).max_kernel_ops == 5
    # an attention program without a norm keeps Mirage's kernel ops
    assert "rms_norm" not in _cfg(ex.gqa_program(2, 8, 16, 64)).kernel_ops


def test_the_norm_as_plain_ops_comes_first_and_yields_flashattention_equal_to_the_program():
    g = _qknorm_decode()
    cfg = _cfg(g)
    gen = Generator(Target(g, cfg), cfg, fingerprint_backend="numpy")
    tasks = gen.all_tasks()
    # one task per customized op after the two plain ops, so that every worker can take one
    chain = [t for t in tasks if t.kind == "kernel" and t.op[0] == "rms_norm" and isinstance(t.child, Then)
             and t.child.op[0] == "mul" and isinstance(t.child.child, BlockRoot)]
    assert len(chain) > 10 and [t.index for t in chain[:4]] == [0, 1, 2, 3], [str(t)[:80] for t in tasks[:4]]
    hits = []
    t0 = time.monotonic()
    for task in chain:
        hits += gen.run_task(task)
        if hits or time.monotonic() - t0 > 120:
            break
    assert hits, "no candidate below rms_norm(Q)·Gq"
    c = build_graph(g, hits[0].ops, hits[0].leaves, hits[0].output_perm)
    plain = [op.op_type for op in c.ops if op.op_type not in ("input", "customized")]
    assert plain == ["rms_norm", "mul"]
    assert len(c.customized_ops) == 1
    xs = [torch.randn(t.dims, dtype=torch.float64) for t in g.inputs]
    torch.testing.assert_close(run_reference(c, xs)[0], run_reference(g, xs)[0])

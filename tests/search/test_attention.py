"""The attention preset reaches FlashDecoding (split-KV) μGraphs, for decode (q_len = 1) too."""
import time

import pytest
import torch

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.search import CancelToken, CandidateFound, Finished, Progress, search
from mirage_lab.search.axes import combinable_axes, input_axis_classes, root_tier, summed_axes
from mirage_lab.search.build import build_graph
from mirage_lab.search.config import SearchConfig, normalize_map
from mirage_lab.search.generator import BlockRoot, Generator, Target, Task
from mirage_lab.search.tilings import tilings


def _float_check(program, cand, scale=0.1):
    ins = [torch.randn(t.dims, dtype=torch.float64) * scale for t in program.inputs]
    for w, g in zip(mi.run_reference(program, ins), mi.run_reference(cand, ins)):
        assert float((g - w).norm() / w.norm()) < 1e-9


def _splits_kv(c):
    """Two customized ops; the first computes exp and splits K's KV dim across a grid axis."""
    if len(c.customized_ops) != 2:
        return False
    k1 = c.customized_ops[0].block_graph
    k = next(o for o in k1.ops if o.op_type == "input" and tuple(o.attrs["dtensor_dims"]) == tuple(c.inputs[1].dims))
    return any(o.op_type == "exp" for o in k1.ops) and \
        any(k1.grid_dim[a] > 1 and k.attrs["input_map"][a] == 2 for a in range(3))


# (program shape, hand-built FlashDecoding parameters): decode at a CPU size and at the
# issue's size, and the README GQA with grids Mirage's rules generate ((2,16,4), (2,16,1)).
HANDBUILT = [
    ((4, 1, 16, 256), dict(kv_splits=32, q_blocks=1, forloop_range=4)),
    ((64, 1, 128, 4096), dict(kv_splits=8, q_blocks=1, forloop_range=4)),
    ((2, 256, 64, 4096), dict(kv_splits=16, q_blocks=4, forloop_range=4, combine_blocks=16)),
]


@pytest.mark.parametrize("shape, kw", HANDBUILT)
def test_every_choice_of_the_handbuilt_flashdecoding_is_in_the_attention_space(shape, kw):
    # Before issue 11 this failed for decode: Q's (0,-1,1) maps a size-1 grid axis on (b,y,1)
    # grids (skipped, and (0,-1,-1) was dropped), the (b,1,1) combine kernel had no imap at
    # all, and sum_todimx folded to 64, not the head dim 128.
    program = ex.gqa_program(*shape)
    cfg = Generator(Target(program, SearchConfig.from_args("attention")), SearchConfig.from_args("attention")).cfg
    fused = ex.gqa_flashdecoding(*shape, **kw)
    ops = fused.customized_ops
    for n, op in enumerate(ops):
        bg = op.block_graph
        dims = [t.dims for t in op.inputs]
        loaders = [o for o in bg.ops if o.op_type == "input"]
        imaps = tuple(normalize_map(o.attrs["input_map"], bg.grid_dim) for o in loaders)
        fmaps = tuple(o.attrs["forloop_dim"] for o in loaders)
        final = [t.dims for t in program.outputs] if n == len(ops) - 1 else None
        space = set(tilings(cfg, dims, 2, final))
        assert (bg.grid_dim, imaps, fmaps, bg.forloop_range) in space, (n, bg.grid_dim, imaps)
        for o in bg.ops:
            if o.op_type == "forloop_accum":
                assert o.attrs["acc"] in cfg.block_accums
            elif o.op_type == "output":
                omaps = {normalize_map(m, bg.grid_dim) for m in cfg.omap_candidates()}
                assert normalize_map(o.attrs["output_map"], bg.grid_dim) in omaps
            elif o.op_type != "input":
                assert o.op_type in cfg.block_ops
        assert bg.reduction_dimx == cfg.reduction_dimx


def test_the_generator_builds_the_handbuilt_decode_mugraph_below_its_root():
    program = ex.gqa_program(4, 1, 16, 256)
    cfg = SearchConfig.from_args("attention")
    gen = Generator(Target(program, cfg), cfg)
    want = ex.gqa_flashdecoding(4, 1, 16, 256, kv_splits=32, q_blocks=1, forloop_range=4)
    root = BlockRoot((0, 1, 2), (4, 32, 1), ((0, -1, -1), (0, 2, -1), (0, 1, -1)), (-1, 2, 1), 4)
    hits = gen.run_task(Task(0, "block", root))
    graphs = [build_graph(program, h.ops, h.leaves, h.output_perm, reduction_dimx=gen.cfg.reduction_dimx) for h in hits]
    assert want.content_hash() in {g.content_hash() for g in graphs}
    for g in graphs:
        assert mi.verify.equivalent(program, g, tests=2, seed=5)


def test_split_kv_axes_and_tiers():
    g = ex.gqa_program(4, 1, 16, 256)
    q, k, v = cls = input_axis_classes(g)
    assert combinable_axes(g) == {k[2]}          # the keys; not the head dim (summed under exp)
    assert not combinable_axes(ex.rms_norm_linear_program(4, 64, 64))   # summed under rms_norm's sqrt
    comb = combinable_axes(g)
    fd = ((0, -1, -1), (0, 2, -1), (0, 1, -1))
    assert root_tier(cls, (4, 32, 1), fd, (-1, 2, 1), comb) == 0
    assert root_tier(cls, (4, 32, 1), fd, (-1, -1, -1), comb) == 1
    # K's keys split by y but V's not: coherent, yet the tiles do not line up
    assert root_tier(cls, (4, 16, 4), ((0, -1, -1), (0, 2, -1), (0, -1, 1)), (-1, 2, 1), comb) == 3
    assert root_tier(cls, (4, 32, 1), fd, (-1, 2, 1)) == 2        # one kernel only: no split-KV tier


def test_single_kernel_presets_order_roots_by_tier_and_keep_them_all():
    # Tiers 0/1 need a second customized op: with default/mlp/lora the roots that read every
    # input come first, consistent tilings before merely coherent ones; none is dropped. (Split-K's
    # roots, which take turns with tier 2's, are checked in test_split_k.py.)
    for preset, g in ((None, ex.rms_norm_linear_program(4, 256, 256)), ("mlp", ex.gated_mlp_program(4, 64, 64)),
                      ("lora", ex.rms_norm_linear_program(4, 64, 64))):
        cfg = SearchConfig.from_args(preset, split_reduction=False)
        gen = Generator(Target(g, cfg), cfg)
        assert gen.cfg.reduction_dimx == 64 and (0, -1, -1) in cfg.imap_candidates()
        cls = input_axis_classes(g)
        summed = summed_axes(g)
        roots = list(gen._block_roots(gen.root_nodes(), None))
        tier = {repr(r): root_tier([cls[i] for i in r.inputs], r.grid, r.imaps, r.fmaps, frozenset(), summed, summed)
                for r in roots}
        assert not any(t in (0, 1) for t in tier.values())
        tasks = gen.all_tasks()
        blocks = [t.op for t in tasks if t.kind == "block"]
        assert sorted(map(repr, blocks)) == sorted(map(repr, roots))
        full = [r for r in roots if tier[repr(r)] < 4 and set(r.inputs) == set(range(len(g.inputs)))]
        # by tier; within a tier, round robin over the tilings; the consistent fused roots after the
        # program's own kernel op (its rms_norm) take turns with tier 2's, and no other kernel task
        # comes before the last of them
        head = [t.op for t in tasks if t.kind == "block"][:len(full)]
        assert sorted(map(repr, head)) == sorted(map(repr, full))
        assert [tier[repr(r)] for r in head] == sorted(tier[repr(r)] for r in head)
        last_full = max(i for i, t in enumerate(tasks) if t.kind == "block" and repr(t.op) in set(map(repr, full)))
        before = [t for t in tasks[:last_full] if t.kind == "kernel"]
        assert all(t.child is not None and t.child.__class__.__name__ == "BlockRoot" for t in before)
        assert tier[repr(blocks[-1])] == 4


def _first_split_kv(program, limit_s, workers=1):
    token, t0, states, found, final = CancelToken(), time.monotonic(), 0, None, None
    for ev in search(program, "attention", workers=workers, cancel=token):
        if isinstance(ev, Progress):
            states = ev.stats.states
        elif isinstance(ev, CandidateFound) and found is None and _splits_kv(ev.graph):
            found = (ev.graph, time.monotonic() - t0, states)
            token.cancel()
        elif isinstance(ev, Finished):
            final = ev
        if time.monotonic() - t0 > limit_s:
            token.cancel()
    return found, final


def test_decode_search_finds_a_split_kv_candidate_quickly():
    # Measured on the 2-core CPU box: ~2 s and ~400 states; before issue 11's fix, none in
    # 120 s (127k states) with two workers.
    program = ex.gqa_program(4, 1, 16, 256)
    found, final = _first_split_kv(program, limit_s=120)
    assert found is not None, final.stats
    cand, seconds, states = found
    assert seconds < 60 and final.stats.states < 5000, (seconds, final.stats)
    assert mi.verify.equivalent(program, cand, tests=3, seed=11)
    _float_check(program, cand)

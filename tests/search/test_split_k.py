"""Split-K μGraphs for skinny matmuls (issue 19): the axes, the grids, the order, a search that finds one."""
import time

import torch

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.search.axes import input_axis_classes, split_axes
from mirage_lab.search.build import build_graph
from mirage_lab.search.config import SearchConfig
from mirage_lab.search.generator import Cancelled, Generator, Target
from mirage_lab.search.tilings import tilings


def _matmul(norm=None, m=8, k=256, n=512):
    g = mi.new_kernel_graph()
    X = g.new_input((m, k))
    W = g.new_input((k, n))
    if norm == "l2":
        X = g.div(X, g.sqrt(g.reduction(g.square(X), 1)))
    elif norm == "rms":
        X = g.rms_norm(X, normalized_shape=(k,))
    g.mark_output(g.matmul(X, W))
    return g


def _hidden(g):
    return input_axis_classes(g)[0][1]


def _first_split_k(c):
    """The dim the first customized op's grid splits on the program's first input, if it splits K."""
    if len(c.customized_ops) != 2:
        return False
    bg = c.customized_ops[0].block_graph
    x = next(o for o in bg.ops if o.op_type == "input" and tuple(o.attrs["dtensor_dims"]) == tuple(c.inputs[0].dims))
    return any(bg.grid_dim[a] > 1 and x.attrs["input_map"][a] == 1 for a in range(3))


def test_split_axes_are_the_sums_a_combine_kernel_can_finish():
    for norm in (None, "l2", "rms"):
        g = _matmul(norm)
        assert split_axes(g) == {_hidden(g)}, norm   # the norm's sqrt acts on the whole sum, after the combine
    gqa = ex.gqa_program(4, 1, 16, 256)
    q, k, v = input_axis_classes(gqa)
    assert split_axes(gqa) == {k[2]}   # the keys; not the head dim: exp(QK) feeds the sum over the keys
    mlp = ex.gated_mlp_program(4, 64, 64)
    assert split_axes(mlp) == {input_axis_classes(mlp)[0][1]}   # silu waits for the combine


def test_split_reduction_resolves_per_program_and_preset():
    g = _matmul()
    assert SearchConfig.from_args(None).resolved(g).split_reduction is False      # opt-in (RESULTS, 2026-11-27)
    assert SearchConfig.from_args(None, split_reduction=True).resolved(g).split_reduction is True
    assert SearchConfig.from_args(None, split_reduction=False).resolved(g).split_reduction is False
    assert SearchConfig.from_args("attention", split_reduction=True).resolved(
        ex.gqa_program(4, 1, 16, 256)).split_reduction is False
    # the split counts are loop ranges: the combine kernel adds one partial sum an iteration
    assert SearchConfig.from_args(None, franges=[2, 8, 64]).split_factors() == (2, 8)


def test_split_grids_split_only_the_summed_dims_they_are_given():
    cfg = SearchConfig.from_args(None, split_reduction=True)
    dims = [(8, 256), (256, 512)]
    plain = {t[0] for t in tilings(cfg, dims, 2)}
    split = list(tilings(cfg, dims, 2, split_dims=[frozenset({1}), frozenset({0})]))
    extra = [t for t in split if t[0] not in plain]
    assert extra and {t[0][0] for t in extra} <= set(cfg.split_factors())
    assert all(t[1][0][0] in (1, -1) and t[1][1][0] in (0, -1) for t in extra)   # axis x cuts K (or nothing) only
    assert all(t[0] in plain for t in tilings(cfg, dims, 2, split_dims=[frozenset(), frozenset()]))


def test_split_roots_take_turns_with_the_one_kernel_ones():
    g = _matmul("l2")
    cfg = SearchConfig.from_args(None, split_reduction=True)
    gen = Generator(Target(g, cfg), cfg)
    head = [t.op for t in gen.all_tasks() if t.kind == "block"][:6]   # (kernel-op tasks take turns too)
    k = _hidden(g)
    cls = input_axis_classes(g)

    def splits(r):
        return any(r.grid[a] > 1 and m[a] >= 0 and cls[i][m[a]] == k for i, m in zip(r.inputs, r.imaps) for a in range(3))
    assert [splits(r) for r in head] == [False, True] * 3


def test_search_finds_a_split_k_candidate_that_matches_the_reference():
    # The generator's tasks in their order (the runner strides them over chunks for its workers):
    # measured on the 2-core CPU box, the first split-K candidate at ~8-10 s, 1,579 states, in task 1.
    program = _matmul("l2")
    cfg = SearchConfig.from_args(None, split_reduction=True)
    t0, found = time.monotonic(), []

    def on_hit(h):
        c = build_graph(program, h.ops, h.leaves, h.output_perm)
        if _first_split_k(c):
            found.append(c)

    gen = Generator(Target(program, cfg), cfg, fingerprint_backend="numpy", on_hit=on_hit,
                    should_stop=lambda: bool(found) or time.monotonic() - t0 > 240)
    try:
        for task in gen.all_tasks()[:4]:
            gen.run_task(task)
    except Cancelled:
        pass
    assert found, gen.stats
    assert mi.verify.equivalent(program, found[0], tests=3, seed=5)
    xs = [torch.randn(t.dims, dtype=torch.float64) for t in program.inputs]
    (want,), (got,) = mi.run_reference(program, xs), mi.run_reference(found[0], xs)
    assert float((got - want).norm() / want.norm()) < 1e-9


def test_handbuilt_split_k_is_equivalent_to_the_program():
    for l2 in (False, True):
        program, g = _matmul("l2" if l2 else None), ex.matmul_split_k(8, 256, 512, splits=4, col_blocks=8,
                                                                       forloop_range=4, l2_norm=l2)
        assert mi.verify.equivalent(program, g, tests=2, seed=3)

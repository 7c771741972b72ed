"""Logical axes order the first customized ops: coherent tilings first, nothing dropped."""
import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.search.axes import input_axis_classes, is_coherent
from mirage_lab.search.config import SearchConfig
from mirage_lab.search.generator import Generator, Target


def test_gqa_axes_tie_keys_across_k_and_v():
    q, k, v = input_axis_classes(ex.gqa_program(2, 32, 64, 256))
    assert q[0] == k[0] == v[0]          # batch
    assert q[2] == k[1]                  # head dim, contracted by Q·K
    assert k[2] == v[1]                  # the keys: reduced by the softmax sum and by ·V
    assert q[1] != k[2]


def test_coherence_of_flashdecoding_and_a_mismatched_tiling():
    cls = input_axis_classes(ex.gqa_program(2, 32, 64, 256))
    fd = ((0, -1, 1), (0, 2, -1), (0, 1, -1))
    assert is_coherent(cls, (2, 16, 4), fd, (-1, 2, 1))
    # grid y splitting Q's rows and K's keys pairs unrelated slices
    assert not is_coherent(cls, (2, 16, 1), ((0, 1, -1), (0, 2, -1), (0, 1, -1)), (-1, -1, -1))
    # a loop over K's keys and V's head dim walks two different axes
    assert not is_coherent(cls, (2, 16, 4), fd, (-1, 2, 2))


def test_tasks_put_coherent_roots_first_and_keep_every_root():
    g = ex.rms_norm_linear_program(4, 256, 256)
    cfg = SearchConfig.from_args()
    gen = Generator(Target(g, cfg), cfg)
    tasks = gen.all_tasks()
    assert [t.index for t in tasks] == list(range(len(tasks)))
    cls = input_axis_classes(g)
    flags = [is_coherent([cls[i] for i in t.op.inputs], t.op.grid, t.op.imaps, t.op.fmaps)
             for t in tasks if t.kind == "block"]
    first_incoherent = flags.index(False)
    assert all(flags[:first_incoherent]) and not any(flags[first_incoherent:])
    # nothing is dropped: the same roots as the generator's own enumeration
    roots = list(gen._block_roots(gen.root_nodes(), None))
    assert len(roots) == len(flags)


def test_flashdecoding_root_starts_among_the_first_tasks_at_full_shape():
    # Listing tasks computes no block-level fingerprints: cheap even at the README's shapes.
    g = ex.gqa_program(2, 256, 64, 4096)
    cfg = SearchConfig.from_args("attention", fingerprint_backend="numpy")
    tasks = Generator(Target(g, cfg), cfg).all_tasks()
    fd = [t.index for t in tasks if t.kind == "block" and t.op.grid == (2, 16, 4)
          and t.op.imaps == ((0, -1, 1), (0, 2, -1), (0, 1, -1)) and t.op.fmaps == (-1, 2, 1) and t.op.frange == 4]
    assert len(tasks) > 6000 and fd and fd[0] < 16, fd   # a 16-worker pool starts it at once


def test_tasks_of_a_tier_take_turns_over_tilings_and_keep_each_tilings_order():
    from mirage_lab.search.task_order import interleave_tilings, tiling_of as _tiling

    g = ex.rms_norm_linear_program(8, 1024, 2048)   # grids of 32 to 256 blocks
    cfg = SearchConfig.from_args(None)
    gen = Generator(Target(g, cfg), cfg)
    tasks = gen.all_tasks()
    blocks = [t for t in tasks if t.kind == "block"]
    tilings = list(dict.fromkeys(_tiling(t) for t in blocks))
    assert len({grid for grid, _ in tilings}) > 2
    # the first tasks already span several grids (a search stopped early has seen wide tiles and narrow ones)
    assert len({_tiling(t)[0] for t in blocks[:len(tilings)]}) > 2
    # each tiling's own tasks keep their relative order; nothing is lost or repeated
    mixed = interleave_tilings(blocks)
    assert sorted(id(t) for t in mixed) == sorted(id(t) for t in blocks)
    for tl in tilings:
        assert [t for t in mixed if _tiling(t) == tl] == [t for t in blocks if _tiling(t) == tl]


def test_a_loop_may_walk_two_summed_axes_each_in_a_pair_of_inputs():
    # LoRA after T = X·A: X and W walk the hidden dim, T and B the rank, in the same iterations
    from mirage_lab.search.axes import op_axis_classes, summed_axes
    g = ex.lora_program(4, 64, 64, 8)
    x, w, a, b = input_axis_classes(g)
    t = op_axis_classes("matmul", [((4, 64), x), ((64, 8), a)], (4, 8))
    summed = summed_axes(g)
    grid, maps = (2, 1, 1), ((-1, -1, -1), (1, -1, -1), (1, -1, -1), (-1, -1, -1))
    assert is_coherent([x, w, b, t], grid, maps, (1, 0, 0, 1), summed)
    assert not is_coherent([x, w, b, t], grid, maps, (1, 0, 0, 1))          # without the program's sums
    # the rank walked by B alone (T not looped), or X's hidden dim walked while W's is not: incoherent
    assert not is_coherent([x, w, b, t], grid, maps, (1, 0, 0, -1), summed)
    assert not is_coherent([x, w, b, t], grid, maps, (1, -1, 0, 1), summed)
    # two axes in one input set where one input (A) has the walked hidden dim but walks the rank
    assert not is_coherent([x, w, a, b], grid, ((-1, -1, -1), (1, -1, -1), (-1, -1, -1), (1, -1, -1)),
                           (1, 0, 1, 0), summed)

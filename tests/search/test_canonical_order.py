"""The canonical order admits every block graph (issue 19: nTrans).

nGPT's update ``Norm(H*(1-a) + a*Norm(HA))`` needs two customized ops, the second computing the
L2 norm of a tensor it makes itself: ``m = H*(1-a) + T``, then ``m / sqrt(sum(square(m)))``.
Under Mirage's order (input indices ascending, lexicographic) the divide, reading ``accum(m)``
and the sqrt, can never come after the sqrt: the whole small space ended with no candidate. With
the indices compared newest first it is built; it needs 10 block ops (3 loaders and 7 ops), one
more than Mirage's 9, which a program of more than three inputs now gets by default.
"""
import mirage_lab as mi
from mirage_lab.search.build import build_graph
from mirage_lab.search.config import SearchConfig
from mirage_lab.search.generator import Generator, Target
from mirage_lab.search.state import order_key


def l2_norm(g, x):
    return g.div(x, g.sqrt(g.reduction(g.square(x), 1)))


def ntrans(rows=4, hidden=64):
    g = mi.new_kernel_graph()
    H = g.new_input((rows, hidden)); HA = g.new_input((rows, hidden))
    A = g.new_input((1, hidden)); OneMinusA = g.new_input((1, hidden))
    g.mark_output(l2_norm(g, g.add(g.mul(H, OneMinusA), g.mul(l2_norm(g, HA), A))))
    return g


def test_an_op_reading_the_newest_tensor_always_follows():
    # x=4 computed in-block; 5 = square(x), 6 = accum(x), 7 = sum(5), 8 = sqrt(7); then div(6, 8)
    seq = [((0, 1), "mul"), ((2, 3), "add"), ((4,), "square"), ((4,), "accum"), ((5,), "accum"),
           ((7,), "sqrt"), ((6, 8), "div")]
    keys = [order_key(ins, typ) for ins, typ in seq]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_block_op_limit_follows_the_program():
    assert SearchConfig.from_args().resolved(ntrans()).max_block_ops == 10
    three = mi.new_kernel_graph()
    x, w1, w2 = (three.new_input(d) for d in ((4, 64), (64, 64), (64, 64)))
    three.mark_output(three.mul(three.matmul(x, w1), three.matmul(x, w2)))
    assert SearchConfig.from_args().resolved(three).max_block_ops == 9
    assert SearchConfig.from_args(max_block_ops=6).resolved(ntrans()).max_block_ops == 6


def test_ntrans_outer_norm_is_built_after_the_inner_one():
    program = ntrans()
    cfg = SearchConfig.from_args()
    gen = Generator(Target(program, cfg), cfg, fingerprint_backend="numpy")
    # the inner norm's customized op: a * Norm(HA), one block per row, no loop
    task = next(t for t in gen.all_tasks() if t.kind == "block" and t.op.inputs == (1, 2)
                and t.op.grid == (4, 1, 1) and t.op.imaps[0] == (0, -1, -1) and t.op.fmaps == (-1, -1))
    hits = gen.run_task(task)
    assert hits, gen.stats
    cand = build_graph(program, hits[0].ops, hits[0].leaves, hits[0].output_perm)
    assert [op.op_type for op in cand.ops if op.op_type != "input"] == ["customized", "customized"]
    assert mi.verify.equivalent(program, cand, tests=3, seed=11)

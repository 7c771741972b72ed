"""The "lora" preset reaches LoRA's two-kernel plan early: ``T = X·A``, then ``X·W`` and ``T·B`` summed in one loop."""
from mirage_lab import examples as ex
from mirage_lab.interp import run_reference
from mirage_lab.search.axes import input_axis_classes, is_coherent, summed_axes
from mirage_lab.search.build import build_graph
from mirage_lab.search.config import SearchConfig
from mirage_lab.search.generator import Generator, Target

import torch


def _fused_lora_tasks(gen: Generator) -> list:
    """Tasks of the plan: the kernel op X·A, then a customized op reading X, W, B and X·A, looping over two axes."""
    return [t for t in gen.all_tasks() if t.kind == "kernel" and t.op[:2] == ("matmul", (0, 2))
            and getattr(t.child, "inputs", None) == (0, 1, 3, 4) and sum(f >= 0 for f in t.child.fmaps) == 4]


def test_lora_preset_orders_the_two_kernel_plan_among_the_first_fused_tilings():
    g = ex.lora_program(4, 64, 64, 8)
    cfg = SearchConfig.from_args("lora")
    assert cfg.max_extra_final_inputs == 1          # the last op may read X again beside X·A
    gen = Generator(Target(g, cfg), cfg)
    tasks = gen.all_tasks()
    fused = _fused_lora_tasks(gen)
    assert fused
    # it takes turns with the one-kernel tilings that read all four inputs: the first comes before the
    # last of those, not after every one of them
    cls, summed = input_axis_classes(g), summed_axes(g)
    one_kernel = [t.index for t in tasks if t.kind == "block" and t.op.inputs == (0, 1, 2, 3)
                  and is_coherent([cls[i] for i in t.op.inputs], t.op.grid, t.op.imaps, t.op.fmaps, summed)]
    assert fused[0].index < max(one_kernel)
    # without the preset's extra input the plan is not in the space at all
    plain = Generator(Target(g, SearchConfig.from_args("lora", max_extra_final_inputs=0)),
                      SearchConfig.from_args("lora", max_extra_final_inputs=0))
    assert not _fused_lora_tasks(plain)


def test_lora_two_kernel_plan_is_found_and_matches_the_program():
    g = ex.lora_program(4, 64, 64, 8)
    cfg = SearchConfig.from_args("lora")
    gen = Generator(Target(g, cfg), cfg, fingerprint_backend="numpy")
    hits = []
    for task in _fused_lora_tasks(gen)[:8]:
        hits += gen.run_task(task)
        if hits:
            break
    assert hits, "no candidate in the first tasks of the two-kernel plan"
    c = build_graph(g, hits[0].ops, hits[0].leaves, hits[0].output_perm)
    assert [op.op_type for op in c.ops if op.op_type not in ("input",)][:1] == ["matmul"]
    assert len(c.customized_ops) == 1
    bg = c.customized_ops[0].block_graph
    assert sum(op.op_type == "matmul" for op in bg.ops) == 2 and bg.forloop_range > 1
    xs = [torch.randn(t.dims, dtype=torch.float64) for t in g.inputs]
    torch.testing.assert_close(run_reference(c, xs)[0], run_reference(g, xs)[0])

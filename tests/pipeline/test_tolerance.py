"""The accuracy bar a lowering variant must meet follows the program's own precision in its dtype."""
from mirage_lab.pipeline.autotune import PROGRAM_ERROR_FACTOR, TOLERANCE, _Tuning
from mirage_lab.pipeline.contenders import ProgramResult


def _tuning(*programs: ProgramResult) -> _Tuning:
    tn = _Tuning(program=None, results=[], mi=None, timer=None, cache_dir=None, repeats=1, stop_margin=None,
                 emit=lambda ev: None, t0=0.0)
    tn.programs.extend(programs)
    return tn


def test_half_precision_programs_keep_the_fixed_bar():
    assert _tuning().tolerance() == TOLERANCE
    assert _tuning(ProgramResult("torch", rel_err=3e-4)).tolerance() == TOLERANCE


def test_a_bfloat16_program_less_accurate_than_the_bar_raises_it_to_twice_its_own_error():
    # bf16 matmuls of the suite measured 2.4e-3 to 2.2e-2 against float64 on the H100; a variant as
    # accurate as torch's own bf16 ops must not be rejected (every bf16 μGraph variant was, at 2e-3)
    tn = _tuning(ProgramResult("torch", rel_err=2.9e-3))
    assert tn.tolerance() == PROGRAM_ERROR_FACTOR * 2.9e-3


def test_a_failed_program_lowering_does_not_set_the_bar():
    tn = _tuning(ProgramResult("torch", rel_err=5e-2, error="timing failed"), ProgramResult("torch.compile", rel_err=1e-3))
    assert tn.tolerance() == TOLERANCE

"""Search settings are checked in the calling cell: explore, run_search, g.search and superoptimize
raise a MirageLabError naming the setting (with "did you mean") before any thread or process starts."""
from __future__ import annotations

import threading

import pytest

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.search import run_search
from mirage_lab.search.config import SearchConfigError
from mirage_lab.search.settings_check import validate_search_settings

PROGRAM = ex.rms_norm_linear_program(4, 256, 256)

BAD = [
    (dict(max_kernel_opz=3), r"unknown search setting 'max_kernel_opz'; did you mean 'max_kernel_ops'\?"),
    (dict(config="nonsense"), r"config='nonsense' is not allowed; use one of 'attention', 'mlp', 'lora', None"),
    (dict(config="attenton"), r"did you mean 'attention'\?"),
    (dict(max_kernel_ops=-1), r"max_kernel_ops=-1: must be a non-negative int"),
    (dict(max_kernel_ops=True), r"max_kernel_ops=True: must be a non-negative int"),
    (dict(workers="two"), r"workers='two': must be a positive int"),
    (dict(workers=0), r"workers=0: must be a positive int"),
    (dict(griddims=[(3, 1, 1)]), r"griddims: \(3, 1, 1\) has x=3, which divides no dimension"),
    (dict(griddims=[(2, 2)]), r"griddims: \(2, 2\) must be 3 positive ints"),
    (dict(imaps="(0,1,-1)"), r"imaps='\(0,1,-1\)': must be a list of 3-tuples"),
    (dict(franges=[0]), r"franges=\[0\]: must be a list of ints >= 1"),
    (dict(fingerprint_backend="gpu"), r"fingerprint_backend='gpu' is not allowed; use one of 'numpy'"),
    (dict(dedup="yes"), r"dedup='yes': must be True or False"),
    (dict(block_ops=["matmull"]), r"block_ops entry='matmull' is not allowed; did you mean 'matmul'\?"),
    (dict(min_blocks=64, max_blocks=8), r"min_blocks=64 is larger than max_blocks=8"),
]


@pytest.mark.parametrize("kw,msg", BAD)
def test_each_entry_point_refuses_bad_settings_before_a_thread_starts(kw, msg):
    kw = dict(kw)
    config = kw.pop("config", None)
    threads = threading.active_count()
    with pytest.raises(SearchConfigError, match=msg) as e:
        mi.lab.explore(PROGRAM, config, **kw)
    assert isinstance(e.value, mi.MirageLabError)
    assert threading.active_count() == threads  # no search thread was started
    with pytest.raises(SearchConfigError, match=msg):
        run_search(PROGRAM, config, **kw)
    with pytest.raises(SearchConfigError, match=msg):
        PROGRAM.search(config, **kw)  # an iterator of events: raises on the call, not on the first next()
    with pytest.raises(SearchConfigError, match=msg):
        mi.superoptimize(PROGRAM, config, tune=False, **kw)


def test_the_widget_level_is_checked_with_its_choices():
    with pytest.raises(SearchConfigError, match=r"level='warp' is not allowed; use one of 'kernel', 'block'"):
        mi.lab.explore(PROGRAM, level="warp")
    with pytest.raises(SearchConfigError, match=r"did you mean 'block'\?"):
        mi.lab.explore(PROGRAM, level="blok")


def test_good_settings_pass_and_a_fitting_grid_is_accepted():
    validate_search_settings("attention", dict(workers=2, max_kernel_ops=4, griddims=[(2, 2, 1)],
                                               imaps=[(0, 1, -1), (0, -1, -1)], fmaps=[-1, 1, 2], franges=[4],
                                               checkpoint="x.ckpt", dedup=False), PROGRAM)
    validate_search_settings(None, dict(griddims=[(4, 1, 1)], workers=None), PROGRAM)

"""Search settings: presets, Mirage-style overrides, candidate spaces, bad input."""
import pytest

from mirage_lab.search import SearchConfig, SearchConfigError


def test_attention_preset_enables_two_kernels_2d_grids_and_todimx():
    cfg = SearchConfig.from_args("attention")
    assert cfg.max_customized_ops == 2 and cfg.two_d_grids
    assert "sum_todimx" in cfg.block_accums
    assert (-1, -1, -1) not in cfg.imap_candidates()  # attention drops the replicate-everything imaps


def test_lora_preset_allows_four_block_inputs():
    assert SearchConfig.from_args("lora").max_block_inputs == 4


def test_grid_candidates_follow_mirage_rules():
    cfg = SearchConfig()
    grids = cfg.grid_candidates([(16, 4096), (4096, 4096)])
    assert (256, 1, 1) in grids and (16, 1, 1) in grids  # 4096/16, and (batch,1,1) for rank-2 inputs
    assert all(32 <= g[0] * g[1] * g[2] <= 4096 for g in grids if g != (16, 1, 1))
    att = SearchConfig.from_args("attention").grid_candidates([(2, 256, 64), (2, 64, 4096), (2, 4096, 64)])
    assert (2, 16, 4) in att and (2, 512, 1) in att


def test_programs_of_many_rows_get_row_by_column_grids():
    # a prefill matmul (256 rows): blocks of 64 or 128 rows by each one-axis grid's columns, tried first;
    # a decode matmul (16 rows) and the attention preset keep their grids
    import mirage_lab as mi

    def program(rows):
        g = mi.new_kernel_graph()
        X, W = g.new_input((rows, 512)), g.new_input((512, 1024))
        g.mark_output(g.matmul(X, W))
        return g

    prefill = SearchConfig().resolved(program(256))
    assert prefill.row_grids
    grids = prefill.grid_candidates([(256, 512), (512, 1024)])
    assert (4, 128, 1) in grids and (2, 128, 1) in grids and (128, 1, 1) in grids
    assert grids[0][0] > 1 and grids[0][1] > 1                       # two-axis grids first
    assert all(32 <= g[0] * g[1] * g[2] <= 4096 for g in grids if g != (256, 1, 1))
    assert not SearchConfig().resolved(program(16)).row_grids
    assert not SearchConfig.from_args("attention").resolved(program(256)).row_grids
    assert not SearchConfig(row_grids=False).resolved(program(256)).row_grids   # the user's word stands
    from mirage_lab.search.settings_check import validate_search_settings

    with pytest.raises(SearchConfigError, match="row_grids"):
        validate_search_settings(None, {"row_grids": "yes"})


def test_user_overrides_are_used():
    cfg = SearchConfig.from_args(griddims=[(8, 1, 1)], imaps=[(1, -1, -1)], omaps=[(1, 0, -1)], fmaps=[0], franges=[2])
    assert (8, 1, 1) in cfg.grid_candidates([(4, 64)])  # below min_blocks, kept because the user asked
    assert cfg.imap_candidates() == ((1, -1, -1),)
    assert cfg.omap_candidates()[0] == (1, 0, -1)
    assert cfg.fmap_candidates() == (0,) and cfg.frange_candidates() == (2,)


@pytest.mark.parametrize("kwargs, msg", [
    (dict(config="fast"), "not a preset"),
    (dict(max_kernel_ops=-1), "max_kernel_ops"),
    (dict(max_blok_ops=3), "unknown search setting 'max_blok_ops'"),
    (dict(imaps=[(0, 1)]), "3-tuples"),
    (dict(franges=[0]), "positive"),
    (dict(blockdims=[(256, 1, 1)]), "128-thread blocks"),
])
def test_bad_settings_name_the_problem(kwargs, msg):
    config = kwargs.pop("config", None)
    with pytest.raises(SearchConfigError, match=msg):
        SearchConfig.from_args(config, **kwargs)


def test_config_fingerprint_is_stable_and_sensitive():
    assert SearchConfig().fingerprint() == SearchConfig().fingerprint()
    assert SearchConfig().fingerprint() != SearchConfig(max_block_ops=8).fingerprint()

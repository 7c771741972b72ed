"""The search's broadcast tile layout agrees with the verifier's gathered tiles."""
import numpy as np
import pytest

from mirage_lab.search import tiles
from mirage_lab.verify import field as F


@pytest.mark.parametrize("dims, grid, imap, fmap, frange", [
    ((8, 64), (4, 1, 1), (1, -1, -1), 0, 2),
    ((8, 64), (4, 1, 1), (-1, -1, -1), 1, 4),
    ((2, 16, 64), (2, 4, 2), (0, 2, 1), 2, 2),     # grid and loop on the same dim
    ((2, 16, 64), (2, 8, 1), (0, 1, -1), -1, 1),
])
def test_load_view_matches_gather(dims, grid, imap, fmap, frange):
    rng = np.random.default_rng(0)
    x = rng.integers(0, F.PQ, size=(2,) + dims, dtype=np.uint16)
    view = tiles.load_view(x, grid, imap, fmap, frange)
    full = np.broadcast_to(view, view.shape[:1] + tuple(grid) + view.shape[4:5] + view.shape[5:])
    gathered = F.gather_tiles(x, grid, imap, fmap, frange)   # [k, B, R, *tile] with B/R possibly 1
    b = np.broadcast_to(gathered.reshape((2,) + ((grid[0], grid[1], grid[2]) if gathered.shape[1] > 1 else (1, 1, 1))
                                         + gathered.shape[2:]), full.shape)
    assert np.array_equal(full, b)


def test_folded_matmul_equals_plain_batched_matmul():
    rng = np.random.default_rng(1)
    a = rng.integers(0, F.PQ, size=(1, 1, 1, 1, 4, 16, 32), dtype=np.uint16)     # shared by all blocks
    b = rng.integers(0, F.PQ, size=(1, 8, 1, 1, 4, 32, 8), dtype=np.uint16)      # one tile per block
    got = tiles.matmul(a, b)
    want = F.matmul(np.broadcast_to(a, (1, 8, 1, 1, 4, 16, 32)), b)
    assert got.shape == want.shape and np.array_equal(got, want)


def test_save_full_inverts_the_output_map():
    rng = np.random.default_rng(2)
    grid, omap, out_dims = (2, 4, 1), (0, 1, -1), (4, 32)
    t = rng.integers(0, F.PQ, size=(1, 2, 4, 1, 2, 8), dtype=np.uint16)
    got = tiles.save_full(t, grid, omap, out_dims)
    want = F.scatter_tiles(t.reshape(1, 8, 2, 8), grid, omap, out_dims)
    assert np.array_equal(got, want)

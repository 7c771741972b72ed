"""The search's speed-ups change nothing it finds: the same candidates, the same states.

The expected values were recorded from the search before it was made faster (commit 55b9285:
numpy fingerprints, SHA-1 digests, no product memo), by running exactly these searches with
``workers=1`` and printing ``sorted(c.content_hash() for c in res.candidates)`` and
``res.stats.states``. A change that alters the search's space, order or dedup shows up here
as a different candidate set or state count; a change that only makes states cheaper does not.
State counts updated once since (coverage branch, issue 19): the canonical order now compares
an op's input indices newest first (``state.order_key``), which admits μGraphs the old order
could not build in any order (nTrans's outer norm); the candidates here are the same, the states
differ by under 1% (10137 -> 10101, 7467 -> 7409, 27010 -> 27275).
(The FlashDecoding subtree's hashes are checked in ``test_search.py``.)
Split-K (``split_reduction``, opt-in; it was on by default for a day after issue 19's splitk branch) adds
μGraphs to the space on purpose; these searches turn it off, so they pin the space without it.
"""
import pytest

from mirage_lab import examples as ex
from mirage_lab.search import run_search

# name: (program, settings, (states, candidate content hashes))
EXPECTED = {
    "rmsnorm_linear_4x64x64_customized": (
        lambda: ex.rms_norm_linear_program(4, 64, 64), dict(max_kernel_ops=3, split_reduction=False),
        (10101, [
        "168533d8e80c902461c6bc15e5127c5df4fc8df67da67163702765c30a39caa8",
        "47fcc9a0bf771fecc4f1b4bd737fa31e59e93eda7c31bc7e0c67300b1cc4ba15",
        "5c511a9dab50108483dcad7601fe0dfc2ce93d6081b1fb5b05105810ecc07b56",
        "63ccec5fa7a9e823726f185297675a914ea314e7305676a007994339c2fc54b7",
        "63fbe07d39a406402467fd6b296c4fd07559a99466045ec0c7a50f152f4a931c",
        "6c4703191f592014d46d7fc135ff283c17292db6e5cbd295d2f3793bb3956107",
        "c2e5defb1464c219fe36c741c5969f4b2079d07cc4fdb1afe1f206449e179c4f",
        "df253c0bfceb63996ad60539653c9849b4130b62a904268365c57224947d5329",
    ]),
    ),
    "rmsnorm_linear_2x32x32_kernel_ops": (
        lambda: ex.rms_norm_linear_program(2, 32, 32),
        dict(max_kernel_ops=4, griddims=[(2, 1, 1), (1, 1, 1)], generate_grids=False, split_reduction=False),
        (7409, [
        "21375c1b68ba238921e57129246d375e7c9641b2f948a237d7430c49d9539550",
        "3354b27f1275b637735fbbb703d28e8a57fb519aeb0d3889003a4acde9c3308e",
        "3905a9d1eacd1d80aba02cc35524b9b412c577817b48edfcbb045d67e2bad837",
        "3ecca7a1eb11798e2789181d667f1426623bfd17e18974ac530fe44b86356d61",
        "449f09b0dd5e835eb07f54a8c4a107b44137aea140187d5051cfecf45a41f111",
        "4e23b6e015f39c1c1d0f85de416ecd6313760c70991f8c5f5aa35c466c39dc95",
        "503c7567a7cac0476037cc45b0b6426a2d7663ab428cd7b75a325b7e4ee0d1ca",
        "5854a17b604ce3b6aa6736e12140b0b681335ac57d0c4ccee8ec4920e8a64db1",
        "58dc6bb42ca1f0cb2a3be3b04255a0a2b88a55e7c3b73ce36336c15e0683ea46",
        "623441a7a0499e39342b4347ad374b5c17147fb821090990be5faf59c74147fa",
        "66edc05d89177977ff401ca5047fa15e79b35af0c8b3fe7905215facf9e446ff",
        "718a9229dc5abec67b279fea8fa054d77ced685f9a730851fb6c3c91894e19f3",
        "728c936e10d72d01c9e39685476858a56c83960b5e9b32cb0bd753d1bd6a3373",
        "a3a7a3639524bdc77d6ebbc239aa29582441506a9dd64641f8c2d63c6acc8062",
        "c523c6e87ca56e6ee142e570100588ba47a2160edf553cbcd12ca24c37d645b6",
        "cabb58603004299419d4d359fac4e89b7266e7ffff89145605b2df145da4ae2c",
        "cfb79bd0abcf072c9c66270c34ae096e796edd4249f75bf7767e713f10cada9d",
    ]),
    ),
    "gated_mlp_4x64x64": (
        lambda: ex.gated_mlp_program(4, 64, 64),
        dict(max_kernel_ops=4, imaps=[(-1, -1, -1), (1, -1, -1)], franges=[4], split_reduction=False),
        (27275, [
        "37e047e39f1eef327aa3057d08dda8d89a41708644f88881bc11518bb2fea5ab",
        "82fcff62335f6c123e1680ee89f4ee4f298118e2c6b7432a0e3abaff7f7f0635",
    ]),
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_same_candidates_and_states_as_before_the_speedup(name):
    make, settings, (states, hashes) = EXPECTED[name]
    res = run_search(make(), workers=1, fingerprint_backend="numpy", **settings)
    assert sorted(c.content_hash() for c in res.candidates) == hashes
    assert res.stats.states == states


@pytest.mark.parametrize("name", ["rmsnorm_linear_4x64x64_customized", "gated_mlp_4x64x64"])
def test_same_with_every_cpu_fast_path_forced_on(name, monkeypatch):
    # At these shapes the size floors keep most arrays on the plain numpy paths; with the floors
    # at zero every digest and saved output goes through the blocked copy, every tile product
    # through the whole-operand memo (and its derivation of coarser chunkings), every exact
    # product through the integer loop or the content memo: the search must not change.
    from mirage_lab.search import arrays, cpu_ops, layout_copy, lazy_digest

    monkeypatch.setattr(layout_copy, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(lazy_digest, "MIN_ELEMENTS", 0)    # every block tensor's digest lazy
    monkeypatch.setattr(cpu_ops, "SHORT_ROWS_MIN", 1)      # short rows' sums read as wide words
    monkeypatch.setattr(arrays.NumpyArrays, "MEMO_MIN_DEPTH", 0)
    monkeypatch.setattr(cpu_ops.SearchFieldOps, "FEW_MIN_ELEMENTS", 0)
    monkeypatch.setattr(cpu_ops.SearchFieldOps, "MEMO_MIN_MACS", 0)
    monkeypatch.setattr(arrays, "_INSTANCES", {})          # a fresh product memo
    make, settings, (states, hashes) = EXPECTED[name]
    res = run_search(make(), workers=1, fingerprint_backend="numpy", **settings)
    assert sorted(c.content_hash() for c in res.candidates) == hashes
    assert res.stats.states == states


@pytest.mark.parametrize("sample", [1, 64])
def test_same_with_lazy_digests_whose_samples_collide(sample, monkeypatch):
    # Every block tensor's key holds a lazy digest hashed by a sample of `sample` elements: with
    # one element most of a root's tensors share a hash, so dedup must tell them apart by the
    # full digests it computes on demand, and find exactly the states and candidates as before.
    from mirage_lab.search import lazy_digest

    monkeypatch.setattr(lazy_digest, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(lazy_digest, "SAMPLE", sample)
    make, settings, (states, hashes) = EXPECTED["rmsnorm_linear_4x64x64_customized"]
    res = run_search(make(), workers=1, fingerprint_backend="numpy", **settings)
    assert sorted(c.content_hash() for c in res.candidates) == hashes
    assert res.stats.states == states

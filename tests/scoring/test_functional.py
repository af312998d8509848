"""evaluate_pkg.functional against independent references (loops, brute force, scipy, torch, torchmetrics)."""

from __future__ import annotations

import doctest
import importlib
import itertools

import numpy as np
import pytest
from scipy import stats as scipy_stats
from scipy.spatial.distance import cosine as scipy_cosine_distance

from idbench.evaluate_pkg.functional import (
    aesthetic_score,
    bg_sim,
    bootstrap_ci,
    clip_i,
    clip_t,
    clipscore_torchmetrics_convention,
    cosine,
    cosine_matrix,
    count_accuracy,
    count_correct,
    dino_sim,
    hungarian_match,
    id_sim,
    id_sim_with_faceless,
    instance_collapse_rate,
    mask_to_patch_grid,
    percentile_interval,
    pooled_masked_features,
    precision_recall_at_k,
    random_expected_precision_recall,
    retrieval_precision_recall,
    subject_collapse_rate,
    torchmetrics_clipscore_of_mean,
)

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

FUNCTIONAL_MODULES = [
    "similarity",
    "matching",
    "collapse",
    "faces",
    "background",
    "aesthetic",
    "counting",
    "retrieval",
    "bootstrap",
]


@pytest.mark.parametrize("module", FUNCTIONAL_MODULES)
def test_docstring_examples_hold(module):
    mod = importlib.import_module(f"idbench.evaluate_pkg.functional.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def vector_with_cosine(base: np.ndarray, other: np.ndarray, c: float) -> np.ndarray:
    """A unit vector with cosine exactly ``c`` to unit ``base`` (``other``: a unit vector orthogonal to it)."""
    return c * base + np.sqrt(1.0 - c * c) * other


# --------------------------------------------------------------------------------------------- cosine


def test_cosine_matches_scipy_row_by_row():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(7, 5)), rng.normal(size=(7, 5)) * 3.0
    expected = [1.0 - scipy_cosine_distance(a[i], b[i]) for i in range(7)]
    np.testing.assert_allclose(cosine(a, b), expected, rtol=0, atol=1e-12)
    # one vector against many broadcasts
    np.testing.assert_allclose(cosine(a[0], b), [1.0 - scipy_cosine_distance(a[0], row) for row in b], atol=1e-12)


def test_cosine_matrix_matches_a_loop_and_handles_empty_sides():
    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(4, 6)), rng.normal(size=(3, 6))
    loop = np.array([[1.0 - scipy_cosine_distance(x, y) for y in B] for x in A])
    np.testing.assert_allclose(cosine_matrix(A, B), loop, atol=1e-12)
    assert cosine_matrix(A, []).shape == (4, 0)
    assert cosine_matrix(np.zeros((0, 6)), B).shape == (0, 3)


def test_cosine_is_raw_and_zero_vector_gives_zero():
    assert float(cosine([1.0, 0.0], [-2.0, 0.0])) == pytest.approx(-1.0)  # negative stays negative
    assert float(cosine([0.0, 0.0], [1.0, 2.0])) == 0.0  # eps keeps it finite, like torch
    with pytest.raises(ValueError, match="widths differ"):
        cosine([1.0, 0.0], [1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="row counts differ"):
        clip_t(np.ones((3, 2)), np.ones((2, 2)))


def test_clip_t_and_clip_i_are_per_sample_cosines():
    rng = np.random.default_rng(2)
    img, txt = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
    expected = [1.0 - scipy_cosine_distance(img[i], txt[i]) for i in range(5)]
    np.testing.assert_allclose(clip_t(img, txt), expected, atol=1e-12)
    np.testing.assert_allclose(clip_i(img, txt), expected, atol=1e-12)
    assert clip_t(img[0], txt[0]).shape == (1,)


def test_clipscore_display_helpers():
    cos = np.array([0.3, -0.2, 0.1])
    np.testing.assert_allclose(clipscore_torchmetrics_convention(cos), [30.0, 0.0, 10.0])
    # clamping the mean (torchmetrics' compute) vs averaging clamped samples
    assert torchmetrics_clipscore_of_mean(cos) == pytest.approx(100 * 0.2 / 3)
    assert clipscore_torchmetrics_convention(cos).mean() == pytest.approx(40 / 3)
    assert torchmetrics_clipscore_of_mean([-0.1, -0.3]) == 0.0


# ------------------------------------------------------------------------------------------- DINO-Sim


def test_dino_sim_is_the_mean_over_references():
    rng = np.random.default_rng(3)
    gen, refs = rng.normal(size=6), rng.normal(size=(4, 6))
    per_ref = [1.0 - scipy_cosine_distance(gen, r) for r in refs]
    result = dino_sim(gen, refs)
    np.testing.assert_allclose(result.per_reference, per_ref, atol=1e-12)
    assert result.mean == pytest.approx(np.mean(per_ref), abs=1e-12)
    with pytest.raises(ValueError, match="N = 0"):
        dino_sim(gen, np.zeros((0, 6)))


# -------------------------------------------------------------------------------------------- Hungarian


def brute_force_match(sim: np.ndarray) -> tuple[list[int], float]:
    """Best one-to-one assignment by trying all of them: per reference its generated index (-1 if none)."""
    n_ref, n_gen = sim.shape
    best_total, best = -np.inf, None
    if n_ref <= n_gen:
        for cols in itertools.permutations(range(n_gen), n_ref):
            total = sum(sim[i, c] for i, c in enumerate(cols))
            if total > best_total:
                best_total, best = total, list(cols)
    else:
        for rows in itertools.permutations(range(n_ref), n_gen):
            total = sum(sim[r, j] for j, r in enumerate(rows))
            if total > best_total:
                best_total, assignment = total, [-1] * n_ref
                for j, r in enumerate(rows):
                    assignment[r] = j
                best = assignment
    return best, best_total


@pytest.mark.parametrize("n_ref,n_gen", [(1, 1), (3, 3), (5, 5), (2, 5), (4, 6), (5, 2), (6, 3), (4, 1)])
def test_hungarian_matches_brute_force(n_ref, n_gen):
    rng = np.random.default_rng(100 * n_ref + n_gen)
    for _ in range(5):
        sim = rng.uniform(-1.0, 1.0, size=(n_ref, n_gen))
        match = hungarian_match(sim)
        expected_index, expected_total = brute_force_match(sim)
        assert match.gen_index.tolist() == expected_index
        assert match.similarity.sum() == pytest.approx(expected_total, abs=1e-12)
        for i, j in enumerate(expected_index):
            assert match.similarity[i] == (sim[i, j] if j >= 0 else 0.0)
        assert match.matched.sum() == min(n_ref, n_gen)


def test_hungarian_with_no_generated_instances_and_bad_input():
    match = hungarian_match(np.zeros((3, 0)))
    assert match.gen_index.tolist() == [-1, -1, -1]
    assert match.similarity.tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="NaN"):
        hungarian_match([[0.1, np.nan]])


# ---------------------------------------------------------------------------------------- collapse rate


def test_subject_collapse_rate_by_hand():
    sims = [0.65, 0.55, 0.45, 0.35, 0.5]
    # below 0.4: 0.35 -> 1/5; below 0.5: 0.45, 0.35 (0.5 itself is not below) -> 2/5; below 0.6: 4/5
    assert subject_collapse_rate(sims, 0.4) == pytest.approx(1 / 5)
    assert subject_collapse_rate(sims, 0.5) == pytest.approx(2 / 5)
    assert subject_collapse_rate(sims, 0.6) == pytest.approx(4 / 5)
    assert np.isnan(subject_collapse_rate([0.9, np.nan], 0.5))


def test_subject_collapse_rate_catches_homogenisation():
    # The generation is a clone of reference 0: the other three references collapse (paper 002, Sec. SCR).
    refs = np.eye(4)
    sims = dino_sim(refs[0], refs).per_reference
    np.testing.assert_allclose(sims, [1.0, 0.0, 0.0, 0.0], atol=1e-12)
    for tau in (0.4, 0.5, 0.6):
        assert subject_collapse_rate(sims, tau) == pytest.approx(0.75)


def test_instance_collapse_rate_by_hand():
    refs = np.eye(4)[:3]  # three orthogonal subjects
    crops = np.stack([refs[0], vector_with_cosine(refs[1], np.eye(4)[3], 0.45)])  # subject 2 missing
    # matched: ref0 -> 1.0, ref1 -> 0.45, ref2 -> none (always collapsed)
    assert instance_collapse_rate(crops, refs, 0.4) == pytest.approx(1 / 3)
    assert instance_collapse_rate(crops, refs, 0.5) == pytest.approx(2 / 3)
    assert instance_collapse_rate(crops, refs, -1.0) == pytest.approx(1 / 3)  # unmatched collapses whatever tau
    assert instance_collapse_rate(np.zeros((0, 4)), refs, 0.5) == 1.0


def test_instance_collapse_rate_counts_a_clone_once():
    refs = np.eye(3)
    clone = unit([1.0, 0.05, 0.0])
    crops = np.stack([refs[0], clone])  # two crops of subject 0, subject 1 and 2 absent
    # one-to-one: one crop goes to ref0, the other to the best remaining ref (cos 0.05): collapsed
    assert instance_collapse_rate(crops, refs, 0.4) == pytest.approx(2 / 3)


# ---------------------------------------------------------------------------------------------- ID-Sim


def test_id_sim_fewer_generated_faces_than_references():
    refs = np.eye(3)
    gens = np.stack([vector_with_cosine(refs[2], refs[0], 0.8)])  # one face, closest to reference 2
    result = id_sim(refs, gens)
    np.testing.assert_allclose(result.per_reference, [0.0, 0.0, 0.8], atol=1e-12)  # unmatched score 0
    assert result.gen_index.tolist() == [-1, -1, 0]
    assert result.mean == pytest.approx(0.8 / 3)
    assert (result.detected, result.expected, result.count_correct) == (1, 3, False)


def test_id_sim_more_generated_faces_than_references_matches_brute_force():
    rng = np.random.default_rng(5)
    refs, gens = rng.normal(size=(3, 16)), rng.normal(size=(5, 16))
    result = id_sim(refs, gens)
    sim = np.array([[1.0 - scipy_cosine_distance(r, g) for g in gens] for r in refs])
    expected_index, expected_total = brute_force_match(sim)
    assert result.gen_index.tolist() == expected_index
    assert result.mean == pytest.approx(expected_total / 3, abs=1e-12)
    assert (result.detected, result.expected) == (5, 3)


def test_id_sim_is_one_to_one_and_handles_no_face():
    refs = np.eye(2)
    clones = np.stack([refs[0], refs[0]])  # the same identity twice: only one reference may use it
    result = id_sim(refs, clones)
    assert sorted(result.per_reference.tolist()) == [0.0, 1.0]
    empty = id_sim(refs, [])
    assert empty.per_reference.tolist() == [0.0, 0.0] and empty.mean == 0.0 and empty.detected == 0


def test_id_sim_faceless_reference_is_nan_and_counted_not_zero():
    refs = np.eye(3)
    # one generated face per identity, cosines 0.9 (to ref 0) and 0.6 (to ref 2); ref 1 has no face
    gens = np.stack([vector_with_cosine(refs[0], refs[1], 0.9), vector_with_cosine(refs[2], refs[1], 0.6)])
    result = id_sim_with_faceless([refs[0], None, refs[2]], gens)
    assert np.isnan(result.per_reference[1])
    np.testing.assert_allclose(result.per_reference[[0, 2]], [0.9, 0.6], atol=1e-12)
    assert result.mean == pytest.approx((0.9 + 0.6) / 2)  # over the 2 references with a face, not / 3
    assert (result.without_face, result.expected, result.detected) == (1, 3, 2)
    assert result.gen_index.tolist() == [0, -1, 1]
    # a reference that has a face but no generated match still scores 0 (the generation's fault)
    missed = id_sim_with_faceless([refs[0], None, refs[2]], gens[:1])
    np.testing.assert_allclose(missed.per_reference[[0, 2]], [0.9, 0.0], atol=1e-12)
    assert missed.mean == pytest.approx(0.45) and missed.without_face == 1
    # no reference with a face: nothing to measure, NaN, every reference counted
    none = id_sim_with_faceless([None, None], gens)
    assert np.isnan(none.mean) and np.isnan(none.per_reference).all() and none.without_face == 2


# ---------------------------------------------------------------------------------------------- BG-Sim


def reference_patch_fractions(mask: np.ndarray, h: int, w: int) -> np.ndarray:
    """Area fraction of each patch inside the mask, by supersampling: repeat pixels h (w) times so that
    every patch is exactly H x W supersampled cells, then count."""
    H, W = mask.shape
    fine = np.kron(mask.astype(np.float64), np.ones((h, w)))
    out = np.zeros((h, w))
    for i in range(h):
        for j in range(w):
            out[i, j] = fine[i * H : (i + 1) * H, j * W : (j + 1) * W].mean()
    return out


def blob_mask(shape: tuple[int, int], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    cy, cx = rng.uniform(0, shape[0]), rng.uniform(0, shape[1])
    return (yy - cy) ** 2 + ((xx - cx) * 0.8) ** 2 < (0.35 * min(shape)) ** 2


@pytest.mark.parametrize(
    "mask_shape,grid",
    [((10, 17), (3, 5)), ((32, 48), (4, 6)), ((7, 7), (7, 7)), ((5, 9), (8, 4))],  # uneven, even, 1:1, upsampling
)
def test_mask_to_patch_grid_matches_supersampling(mask_shape, grid):
    for seed in range(4):
        mask = blob_mask(mask_shape, seed)
        np.testing.assert_allclose(mask_to_patch_grid(mask, grid), reference_patch_fractions(mask, *grid), atol=1e-12)


def test_pooled_masked_features_matches_an_explicit_loop():
    rng = np.random.default_rng(6)
    h, w, d = 3, 5, 4
    tokens = rng.normal(size=(h, w, d))
    for seed in range(6):
        mask = blob_mask((10, 17), seed)
        fractions = reference_patch_fractions(mask, h, w)
        picked = [tokens[i, j] for i in range(h) for j in range(w) if fractions[i, j] > 0.5]
        pooled = pooled_masked_features(tokens, mask)
        if picked:
            np.testing.assert_allclose(pooled, np.mean(picked, axis=0), atol=1e-12)
        else:
            assert np.isnan(pooled).all()


def test_bg_sim_is_cosine_of_background_pools_and_ignores_foreground():
    rng = np.random.default_rng(7)
    gen_tok, ref_tok = rng.normal(size=(4, 4, 8)), rng.normal(size=(4, 4, 8))
    gen_fg = np.zeros((16, 16), bool)
    gen_fg[:8, :8] = True  # top-left 2x2 patches are foreground
    ref_fg = np.zeros((16, 16), bool)
    ref_fg[8:, 8:] = True
    gen_bg_tokens = [gen_tok[i, j] for i in range(4) for j in range(4) if not (i < 2 and j < 2)]
    ref_bg_tokens = [ref_tok[i, j] for i in range(4) for j in range(4) if not (i >= 2 and j >= 2)]
    expected = 1.0 - scipy_cosine_distance(np.mean(gen_bg_tokens, 0), np.mean(ref_bg_tokens, 0))
    assert bg_sim(gen_tok, gen_fg, ref_tok, ref_fg) == pytest.approx(expected, abs=1e-12)
    # whatever the subjects look like, the background score does not move
    altered = gen_tok.copy()
    altered[:2, :2] = rng.normal(size=(2, 2, 8)) * 50
    assert bg_sim(altered, gen_fg, ref_tok, ref_fg) == pytest.approx(expected, abs=1e-12)
    # no reference mask = the whole reference is background
    assert bg_sim(gen_tok, gen_fg, ref_tok, None) == pytest.approx(
        bg_sim(gen_tok, gen_fg, ref_tok, np.zeros((16, 16), bool)), abs=1e-12
    )


def test_bg_sim_is_nan_without_background():
    tok = np.ones((2, 2, 3))
    assert np.isnan(bg_sim(tok, np.ones((8, 8), bool), tok, None))
    assert np.isnan(bg_sim(tok, np.zeros((8, 8), bool), tok, np.ones((8, 8), bool)))


# ------------------------------------------------------------------------------------------- aesthetic


def torch_aesthetic_head(seed: int):
    """The improved-aesthetic-predictor MLP as the original code builds it (a module holding ``layers``)."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.Sequential(
                nn.Linear(768, 1024),
                nn.Dropout(0.2),
                nn.Linear(1024, 128),
                nn.Dropout(0.2),
                nn.Linear(128, 64),
                nn.Dropout(0.1),
                nn.Linear(64, 16),
                nn.Linear(16, 1),
            )

        def forward(self, x):
            return self.layers(x)

    torch.manual_seed(seed)
    return MLP().eval()


def test_aesthetic_numpy_forward_matches_torch():
    torch = pytest.importorskip("torch")
    head = torch_aesthetic_head(0).double()
    rng = np.random.default_rng(8)
    emb = rng.normal(size=(6, 768)) * 4.0  # raw, unnormalised embeddings
    with torch.no_grad():
        expected = head(torch.nn.functional.normalize(torch.from_numpy(emb), dim=-1))[:, 0].numpy()
    state = {k: v.numpy() for k, v in head.state_dict().items()}
    np.testing.assert_allclose(aesthetic_score(state, emb), expected, rtol=0, atol=1e-12)
    # the float32 torch state dict itself (what the checkpoint holds) works as is
    head32 = torch_aesthetic_head(0)
    with torch.no_grad():
        expected32 = head32(torch.nn.functional.normalize(torch.from_numpy(emb).float(), dim=-1))[:, 0].numpy()
    np.testing.assert_allclose(aesthetic_score(head32.state_dict(), emb), expected32, atol=1e-5)
    assert aesthetic_score(state, emb[0]).shape == (1,)


def test_aesthetic_uses_the_original_checkpoint_keys_and_checks_them():
    state = {k: v.numpy() for k, v in torch_aesthetic_head(1).state_dict().items()}
    assert sorted(state) == sorted(f"layers.{i}.{p}" for i in (0, 2, 4, 6, 7) for p in ("weight", "bias"))
    with pytest.raises(KeyError, match="layers.7.bias"):
        aesthetic_score({k: v for k, v in state.items() if k != "layers.7.bias"}, np.ones(768))
    bad = dict(state, **{"layers.2.weight": np.zeros((128, 1000))})
    with pytest.raises(ValueError, match="layers.2.weight"):
        aesthetic_score(bad, np.ones(768))
    with pytest.raises(ValueError, match="768"):
        aesthetic_score(state, np.ones((2, 512)))


# -------------------------------------------------------------------------------- count and retrieval


def test_count_accuracy():
    assert count_correct([2, 3, 0], [2, 4, 0]).tolist() == [True, False, True]
    assert count_accuracy([2, 3, 0], [2, 4, 0]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        count_accuracy([1, 2], [1])


def test_retrieval_precision_recall_by_hand():
    ranked = ["r4", "r1", "r9", "r2", "r7", "r3"]
    relevant = {"r1", "r2"}
    assert precision_recall_at_k(ranked, relevant, 1) == (0.0, 0.0)
    assert precision_recall_at_k(ranked, relevant, 3) == pytest.approx((1 / 3, 1 / 2))
    assert precision_recall_at_k(ranked, relevant, 5) == pytest.approx((2 / 5, 1.0))
    assert retrieval_precision_recall(ranked, relevant, ks=(1, 3, 5)) == pytest.approx(
        {"p@1": 0.0, "r@1": 0.0, "p@3": 1 / 3, "r@3": 0.5, "p@5": 0.4, "r@5": 1.0}
    )
    assert precision_recall_at_k(["r1"], {"r1"}, 5) == (0.2, 1.0)  # fewer than k ranked: denominator stays k
    p, r = precision_recall_at_k(["r1"], set(), 1)
    assert p == 0.0 and np.isnan(r)


@pytest.mark.parametrize("n_candidates", [1, 2, 3, 4, 5, 6])
def test_random_expectation_is_the_mean_over_every_ordering(n_candidates):
    candidates = [f"c{i}" for i in range(n_candidates)]
    orders = list(itertools.permutations(candidates))
    for n_relevant in range(n_candidates + 1):
        relevant = set(candidates[:n_relevant])
        got = random_expected_precision_recall(n_candidates, n_relevant, ks=(1, 2, 3, 5, 7))
        for k in (1, 2, 3, 5, 7):
            hits = [len(set(order[:k]) & relevant) for order in orders]
            assert got[f"p@{k}"] == pytest.approx(sum(hits) / len(orders) / k)
            if n_relevant:
                assert got[f"r@{k}"] == pytest.approx(sum(hits) / len(orders) / n_relevant)
            else:
                assert np.isnan(got[f"r@{k}"])


def test_random_expectation_by_hand_and_bad_counts():
    # 4 candidates, 1 relevant: a random pick is right 1 time in 4; the top 3 holds it 3 times in 4
    assert random_expected_precision_recall(4, 1, ks=(1, 3, 5)) == pytest.approx(
        {"p@1": 0.25, "r@1": 0.25, "p@3": 0.25, "r@3": 0.75, "p@5": 0.2, "r@5": 1.0}
    )
    assert random_expected_precision_recall(1, 1, ks=(1,)) == {"p@1": 1.0, "r@1": 1.0}  # cannot be missed
    for c, r in ((0, 0), (2, 3), (2, -1)):
        with pytest.raises(ValueError):
            random_expected_precision_recall(c, r, ks=(1,))


# ------------------------------------------------------------------------------------------- bootstrap


def prompt_ids(k: int) -> np.ndarray:
    return np.array([f"p{i:03d}" for i in range(k)], dtype=object)


def scipy_percentile_ci(values: np.ndarray, n_resamples: int, seed: int) -> tuple[float, float]:
    """The independent reference: scipy's percentile bootstrap of the mean of ``values``."""
    res = scipy_stats.bootstrap(
        (values,),
        np.mean,
        method="percentile",
        n_resamples=n_resamples,
        confidence_level=0.95,
        rng=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def test_seed_copies_get_the_interval_of_the_prompt_means():
    # 75 prompts, three seeds that are exact copies: the images add nothing beyond the prompt means
    rng = np.random.default_rng(11)
    means = rng.normal(0.6, 0.1, size=75)
    values, clusters = np.repeat(means, 3), np.repeat(prompt_ids(75), 3)
    copies = bootstrap_ci(values, clusters, n_resamples=2000, seed=4)
    alone = bootstrap_ci(means, prompt_ids(75), n_resamples=2000, seed=4)  # one value per prompt
    assert (copies.n, copies.n_clusters, alone.n_clusters) == (225, 75, 75)
    assert copies.mean == pytest.approx(means.mean())
    assert (copies.low, copies.high) == pytest.approx((alone.low, alone.high), abs=1e-12)
    # scipy on the 75 prompt means: the same interval up to Monte-Carlo error (2 % of the width)
    big = bootstrap_ci(values, clusters, n_resamples=40_000, seed=1)
    low, high = scipy_percentile_ci(means, 40_000, seed=2)
    width = high - low
    assert big.low == pytest.approx(low, abs=0.03 * width) and big.high == pytest.approx(high, abs=0.03 * width)
    # treating the 225 images as independent (the old interval) is too narrow by sqrt(3)
    per_image = bootstrap_ci(values, np.arange(225), n_resamples=40_000, seed=1)
    assert (per_image.high - per_image.low) == pytest.approx(width / np.sqrt(3), rel=0.05)


def test_prompt_level_interval_is_wider_than_the_seed_level_one():
    # strong between-prompt variance (sd 1), independent seed noise (sd 0.3): width ratio
    # sqrt((3 sp^2 + se^2) / (sp^2 + se^2)) = 1.68 in expectation
    rng = np.random.default_rng(5)
    k = 75
    values = np.repeat(rng.normal(0.0, 1.0, size=k), 3) + rng.normal(0.0, 0.3, size=3 * k)
    prompts = bootstrap_ci(values, np.repeat(prompt_ids(k), 3), n_resamples=4000, seed=0)
    images = bootstrap_ci(values, np.arange(3 * k), n_resamples=4000, seed=0)
    assert (prompts.high - prompts.low) > 1.4 * (images.high - images.low)
    assert prompts.mean == pytest.approx(images.mean) == pytest.approx(values.mean())


def test_cluster_bootstrap_agrees_with_a_brute_force_loop_over_prompt_ids():
    # unequal seeds per prompt and a few NaNs: the estimator is the mean of the known values of the
    # drawn prompts (all of a drawn prompt's values together), which a plain loop computes directly
    rng = np.random.default_rng(21)
    k = 40
    sizes = rng.integers(1, 6, size=k)
    ids = np.repeat(prompt_ids(k), sizes)
    values = np.repeat(rng.normal(0.0, 1.0, size=k), sizes) + rng.normal(0.0, 0.5, size=ids.size)
    values[rng.choice(ids.size, size=8, replace=False)] = np.nan
    helper = bootstrap_ci(values, ids, n_resamples=20_000, seed=3)

    known = ~np.isnan(values)
    by_prompt = {p: values[(ids == p) & known] for p in np.unique(ids[known])}
    names = list(by_prompt)
    loop_rng = np.random.default_rng(99)
    boot = []
    for _ in range(20_000):
        drawn = loop_rng.choice(len(names), size=len(names), replace=True)
        boot.append(np.concatenate([by_prompt[names[i]] for i in drawn]).mean())
    low, high = np.quantile(boot, [0.025, 0.975])
    width = high - low
    assert helper.mean == pytest.approx(np.nanmean(values))
    assert helper.n_clusters == len(names)
    assert helper.low == pytest.approx(low, abs=0.04 * width) and helper.high == pytest.approx(high, abs=0.04 * width)


def test_bootstrap_ci_excludes_and_counts_nan_and_is_seeded():
    values = [0.1, np.nan, 0.5, 0.3, np.nan, 0.7, np.nan, np.nan]
    clusters = ["a", "a", "b", "b", "c", "c", "d", "d"]  # every value of "d" is missing
    ci = bootstrap_ci(values, clusters, n_resamples=500, seed=3)
    assert (ci.n, ci.n_nan, ci.n_clusters) == (4, 4, 3)  # "d" holds no evidence and is not drawn
    assert ci.mean == pytest.approx(0.4)
    assert np.isfinite([ci.low, ci.high]).all() and ci.low <= ci.mean <= ci.high
    assert ci == bootstrap_ci(values, clusters, n_resamples=500, seed=3)
    # the draws belong to the prompt ids, not to the row order
    order = [7, 2, 5, 0, 3, 6, 1, 4]
    shuffled = bootstrap_ci([values[i] for i in order], [clusters[i] for i in order], n_resamples=500, seed=3)
    assert (shuffled.low, shuffled.high, shuffled.mean) == pytest.approx((ci.low, ci.high, ci.mean), abs=1e-12)
    empty = bootstrap_ci([np.nan, np.nan], ["a", "b"])
    assert np.isnan([empty.mean, empty.low, empty.high]).all() and (empty.n, empty.n_nan, empty.n_clusters) == (0, 2, 0)
    # one prompt: the mean stands, but there is no interval (never a zero-width one)
    one = bootstrap_ci([0.25, 0.35, np.nan], ["a", "a", "a"])
    assert one.mean == pytest.approx(0.3) and np.isnan(one.low) and np.isnan(one.high) and one.n_clusters == 1
    with pytest.raises(ValueError, match="3 values but 2 cluster labels"):
        bootstrap_ci([1.0, 2.0, 3.0], ["a", "b"])


def test_cluster_draws_are_chunked_without_changing_the_stream(monkeypatch):
    from idbench.evaluate_pkg.functional import bootstrap as module

    whole = module.cluster_draws(7, 50, seed=2)
    monkeypatch.setattr(module, "_CHUNK_ELEMENTS", 20)  # two rows per chunk
    assert (module.cluster_draws(7, 50, seed=2) == whole).all()
    assert (whole.sum(axis=1) == 7).all()


def test_percentile_interval_leaves_out_undefined_replicates():
    low, high = percentile_interval(np.array([np.nan, *np.arange(101.0), np.inf]), 0.9)
    assert (low, high) == pytest.approx((5.0, 95.0))
    assert np.isnan(percentile_interval(np.array([np.nan]), 0.95)).all()


# ------------------------------------------------------------------- CLIP-T against torchmetrics CLIPScore


@pytest.fixture(scope="module")
def tiny_clip():
    """A tiny random transformers CLIPModel and a CLIPProcessor made here, with no download."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers import pre_tokenizers

    # Byte-level BPE vocabulary with no merges: every character is a token, "</w>" marks a word end.
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    vocab.update({ch + "</w>": len(alphabet) + i for i, ch in enumerate(alphabet)})
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    tokenizer = transformers.CLIPTokenizer(vocab=vocab, merges=[])
    image_processor = transformers.CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = transformers.CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer)

    torch.manual_seed(0)
    config = transformers.CLIPConfig(
        text_config=dict(
            vocab_size=len(vocab),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=77,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        ),
        vision_config=dict(
            image_size=32,
            patch_size=8,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
        ),
        projection_dim=64,
    )
    model = transformers.CLIPModel(config).eval()

    class PooledCLIP(torch.nn.Module):
        """transformers 5 returns output objects; torchmetrics 1.9 expects the projected tensors."""

        def __init__(self, clip):
            super().__init__()
            self.clip = clip
            self.config = clip.config

        def get_image_features(self, *args, **kwargs):
            return self.clip.get_image_features(*args, **kwargs).pooler_output

        def get_text_features(self, *args, **kwargs):
            return self.clip.get_text_features(*args, **kwargs).pooler_output

    images = [
        torch.randint(0, 256, (3, 40, 48), generator=torch.Generator().manual_seed(i), dtype=torch.uint8)
        for i in range(8)
    ]
    prompts = [
        "a cat on a mat",
        "two dogs",
        "a red car parked by the sea",
        "x",
        "three people hugging in a park",
        "a bowl of soup",
        "subject a stands behind subject b",
        "an old man holding a violin",
    ]
    return PooledCLIP(model), processor, images, prompts


def our_clip_t(tiny_clip) -> np.ndarray:
    torch = pytest.importorskip("torch")
    model, processor, images, prompts = tiny_clip
    with torch.no_grad():
        pixels = processor(images=images, return_tensors="pt")["pixel_values"]
        text = processor(text=prompts, return_tensors="pt", padding=True)
        image_emb = model.get_image_features(pixel_values=pixels).numpy()
        text_emb = model.get_text_features(input_ids=text["input_ids"], attention_mask=text["attention_mask"]).numpy()
    return clip_t(image_emb, text_emb)


@pytest.mark.slow
def test_clip_t_per_sample_equals_torchmetrics_clip_score(tiny_clip):
    pytest.importorskip("torchmetrics")
    from torchmetrics.functional.multimodal import clip_score

    model, processor, images, prompts = tiny_clip
    ours = our_clip_t(tiny_clip)
    assert (ours > 0).any() and (ours < 0).any()  # both sides of the clamp are exercised
    torch = pytest.importorskip("torch")
    for i in range(len(images)):
        # one sample: torchmetrics' clamp of the mean is the per-sample clamp
        with torch.no_grad():
            theirs = float(clip_score(images[i], prompts[i], model_name_or_path=lambda: (model, processor)))
        assert clipscore_torchmetrics_convention(ours[i]) == pytest.approx(theirs, abs=1e-5)


@pytest.mark.slow
def test_clip_t_batch_equals_torchmetrics_clipscore_of_mean(tiny_clip):
    pytest.importorskip("torchmetrics")
    from torchmetrics.multimodal import CLIPScore

    model, processor, images, prompts = tiny_clip
    ours = our_clip_t(tiny_clip)
    metric = CLIPScore(model_name_or_path=lambda: (model, processor))
    metric.update(images[:3], prompts[:3])
    metric.update(images[3:], prompts[3:])
    theirs = float(metric.compute())
    assert torchmetrics_clipscore_of_mean(ours) == pytest.approx(theirs, abs=1e-5)
    # CLIPScore clamps the batch mean, not each sample: with negative samples the two conventions differ,
    # which is why we store raw cosines and clamp per sample only for display.
    assert clipscore_torchmetrics_convention(ours).mean() != pytest.approx(theirs, abs=1e-3)
    positive = [i for i in range(len(images)) if ours[i] > 0]
    metric.reset()
    metric.update([images[i] for i in positive], [prompts[i] for i in positive])
    assert clipscore_torchmetrics_convention(ours[positive]).mean() == pytest.approx(float(metric.compute()), abs=1e-5)

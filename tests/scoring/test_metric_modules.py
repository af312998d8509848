"""The evaluate modules in evaluate_pkg/metrics: offline loading, compute == functional, add_batch == compute."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

evaluate = pytest.importorskip("evaluate")

from idbench.evaluate_pkg import functional as F  # noqa: E402
from idbench.evaluate_pkg.metrics import METRIC_NAMES, load, metric_path  # noqa: E402

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

RNG_SEED = 0


def f32(x) -> np.ndarray:
    """Inputs are float32 like the feature store's, so the module's float32 storage loses nothing."""
    return np.asarray(x, dtype=np.float32)


def make_inputs(name: str, rng: np.random.Generator, n: int = 6) -> dict[str, list]:
    """n samples of plausible features for metric ``name``, ragged where the metric allows it."""
    d = 8
    if name == "clip_t":
        return {
            "image_embeddings": list(f32(rng.normal(size=(n, d)))),
            "text_embeddings": list(f32(rng.normal(size=(n, d)))),
        }
    if name == "clip_i":
        return {
            "generated_embeddings": list(f32(rng.normal(size=(n, d)))),
            "reference_embeddings": list(f32(rng.normal(size=(n, d)))),
        }
    if name in ("dino_sim", "subject_collapse_rate"):
        gen = list(f32(rng.normal(size=(n, d))))
        # make some references close to the generation so that every threshold bites
        refs = [
            f32(gen[i] + rng.normal(size=(k, d)) * rng.uniform(1.0, 2.6, size=(k, 1)))  # cosines ~0.35-0.7
            for i, k in enumerate(2 + np.arange(n) % 3)
        ]
        return {"generated_embeddings": gen, "reference_embeddings": refs}
    if name == "instance_collapse_rate":
        refs = [f32(rng.normal(size=(2 + i % 3, d))) for i in range(n)]
        crops = [f32(r[: i % 4] + rng.normal(size=(min(i % 4, len(r)), d)) * 0.6) for i, r in enumerate(refs)]
        return {"crop_embeddings": crops, "reference_embeddings": refs}
    if name == "id_sim":
        refs = [f32(rng.normal(size=(2 + i % 3, d))) for i in range(n)]
        # 0 faces, fewer, as many, and more faces than references
        gens = [f32(rng.normal(size=(k, d))) for k in (0, 1, 2, 3, 5, 4)[:n]]
        return {"reference_face_embeddings": refs, "generated_face_embeddings": gens}
    if name == "bg_sim":
        gen_tok = [f32(rng.normal(size=(3, 4, d))) for _ in range(n)]
        ref_tok = [f32(rng.normal(size=(3, 4, d))) for _ in range(n)]
        gen_masks, ref_masks = [], []
        for i in range(n):
            m = np.zeros((12, 16), bool)
            m[: 2 + i, : 4 + i] = True
            gen_masks.append(m)
            ref_masks.append(np.zeros((6, 8), bool))
        gen_masks[2] = np.ones((12, 16), bool)  # all foreground: BG-Sim undefined
        return {
            "generated_tokens": gen_tok,
            "generated_foreground_masks": gen_masks,
            "reference_tokens": ref_tok,
            "reference_foreground_masks": ref_masks,
        }
    if name == "aesthetic":
        return {"image_embeddings": list(f32(rng.normal(size=(n, 768))))}
    if name == "count_accuracy":
        expected = rng.integers(2, 6, size=n)
        detected = expected + rng.integers(-1, 2, size=n)
        return {"detected": detected.tolist(), "expected": expected.tolist()}
    if name == "retrieval":
        pool = [f"ref{i}" for i in range(10)]
        ranked = [list(rng.permutation(pool)[:6]) for _ in range(n)]
        relevant = [list(rng.choice(pool, size=1 + i % 3, replace=False)) for i in range(n)]
        relevant[1] = []  # no relevant reference: R@k undefined
        return {"ranked_ids": ranked, "relevant_ids": relevant}
    raise KeyError(name)


def aesthetic_weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = {0: (1024, 768), 2: (128, 1024), 4: (64, 128), 6: (16, 64), 7: (1, 16)}
    out = {}
    for i, (o, k) in shapes.items():
        out[f"layers.{i}.weight"] = rng.uniform(-1, 1, size=(o, k)) / np.sqrt(k)
        out[f"layers.{i}.bias"] = rng.uniform(-1, 1, size=o) / np.sqrt(k)
    return out


def compute_kwargs(name: str) -> dict[str, Any]:
    return {"head_weights": aesthetic_weights()} if name == "aesthetic" else {}


def functional_results(name: str, x: dict[str, list]) -> dict[str, Any]:
    """What each module must return, computed straight from the functional twins."""
    if name == "clip_t":
        v = F.clip_t(x["image_embeddings"], x["text_embeddings"])
        return {"clip_t": v.mean(), "clip_t_per_sample": v}
    if name == "clip_i":
        v = F.clip_i(x["generated_embeddings"], x["reference_embeddings"])
        return {"clip_i": v.mean(), "clip_i_per_sample": v}
    if name == "dino_sim":
        rs = [F.dino_sim(g, r) for g, r in zip(x["generated_embeddings"], x["reference_embeddings"])]
        v = np.array([r.mean for r in rs])
        return {"dino_sim": v.mean(), "dino_sim_per_sample": v, "dino_sim_per_reference": [r.per_reference for r in rs]}
    if name == "subject_collapse_rate":
        sims = [F.dino_sim(g, r).per_reference for g, r in zip(x["generated_embeddings"], x["reference_embeddings"])]
        out = {}
        for tau in (0.4, 0.5, 0.6):
            v = np.array([F.subject_collapse_rate(s, tau) for s in sims])
            out[f"scr@{tau:g}"], out[f"scr@{tau:g}_per_sample"] = v.mean(), v
        return out
    if name == "instance_collapse_rate":
        out = {}
        for tau in (0.4, 0.5, 0.6):
            pairs = zip(x["crop_embeddings"], x["reference_embeddings"])
            v = np.array([F.instance_collapse_rate(crops, refs, tau) for crops, refs in pairs])
            out[f"instance_scr@{tau:g}"], out[f"instance_scr@{tau:g}_per_sample"] = v.mean(), v
        return out
    if name == "id_sim":
        rs = [F.id_sim(r, g) for r, g in zip(x["reference_face_embeddings"], x["generated_face_embeddings"])]
        v = np.array([r.mean for r in rs])
        return {
            "id_sim": v.mean(),
            "id_sim_per_sample": v,
            "id_sim_per_reference": [r.per_reference for r in rs],
            "detected_faces": [r.detected for r in rs],
            "expected_faces": [r.expected for r in rs],
            "references_without_face": [0 for _ in rs],  # every reference of these inputs has a face
            "face_count_accuracy": np.mean([r.count_correct for r in rs]),
        }
    if name == "bg_sim":
        v = np.array(
            [
                F.bg_sim(*args)
                for args in zip(
                    x["generated_tokens"],
                    x["generated_foreground_masks"],
                    x["reference_tokens"],
                    x["reference_foreground_masks"],
                )
            ]
        )
        return {"bg_sim": np.nanmean(v), "bg_sim_per_sample": v, "bg_sim_undefined": int(np.isnan(v).sum())}
    if name == "aesthetic":
        v = F.aesthetic_score(aesthetic_weights(), x["image_embeddings"])
        return {"aesthetic": v.mean(), "aesthetic_per_sample": v}
    if name == "count_accuracy":
        c = F.count_correct(x["detected"], x["expected"])
        return {"count_accuracy": c.mean(), "count_correct_per_sample": c.tolist()}
    if name == "retrieval":
        rows = [
            F.retrieval_precision_recall(r, rel, ks=(1, 3, 5)) for r, rel in zip(x["ranked_ids"], x["relevant_ids"])
        ]
        out = {}
        for key in rows[0]:
            v = np.array([row[key] for row in rows])
            out[key], out[f"{key}_per_sample"] = np.nanmean(v), v
        out["slots_without_relevant"] = sum(1 for rel in x["relevant_ids"] if not rel)
        return out
    raise KeyError(name)


def assert_same_results(got: dict, expected: dict) -> None:
    assert set(got) == set(expected)
    for key, want in expected.items():
        if isinstance(want, list) and want and isinstance(want[0], (list, np.ndarray)):  # ragged, per reference
            assert len(got[key]) == len(want)
            for g, w in zip(got[key], want):
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=key)
        else:
            got_arr, want_arr = np.asarray(got[key], dtype=float), np.asarray(want, dtype=float)
            np.testing.assert_allclose(got_arr, want_arr, rtol=1e-12, atol=1e-12, err_msg=key, equal_nan=True)


def chunk(x: dict[str, list], start: int, stop: int) -> dict[str, list]:
    return {k: v[start:stop] for k, v in x.items()}


def test_hub_is_off_for_these_tests():
    # tests/conftest.py sets these before anything imports huggingface_hub: loading must work offline
    assert os.environ.get("HF_HUB_OFFLINE") == "1" and os.environ.get("HF_DATASETS_OFFLINE") == "1"


@pytest.mark.parametrize("name", METRIC_NAMES)
def test_module_loads_offline_and_describes_itself(name):
    module = evaluate.load(str(metric_path(name)), keep_in_memory=True)
    assert isinstance(module, evaluate.Metric)
    assert module.name == name
    assert module.description.strip() and module.citation.strip() and module.inputs_description.strip()
    assert set(module.features) == set(make_inputs(name, np.random.default_rng(RNG_SEED)))


@pytest.mark.parametrize("name", METRIC_NAMES)
def test_compute_equals_functional(name):
    x = make_inputs(name, np.random.default_rng(RNG_SEED))
    got = load(name, keep_in_memory=True).compute(**x, **compute_kwargs(name))
    assert_same_results(got, functional_results(name, x))


@pytest.mark.parametrize("name", METRIC_NAMES)
def test_add_batch_accumulates_like_one_compute(name):
    x = make_inputs(name, np.random.default_rng(RNG_SEED))
    module = load(name, keep_in_memory=True)
    for start, stop in ((0, 2), (2, 3), (3, 6)):
        module.add_batch(**chunk(x, start, stop))
    accumulated = module.compute(**compute_kwargs(name))
    once = load(name, keep_in_memory=True).compute(**x, **compute_kwargs(name))
    assert_same_results(accumulated, once)


def test_add_batch_with_the_on_disk_cache(tmp_path):
    x = make_inputs("clip_t", np.random.default_rng(1), n=5)
    module = evaluate.load(str(metric_path("clip_t")), cache_dir=str(tmp_path))
    module.add_batch(**chunk(x, 0, 2))
    module.add_batch(**chunk(x, 2, 5))
    result = module.compute()
    expected = F.clip_t(x["image_embeddings"], x["text_embeddings"])
    np.testing.assert_allclose(result["clip_t_per_sample"], expected, atol=1e-12)


def test_clip_t_accepts_numpy_matrices_and_keeps_raw_cosines():
    rng = np.random.default_rng(2)
    img, txt = f32(rng.normal(size=(4, 8))), f32(rng.normal(size=(4, 8)))
    result = load("clip_t", keep_in_memory=True).compute(image_embeddings=img, text_embeddings=-img)
    assert result["clip_t"] == pytest.approx(-1.0)  # never clamped, never x100
    result = load("clip_t", keep_in_memory=True).compute(image_embeddings=img, text_embeddings=txt)
    np.testing.assert_allclose(result["clip_t_per_sample"], F.clip_t(img, txt), atol=1e-12)


def test_subject_collapse_rate_thresholds_from_config_or_keyword():
    x = make_inputs("subject_collapse_rate", np.random.default_rng(RNG_SEED))
    default = load("subject_collapse_rate", keep_in_memory=True).compute(**x)
    assert [k for k in default if not k.endswith("_per_sample")] == ["scr@0.4", "scr@0.5", "scr@0.6"]
    assert len({default["scr@0.4"], default["scr@0.5"], default["scr@0.6"]}) > 1  # the thresholds bite
    one = load("subject_collapse_rate", config_name="0.5", keep_in_memory=True).compute(**x)
    assert set(one) == {"scr@0.5", "scr@0.5_per_sample"} and one["scr@0.5"] == default["scr@0.5"]
    some = load("subject_collapse_rate", keep_in_memory=True).compute(**x, taus=[0.45])
    assert set(some) == {"scr@0.45", "scr@0.45_per_sample"}
    with pytest.raises(ValueError, match="not a threshold"):
        load("subject_collapse_rate", config_name="strict", keep_in_memory=True).compute(**x)


def test_id_sim_reports_face_counts():
    x = make_inputs("id_sim", np.random.default_rng(RNG_SEED))
    result = load("id_sim", keep_in_memory=True).compute(**x)
    assert result["detected_faces"] == [0, 1, 2, 3, 5, 4]
    assert result["expected_faces"] == [2, 3, 4, 2, 3, 4]
    assert result["face_count_accuracy"] == pytest.approx(1 / 6)
    assert result["id_sim_per_reference"][0] == [0.0, 0.0]  # no face found: every reference scores 0


def test_id_sim_leaves_a_reference_without_a_face_out_as_the_suite_does():
    """An empty reference embedding (no face in the reference) is missing evidence: NaN, not matched,
    counted; an image with no usable reference is left out of the mean (worked out by hand)."""
    result = load("id_sim", keep_in_memory=True).compute(
        reference_face_embeddings=[[[1.0, 0.0], [], [0.0, 1.0]], [[]]],
        generated_face_embeddings=[[[0.6, 0.8]], [[1.0, 0.0]]],
    )
    first = result["id_sim_per_reference"][0]
    assert first[0] == 0.0 and np.isnan(first[1]) and first[2] == pytest.approx(0.8)
    assert result["references_without_face"] == [1, 1]
    assert np.isnan(result["id_sim_per_sample"][1])
    assert result["id_sim"] == pytest.approx(0.4)  # (0 + 0.8) / 2, the face-less image left out


def test_bg_sim_counts_undefined_images_and_leaves_them_out():
    x = make_inputs("bg_sim", np.random.default_rng(RNG_SEED))
    result = load("bg_sim", keep_in_memory=True).compute(**x)
    assert result["bg_sim_undefined"] == 1 and np.isnan(result["bg_sim_per_sample"][2])
    defined = [v for v in result["bg_sim_per_sample"] if not np.isnan(v)]
    assert result["bg_sim"] == pytest.approx(np.mean(defined))


def test_aesthetic_needs_the_head_weights():
    x = make_inputs("aesthetic", np.random.default_rng(RNG_SEED))
    with pytest.raises(ValueError, match="head_weights"):
        load("aesthetic", keep_in_memory=True).compute(**x)


def test_unknown_metric_name_lists_what_exists():
    with pytest.raises(KeyError, match="clip_t"):
        metric_path("clip_score")

"""CogCanvas (paper 001): ID-Sim, DINO-Sim on item crops, CLIP-T, BG-Sim, aesthetics, person count,
and, with a VLM judge, Attr-VQA and interaction-graph consistency over the built yes/no questions.

A text-to-image submission (no references) is scored here with count accuracy and
``attr_vqa.binding``, the judge then asked the binding questions only. The retrieval task scores
rankings of references, not generations: ``evaluate_pkg/retrieval.py``.
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np

from idbench.builders.benchmarks.cogcanvas import QUESTION_KINDS
from idbench.evaluate_pkg import functional as F
from idbench.evaluate_pkg.baselines import Layout, Slot, pick_impostors
from idbench.evaluate_pkg.data import BenchmarkData, BenchmarkDataError
from idbench.evaluate_pkg.context import JUDGE_CHUNK, Context, Result, crop_bytes
from idbench.evaluate_pkg.images import content_hash

PERSON_QUERY = "a person"
PERSON_NMS_IOU = 0.5

# The judged metrics: one set of answers (one request per image) gives them all.
VQA_METRICS = frozenset({"attr_vqa", "igc", "attr_vqa_paired", "igc_paired", "attr_vqa.binding"})
# Every metric of the spec is computed for the tasks it declares (the runner reports the others).
NOT_RUN: dict[str, str] = {}
# Per-image counts stored next to the metrics (not metrics of the suite: never ranked).
DIAGNOSTICS: dict[str, str] = {
    "faces_detected": "faces found in the generation (ID-Sim)",
    "faces_expected": "persons the prompt asks for (ID-Sim)",
    "persons_detected": "persons counted after NMS (count accuracy)",
    # Attr-VQA's accuracy per question kind, next to the overall one (attr_vqa.binding is a metric of
    # the suite: the T2I task's Attr-VQA).
    **{f"attr_vqa.{kind}": f"Attr-VQA accuracy on the {kind} facts" for kind in QUESTION_KINDS if kind != "binding"},
    "attr_vqa.negative_yes_rate": "share of the negative questions the judge answered yes (its yes-bias)",
}


def score(ctx: Context, metrics: set[str]) -> list[Result]:
    results = _vqa(ctx, metrics) if metrics & VQA_METRICS else []
    return results + _encoders(ctx, metrics)


def _vqa(ctx: Context, metrics: set[str]) -> list[Result]:
    """Attr-VQA and IGC (and their paired variants) per image (one judge request per image), failure
    rates, the yes-rate on the negatives, evidence, run notes.

    The judge answers all of an image's questions at once, so every metric comes from the same answers;
    an unrequested one is dropped from the results.
    """
    from idbench.evaluate_pkg.judge.vqa import METRIC_KINDS, fact_tally, score_images, vqa_items

    prompts = ctx.data.prompt_rows
    if not metrics & (VQA_METRICS - {"attr_vqa.binding"}):  # the T2I task: ask the binding questions only
        prompts = {p: {**row, "questions": [q for q in row["questions"] if q["kind"] == "binding"]} for p, row in prompts.items()}
    runs = [score_images(ctx.judge, vqa_items(prompts, chunk)) for chunk in ctx.generation_bytes(JUDGE_CHUNK)]
    run = runs[0]
    for more in runs[1:]:  # one run's worth of results, outcomes and answers across the chunks
        run.results += more.results
        run.outcomes += more.outcomes
        run.answers += more.answers
    results = [r for r in run.results if _vqa_owner(r.metric) in metrics]
    by_image: dict[tuple[str, int], list] = {}
    for outcome in run.outcomes:
        by_image.setdefault((outcome.prompt_id, outcome.seed), []).append(outcome)
    for (prompt_id, seed), outcomes in by_image.items():
        for metric in ("igc", "attr_vqa.binding"):  # the failure rate over the metric's own facts, next to its score
            if metric in metrics:
                rate = fact_tally(outcomes, METRIC_KINDS[metric]).failure_rate
                results.append(Result(prompt_id, seed, f"{metric}.failure_rate", float(rate)))
        answered = [
            {"question": o.question_id, "kind": o.kind, "expected": o.expected, "given": o.given, "failure": o.failure,
             "negates": o.negates}
            for o in outcomes
        ]  # fmt: skip
        ctx.evidence.append((prompt_id, seed, "attr_vqa", {"questions": answered}))
    ctx.notes["attr_vqa"] = run.summary(ctx.data.build_info.get("questions_version"))
    return results


def _vqa_owner(name: str) -> str:
    """The metric a judged result belongs to: itself, the metric of a ``<metric>.failure_rate``, else the
    family of a diagnostic (``attr_vqa.position``, ``attr_vqa.failure_rate`` -> ``attr_vqa``)."""
    if name in VQA_METRICS:
        return name
    base = name.removesuffix(".failure_rate")
    return base if base in VQA_METRICS and base != name else name.split(".")[0]


def _encoders(ctx: Context, metrics: set[str]) -> list[Result]:
    prompts, results = ctx.data.prompt_rows, []
    generations = ctx.generation_keys()
    gen_loaders = ctx.generation_loaders()

    if metrics & {"clip_t", "aesthetic"}:
        gen_clip = ctx.image_features("clip", gen_loaders)
        pairs = list(generations)
        embeddings = np.stack([gen_clip[generations[pair]]["embedding"] for pair in pairs])
        if "clip_t" in metrics:
            texts = [p["prompt"] for p in prompts.values()]
            text = ctx.text_features("clip", texts)
            values = F.clip_t(embeddings, np.stack([text[prompts[prompt_id]["prompt"]] for prompt_id, _ in pairs]))
            results.extend(Result(p, s, "clip_t", float(v)) for (p, s), v in zip(pairs, values))
            ctx.notes["clip_t_prompts_truncated"] = ctx.models["clip"].count_truncated(texts)
        if "aesthetic" in metrics:
            values = F.aesthetic_score(ctx.models["aesthetic"].weights, embeddings)
            results.extend(Result(p, s, "aesthetic", float(v)) for (p, s), v in zip(pairs, values))

    if "id_sim" in metrics:
        results.extend(_id_sim(ctx, generations, gen_loaders))

    if metrics & {"dino_sim", "bg_sim", "count_accuracy"}:
        names = _item_names(ctx)
        queries = {key: _queries(prompts[p], names) for (p, _), key in generations.items()}
        detections = ctx.detections(gen_loaders, queries)
        if "count_accuracy" in metrics:
            for (prompt_id, seed), key in generations.items():
                persons = count_persons(detections[key])
                expected = prompts[prompt_id]["n_persons"]
                results.append(Result(prompt_id, seed, "persons_detected", float(persons)))
                results.append(Result(prompt_id, seed, "count_accuracy", float(persons == expected)))
        if "dino_sim" in metrics:
            results.extend(_item_dino_sim(ctx, generations, gen_loaders, detections))
        if "bg_sim" in metrics:
            results.extend(_bg_sim(ctx, generations, gen_loaders, detections))
    return results


def person_boxes(found: dict[str, np.ndarray], iou: float = PERSON_NMS_IOU) -> np.ndarray:
    """Person boxes (label 0) left after non-maximum suppression, (k, 4).

    Grounding DINO's post-processing keeps overlapping boxes of one person; without NMS they would
    count twice.
    """
    import torch
    from torchvision.ops import nms

    persons = np.flatnonzero(found["labels"] == 0)
    if persons.size == 0:
        return np.zeros((0, 4), dtype=np.float32)
    kept = nms(torch.from_numpy(found["boxes"][persons]), torch.from_numpy(found["scores"][persons]), iou)
    return found["boxes"][persons[kept.numpy()]]


def count_persons(found: dict[str, np.ndarray]) -> int:
    return len(person_boxes(found))


def best_item_boxes(found: dict[str, np.ndarray], n_items: int) -> dict[int, np.ndarray]:
    """Item index (1-based, as its query label) -> its most confident box, for the items found."""
    best = {}
    for label in range(1, n_items + 1):
        hits = np.flatnonzero(found["labels"] == label)
        if hits.size:
            best[label] = found["boxes"][hits[np.argmax(found["scores"][hits])]]
    return best


def subject_boxes(found: dict[str, np.ndarray], n_items: int) -> np.ndarray:
    """The foreground of a generation: every person (after NMS) and the best box of each bound item."""
    items = list(best_item_boxes(found, n_items).values())
    return np.concatenate([person_boxes(found), np.array(items, dtype=np.float32).reshape(-1, 4)])


def _queries(prompt: dict, names: dict[str, str]) -> list[str]:
    """What the detector looks for in a generation: persons first (label 0), then each item by name.

    Item k of the prompt's persons list is label k + 1.
    """
    return [PERSON_QUERY, *(names[p["item_entity_id"]] for p in prompt["persons"])]


def _item_names(ctx: Context) -> dict[str, str]:
    """entity id -> the name the prompt uses ("the red espresso cup"), which is what a detector is asked."""
    return {r["entity_id"]: r["name"] for r in ctx.data.references.values()}


def _id_sim(ctx: Context, generations, gen_loaders) -> list[Result]:
    """Faces of the prompt's person references vs all faces found in the generation, Hungarian-matched."""
    prompts = ctx.data.prompt_rows
    person_refs = sorted({p["ref_id"] for prompt in prompts.values() for p in prompt["persons"]})
    ref_faces = ctx.image_features("face", ctx.reference_loaders(person_refs))
    gen_faces = ctx.image_features("face", gen_loaders)
    missing_reference_faces = set()
    results = []
    for (prompt_id, seed), key in generations.items():
        persons = prompts[prompt_id]["persons"]
        embeddings = []
        for p in persons:
            faces = ref_faces[ctx.reference_key(p["ref_id"])]
            if len(faces["embeddings"]) == 0:
                missing_reference_faces.add(p["ref_id"])
                embeddings.append(None)
            else:  # a reference portrait shows one person: its most confident face
                embeddings.append(faces["embeddings"][int(np.argmax(faces["scores"]))])
        usable = [i for i, e in enumerate(embeddings) if e is not None]
        generated = gen_faces[key]["embeddings"]
        results.append(Result(prompt_id, seed, "faces_detected", float(len(generated))))
        results.append(Result(prompt_id, seed, "faces_expected", float(len(persons))))
        if not usable:
            results.append(Result(prompt_id, seed, "id_sim", float("nan")))
            continue
        sim = F.id_sim(np.stack([embeddings[i] for i in usable]), generated)
        results.append(Result(prompt_id, seed, "id_sim", sim.mean))
        for i, value in zip(usable, sim.per_reference):
            results.append(Result(prompt_id, seed, "id_sim", float(value), persons[i]["slot"]))
    ctx.notes["reference_faces_not_found"] = sorted(missing_reference_faces)
    return results


def _item_dino_sim(ctx: Context, generations, gen_loaders, detections) -> list[Result]:
    """DINOv2 CLS of the best box for each named item vs the item's reference; not found scores 0."""
    prompts = ctx.data.prompt_rows
    item_refs = sorted({p["item_ref_id"] for prompt in prompts.values() for p in prompt["persons"]})
    refs = ctx.image_features("dinov2", ctx.reference_loaders(item_refs))
    crop_of: dict[tuple[str, int, str], str] = {}
    crop_loaders = {}
    for (prompt_id, seed), key in generations.items():
        persons, data = prompts[prompt_id]["persons"], None
        for label, box in best_item_boxes(detections[key], len(persons)).items():
            person = persons[label - 1]
            data = data if data is not None else gen_loaders[key]()
            blob = crop_bytes(data, box)
            crop_key = content_hash(blob)
            crop_loaders[crop_key] = lambda blob=blob: blob
            crop_of[(prompt_id, seed, person["slot"])] = crop_key
    crops = ctx.image_features("dinov2", crop_loaders) if crop_loaders else {}
    results = []
    for (prompt_id, seed), key in generations.items():
        values = []
        for person in prompts[prompt_id]["persons"]:
            crop_key = crop_of.get((prompt_id, seed, person["slot"]))
            reference = refs[ctx.reference_key(person["item_ref_id"])]["cls"]
            value = 0.0 if crop_key is None else float(F.cosine(crops[crop_key]["cls"], reference))
            values.append(value)
            results.append(Result(prompt_id, seed, "dino_sim", value, f"{person['slot']}.item"))
        results.append(Result(prompt_id, seed, "dino_sim", float(np.mean(values))))
    return results


def _bg_sim(ctx: Context, generations, gen_loaders, detections) -> list[Result]:
    """DINOv3 patch tokens pooled over the non-foreground region vs the reference background."""
    prompts = ctx.data.prompt_rows
    encoder = ctx.models["dinov3"].with_patches(True)
    n_items = {key: len(prompts[p]["persons"]) for (p, _), key in generations.items()}
    masks = ctx.foreground_masks(gen_loaders, {key: subject_boxes(detections[key], n_items[key]) for key in gen_loaders})
    gens = ctx.image_features("dinov3", gen_loaders, encoder=encoder)
    backgrounds = sorted({p["background_ref_id"] for p in prompts.values()})
    refs = ctx.image_features("dinov3", ctx.reference_loaders(backgrounds), encoder=encoder)
    results = []
    for (prompt_id, seed), key in generations.items():
        reference = refs[ctx.reference_key(prompts[prompt_id]["background_ref_id"])]["patches"]
        value = F.bg_sim(gens[key]["patches"], masks[key], reference, None)
        results.append(Result(prompt_id, seed, "bg_sim", value))
    return results


# --- baselines -----------------------------------------------------------------------------------


def _slots(data: BenchmarkData, prompt: dict) -> list[Slot]:
    """Each person in the prompt's layout order, with its bound item."""
    by_slot = {p["slot"]: p for p in prompt["persons"]}
    try:
        persons = [by_slot[slot] for slot in prompt["layout"]]
    except KeyError as err:
        where = f"prompt {prompt['prompt_id']}"
        raise BenchmarkDataError(f"{where}: layout names slot {err} that has no person") from None
    return [Slot(p["entity_id"], p["ref_id"], p["item_ref_id"] or None) for p in persons]


def _impostors(data: BenchmarkData, slots: list[Slot], rng: random.Random) -> list[Slot]:
    """Other person entities of the pool (each with one of its reference images); items stay."""
    refs: dict[str, list[str]] = {}
    for ref_id, row in data.references.items():
        if row["kind"] == "person":
            refs.setdefault(row["entity_id"], []).append(ref_id)
    chosen = pick_impostors([s.identity for s in slots], list(refs), rng)
    return [replace(s, identity=e, ref_id=rng.choice(sorted(refs[e]))) for s, e in zip(slots, chosen)]


BASELINES = Layout(slots=_slots, background_ref_id=lambda prompt: prompt.get("background_ref_id"), impostors=_impostors)

"""CogCanvas (paper 001): ID-Sim, DINO-Sim on item crops, CLIP-T, BG-Sim, aesthetics, person count,
and, with a VLM judge, Attr-VQA and interaction-graph consistency over the built yes/no questions.

A text-to-image submission (no references) is scored here with count accuracy and
``attr_vqa.binding``, the judge then asked the binding questions only. The retrieval task scores
rankings of references, not generations: ``benchmarks/cogcanvas/retrieval.py``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

import numpy as np

from idbench.benchmarks.cogcanvas.retrieval import DIAGNOSTICS as RETRIEVAL_DIAGNOSTICS
from idbench.benchmarks.cogcanvas.spec import QUESTION_KINDS
from idbench.evaluate_pkg import functional as F
from idbench.evaluate_pkg.baselines import Layout, Slot, pick_impostors
from idbench.evaluate_pkg.context import JUDGE_CHUNK, Context, Result, crop_bytes
from idbench.evaluate_pkg.data import BenchmarkData, BenchmarkDataError
from idbench.evaluate_pkg.images import content_hash, load_working_image
from idbench.evaluate_pkg.models.detection import SUBJECT_NMS_IOU, nms_per_label
from idbench.evaluate_pkg.suites.text_alignment import DIAGNOSTICS as TEXT_DIAGNOSTICS
from idbench.evaluate_pkg.suites.text_alignment import METRICS as TEXT_METRICS
from idbench.evaluate_pkg.suites.text_alignment import text_alignment

# Persons are detected by a query of their own: Grounding DINO gives each box to one phrase of its
# caption, so sharing the caption with the item queries lets a worn garment ("the denim jacket") take a
# person's box. The threshold: SUBJECT_NMS_IOU's docstring (from the collage baseline's geometry).
PERSON_QUERY = "a person"
PERSON_NMS_IOU = SUBJECT_NMS_IOU

# The judged metrics: one set of answers (one request per image) gives them all.
VQA_METRICS = frozenset(
    {
        "attr_vqa",
        "attr_vqa_itt",
        "igc",
        "igc_itt",
        "attr_vqa_paired",
        "igc_paired",
        "attr_vqa.binding",
        "attr_vqa.binding_itt",
    }
)
# The T2I task's: the binding questions only.
BINDING_VQA_METRICS = frozenset({"attr_vqa.binding", "attr_vqa.binding_itt"})
# The metrics grounded on the located identities (``functional/identity.py``, ``functional/binding.py``):
# not the paper's, named apart. All read one face assignment per image ("who became whom").
IDENTITY_METRICS = frozenset({"id_sim", "id_sim_strict", "id_arranged", "layout_grounded", "binding_grounded"})
GROUNDED_VQA_METRICS = frozenset({"binding_grounded_vqa", "binding_grounded_vqa_paired", "id_arranged_vqa"})
# The default ranking (suite 0.5): identity credited only to a person found where the position graph
# puts it (``functional.id_arranged``); its judged twin also needs the judge to confirm the person's own
# item (``binding_grounded_vqa_paired`` per person).
ARRANGED, ARRANGED_VQA = "id_arranged", "id_arranged_vqa"
# A person's item boxes compared with the prompt's items: the most confident few per person of the
# prompt (a detector's long tail of weak boxes would only add DINOv2 crops to encode).
ITEM_BOXES_PER_PERSON = 3
WHO = "who_became_whom"  # the evidence record of the face assignment (judge_evidence.parquet)
# Every metric of the spec is computed for the tasks it declares (the runner reports the others).
NOT_RUN: dict[str, str] = {}
# The per-image count of ID-Sim's missing evidence (references without a face), a diagnostic below.
REFERENCE_WITHOUT_FACE = "id_sim.reference_without_face"
FACE_SEARCH_SKIPPED = "faces.slow_search_skipped"
# Per-image counts stored next to the metrics (not metrics of the suite: never ranked).
DIAGNOSTICS: dict[str, str] = {
    "faces_detected": "faces found in the generation (ID-Sim)",
    "faces_expected": "persons the prompt asks for (ID-Sim)",
    # The face search's own decision, kept so that a 0 faces found can be read: searched or not.
    FACE_SEARCH_SKIPPED: "1 where the face model's slow search (dlib's CNN) did not run: its fast detector found no "
    "face and its candidate check no face-like window (only for face models with that search)",
    # Missing evidence, not a generator's miss: those references' ID-Sim is NaN and outside the mean.
    REFERENCE_WITHOUT_FACE: "person references of the prompt whose own image shows no detectable face",
    "persons_detected": "persons counted after NMS (count accuracy)",
    # ID-Sim = face_share x matched_mean, exactly: how many persons got a face, and how alike those are.
    "id_sim.face_share": "share of the persons (with a reference face) that ID-Sim's matching gave a generated face",
    "id_sim.matched_mean": "mean matched cosine of those persons (NaN when none got a face)",
    # Who became whom (counts per image; the face model's same-identity threshold decides "found").
    "who.found": "persons recognised as themselves: matched face at or above the same-identity cosine, closer to "
    "them than to any other person of the prompt",
    "who.missing": "persons with a reference face that were not found",
    "who.swapped": "found persons standing at another person's place (left-to-right rank among the found ones)",
    "who.cloned": "generated faces repeating a person another generated face already shows",
    "who.extra": "faces beyond the persons the prompt asks for",
    "layout_grounded.not_located": "position edges left out: a person of the edge has no reference face",
    "id_arranged.not_located": "persons left out of id_arranged (and id_arranged_vqa): no reference face",
    "id_arranged.misplaced": "persons found but not where the position graph puts them among the found persons "
    "(id_arranged counts them 0)",
    "id_arranged_vqa.unbound": "persons found in their place that the judge did not confirm with their own item "
    "(yes to it and no to another person's); counted 0",
    "id_arranged_vqa.judge_failed": "persons found in their place whose binding answer failed: counted 0 (intent "
    "to treat), never left out",
    "binding_grounded.not_located": "persons left out of the grounded binding: no reference face",
    "binding_grounded_vqa.not_located": "persons left out of the judged grounded binding: no reference face",
    "binding_grounded_vqa.failure_rate": "share of the located persons' binding questions the judge gave no usable answer to",
    "dino_sim.items_detected": "bound items the detector found (DINO-Sim; an item not found scores 0)",
    "dino_sim.items_expected": "bound items the prompt names",
    "bg_sim.no_foreground": "1 when no subject was found in a generation whose prompt has subjects: its BG-Sim "
    "is computed over the whole image, subjects included (flagged, not dropped)",
    "bg_sim.all_foreground": "1 when the generation's subject masks leave no background patch: BG-Sim is NaN",
    # Attr-VQA's accuracy per question kind, next to the overall one (attr_vqa.binding is a metric of
    # the suite: the T2I task's Attr-VQA).
    **{f"attr_vqa.{kind}": f"Attr-VQA accuracy on the {kind} facts" for kind in QUESTION_KINDS if kind != "binding"},
    "attr_vqa.negative_yes_rate": "share of the negative questions the judge answered yes (its yes-bias)",
    **TEXT_DIAGNOSTICS,
    # The retrieval task's per-prompt slot counts and random-ranker expectations (benchmarks/cogcanvas/retrieval.py).
    **RETRIEVAL_DIAGNOSTICS,
}


def score(ctx: Context, metrics: set[str]) -> list[Result]:
    results = _vqa(ctx, metrics) if metrics & VQA_METRICS else []
    return results + _encoders(ctx, metrics)


class _Lazy:
    """What several metric groups share, computed on first use: person detections, item detections and
    the face assignment of every generation."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.gen_loaders = ctx.generation_loaders()
        self._persons = self._items = self._located = None

    @property
    def persons(self) -> dict:
        if self._persons is None:
            self._persons = _person_detections(self.ctx, self.gen_loaders)
        return self._persons

    @property
    def items(self) -> dict:
        if self._items is None:
            prompts, names = self.ctx.data.prompt_rows, _item_names(self.ctx)
            queries = {key: _queries(prompts[p], names) for (p, _), key in self.ctx.generation_keys().items()}
            self._items = self.ctx.detections(self.gen_loaders, queries)
        return self._items

    @property
    def located(self) -> dict:
        if self._located is None:
            self._located = _locate(self.ctx, self.gen_loaders)
        return self._located


def _vqa(ctx: Context, metrics: set[str]) -> list[Result]:
    """Attr-VQA and IGC (and their paired variants) per image (one judge request per image), failure
    rates, the yes-rate on the negatives, evidence, run notes.

    The judge answers all of an image's questions at once, so every metric comes from the same answers;
    an unrequested one is dropped from the results.
    """
    from idbench.benchmarks.cogcanvas.vqa import ITT_METRIC_KINDS, METRIC_KINDS, fact_tally, score_images, vqa_items

    prompts = ctx.data.prompt_rows
    if not metrics & (VQA_METRICS - BINDING_VQA_METRICS):  # the T2I task: ask the binding questions only
        prompts = {
            p: {**row, "questions": [q for q in row["questions"] if q["kind"] == "binding"]}
            for p, row in prompts.items()
        }
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
        for metric in (
            "igc",
            "igc_itt",
            "attr_vqa.binding",
            "attr_vqa.binding_itt",
            "attr_vqa_itt",
        ):  # the failure rate over the metric's own facts
            if metric in metrics:
                rate = fact_tally(outcomes, {**METRIC_KINDS, **ITT_METRIC_KINDS}[metric]).failure_rate
                results.append(Result(prompt_id, seed, f"{metric}.failure_rate", float(rate)))
        answered = [
            {
                "question": o.question_id,
                "kind": o.kind,
                "expected": o.expected,
                "given": o.given,
                "failure": o.failure,
                "negates": o.negates,
            }
            for o in outcomes
        ]
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
    shared = _Lazy(ctx)
    gen_loaders = shared.gen_loaders

    if metrics & (TEXT_METRICS | {"aesthetic"}):
        gen_clip = ctx.image_features("clip", gen_loaders)
        pairs = list(generations)
        embeddings = np.stack([gen_clip[generations[pair]]["embedding"] for pair in pairs])
        results.extend(text_alignment(ctx, metrics, dict(zip(pairs, embeddings))))
        if "aesthetic" in metrics:
            values = F.aesthetic_score(ctx.models["aesthetic"].weights, embeddings)
            results.extend(Result(p, s, "aesthetic", float(v)) for (p, s), v in zip(pairs, values))

    if metrics & (IDENTITY_METRICS | GROUNDED_VQA_METRICS):
        results.extend(_identities(ctx, metrics, shared))

    if "count_accuracy" in metrics:
        for (prompt_id, seed), key in generations.items():
            found = len(person_boxes(shared.persons[key]))
            expected = prompts[prompt_id]["n_persons"]
            results.append(Result(prompt_id, seed, "persons_detected", float(found)))
            results.append(Result(prompt_id, seed, "count_accuracy", float(found == expected)))
    if "dino_sim" in metrics:
        results.extend(_item_dino_sim(ctx, generations, gen_loaders, shared.items))
    if "bg_sim" in metrics:
        results.extend(_bg_sim(ctx, generations, gen_loaders, shared.items, shared.persons))
    return results


def _person_detections(ctx: Context, loaders) -> dict:
    """Detections of the person query alone (label 0) for each image of ``loaders``."""
    return ctx.detections(loaders, {key: [PERSON_QUERY] for key in loaders})


def person_boxes(found: dict[str, np.ndarray], iou: float = PERSON_NMS_IOU) -> np.ndarray:
    """Person boxes (label 0) left after non-maximum suppression at ``iou``, (k, 4), best first.

    Grounding DINO's post-processing keeps overlapping boxes of one person; without NMS they would
    count twice. Neighbours who touch keep their own boxes (``SUBJECT_NMS_IOU`` says up to which overlap).
    """
    persons = np.flatnonzero(found["labels"] == 0)
    kept = nms_per_label(found["boxes"][persons], found["scores"][persons], found["labels"][persons], iou)
    return found["boxes"][persons[kept]].reshape(-1, 4)


def best_item_boxes(found: dict[str, np.ndarray], n_items: int) -> dict[int, np.ndarray]:
    """Item index (1-based, as its query label) -> its most confident box, for the items found."""
    best = {}
    for label in range(1, n_items + 1):
        hits = np.flatnonzero(found["labels"] == label)
        if hits.size:
            best[label] = found["boxes"][hits[np.argmax(found["scores"][hits])]]
    return best


def subject_boxes(persons: dict[str, np.ndarray], items: dict[str, np.ndarray], n_items: int) -> np.ndarray:
    """The foreground of a generation: every person of the person query (after NMS) and the best box of
    each bound item from the item query."""
    found = list(best_item_boxes(items, n_items).values())
    return np.concatenate([person_boxes(persons), np.array(found, dtype=np.float32).reshape(-1, 4)])


def _queries(prompt: dict, names: dict[str, str]) -> list[str]:
    """What the detector looks for in a generation's items: persons first (label 0), then each item by name.

    Item k of the prompt's persons list is label k + 1. The person phrase stays in this caption as a
    decoy that takes the person boxes, so they do not go to an item's phrase; persons themselves are
    counted from their own query (``_person_detections``).
    """
    return [PERSON_QUERY, *(names[p["item_entity_id"]] for p in prompt["persons"])]


def _item_names(ctx: Context) -> dict[str, str]:
    """entity id -> the name the prompt uses ("the red espresso cup"), which is what a detector is asked."""
    return {r["entity_id"]: r["name"] for r in ctx.data.references.values()}


@dataclass(frozen=True)
class _Located:
    """One generation's faces read against its prompt's persons."""

    persons: list[dict]  # the prompt's persons, left to right (its layout)
    boxes: np.ndarray  # (k, 4) every generated face
    assignment: F.WhoBecameWhom  # indexed like ``persons``
    paper: F.IdSim  # the paper's ID-Sim, indexed like the prompt's ``persons`` list
    slow_search_skipped: bool | None  # the face model's record (None: a model without a slow search)


def _layout_persons(prompt: dict) -> list[dict]:
    by_slot = {p["slot"]: p for p in prompt["persons"]}
    return [by_slot[slot] for slot in prompt["layout"]]


def _locate(ctx: Context, gen_loaders) -> dict[tuple[str, int], _Located]:
    """Every generation's faces against its prompt's reference faces: the paper's ID-Sim matching and
    the assignment that says who became whom (``functional/identity.py``), from one set of features.

    A reference portrait shows one person: its most confident face is the person's. A reference with
    no detectable face is missing evidence (NaN in ID-Sim, "not located" in the grounded metrics).
    """
    prompts = ctx.data.prompt_rows
    person_refs = sorted({p["ref_id"] for prompt in prompts.values() for p in prompt["persons"]})
    ref_faces = ctx.image_features("face", ctx.reference_loaders(person_refs))
    gen_faces = ctx.image_features("face", gen_loaders)

    def best_face(ref_id: str):
        faces = ref_faces[ctx.reference_key(ref_id)]
        return faces["embeddings"][int(np.argmax(faces["scores"]))] if len(faces["embeddings"]) else None

    reference_face = {ref_id: best_face(ref_id) for ref_id in person_refs}
    threshold = float(ctx.models["face"].same_identity_cosine)
    out = {}
    for (prompt_id, seed), key in ctx.generation_keys().items():
        prompt, faces = prompts[prompt_id], gen_faces[key]
        ordered = _layout_persons(prompt)
        assignment = F.who_became_whom(
            [reference_face[p["ref_id"]] for p in ordered], faces["embeddings"], faces["boxes"], threshold
        )
        paper = F.id_sim_with_faceless([reference_face[p["ref_id"]] for p in prompt["persons"]], faces["embeddings"])
        skipped = bool(np.asarray(faces["cnn_skipped"])) if "cnn_skipped" in faces else None
        out[(prompt_id, seed)] = _Located(
            ordered, np.asarray(faces["boxes"]).reshape(-1, 4), assignment, paper, skipped
        )
    ctx.notes["reference_faces_not_found"] = sorted(r for r, e in reference_face.items() if e is None)
    ctx.notes[WHO] = {
        "same_identity_cosine": threshold,
        "rule": "found: matched face cosine >= same_identity_cosine and closer to the person than to any other "
        "person of the prompt; swapped: found, at another rank from the left among the found persons; "
        "cloned: faces alike at that cosine whose references are not; extra: faces beyond N",
    }
    return out


def _identities(ctx: Context, metrics: set[str], shared: _Lazy) -> list[Result]:
    """ID-Sim (the paper's), its strict variant, the counts of who became whom, and the metrics grounded
    on the located persons: layout, binding (detector + DINOv2) and the judged binding.

    ID-Sim (paper): faces of the prompt's person references vs all faces found in the generation,
    Hungarian-matched; a reference image without a detectable face is NaN and counted
    (``id_sim.reference_without_face``); a person whose reference has a face and who got no face scores
    0. It is ``id_sim.face_share`` x ``id_sim.matched_mean`` exactly, so "faces found" and "faces alike"
    can be read apart. ``id_sim_strict`` (not in the paper) divides by ``max(N, faces found)``, so a
    crowd of faces cannot raise it. ``id_arranged`` (not in the paper, the default ranking) credits a
    person's cosine only when it is found where the position graph puts it (``functional.placed``);
    ``id_arranged_vqa`` also needs the judge's paired confirmation of its own item.
    """
    results: list[Result] = []
    where: dict[tuple[str, int], np.ndarray] = {}  # pair -> placed, per person of the layout
    for (prompt_id, seed), loc in shared.located.items():
        sim, who = loc.paper, loc.assignment
        if "id_sim" in metrics:
            matched = sim.gen_index >= 0
            usable = ~np.isnan(sim.per_reference)
            results.append(Result(prompt_id, seed, "faces_detected", float(sim.detected)))
            results.append(Result(prompt_id, seed, "faces_expected", float(sim.expected)))
            if loc.slow_search_skipped is not None:
                results.append(Result(prompt_id, seed, FACE_SEARCH_SKIPPED, float(loc.slow_search_skipped)))
            results.append(Result(prompt_id, seed, REFERENCE_WITHOUT_FACE, float(sim.without_face)))
            results.append(Result(prompt_id, seed, "id_sim", sim.mean))
            share = matched.sum() / usable.sum() if usable.any() else float("nan")
            results.append(Result(prompt_id, seed, "id_sim.face_share", float(share)))
            mean = float(sim.per_reference[matched].mean()) if matched.any() else float("nan")
            results.append(Result(prompt_id, seed, "id_sim.matched_mean", mean))
            for person, value in zip(ctx.data.prompt_rows[prompt_id]["persons"], sim.per_reference):
                results.append(Result(prompt_id, seed, "id_sim", float(value), person["slot"]))
        counts = {
            "found": who.n_found,
            "missing": who.n_missing,
            "swapped": who.n_swapped,
            "cloned": who.n_cloned,
            "extra": who.n_extra,
        }
        results.extend(Result(prompt_id, seed, f"who.{name}", float(value)) for name, value in counts.items())
        if "id_sim_strict" in metrics:
            results.append(Result(prompt_id, seed, "id_sim_strict", F.id_sim_strict(who, sim.without_face)))
        if "layout_grounded" in metrics:
            prompt = ctx.data.prompt_rows[prompt_id]
            value, skipped = F.layout_score([p["slot"] for p in loc.persons], prompt["position_graph"], who, loc.boxes)
            results.append(Result(prompt_id, seed, "layout_grounded", value))
            results.append(Result(prompt_id, seed, "layout_grounded.not_located", float(skipped)))
        if metrics & {ARRANGED, ARRANGED_VQA}:
            slots = [p["slot"] for p in loc.persons]
            at = where[(prompt_id, seed)] = F.placed(
                slots, ctx.data.prompt_rows[prompt_id]["position_graph"], who, loc.boxes
            )
            results.append(Result(prompt_id, seed, "id_arranged.not_located", float((~who.has_reference).sum())))
            results.append(Result(prompt_id, seed, "id_arranged.misplaced", float((who.found & ~at).sum())))
        if ARRANGED in metrics:
            value, per = F.id_arranged(who, at, sim.without_face)
            results.append(Result(prompt_id, seed, ARRANGED, value))
            results.extend(Result(prompt_id, seed, ARRANGED, float(v), slot) for slot, v in zip(slots, per))
    evidence = {
        pair: loc.assignment.as_evidence([p["slot"] for p in loc.persons], loc.boxes)
        for pair, loc in shared.located.items()
    }
    for pair, at in where.items():
        evidence[pair]["placed"] = {p["slot"]: bool(v) for p, v in zip(shared.located[pair].persons, at)}
    if metrics & ({"binding_grounded"} | GROUNDED_VQA_METRICS):
        bodies = _bodies(ctx, shared)
        for pair, boxes in bodies.items():
            evidence[pair]["bodies"] = {slot: [round(float(v), 1) for v in box] for slot, box in boxes.items()}
        if "binding_grounded" in metrics:
            results.extend(_binding_grounded(ctx, shared, bodies, evidence))
        if metrics & GROUNDED_VQA_METRICS and ctx.judge is not None:
            judged, failed = _binding_grounded_vqa(ctx, shared, bodies, evidence)
            if ARRANGED_VQA in metrics:
                results.extend(_id_arranged_vqa(shared, where, judged, failed))
            results.extend(r for r in judged if r.metric.split(".")[0] in metrics or "." in r.metric)
    ctx.evidence.extend((p, s, WHO, record) for (p, s), record in evidence.items())
    return results


def _bodies(ctx: Context, shared: _Lazy) -> dict[tuple[str, int], dict[str, np.ndarray]]:
    """(prompt, seed) -> slot -> the box of each *found* person: the detected person box holding its
    face (``functional.person_for_face``), else a body box grown from the face."""
    from idbench.evaluate_pkg.context import image_size

    out = {}
    keys = ctx.generation_keys()
    for pair, loc in shared.located.items():
        who, persons = loc.assignment, person_boxes(shared.persons[keys[pair]])
        found = np.flatnonzero(who.found)
        size = None
        boxes = {}
        for i in found:
            face = loc.boxes[who.face[i]]
            others = [loc.boxes[who.face[j]] for j in found if j != i]
            index = F.person_for_face(face, persons, others)
            if index >= 0:
                boxes[loc.persons[i]["slot"]] = persons[index].astype(np.float64)
            else:
                size = size or image_size(shared.gen_loaders[keys[pair]]())
                boxes[loc.persons[i]["slot"]] = F.body_from_face(face, size)
        out[pair] = boxes
    return out


def _item_boxes(found: dict[str, np.ndarray], n_persons: int) -> np.ndarray:
    """Every item box of the item query (any item's phrase: the detector may give a box the wrong
    phrase, which is why crops are compared with every item of the prompt), NMS'd across phrases, the
    ``ITEM_BOXES_PER_PERSON * N`` most confident."""
    items = np.flatnonzero(found["labels"] >= 1)
    boxes, scores = found["boxes"][items], found["scores"][items]
    kept = nms_per_label(boxes, scores, np.ones(len(items), dtype=np.int64), PERSON_NMS_IOU)
    return boxes[kept][: ITEM_BOXES_PER_PERSON * n_persons].reshape(-1, 4)


def _binding_grounded(ctx: Context, shared: _Lazy, bodies, evidence) -> list[Result]:
    """Per person: is its own item the one with it? Item boxes go to the found persons' boxes
    (``functional.assign_items``); each person's crops are compared (DINOv2 CLS, crops padded to a
    square as for DINO-Sim) with the prompt's item references; bound when the most alike is its own
    (``functional.bound_right``). A person not found is not bound (0); one without a reference face
    cannot be located (NaN, counted in ``binding_grounded.not_located``)."""
    prompts, keys = ctx.data.prompt_rows, ctx.generation_keys()
    item_refs = sorted({p["item_ref_id"] for prompt in prompts.values() for p in prompt["persons"]})
    refs = ctx.image_features("dinov2", ctx.reference_loaders(item_refs))
    keep = ctx.models["dinov2"].square_keep()
    crops: dict[tuple[str, int], list[tuple[str, str]]] = {}  # pair -> [(slot, crop key)]
    loaders = {}
    for pair, loc in shared.located.items():
        slots = [s for s in (p["slot"] for p in loc.persons) if s in bodies[pair]]
        boxes = _item_boxes(shared.items[keys[pair]], len(loc.persons))
        owner = F.assign_items(np.array([bodies[pair][s] for s in slots]).reshape(-1, 4), boxes)
        # decoded once for all its crops, and only when a crop is cut
        image = load_working_image(shared.gen_loaders[keys[pair]], keys[pair]) if (owner >= 0).any() else None
        crops[pair] = []
        for box, person in zip(boxes, owner):
            if person < 0:
                continue
            blob = crop_bytes(image, box, keep)
            crop_key = content_hash(blob)
            loaders[crop_key] = lambda blob=blob: blob
            crops[pair].append((slots[person], crop_key))
    feats = ctx.image_features("dinov2", loaders) if loaders else {}
    results = []
    for pair, loc in shared.located.items():
        prompt_id, seed = pair
        items = [refs[ctx.reference_key(p["item_ref_id"])]["cls"] for p in loc.persons]
        values, verdicts = [], {}
        for i, person in enumerate(loc.persons):
            slot = person["slot"]
            if not loc.assignment.has_reference[i]:
                value = float("nan")
            else:
                mine = np.array(
                    [[F.cosine(feats[c]["cls"], item) for item in items] for s, c in crops[pair] if s == slot]
                ).reshape(-1, len(items))
                value = float(F.bound_right(mine, i))
                verdicts[slot] = {
                    "crops": int(len(mine)),
                    "most_alike_item": loc.persons[int(np.argmax(mine.max(axis=0)))]["slot"] if len(mine) else None,
                }
            values.append(value)
            results.append(Result(prompt_id, seed, "binding_grounded", value, slot))
        known = [v for v in values if not np.isnan(v)]
        results.append(Result(prompt_id, seed, "binding_grounded", float(np.mean(known)) if known else float("nan")))
        results.append(Result(prompt_id, seed, "binding_grounded.not_located", float(len(values) - len(known))))
        evidence[pair]["binding"] = verdicts
    return results


def _binding_grounded_vqa(
    ctx: Context, shared: _Lazy, bodies, evidence
) -> tuple[list[Result], set[tuple[str, int, str]]]:
    """The binding questions asked about the located person: each found person is marked with a red box
    on the generation and the judge asks whether *that* person does the prompt's thing with its own
    item (yes) and with another person's item (no); ``judge/grounded.py``. One request per found
    person. A person not found is not confirmed (0); no reference face: NaN, counted; a failed answer:
    not confirmed (0, intent to treat since suite 0.6: a judge failing on the hard images cannot lift
    it), counted in ``binding_grounded_vqa.failure_rate``. Returns the results of both metrics (per
    person and per image) and their diagnostics, which the caller keeps as asked, and the (prompt,
    seed, slot) of every failed answer."""
    from idbench.benchmarks.cogcanvas import grounded
    from idbench.benchmarks.cogcanvas.graphs import binding_phrases

    prompts, keys = ctx.data.prompt_rows, ctx.generation_keys()
    names = _item_names(ctx)
    planned = []  # (pair, slot, request)
    for pair in shared.located:
        prompt = prompts[pair[0]]
        phrases = binding_phrases(prompt["interaction_graph"], prompt["position_graph"], names)
        data = shared.gen_loaders[keys[pair]]() if bodies[pair] else None
        for slot, box in bodies[pair].items():
            own, other = phrases[slot]
            planned.append((pair, slot, grounded.binding_request(grounded.mark_person(data, box), own, other)))
    answers = list(ctx.judge.ask([r for _, _, r in planned])) if planned else []
    read = {(pair, slot): grounded.read_binding(answer) for (pair, slot, _), answer in zip(planned, answers)}
    results, failed, asked, failed_slots = [], 0, 0, set()
    for pair, loc in shared.located.items():
        prompt_id, seed = pair
        confirmed, paired, answered = [], [], {}
        image_failed = image_asked = 0
        for i, person in enumerate(loc.persons):
            slot = person["slot"]
            if not loc.assignment.has_reference[i]:
                one = two = float("nan")
            elif (pair, slot) not in read:  # not found: nothing to ask about, not confirmed
                one = two = 0.0
            else:
                verdict = read[(pair, slot)]
                image_asked += 1
                answered[slot] = verdict.as_dict()
                if verdict.failure:  # not confirmed, and counted
                    image_failed += 1
                    failed_slots.add((prompt_id, seed, slot))
                    one = two = 0.0
                else:
                    one, two = float(verdict.own == "yes"), float(verdict.own == "yes" and verdict.other == "no")
            confirmed.append(one)
            paired.append(two)
            results.append(Result(prompt_id, seed, "binding_grounded_vqa", one, slot))
            results.append(Result(prompt_id, seed, "binding_grounded_vqa_paired", two, slot))
        for name, values in (("binding_grounded_vqa", confirmed), ("binding_grounded_vqa_paired", paired)):
            known = [v for v in values if not np.isnan(v)]
            results.append(Result(prompt_id, seed, name, float(np.mean(known)) if known else float("nan")))
        not_located = int((~loc.assignment.has_reference).sum())
        results.append(Result(prompt_id, seed, "binding_grounded_vqa.not_located", float(not_located)))
        rate = image_failed / image_asked if image_asked else float("nan")
        results.append(Result(prompt_id, seed, "binding_grounded_vqa.failure_rate", float(rate)))
        failed, asked = failed + image_failed, asked + image_asked
        evidence[pair]["judge"] = answered
    ctx.notes["binding_grounded_vqa"] = {
        "judge_model": ctx.judge.model,
        "requests": len(planned),
        "cached": sum(a.cached for a in answers),
        "failed": failed,
        "failure_rate": failed / asked if asked else None,
    }
    return results, failed_slots


def _id_arranged_vqa(
    shared: _Lazy, where: dict, judged: list[Result], failed: set[tuple[str, int, str]]
) -> list[Result]:
    """``id_arranged`` with the judge's binding as a third factor: a person counts when found, placed
    and confirmed with its own item while denied another person's (``binding_grounded_vqa_paired`` of
    that person is 1). A placed person whose answer failed is counted 0 and in
    ``id_arranged_vqa.judge_failed`` (intent to treat: a judge failure never lifts a score, and is
    never left out); placed but not confirmed: ``id_arranged_vqa.unbound``. ``failed``: the (prompt,
    seed, slot) whose binding answer failed."""
    paired = {
        (r.prompt_id, r.seed, r.subject): r.value
        for r in judged
        if r.metric == "binding_grounded_vqa_paired" and r.subject
    }
    results = []
    for (prompt_id, seed), loc in shared.located.items():
        who, at = loc.assignment, where[(prompt_id, seed)]
        slots = [p["slot"] for p in loc.persons]
        answer = np.array([paired.get((prompt_id, seed, slot), np.nan) for slot in slots], dtype=np.float64)
        bound = answer == 1.0  # a failed answer (0), no reference face (NaN) and 0 are not bound
        judge_failed = np.array([(prompt_id, seed, slot) in failed for slot in slots], dtype=bool)
        placed = who.found & at
        value, per = F.id_arranged(who, at, int(loc.paper.without_face), bound=bound)
        results.append(Result(prompt_id, seed, ARRANGED_VQA, value))
        results.extend(Result(prompt_id, seed, ARRANGED_VQA, float(v), slot) for slot, v in zip(slots, per))
        results.append(
            Result(prompt_id, seed, "id_arranged_vqa.unbound", float((placed & (answer == 0.0) & ~judge_failed).sum()))
        )
        results.append(Result(prompt_id, seed, "id_arranged_vqa.judge_failed", float((placed & judge_failed).sum())))
    return results


def _item_dino_sim(ctx: Context, generations, gen_loaders, detections) -> list[Result]:
    """DINOv2 CLS of the best box for each named item vs the item's reference; not found scores 0.

    Each crop is padded to a square (``crop_bytes``) before DINOv2's resize-256 / centre-crop-224.
    """
    prompts = ctx.data.prompt_rows
    item_refs = sorted({p["item_ref_id"] for prompt in prompts.values() for p in prompt["persons"]})
    refs = ctx.image_features("dinov2", ctx.reference_loaders(item_refs))
    crop_of: dict[tuple[str, int, str], str] = {}
    crop_loaders = {}
    keep = ctx.models["dinov2"].square_keep()
    for (prompt_id, seed), key in generations.items():
        persons, image = prompts[prompt_id]["persons"], None
        for label, box in best_item_boxes(detections[key], len(persons)).items():
            person = persons[label - 1]
            image = image if image is not None else load_working_image(gen_loaders[key], key)  # once per generation
            blob = crop_bytes(image, box, keep)  # padded to a square: the centre crop keeps the item
            crop_key = content_hash(blob)
            crop_loaders[crop_key] = lambda blob=blob: blob
            crop_of[(prompt_id, seed, person["slot"])] = crop_key
    crops = ctx.image_features("dinov2", crop_loaders) if crop_loaders else {}
    results = []
    for prompt_id, seed in generations:
        values = []
        for person in prompts[prompt_id]["persons"]:
            crop_key = crop_of.get((prompt_id, seed, person["slot"]))
            reference = refs[ctx.reference_key(person["item_ref_id"])]["cls"]
            value = 0.0 if crop_key is None else float(F.cosine(crops[crop_key]["cls"], reference))
            values.append(value)
            results.append(Result(prompt_id, seed, "dino_sim", value, f"{person['slot']}.item"))
        results.append(Result(prompt_id, seed, "dino_sim", float(np.mean(values))))
        found = sum((prompt_id, seed, p["slot"]) in crop_of for p in prompts[prompt_id]["persons"])
        results.append(Result(prompt_id, seed, "dino_sim.items_detected", float(found)))
        results.append(Result(prompt_id, seed, "dino_sim.items_expected", float(len(prompts[prompt_id]["persons"]))))
    return results


def _bg_sim(ctx: Context, generations, gen_loaders, detections, persons) -> list[Result]:
    """DINOv3 patch tokens pooled over the background of the generation and of the reference background.

    Both images are masked (as the paper does): the generation's foreground is every person of the
    person query and every bound item found (detector boxes -> SAM 2 masks); the reference background's
    foreground is the persons found in it (a scene photo may hold people). Pooling
    (``functional.background``): the pixel mask is area-averaged onto DINOv3's patch grid (its
    processor resizes the whole image, so the grid covers it all); a patch is background when more than
    ``PATCH_THRESHOLD`` (half) of its area is; the mean of those patch tokens is the image's background
    feature; BG-Sim is the cosine of the two means.

    Counted, never dropped: a generation where nothing was found although its prompt has subjects
    (``bg_sim.no_foreground``: scored over the whole image, flagged), one whose masks leave no
    background patch (``bg_sim.all_foreground``: NaN), and references whose persons cover everything.
    """
    prompts = ctx.data.prompt_rows
    encoder = ctx.models["dinov3"].with_patches(True)
    n_items = {key: len(prompts[p]["persons"]) for (p, _), key in generations.items()}
    boxes = {key: subject_boxes(persons[key], detections[key], n_items[key]) for key in gen_loaders}
    masks = ctx.foreground_masks(gen_loaders, boxes)
    gens = ctx.image_features("dinov3", gen_loaders, encoder=encoder)
    backgrounds = sorted({p["background_ref_id"] for p in prompts.values()})
    ref_loaders = ctx.reference_loaders(backgrounds)
    ref_persons = _person_detections(ctx, ref_loaders)
    ref_masks = ctx.foreground_masks(ref_loaders, {key: person_boxes(ref_persons[key]) for key in ref_loaders})
    refs = ctx.image_features("dinov3", ref_loaders, encoder=encoder)
    results, flagged = [], {"no_foreground": 0, "all_foreground": 0}
    for (prompt_id, seed), key in generations.items():
        prompt = prompts[prompt_id]
        ref_key = ctx.reference_key(prompt["background_ref_id"])
        gen_patches, ref_patches = gens[key]["patches"], refs[ref_key]["patches"]
        no_foreground = prompt["n_persons"] > 0 and not masks[key].any()
        all_foreground = F.background_patches(masks[key], gen_patches.shape[:2]) == 0
        value = F.bg_sim(gen_patches, masks[key], ref_patches, ref_masks[ref_key])
        results.append(Result(prompt_id, seed, "bg_sim", value))
        results.append(Result(prompt_id, seed, "bg_sim.no_foreground", float(no_foreground)))
        results.append(Result(prompt_id, seed, "bg_sim.all_foreground", float(all_foreground)))
        flagged["no_foreground"] += int(no_foreground)
        flagged["all_foreground"] += int(all_foreground)
    ref_keys = {r: ctx.reference_key(r) for r in backgrounds}
    full = [r for r, k in ref_keys.items() if F.background_patches(ref_masks[k], refs[k]["patches"].shape[:2]) == 0]
    ctx.notes["bg_sim"] = {
        "images": len(generations),
        **flagged,
        "references_with_persons": sum(bool(ref_masks[k].any()) for k in ref_loaders),
        "references_all_foreground": full,
    }
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


def _pool(data: BenchmarkData) -> list[Slot]:
    """Every person entity of the references, with its first image (by ref id), no item."""
    first: dict[str, str] = {}
    for ref_id, row in sorted(data.references.items()):
        if row["kind"] == "person":
            first.setdefault(row["entity_id"], ref_id)
    return [Slot(entity, ref_id) for entity, ref_id in sorted(first.items())]


BASELINES = Layout(
    slots=_slots, background_ref_id=lambda prompt: prompt.get("background_ref_id"), impostors=_impostors, pool=_pool
)

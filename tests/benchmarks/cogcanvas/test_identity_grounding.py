r"""Who became whom, and the scores grounded on it (issue 16): pictures built here, scored for real.

The pictures are the CogCanvas sample build's references pasted by the baselines' geometry (``compose``),
at 1024 px so that dlib's HOG finds the pasted faces of up to five persons. Faces go through the real dlib
model. Everything else that must "answer truthfully" knows the picture because this module drew it:

- ``SceneDetector`` returns each drawn person's and item's box (by pixel content and query);
- ``ThumbnailEncoder`` stands in for DINOv2 on item crops: a colour histogram, which tells the pasted
  item images apart (the tiny random DINOv2 confuses 4 of 40; its loading path is tested in
  test_models.py);
- ``SceneJudge`` answers every yes/no question from the drawn scene: the built Attr-VQA questions by the
  column a "where" phrase names and the item each column holds, the grounded binding questions by
  finding the red mark (the pixels that differ from the drawn picture) and the person under it. No
  picture shows two persons interacting, so it denies every interaction.

Expected orderings come from how each picture was drawn, never from the scorer's own output.

The arrangement table of docs/identity-grounding.md is this module's ``test_the_table`` on every sample
prompt (28 minutes on one CPU core; the default, 8 prompts and every picture, is what the other tests
assert on)::

    IDBENCH_GROUNDING_PROMPTS=82 \
    IDBENCH_GROUNDING_PICTURES="collage,one pair swapped,crossed,shifted row,items crossed" \
    pytest -n 0 -s -k the_table tests/benchmarks/cogcanvas/test_identity_grounding.py
"""

from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from idbench.benchmarks.cogcanvas.spec import ITEM_INTERACTIONS
from idbench.builders.build import build
from idbench.evaluate_pkg import baselines as B
from idbench.evaluate_pkg import functional as F
from idbench.evaluate_pkg.context import Models, ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.images import content_hash
from idbench.evaluate_pkg.judge.types import JudgeAnswer
from idbench.evaluate_pkg.models.detection import Detection
from idbench.evaluate_pkg.runner import score_submission

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

SIZE = 1024
PERSON = "a person"
PROMPTS = int(os.environ.get("IDBENCH_GROUNDING_PROMPTS", "8"))
PICTURES = ("collage", "shifted row", "crossed", "items crossed", "one pair swapped", "clone", "one missing", "crowd")
CHOSEN = (
    tuple(p.strip() for p in os.environ["IDBENCH_GROUNDING_PICTURES"].split(","))
    if os.environ.get("IDBENCH_GROUNDING_PICTURES")
    else PICTURES
)


# --- the pure functions, on hand-made embeddings ------------------------------------------------------


def unit(*v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v)


E = np.eye(4)  # four people, orthogonal faces
BOX = [[0, 0, 10, 10], [100, 0, 110, 10], [200, 0, 210, 10], [300, 0, 310, 10]]  # left to right


def test_found_needs_the_threshold_and_a_positive_margin():
    lookalike = unit(0.9, 0.1, 0, 0)  # A's face, a little like B
    stranger = unit(0, 0, 0, 1)
    r = F.who_became_whom([E[0], E[1]], [lookalike, stranger], BOX[:2], threshold=0.5)
    assert r.found.tolist() == [True, False]  # the stranger is matched to B (Hungarian) but is nobody
    assert r.face.tolist() == [0, 1] and np.isclose(r.cosine[1], 0.0)
    assert r.n_missing == 1 and r.n_extra == 0
    # A face closer to another person of the prompt than to its own match is not found.
    both = unit(1, 0.9, 0, 0)
    r = F.who_became_whom([E[0], E[1]], [E[0], both], BOX[:2], threshold=0.5)
    assert r.found.tolist() == [True, False]
    assert r.margin[1] < 0


def test_swaps_clones_and_extras_counted_by_hand():
    # Layout A B C; the picture shows B A C: two swapped, one in place.
    r = F.who_became_whom([E[0], E[1], E[2]], [E[1], E[0], E[2]], BOX[:3], threshold=0.5)
    assert r.n_found == 3 and r.n_swapped == 2 and r.in_place.tolist() == [False, False, True]
    # A row rotated by one (B C A): every person out of place.
    r = F.who_became_whom([E[0], E[1], E[2]], [E[1], E[2], E[0]], BOX[:3], threshold=0.5)
    assert r.n_swapped == 3
    # A cloned three times: one found, two missing, two clones (three faces of one person).
    r = F.who_became_whom([E[0], E[1], E[2]], [E[0], E[0], E[0]], BOX[:3], threshold=0.5)
    assert (r.n_found, r.n_missing, r.n_cloned, r.n_extra) == (1, 2, 2, 0)
    # Two persons and four faces (the two, plus two strangers): two extra faces, no clone.
    r = F.who_became_whom([E[0], E[1]], [E[0], E[1], E[2], E[3]], BOX, threshold=0.5)
    assert (r.n_found, r.n_cloned, r.n_extra) == (2, 0, 2)
    # Missing person: its swap status is not judged, the others' ranks are taken among the found ones.
    r = F.who_became_whom([E[0], E[1], E[2]], [E[0], E[2]], [BOX[0], BOX[2]], threshold=0.5)
    assert r.found.tolist() == [True, False, True] and r.n_swapped == 0


def test_references_alike_are_not_clones():
    twin = unit(1, 0.05, 0, 0)  # two references of one look: their faces may be alike
    r = F.who_became_whom([E[0], twin], [E[0], twin], BOX[:2], threshold=0.5)
    assert r.n_cloned == 0


def test_layout_score_by_hand():
    graph = [
        {"source": "A", "relation": "left_of", "target": "B"},
        {"source": "B", "relation": "left_of", "target": "C"},
    ]
    ordered = F.who_became_whom([E[0], E[1], E[2]], [E[0], E[1], E[2]], BOX[:3], threshold=0.5)
    assert F.layout_score("ABC", graph, ordered, BOX[:3]) == (1.0, 0)
    rotated = F.who_became_whom([E[0], E[1], E[2]], [E[1], E[2], E[0]], BOX[:3], threshold=0.5)
    assert F.layout_score("ABC", graph, rotated, BOX[:3]) == (0.5, 0)  # B left of C still holds
    missing = F.who_became_whom([E[0], E[1], E[2]], [E[0], E[2]], [BOX[0], BOX[2]], threshold=0.5)
    assert F.layout_score("ABC", graph, missing, [BOX[0], BOX[2]]) == (0.0, 0)  # B not found fails both
    faceless = F.who_became_whom([E[0], None, E[2]], [E[0], E[2]], [BOX[0], BOX[2]], threshold=0.5)
    value, skipped = F.layout_score("ABC", graph, faceless, [BOX[0], BOX[2]])
    assert np.isnan(value) and skipped == 2  # both edges touch B, whose reference shows no face


def test_id_sim_strict_cannot_be_padded():
    pair = F.who_became_whom([E[0], E[1]], [E[0], E[1]], BOX[:2], threshold=0.5)
    crowd = F.who_became_whom([E[0], E[1]], [E[0], E[1], E[2], E[3]], BOX, threshold=0.5)
    assert F.id_sim_strict(pair) == pytest.approx(1.0)
    assert F.id_sim_strict(crowd) == pytest.approx(0.5)  # 2 of max(2, 4)
    assert F.id_sim(np.stack([E[0], E[1]]), np.stack([E[0], E[1], E[2], E[3]])).mean == pytest.approx(
        1.0
    )  # the paper's
    stranger = F.who_became_whom([E[0]], [unit(-1, 0.1, 0, 0)], BOX[:1], threshold=0.5)
    assert F.id_sim_strict(stranger) == 0.0  # a negative cosine counts as no match, never below it


CHAIN = [{"source": "A", "relation": "left_of", "target": "B"}, {"source": "B", "relation": "left_of", "target": "C"}]


def test_placed_holds_each_person_to_the_whole_row():
    three = [E[0], E[1], E[2]]
    ordered = F.who_became_whom(three, three, BOX[:3], threshold=0.5)
    assert F.placed("ABC", CHAIN, ordered, BOX[:3]).tolist() == [True, True, True]
    # C B A: B stands in the middle as asked, but its neighbours are the wrong way round (the closed
    # graph says A left of B left of C), so nobody is placed; a rank-only reading would keep B.
    mirrored = F.who_became_whom(three, [E[2], E[1], E[0]], BOX[:3], threshold=0.5)
    assert mirrored.in_place.tolist() == [False, True, False]
    assert F.placed("ABC", CHAIN, mirrored, BOX[:3]).tolist() == [False, False, False]
    # B C A (a row shifted by one): B left of C still holds, but each is out of place against A.
    rotated = F.who_became_whom(three, [E[1], E[2], E[0]], BOX[:3], threshold=0.5)
    assert F.placed("ABC", CHAIN, rotated, BOX[:3]).tolist() == [False, False, False]
    # B A C (one pair swapped): C keeps its place.
    pair = F.who_became_whom(three, [E[1], E[0], E[2]], BOX[:3], threshold=0.5)
    assert F.placed("ABC", CHAIN, pair, BOX[:3]).tolist() == [False, False, True]
    # B missing: A and C are judged against each other only (A left of C, through B), both placed; B is not.
    missing = F.who_became_whom(three, [E[0], E[2]], [BOX[0], BOX[2]], threshold=0.5)
    assert F.placed("ABC", CHAIN, missing, [BOX[0], BOX[2]]).tolist() == [True, False, True]
    with pytest.raises(ValueError, match="behind"):
        F.placed("AB", [{"source": "A", "relation": "behind", "target": "B"}], ordered, BOX[:3])


def test_id_arranged_by_hand():
    three = [E[0], E[1], E[2]]
    near = [unit(1, 0.2, 0, 0), unit(0.1, 1, 0, 0), unit(0, 0.1, 1, 0)]  # A, B, C a little off (cosines < 1)
    cos = [float(near[i] @ E[i]) for i in range(3)]
    ordered = F.who_became_whom(three, near, BOX[:3], threshold=0.5)
    value, per = F.id_arranged(ordered, F.placed("ABC", CHAIN, ordered, BOX[:3]))
    assert (
        value == pytest.approx(sum(cos) / 3) == pytest.approx(F.id_sim_strict(ordered))
    )  # all in place: id_sim_strict
    assert per == pytest.approx(cos)
    # One pair swapped: the same faces, the same id_sim_strict, only C's share is left.
    swapped = F.who_became_whom(three, [near[1], near[0], near[2]], BOX[:3], threshold=0.5)
    value, per = F.id_arranged(swapped, F.placed("ABC", CHAIN, swapped, BOX[:3]))
    assert F.id_sim_strict(swapped) == pytest.approx(sum(cos) / 3)
    assert value == pytest.approx(cos[2] / 3) and per.tolist()[:2] == [0.0, 0.0]
    # A binding factor takes the share of a person placed with the wrong item.
    value, _ = F.id_arranged(ordered, [True, True, True], bound=[True, False, True])
    assert value == pytest.approx((cos[0] + cos[2]) / 3)
    # Missing persons score 0 over N; a crowd pays max(N, faces found) as in id_sim_strict.
    missing = F.who_became_whom(three, [near[0], near[2]], [BOX[0], BOX[2]], threshold=0.5)
    value, per = F.id_arranged(missing, F.placed("ABC", CHAIN, missing, [BOX[0], BOX[2]]))
    assert value == pytest.approx((cos[0] + cos[2]) / 3) and per[1] == 0.0
    crowd = F.who_became_whom([E[0], E[1]], [E[0], E[1], E[2], E[3]], BOX, threshold=0.5)
    assert F.id_arranged(crowd, F.placed("AB", CHAIN[:1], crowd, BOX))[0] == pytest.approx(0.5)
    # A reference without a face: NaN per person, out of N and of the faces (as id_sim_strict).
    faceless = F.who_became_whom([E[0], None, E[2]], [E[0], E[1], E[2]], BOX[:3], threshold=0.5)
    value, per = F.id_arranged(faceless, F.placed("ABC", CHAIN, faceless, BOX[:3]), without_face=1)
    assert np.isnan(per[1]) and value == pytest.approx(1.0)
    # A stranger matched to a person is not found: 0, whatever its place.
    stranger = F.who_became_whom([E[0]], [unit(0.3, 1, 0, 0)], BOX[:1], threshold=0.5)
    assert F.id_arranged(stranger, [True])[0] == 0.0 < F.id_sim_strict(stranger)
    assert np.isnan(F.id_arranged(F.who_became_whom([None], [E[0]], BOX[:1], threshold=0.5), [False])[0])


def test_binding_pieces_by_hand():
    persons = [[0, 0, 50, 200], [100, 0, 150, 200]]
    assert F.person_for_face([20, 10, 30, 20], persons) == 0
    assert F.person_for_face([400, 10, 410, 20], persons) == -1
    assert F.body_from_face([100, 100, 120, 120], (1000, 1000)).tolist() == [70, 90, 150, 260]
    assert F.assign_items(persons, [[40, 150, 60, 170], [120, 150, 130, 160]]).tolist() == [0, 1]
    assert not F.bound_right([[0.5, 0.5]], 0)  # a tie is no binding: every item beside every person


# --- pictures with known content ----------------------------------------------------------------------


@dataclass
class Column:
    person: str | None  # reference id of the person drawn in the column, None for an empty place
    item: str | None  # reference id of the item drawn at its lower right, None for none


@dataclass
class Scene:
    image: Image.Image
    columns: list[Column]
    persons: list[tuple[float, ...]] = field(default_factory=list)  # drawn person box per column (None-less)
    items: dict[str, tuple[float, ...]] = field(default_factory=dict)  # item ref id -> drawn box


def draw(data, prompt, columns: list[Column]) -> Scene:
    n = len(columns)
    background = B.background_image(data, prompt)
    blank = Image.new("RGB", (60, 120), B.NEUTRAL_GREY)  # an empty place: grey, no face
    subjects = [data.references[c.person]["image"] if c.person else blank for c in columns]
    items = [data.references[c.item]["image"] if c.item else None for c in columns]
    image = B.compose(background, subjects, SIZE, items=items if any(items) else None)
    scene = Scene(image, columns)
    for k, (column, subject) in enumerate(zip(columns, subjects)):
        scene.persons.append(B.subject_box(subject.size, k, n, SIZE) if column.person else None)
        if column.item:
            scene.items[column.item] = B.item_box(data.references[column.item]["image"].size, k, n, SIZE)
    return scene


def pictures(data, prompt) -> dict[str, Scene]:
    """The issue's pictures for one prompt, as columns left to right."""
    slots = B.prompt_slots(data, prompt)
    people, items = [s.ref_id for s in slots], [s.item_ref_id for s in slots]
    n = len(slots)
    rot = lambda xs: xs[1:] + xs[:1]  # noqa: E731
    pool = sorted(r for r, row in data.references.items() if row["kind"] == "person" and r not in people)
    cols = {
        "collage": [Column(p, i) for p, i in zip(people, items)],
        "shifted row": [Column(p, i) for p, i in zip(rot(people), rot(items))],  # items travel
        "crossed": [Column(p, i) for p, i in zip(rot(people), items)],  # items stay
        "items crossed": [
            Column(p, i) for p, i in zip(people, rot(items))
        ],  # persons in place, each with the next one's item
        "one pair swapped": [Column(people[1], items[1]), Column(people[0], items[0])]
        + [Column(p, i) for p, i in zip(people[2:], items[2:])],
        "clone": [Column(people[0], i) for i in items],
        "one missing": [Column(None, items[0])] + [Column(p, i) for p, i in zip(people[1:], items[1:])],
        "crowd": [Column(p, i) for p, i in zip(people, items)] + [Column(p, None) for p in pool],
    }
    assert n >= 2 and set(cols) == set(PICTURES)
    return {name: draw(data, prompt, cols[name]) for name in CHOSEN}


def pixels_key(image: Image.Image) -> str:
    return content_hash(np.asarray(image.convert("RGB")).tobytes())


class SceneDetector:
    """Grounding DINO stand-in: the drawn boxes of the persons and of the items a query names."""

    key, feature_version = "scene-detector", 1

    def __init__(self, scenes: list[Scene], names: dict[str, str]):
        self.boxes = {}
        for s in scenes:
            found = {PERSON: [b for b in s.persons if b is not None]}
            for item, box in s.items.items():
                found.setdefault(names[item], []).append(box)
            self.boxes[pixels_key(s.image)] = found

    def detect(self, images, queries):
        out = []
        for image, query in zip(images, queries):
            known = self.boxes.get(pixels_key(image), {})
            out.append([Detection(q, tuple(map(float, box)), 0.9) for q in query for box in known.get(q, [])])
        return out


class ThumbnailEncoder:
    """DINOv2 stand-in for crops: the square root of a 4x4x4 RGB colour histogram as the CLS vector
    (Hellinger affinity: the pasted items' colours tell them apart whatever the crop's margins)."""

    key, feature_version = "colour-histogram", 1

    def square_keep(self) -> float:
        return 1.0

    def preprocess(self, image):
        rgb = np.asarray(image.convert("RGB").resize((64, 64), Image.Resampling.BOX)) // 64
        codes = (rgb[..., 0] * 16 + rgb[..., 1] * 4 + rgb[..., 2]).ravel()
        return np.sqrt(np.bincount(codes, minlength=64) / codes.size).astype(np.float32)

    def collate(self, items):
        return list(items)

    def encode_batch(self, batch):
        return [{"cls": v} for v in batch]


WHERE = {
    "the person on the far left": 0,
    "the person on the far right": -1,
    **{f"the {w} person from the left": i for i, w in enumerate(("second", "third", "fourth"), start=1)},
}


class SceneJudge:
    """Answers from the drawn scene (see the module doc); ``model`` and ``ask`` are the Judge protocol."""

    model = "scripted-scene"

    def __init__(self, scenes: list[Scene], names: dict[str, str]):
        self.scenes, self.names = scenes, names
        self.asked = 0
        self.by_top: dict[bytes, list[tuple[Scene, np.ndarray]]] = {}  # each scene's pixels decoded once
        for s in scenes:
            pixels = np.asarray(s.image.convert("RGB"))
            self.by_top.setdefault(pixels[: SIZE // 4].tobytes(), []).append((s, pixels))
        self.every = [pair for pairs in self.by_top.values() for pair in pairs]

    def _holding(self, scene: Scene, column: int, phrase: str) -> bool:
        item = scene.columns[column].item
        return item is not None and phrase.endswith(self.names[item])

    def _column_of(self, scene: Scene, phrase: str) -> int | None:
        return next((k for k, c in enumerate(scene.columns) if c.item and phrase.endswith(self.names[c.item])), None)

    def _scene_and_mark(self, data: bytes):
        image = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        # The top quarter is never marked (persons stand in the lower two thirds): it narrows the search
        # to the pictures of one prompt's background. Of those, the one nearest on every 8th pixel is the
        # drawing (the others differ by whole persons, the mark by a thin outline); only it is compared
        # whole, for the mark's box (comparing every candidate whole took 43 s of the fixture's 185 s).
        top, sparse = image[: SIZE // 4].tobytes(), image[::8, ::8]
        candidates = [(s, d) for s, d in self.by_top.get(top, self.every) if d.shape == image.shape]
        if not candidates:  # not one of the drawn scenes: a judge-control image built from the references
            return None, None
        scene, drawn = min(candidates, key=lambda c: np.count_nonzero((c[1][::8, ::8] != sparse).any(axis=2)))
        diff = (drawn != image).any(axis=2)
        if not diff.any():
            return scene, None
        ys, xs = np.nonzero(diff)
        return scene, (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)

    def answer(self, request) -> dict:
        scene, mark = self._scene_and_mark(request.images[0])
        lines = re.findall(r"^- (\S+): (.*)$", request.prompt, flags=re.M)
        answers = []
        for qid, text in lines:
            yes = False
            if scene is None:  # a control image: this judge knows only its scenes and confirms nothing else
                pass
            elif mark is not None:  # a grounded question: the person under the red mark
                iou = [(_iou(mark, b) if b is not None else 0.0) for b in scene.persons]
                column = int(np.argmax(iou))
                yes = self._holding(scene, column, text.rstrip("?"))
            elif m := re.match(r"Is the person (.*) to the (left|right) of the person (.*)\?$", text):
                a, b = self._column_of(scene, m.group(1)), self._column_of(scene, m.group(3))
                yes = a is not None and b is not None and (a < b if m.group(2) == "left" else a > b)
            elif m := re.match(r"Is (the .*? (?:left|right)) (\w+ .*)\?$", text):
                column = WHERE[m.group(1)] % len(scene.columns)
                yes = scene.columns[column].person is not None and self._holding(scene, column, m.group(2))
            answers.append({"question_id": qid, "answer": "yes" if yes else "no"})  # interactions: never shown
        return {"answers": answers}

    def ask(self, requests):
        self.asked += len(requests)
        return [JudgeAnswer(value=self.answer(r), raw="{}") for r in requests]


def _iou(a, b) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union else 0.0


def write_submission(folder, name, scenes: dict[str, Scene]):
    (folder / "images").mkdir(parents=True)
    rows = []
    for prompt_id, scene in scenes.items():
        file = f"images/{prompt_id}_s0.png"
        scene.image.save(folder / file, compress_level=1)  # lossless and quick: 64 pictures of 1024 px
        rows.append({"prompt_id": prompt_id, "seed": 0, "file": file})
    pd.DataFrame(rows).to_csv(folder / "manifest.csv", index=False)
    (folder / "submission.json").write_text(json.dumps({"model": name, "benchmark": "cogcanvas"}))
    return folder


METRICS = (
    "id_arranged",
    "id_arranged_vqa",
    "id_sim",
    "id_sim_strict",
    "layout_grounded",
    "binding_grounded",
    "binding_grounded_vqa",
    "binding_grounded_vqa_paired",
    "dino_sim",
    "count_accuracy",
    "attr_vqa",
    "attr_vqa.binding",
    "attr_vqa_paired",
    "igc",
)
SHOWN = (
    *METRICS,
    "who.found",
    "who.missing",
    "who.swapped",
    "who.cloned",
    "who.extra",
    "id_arranged.misplaced",
    "id_arranged_vqa.unbound",
    "id_arranged_vqa.judge_failed",
)


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """picture -> overall means of every metric, and the per-image results, on 8 sample prompts."""
    root = tmp_path_factory.mktemp("grounding")
    build("cogcanvas", out=root / "data", n_prompts=PROMPTS)
    data = load_benchmark_data(root / "data", cache_dir=str(root / "hf"))
    names = {r: row["name"] for r, row in data.references.items()}
    by_picture: dict[str, dict[str, Scene]] = {}
    for prompt_id, prompt in data.prompt_rows.items():
        for name, scene in pictures(data, prompt).items():
            by_picture.setdefault(name, {})[prompt_id] = scene
    scenes = [s for per in by_picture.values() for s in per.values()]
    models = Models(ScoreOptions(profile="tiny"))
    models._loaded.update(detector=SceneDetector(scenes, names), dinov2=ThumbnailEncoder())
    judge = SceneJudge(scenes, names)
    out = {}
    for name, per_prompt in by_picture.items():
        folder = write_submission(root / "subs" / name.replace(" ", "-"), name, per_prompt)
        summary = score_submission(
            folder,
            data,
            root / "scores" / name.replace(" ", "-"),
            ScoreOptions(profile="tiny", metrics=METRICS, judge=judge),
            cache_dir=root / "cache",
            progress=False,
            models=models,
        )
        rows = pd.read_parquet(root / "scores" / name.replace(" ", "-") / "results.parquet")
        out[name] = SimpleNamespace(
            mean={m: s["mean"] for m, s in summary["aggregates"]["overall"].items()}, rows=rows, notes=summary["notes"]
        )
    return SimpleNamespace(runs=out, data=data, judge=judge, root=root, models=models)


def mean(scored, picture, metric):
    return scored.runs[picture].mean[metric]


@pytest.mark.slow
def test_the_table(scored, capsys):
    """Every metric for every picture (the closing note's table), printed with -s."""
    table = pd.DataFrame({p: {m: r.mean.get(m) for m in SHOWN} for p, r in scored.runs.items()})
    with capsys.disabled():
        print("\n" + table.round(3).to_string())
    assert list(table.columns) == list(CHOSEN)


@pytest.mark.slow
def test_faces_are_found_in_the_collage(scored):
    # dlib at 1024 px: the pasted faces of the 8 prompts (2-5 persons) are recognised, else nothing below means much.
    assert mean(scored, "collage", "who.missing") <= 0.25
    assert mean(scored, "collage", "who.swapped") == 0 and mean(scored, "collage", "who.cloned") == 0


@pytest.mark.slow
def test_crossed_binding_is_caught_and_the_paper_misses_it(scored):
    # Every identity holds another person's item: the grounded binding falls, the position-named one does not.
    for metric in ("binding_grounded", "binding_grounded_vqa", "binding_grounded_vqa_paired"):
        assert mean(scored, "crossed", metric) <= 0.1 < 0.7 <= mean(scored, "collage", metric), metric
    assert mean(scored, "crossed", "attr_vqa.binding") == pytest.approx(mean(scored, "collage", "attr_vqa.binding"))
    assert mean(scored, "crossed", "who.swapped") >= 1  # the persons moved, their items did not


@pytest.mark.slow
def test_shifted_row_keeps_binding_and_loses_layout(scored):
    # Each identity with its own item, the row shifted by one: binding as the collage's (less the faces
    # dlib's HOG misses where they land now: who.missing 0.25 against 0.125), layout low.
    for metric in ("binding_grounded", "binding_grounded_vqa"):
        assert mean(scored, "shifted row", metric) >= mean(scored, "collage", metric) - 0.12, metric
    assert mean(scored, "shifted row", "layout_grounded") < mean(scored, "collage", "layout_grounded") - 0.3
    assert mean(scored, "shifted row", "who.swapped") >= 2
    # The paper's position-named binding punishes the correct binding.
    assert mean(scored, "shifted row", "attr_vqa.binding") < 0.5 * mean(scored, "collage", "attr_vqa.binding")


@pytest.mark.slow
def test_per_image_full_binding_where_every_face_is_found(scored):
    rows = scored.runs["shifted row"].rows
    images = rows[rows["subject"] == ""].pivot_table(index="prompt_id", columns="metric", values="value")
    complete = images[images["who.missing"] == 0]
    assert len(complete) >= 4
    assert (complete["binding_grounded_vqa"] == 1.0).all() and (complete["binding_grounded"] == 1.0).all()


@pytest.mark.slow
def test_one_pair_swapped_clone_missing_and_crowd(scored):
    assert mean(scored, "one pair swapped", "who.swapped") == pytest.approx(2, abs=0.5)
    assert mean(scored, "one pair swapped", "layout_grounded") < mean(scored, "collage", "layout_grounded")
    assert (
        mean(scored, "one pair swapped", "binding_grounded_vqa")
        >= mean(scored, "collage", "binding_grounded_vqa") - 0.12
    )
    assert mean(scored, "clone", "who.cloned") >= 1 and mean(scored, "clone", "who.found") <= 1.25
    for metric in ("id_sim_strict", "layout_grounded", "binding_grounded_vqa"):
        assert mean(scored, "clone", metric) < mean(scored, "collage", metric)
        assert mean(scored, "one missing", metric) < mean(scored, "collage", metric)
    assert mean(scored, "one missing", "who.missing") >= 1
    # A crowd of every pool identity (six: at N = 5 one extra column): the strict score pays for every
    # extra face found, the paper's ignores them, and the crowd does not beat the collage on the default ranking.
    rows = scored.runs["crowd"].rows
    images = rows[rows["subject"] == ""].pivot_table(index="prompt_id", columns="metric", values="value")
    padded = images[images["who.extra"] > 0]
    assert len(padded) >= 2
    assert (padded["id_sim_strict"] < padded["id_sim"] - 0.1).all()
    assert mean(scored, "crowd", "id_sim_strict") < mean(scored, "collage", "id_sim_strict") - 0.1


def images_of(scored, picture) -> pd.DataFrame:
    rows = scored.runs[picture].rows
    return rows[rows["subject"] == ""].pivot_table(index="prompt_id", columns="metric", values="value")


@pytest.mark.slow
def test_arrangements_lose_to_the_collage_on_the_headline(scored):
    """The issue's arrangements (the right faces, in the wrong places or with the wrong items): the strict
    ID-Sim keeps them near the collage; the default ranking's id_arranged does not."""
    collage = mean(scored, "collage", "id_arranged")
    assert collage == pytest.approx(
        mean(scored, "collage", "id_sim_strict"), abs=0.05
    )  # a right picture keeps its identity score
    for picture in ("one pair swapped", "crossed", "shifted row"):
        assert mean(scored, picture, "id_sim_strict") > mean(scored, "collage", "id_sim_strict") - 0.15, (
            picture
        )  # the failure fixed
        assert mean(scored, picture, "id_arranged") < collage - 0.4, picture
        assert mean(scored, picture, "id_arranged") < 0.5 * collage, picture
        assert mean(scored, picture, "id_arranged.misplaced") >= 1, picture
    # The right faces in their places holding each other's items: invisible without a judge, caught with one.
    assert mean(scored, "items crossed", "id_arranged") == pytest.approx(collage, abs=0.05)
    assert mean(scored, "items crossed", "id_arranged_vqa") <= 0.1 < collage - 0.5
    assert mean(scored, "collage", "id_arranged_vqa") == pytest.approx(collage, abs=0.05)
    for picture in ("one pair swapped", "crossed", "shifted row", "items crossed", "clone", "one missing", "crowd"):
        assert mean(scored, picture, "id_arranged_vqa") < mean(scored, "collage", "id_arranged_vqa") - 0.3, picture
    for picture in ("clone", "one missing", "crowd"):
        assert mean(scored, picture, "id_arranged") < collage - 0.1, picture


@pytest.mark.slow
def test_id_arranged_never_exceeds_its_factors(scored):
    """Per image: id_arranged <= id_sim_strict (each person's share kept or dropped whole), the judged
    twin <= id_arranged; a shifted row's images where every face was found score exactly 0."""
    for picture in scored.runs:
        images = images_of(scored, picture)
        assert (images["id_arranged"] <= images["id_sim_strict"] + 1e-12).all(), picture
        assert (images["id_arranged_vqa"] <= images["id_arranged"] + 1e-12).all(), picture
        assert (images["id_arranged_vqa.judge_failed"] == 0).all()  # the scripted judge always answers
    shifted = images_of(scored, "shifted row")
    complete = shifted[shifted["who.missing"] == 0]
    assert len(complete) >= 4 and (complete["id_arranged"] == 0.0).all()


@pytest.mark.slow
def test_id_arranged_judge_failures_count_zero(scored):
    """A judge whose grounded answers all fail: id_arranged_vqa is 0 for every located person (intent to
    treat), each counted in id_arranged_vqa.judge_failed, never left out; id_arranged is untouched."""

    class Failing:
        model = "scripted-failing"

        def ask(self, requests):
            return [JudgeAnswer(error="down") for _ in requests]

    options = ScoreOptions(profile="tiny", metrics=("id_arranged", "id_arranged_vqa"), judge=Failing())
    summary = score_submission(
        scored.root / "subs" / "collage",
        scored.data,
        None,
        options,
        cache_dir=scored.root / "cache",
        progress=False,
        models=scored.models,
    )
    overall = summary["aggregates"]["overall"]
    assert overall["id_arranged_vqa"]["mean"] == 0.0 and overall["id_arranged_vqa"]["n_nan"] == 0
    collage = images_of(scored, "collage")
    placed = collage["who.found"] - collage["id_arranged.misplaced"]
    assert overall["id_arranged_vqa.judge_failed"]["mean"] == pytest.approx(placed.mean())
    assert overall["id_arranged"]["mean"] == pytest.approx(mean(scored, "collage", "id_arranged"))


@pytest.mark.slow
def test_who_became_whom_evidence_is_stored(scored):
    from idbench.evaluate_pkg.results import EVIDENCE_FILE

    evidence = pd.read_parquet(scored.root / "scores" / "crossed" / EVIDENCE_FILE)
    who = evidence[evidence["metric"] == "who_became_whom"]
    assert len(who) == len(scored.data.prompt_rows)
    record = json.loads(who.iloc[0]["evidence"])
    assert {"identities", "faces", "counts", "bodies", "binding", "judge", "placed"} <= set(record)
    assert all(
        i["found"] == (i["cosine"] is not None and i["cosine"] >= 0.95) or not i["found"] for i in record["identities"]
    )
    assert scored.runs["crossed"].notes["who_became_whom"]["same_identity_cosine"] == 0.95


@pytest.mark.slow
def test_judge_failures_are_counted_and_score_zero(scored):
    """A judge whose grounded answers all fail: a failure rate of 1, and every person asked about not
    confirmed (0, intent to treat since suite 0.6; left out, a judge failing on the hard images would
    lift the score), never a 1."""

    class Failing:
        model = "scripted-failing"

        def ask(self, requests):
            return [JudgeAnswer(error="down") for _ in requests]

    options = ScoreOptions(profile="tiny", metrics=("binding_grounded_vqa",), judge=Failing())
    summary = score_submission(
        scored.root / "subs" / "collage",
        scored.data,
        None,
        options,
        cache_dir=scored.root / "cache",
        progress=False,
        models=scored.models,
    )
    overall, notes = summary["aggregates"]["overall"], summary["notes"]["binding_grounded_vqa"]
    assert overall["binding_grounded_vqa.failure_rate"]["mean"] == pytest.approx(1.0)
    assert notes["failed"] == notes["requests"] > 0
    # Every person asked about scores 0 (not confirmed), as do the persons never found.
    collage = scored.runs["collage"].rows
    found = collage[collage["metric"] == "who.found"]["value"].sum()
    assert notes["requests"] == found
    assert overall["binding_grounded_vqa"]["mean"] == 0.0 and overall["binding_grounded_vqa"]["n_nan"] == 0
    assert summary["judge"]["incomplete"]["binding_grounded_vqa"] == pytest.approx(1.0)


@pytest.mark.parametrize("interaction", sorted(ITEM_INTERACTIONS))
def test_binding_phrases_use_the_prompt_words(interaction):
    from idbench.benchmarks.cogcanvas.graphs import binding_phrases

    graph = [
        {"source": "A", "relation": interaction, "target": "cup"},
        {"source": "B", "relation": "wear", "target": "hat"},
    ]
    position = [{"source": "A", "relation": "left_of", "target": "B"}]
    phrases = binding_phrases(graph, position, {"cup": "the red cup", "hat": "the blue hat"})
    assert phrases["A"] == (f"{ITEM_INTERACTIONS[interaction].progressive} the red cup", "wearing the blue hat")
    assert phrases["B"] == ("wearing the blue hat", f"{ITEM_INTERACTIONS[interaction].progressive} the red cup")

"""Region metrics (issue 11.4-6): crops keep their content, NMS, person count, BG-Sim masking.

The detector and segmenter here are deterministic stand-ins that return known boxes (the tiny
Grounding DINO / SAM 2 have random weights, so their boxes mean nothing; their loading path runs in
test_detection.py and in the suite contract). Expected values come from the geometry of hand-made
images, never from the code's own output.
"""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from idbench.benchmarks.cogcanvas import suite as cogcanvas
from idbench.benchmarks.identity_collapse import suite as collapse
from idbench.evaluate_pkg import baselines as B
from idbench.evaluate_pkg.context import Context, ScoreOptions, crop_bytes
from idbench.evaluate_pkg.features import FeatureStore
from idbench.evaluate_pkg.images import content_hash, normalize_image
from idbench.evaluate_pkg.models import registry
from idbench.evaluate_pkg.models.detection import CROP_FILL, SUBJECT_NMS_IOU, Detection, nms_per_label

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

RED, BLUE, GREY = (255, 0, 0), (0, 0, 255), (90, 160, 90)


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def pixels_key(image: Image.Image) -> str:
    return content_hash(np.asarray(image.convert("RGB")).tobytes())


def iou(a, b) -> float:
    """Brute force on a pixel grid (boxes are whole pixels here), independent of torchvision."""
    grid = np.zeros((2, 1200, 1200), bool)
    for layer, box in zip(grid, (a, b)):
        x0, y0, x1, y1 = (int(v) + 200 for v in box)  # boxes grown past the canvas stay on the grid
        layer[y0:y1, x0:x1] = True
    return (grid[0] & grid[1]).sum() / (grid[0] | grid[1]).sum()


@pytest.fixture(scope="module")
def dinov2(tmp_path_factory):
    return registry.load_model("dinov2-base-tiny", models_dir=tmp_path_factory.mktemp("models"))


class StubDetector:
    """Known boxes per image (by pixel content) and query; records every caption it is asked."""

    key, feature_version = "stub-detector", 1

    def __init__(self, boxes: dict[str, dict[str, list[tuple[tuple[float, ...], float]]]]):
        self.boxes = boxes  # pixels key -> query -> [(box, score)]
        self.asked: list[tuple[str, ...]] = []

    def detect(self, images, queries):
        out = []
        for image, query in zip(images, queries):
            self.asked.append(tuple(query))
            known = self.boxes.get(pixels_key(image), {})
            found = [Detection(q, tuple(map(float, box)), score) for q in query for box, score in known.get(q, [])]
            out.append(sorted(found, key=lambda d: -d.score))
        return out


class BoxSegmenter:
    """SAM 2 stand-in: the mask of a box is the box itself."""

    key, feature_version = "box-segmenter", 1

    def segment(self, images, boxes):
        out = []
        for image, image_boxes in zip(images, boxes):
            masks = np.zeros((len(image_boxes), image.height, image.width), bool)
            for mask, (x0, y0, x1, y1) in zip(masks, np.asarray(image_boxes).reshape(-1, 4)):
                mask[int(y0) : int(y1), int(x0) : int(x1)] = True
            out.append(masks)
        return out


def fake_context(tmp_path, prompts: dict, references: dict, generations: dict, models: dict) -> Context:
    """A scoring context over hand-made images: prompts, reference rows and bytes, (prompt, seed) -> image."""
    entries = [
        SimpleNamespace(prompt_id=p, seed=s, content_hash=content_hash(png(im)), data=(lambda im=im: png(im)))
        for (p, s), im in generations.items()
    ]
    data = SimpleNamespace(
        prompt_rows=prompts,
        references={r: row for r, (row, _) in references.items()},
        reference_bytes={r: png(im) for r, (_, im) in references.items()},
        build_info={},
    )
    return Context(data, SimpleNamespace(entries=entries), FeatureStore(tmp_path / "cache"), models, ScoreOptions())


# --- 5. crops keep their content ------------------------------------------------------------------------


def tall_subject() -> tuple[Image.Image, tuple[int, int, int, int]]:
    """A 100x250 standing subject whose top 20 % (the head) is red and the rest blue, on green-grey."""
    image = Image.new("RGB", (400, 400), GREY)
    box = (150, 80, 250, 330)
    image.paste(BLUE, box)
    image.paste(RED, (150, 80, 250, 130))
    return image, box


def colour_masks(pixel_values: torch.Tensor, processor) -> dict[str, np.ndarray]:
    """(H, W) masks of the processed (3, H, W) tensor's pixels by colour, after undoing the normalisation."""
    mean = torch.tensor(processor.image_mean)[:, None, None]
    std = torch.tensor(processor.image_std)[:, None, None]
    rgb = ((pixel_values * std + mean) * 255).permute(1, 2, 0).numpy()
    near = lambda colour: np.abs(rgb - np.array(colour)).max(axis=-1) < 40  # noqa: E731
    return {"red": near(RED), "blue": near(BLUE), "grey": near(GREY), "fill": near(CROP_FILL)}


@pytest.mark.slow
def test_a_tall_subject_keeps_its_head_through_dinov2s_centre_crop(dinov2):
    image, box = tall_subject()
    # the former path: the 5 %-padded box as it is; DINOv2 resizes its short side to 256, crops 224
    x0, y0, x1, y1 = box
    old = colour_masks(dinov2.preprocess(image.crop((x0 - 5, y0 - 12, x1 + 5, y1 + 13))), dinov2.image_processor)
    assert old["red"].sum() == 0 and old["blue"].sum() > 0  # the head is cut, the torso is kept

    square = normalize_image(crop_bytes(png(image), box, dinov2.square_keep()), where="crop")
    assert square.width == square.height
    tensor = dinov2.preprocess(square)
    assert tensor.shape == (3, 224, 224)
    new = colour_masks(tensor, dinov2.image_processor)
    # the whole subject is inside: head and body keep their 1 : 4 proportion of area
    assert new["red"].sum() / new["blue"].sum() == pytest.approx(50 / 200, rel=0.05)
    # with the context above the head (the crop's 5 % margin, grey) and padding at the sides
    head_top = np.flatnonzero(new["red"].any(axis=1))[0]
    assert head_top >= 5 and new["grey"][:head_top].any() and not new["red"][:head_top].any()
    assert new["fill"][:, :20].all() and new["fill"][:, -20:].all()


@pytest.mark.slow
def test_the_padding_colour_normalises_to_zero_for_dinov2(dinov2):
    """CROP_FILL is ImageNet's mean: the encoder sees "no signal" in the padding, not a colour."""
    assert CROP_FILL == tuple(round(255 * m) for m in dinov2.image_processor.image_mean)
    assert dinov2.square_keep() == pytest.approx(224 / 256)


@pytest.mark.slow
def test_instance_scr_takes_one_crop_per_subject_after_nms(tmp_path, dinov2):
    """Two subjects, the first boxed three times: NMS leaves two crops (formerly min(3 boxes, 2N) = 3)."""
    image = Image.new("RGB", (400, 300), GREY)
    image.paste(BLUE, (40, 60, 140, 280))
    image.paste(RED, (200, 60, 300, 280))
    first, second = (40, 60, 140, 280), (200, 60, 300, 280)
    duplicates = [(first, 0.9), ((44, 66, 142, 280), 0.8), ((38, 56, 136, 276), 0.7), (second, 0.85)]
    assert all(iou(first, b) > SUBJECT_NMS_IOU for b, _ in duplicates[1:3]) and iou(first, second) == 0
    detector = StubDetector({pixels_key(image): {"a person": duplicates}})
    refs = {s: ({"kind": "human"}, Image.new("RGB", (64, 64), c)) for s, c in (("s1", BLUE), ("s2", RED))}
    prompts = {"p0": {"subject_ids": ["s1", "s2"]}}
    ctx = fake_context(tmp_path, prompts, refs, {("p0", 0): image}, {"detector": detector, "dinov2": dinov2})
    ref_cls = {s: np.ones(dinov2.embedding_dim) for s in refs}
    results = collapse._instance_level(
        ctx, {"scr_instance@0.5"}, ctx.generation_keys(), ctx.generation_loaders(), ref_cls
    )
    assert [r.value for r in results if r.metric == "subjects_detected"] == [2.0]


def test_nms_runs_within_each_label_only():
    boxes = [(0, 0, 100, 100), (2, 2, 100, 100), (0, 0, 100, 100)]
    assert sorted(nms_per_label(boxes, [0.9, 0.8, 0.7], [0, 0, 1]).tolist()) == [0, 2]
    assert nms_per_label(np.zeros((0, 4)), [], []).tolist() == []


# --- 6. person count -----------------------------------------------------------------------------------

SIZE = 512


def collage_boxes(n: int, reference=(300, 400)) -> list[tuple[int, int, int, int]]:
    """The persons' boxes of the collage baseline's layout (baselines.subject_box), left to right."""
    return [B.subject_box(reference, k, n, SIZE) for k in range(n)]


def pushed_together(boxes, share: float):
    """Neighbours moved towards the first until each shares ``share`` of its width with the next (a hug)."""
    width = boxes[0][2] - boxes[0][0]
    step = round(width * (1 - share))
    return [(boxes[0][0] + k * step, b[1], boxes[0][0] + k * step + width, b[3]) for k, b in enumerate(boxes)]


def duplicates_of(box, rng) -> list[tuple[float, ...]]:
    """Near copies of one person's box as Grounding DINO returns them: edges moved by up to 10 %."""
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    out = [
        (x0 + 0.1 * w, y0 + 0.1 * h, x1 - 0.1 * w, y1 - 0.1 * h),  # shrunk 10 % per edge
        (x0 + 0.1 * w, y0 + 0.1 * h, x1 + 0.1 * w, y1 + 0.1 * h),  # shifted 10 % both ways
        (x0 - 0.1 * w, y0 - 0.1 * h, x1 + 0.1 * w, y1 + 0.1 * h),
    ]  # grown 10 % per edge
    out.append(tuple(v + d for v, d in zip(box, rng.uniform(-0.05, 0.05, 4) * (w, h, w, h))))
    return [tuple(round(v) for v in b) for b in out]


def found(boxes_scores) -> dict[str, np.ndarray]:
    return {
        "boxes": np.array([b for b, _ in boxes_scores], np.float32).reshape(-1, 4),
        "scores": np.array([s for _, s in boxes_scores], np.float32),
        "labels": np.zeros(len(boxes_scores), np.int64),
    }


def with_duplicates(boxes, rng):
    """Every person at score 0.9 - k / 100, then its duplicates at lower scores."""
    out = [(b, 0.9 - k / 100) for k, b in enumerate(boxes)]
    for box in boxes:
        out += [(d, 0.5 - rng.uniform(0, 0.2)) for d in duplicates_of(box, rng)]
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 10])
@pytest.mark.parametrize("share", [0.0, 0.5, 0.7])
def test_touching_people_each_count_and_duplicates_merge(n, share):
    rng = np.random.default_rng(n)
    boxes = pushed_together(collage_boxes(n), share) if share else collage_boxes(n)
    if n > 1:  # the geometry the threshold is chosen from: neighbours' IoU is share / (2 - share)
        assert iou(boxes[0], boxes[1]) == pytest.approx(share / (2 - share), abs=0.02)
        assert iou(boxes[0], boxes[1]) < SUBJECT_NMS_IOU
    assert all(iou(b, d) > SUBJECT_NMS_IOU for b in boxes for d in duplicates_of(b, rng))
    assert len(cogcanvas.person_boxes(found(with_duplicates(boxes, rng)))) == n


def test_the_former_threshold_merged_people_who_hug():
    boxes = pushed_together(collage_boxes(3), 0.7)  # IoU 0.54 between neighbours
    # at 0.5 the middle person merges into the left one (the outer two share 40 % of a width: kept)
    assert len(cogcanvas.person_boxes(found([(b, 0.9) for b in boxes]), iou=0.5)) == 2
    assert len(cogcanvas.person_boxes(found([(b, 0.9) for b in boxes]))) == 3


@pytest.fixture(scope="module")
def cogcanvas_collage(tmp_path_factory):
    from idbench.builders.build import build
    from idbench.evaluate_pkg.data import load_benchmark_data

    root = tmp_path_factory.mktemp("cogcanvas")
    build("cogcanvas", out=root / "data", n_prompts=12)
    data = load_benchmark_data(root / "data")
    B.make_baseline("collage", data, root / "collage", size=SIZE)
    return root, data


@pytest.mark.slow
def test_collage_baselines_count_right_from_the_person_query(cogcanvas_collage, tmp_path):
    """Stand-in detector: the collage's person boxes (baselines.subject_box) plus noise duplicates."""
    from idbench.evaluate_pkg.context import Models
    from idbench.evaluate_pkg.runner import score_submission

    root, data = cogcanvas_collage
    rng = np.random.default_rng(0)
    known, expected = {}, {}
    for prompt in data.prompt_rows.values():
        slots = B.prompt_slots(data, prompt)
        picture = B.collage(data, prompt, SIZE)
        boxes = [
            B.subject_box(data.references[s.ref_id]["image"].size, k, len(slots), SIZE) for k, s in enumerate(slots)
        ]
        persons = with_duplicates(boxes, rng)
        known[pixels_key(picture)] = {"a person": persons}
        expected[prompt["prompt_id"]] = prompt["n_persons"]
    assert len(set(expected.values())) > 1  # several group sizes
    detector = StubDetector(known)
    models = Models(ScoreOptions(profile="tiny"))
    models._loaded["detector"] = detector
    options = ScoreOptions(profile="tiny", metrics=("count_accuracy",))
    summary = score_submission(root / "collage", data, None, options, cache_dir=tmp_path, progress=False, models=models)
    assert summary["aggregates"]["overall"]["count_accuracy"]["mean"] == 1.0
    assert set(detector.asked) == {("a person",)}  # the count never shares its caption

    # BG-Sim's counts reach aggregates.json and report.md (tiny DINOv3, boxes as masks)
    models._loaded["segmenter"] = BoxSegmenter()
    options = ScoreOptions(profile="tiny", metrics=("bg_sim",))
    score_submission(
        root / "collage", data, tmp_path / "out", options, cache_dir=tmp_path, progress=False, models=models
    )
    written = json.loads((tmp_path / "out" / "aggregates.json").read_text())
    n_images = len(data.required_pairs)
    assert written["notes"]["bg_sim"] == {
        "images": n_images,
        "no_foreground": 0,
        "all_foreground": 0,
        "references_with_persons": 0,
        "references_all_foreground": [],
    }
    assert written["aggregates"]["overall"]["bg_sim.no_foreground"]["mean"] == 0.0
    assert written["aggregates"]["overall"]["bg_sim"]["n"] == n_images
    report = (tmp_path / "out" / "report.md").read_text()
    assert "`bg_sim.no_foreground`" in report and "- bg_sim: " in report


# --- 4. BG-Sim ------------------------------------------------------------------------------------------

# A palette: two backgrounds of two colours each, and the subjects' magenta.
PALETTE = np.array([(200, 60, 60), (60, 200, 60), (60, 60, 200), (200, 200, 60), (255, 0, 255)], float)
PATCH = 16  # 224 / 16 = a 14 x 14 grid, as DINOv3 ViT-B/16's


class PaletteEncoder:
    """A DINOv3 stand-in whose patch token is the histogram of its patch's pixels over PALETTE.

    Deterministic and readable: two patches have cosine 1 when they show the same colours in the same
    shares, 0 when they share none, so BG-Sim's expected values follow from the images by hand.
    """

    key, feature_version = "palette", 1

    def with_patches(self, patches=True):
        return self

    def preprocess(self, image):
        rgb = np.asarray(image.convert("RGB"), float)
        nearest = np.argmin(((rgb[:, :, None, :] - PALETTE) ** 2).sum(-1), axis=-1)
        return torch.from_numpy(np.eye(len(PALETTE))[nearest])

    def collate(self, items):
        return torch.stack(list(items))

    def encode_batch(self, batch):
        n, h, w, k = batch.shape
        grids = batch.reshape(n, h // PATCH, PATCH, w // PATCH, PATCH, k).mean(dim=(2, 4)).numpy()
        return [{"cls": g.mean(axis=(0, 1)), "patches": g} for g in grids]


def scene(stripes: tuple[int, int], blocks=()) -> Image.Image:
    """224 x 224 stripes of two palette colours (32 px wide) with magenta subject blocks (xyxy, patch-aligned)."""
    a, b = (tuple(int(v) for v in PALETTE[i]) for i in stripes)
    image = Image.new("RGB", (224, 224), a)
    for x in range(32, 224, 64):
        image.paste(b, (x, 0, x + 32, 224))
    for block in blocks:
        image.paste((255, 0, 255), block)
    return image


LEFT, RIGHT, MIDDLE = (16, 96, 64, 208), (160, 96, 208, 208), (96, 32, 128, 128)


def bg_context(tmp_path, generations: dict, boxes: dict, reference: Image.Image):
    """CogCanvas prompts of one person with one item over ``reference``; ``boxes``: image -> person boxes."""
    known = {pixels_key(im): {"a person": [(b, 0.9) for b in boxes[k]]} for k, im in generations.items()}
    known[pixels_key(reference)] = {"a person": [(b, 0.9) for b in boxes.get("reference", [])]}
    prompts = {
        p: {
            "prompt_id": p,
            "n_persons": 1,
            "background_ref_id": "bg",
            "persons": [{"slot": "A", "item_entity_id": "cup"}],
        }
        for p, _ in generations
    }
    refs = {
        "bg": ({"entity_id": "bg", "name": "the scene"}, reference),
        "cupref": ({"entity_id": "cup", "name": "the cup"}, reference),
    }
    models = {"detector": StubDetector(known), "segmenter": BoxSegmenter(), "dinov3": PaletteEncoder()}
    return fake_context(tmp_path, prompts, refs, generations, models)


def scores(results, metric):
    return {r.prompt_id: r.value for r in results if r.metric == metric}


@pytest.mark.slow
def test_bg_sim_tracks_the_background_not_the_subjects(tmp_path):
    generations = {
        ("same_bg_left", 0): scene((0, 1), [LEFT]),
        ("same_bg_moved", 0): scene((0, 1), [RIGHT, MIDDLE]),
        ("other_bg_left", 0): scene((2, 3), [LEFT]),
    }
    boxes = {("same_bg_left", 0): [LEFT], ("same_bg_moved", 0): [RIGHT, MIDDLE], ("other_bg_left", 0): [LEFT]}
    ctx = bg_context(tmp_path, generations, boxes, scene((0, 1)))
    results = cogcanvas.score(ctx, {"bg_sim"})
    bg = scores(results, "bg_sim")
    # Masked, the subjects leave no trace: the same stripes give cosine 1 wherever the subjects stand
    # (up to the stripes' shares left visible), another background shares no colour: cosine 0.
    assert bg["same_bg_left"] > 0.98 and bg["same_bg_moved"] > 0.98
    assert bg["other_bg_left"] == pytest.approx(0.0, abs=1e-9)
    assert not any(scores(results, "bg_sim.no_foreground").values())
    assert not any(scores(results, "bg_sim.all_foreground").values())
    assert ctx.notes["bg_sim"]["no_foreground"] == 0 and ctx.notes["bg_sim"]["references_with_persons"] == 0


@pytest.mark.slow
def test_bg_sim_masks_the_persons_of_the_reference_background(tmp_path):
    from idbench.evaluate_pkg import functional as F

    crowd = (96, 0, 224, 224)
    reference = scene((0, 1), [crowd])  # the scene photo holds people
    generation = scene((0, 1), [LEFT])
    ctx = bg_context(tmp_path, {("p", 0): generation}, {("p", 0): [LEFT], "reference": [crowd]}, reference)
    value = scores(cogcanvas.score(ctx, {"bg_sim"}), "bg_sim")["p"]
    # only the background of each is compared: exactly the same stripes -> 1 up to the masked shares;
    # leaving the reference's person in (the former behaviour) mixes magenta into its pool
    encoder = PaletteEncoder()
    tokens = lambda im: encoder.encode_batch(encoder.collate([encoder.preprocess(im)]))[0]["patches"]  # noqa: E731
    mask = np.zeros((224, 224), bool)
    mask[96:208, 16:64] = True
    unmasked_reference = F.bg_sim(tokens(generation), mask, tokens(reference), None)
    assert value > 0.98 and unmasked_reference < 0.6
    assert ctx.notes["bg_sim"]["references_with_persons"] == 1


@pytest.mark.slow
def test_bg_sim_flags_missing_and_total_foreground(tmp_path):
    generations = {
        ("nothing_found", 0): scene((0, 1), [LEFT, RIGHT]),
        ("all_subject", 0): scene((0, 1), [(0, 0, 224, 224)]),
    }
    boxes = {("nothing_found", 0): [], ("all_subject", 0): [(0, 0, 224, 224)]}
    ctx = bg_context(tmp_path, generations, boxes, scene((0, 1)))
    results = cogcanvas.score(ctx, {"bg_sim"})
    bg = scores(results, "bg_sim")
    # nothing found: scored over the whole image, subject included (below 1), and flagged
    assert 0.5 < bg["nothing_found"] < 0.95
    assert scores(results, "bg_sim.no_foreground") == {"nothing_found": 1.0, "all_subject": 0.0}
    # all foreground: undefined, counted
    assert np.isnan(bg["all_subject"])
    assert scores(results, "bg_sim.all_foreground") == {"nothing_found": 0.0, "all_subject": 1.0}
    assert {k: ctx.notes["bg_sim"][k] for k in ("images", "no_foreground", "all_foreground")} == {
        "images": 2,
        "no_foreground": 1,
        "all_foreground": 1,
    }

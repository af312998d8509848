"""Baseline submissions: the right files, and pictures whose content is checked pixel by pixel.

The expected pixels are computed here independently: the reference image resized with PIL to the box
it is pasted in. Which reference a column shows is read from the prompt rows directly (layout, persons,
subject_ids), not through the module's own slot helpers.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import idbench
from idbench.builders.build import build
from idbench.evaluate_pkg import baselines as B
from idbench.evaluate_pkg.data import BenchmarkData, BenchmarkDataError, load_benchmark_data

# Makes every baseline of every sample benchmark as PNGs at full size: about a minute in all.
pytestmark = [pytest.mark.slow]

SIZE = 128  # small pictures keep the suite fast; one test checks the default 512
BENCHMARKS = ("charis", "cogcanvas", "identity-collapse")
# Fewer CHARIS prompts than the samples' 203 (7 per subject): still every subject type and style, at a
# third of the time. CogCanvas keeps all 82 so that groups of 4 and 5 (impostors from inside) occur;
# Identity Collapse has a fixed grid of 75.
PROMPTS = {"charis": 60, "cogcanvas": None, "identity-collapse": None}
LANCZOS = Image.Resampling.LANCZOS


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def benchmarks(tmp_path_factory) -> dict[str, BenchmarkData]:
    root = tmp_path_factory.mktemp("benchmarks")
    cache = str(tmp_path_factory.mktemp("hf-cache"))
    data = {}
    for name in BENCHMARKS:
        build(name, out=root / name, n_prompts=PROMPTS[name])
        data[name] = load_benchmark_data(root / name, cache_dir=cache)
    return data


@pytest.fixture(scope="module")
def submission(benchmarks, tmp_path_factory):
    """submission(benchmark, baseline) -> the folder, made once per module at SIZE."""
    root = tmp_path_factory.mktemp("submissions")
    made: dict[tuple[str, str], Path] = {}

    def get(benchmark: str, name: str) -> Path:
        if (benchmark, name) not in made:
            out = root / f"{benchmark}-{name}"
            made[benchmark, name] = B.make_baseline(name, benchmarks[benchmark], out, size=SIZE)
        return made[benchmark, name]

    return get


# --- helpers -------------------------------------------------------------------------------------


def picture(folder: Path, prompt_id: str, seed: int = 0) -> np.ndarray:
    with Image.open(folder / "images" / f"{prompt_id}_s{seed}.png") as image:
        return np.asarray(image.convert("RGB"))


_RESIZED: dict[tuple[int, tuple[int, int]], np.ndarray] = {}


def resized(image: Image.Image, box: tuple[int, int, int, int]) -> np.ndarray:
    """What a reference pasted into ``box`` must look like: PIL's own resize, computed here."""
    assert image.mode == "RGB", "the samples have no transparent references"
    size = (box[2] - box[0], box[3] - box[1])
    # Cached by object: the references live as long as the module's benchmarks, and the pool is
    # compared against every column of every picture.
    key = (id(image), size)
    if key not in _RESIZED:
        _RESIZED[key] = np.asarray(image.resize(size, LANCZOS))
    return _RESIZED[key]


def shows(pixels: np.ndarray, image: Image.Image, box, hide=None) -> bool:
    """Whether ``box`` of the picture holds ``image`` exactly, ignoring the ``hide`` box (an item)."""
    left, top, right, bottom = box
    crop = pixels[top:bottom, left:right]
    keep = np.ones(crop.shape[:2], dtype=bool)
    if hide is not None:
        keep[max(0, hide[1] - top) : max(0, hide[3] - top), max(0, hide[0] - left) : max(0, hide[2] - left)] = False
    return bool((crop == resized(image, box))[keep].all())


def layout_refs(data: BenchmarkData, prompt: dict) -> list[tuple[str, str | None]]:
    """(subject reference, item reference) left to right, read straight from the prompt row."""
    if data.name == "cogcanvas":
        by_slot = {p["slot"]: p for p in prompt["persons"]}
        return [(by_slot[s]["ref_id"], by_slot[s]["item_ref_id"]) for s in prompt["layout"]]
    if data.name == "identity-collapse":
        return [(s, None) for s in prompt["subject_ids"]]
    return [(prompt["subject_id"], None)]


def item_at(data: BenchmarkData, pixels: np.ndarray, k: int, n: int, item_ref: str) -> bool:
    item = data.references[item_ref]["image"]
    return shows(pixels, item, B.item_box(item.size, k, n, SIZE))


def identify(data: BenchmarkData, pixels: np.ndarray, k: int, n: int, candidates, hide_item: str | None) -> list[str]:
    """Which of the ``candidates`` references column ``k`` shows (a correct picture: exactly one)."""
    hide = None
    if hide_item:
        item = data.references[hide_item]["image"]
        hide = B.item_box(item.size, k, n, SIZE)
    found = []
    for ref_id in candidates:
        image = data.references[ref_id]["image"]
        if shows(pixels, image, B.subject_box(image.size, k, n, SIZE), hide):
            found.append(ref_id)
    return found


def column_crops(pixels: np.ndarray, n: int) -> list[np.ndarray]:
    """N equal-width columns of the canvas (leftover pixels split between the outer margins)."""
    width = SIZE // n
    left = (SIZE - n * width) // 2
    return [pixels[:, left + k * width : left + (k + 1) * width] for k in range(n)]


def identity_of(data: BenchmarkData, ref_id: str) -> str:
    return data.references[ref_id]["entity_id"] if data.name == "cogcanvas" else ref_id


# --- the submission folder -----------------------------------------------------------------------


@pytest.mark.parametrize("name", B.BASELINES)
@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_one_png_per_required_pair(benchmarks, submission, benchmark, name):
    data = benchmarks[benchmark]
    if benchmark == "charis" and name.startswith("stranger"):  # its sample build holds every stranger
        with pytest.raises(BenchmarkDataError, match="every shipped stranger .* is one of its references"):
            submission(benchmark, name)
        return
    folder = submission(benchmark, name)
    with (folder / "manifest.csv").open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        assert next(reader) == ["prompt_id", "seed", "file"]
        rows = list(reader)
    assert [(p, int(s)) for p, s, _ in rows] == data.required_pairs
    assert [f for _, _, f in rows] == [f"images/{p}_s{s}.png" for p, s in data.required_pairs]
    assert sorted(p.name for p in (folder / "images").iterdir()) == sorted(Path(f).name for _, _, f in rows)
    single = benchmark == "charis"  # one subject per prompt: copy is the reference at its own size
    for prompt_id, _, file in rows:
        with Image.open(folder / file) as image:
            size = (
                data.references[data.prompt_rows[prompt_id]["subject_id"]]["image"].size
                if single and name == "copy"
                else (SIZE, SIZE)
            )
            assert image.format == "PNG" and image.size == size and image.mode == "RGB"
            image.load()
    assert json.loads((folder / "submission.json").read_text()) == {
        "benchmark": benchmark,
        "model": f"baseline-{name}",
        "link": "",
        "license": "same as the benchmark's references",
        "generation": {"baseline": name, "size": SIZE, "seed": 0},
        "notes": B.NOTES[name],
        "idbench_version": idbench.__version__,
    }
    assert sorted(p.name for p in folder.iterdir()) == ["images", "manifest.csv", "submission.json"]


def test_default_size_is_512(benchmarks, tmp_path):
    folder = B.make_baseline("collage", benchmarks["identity-collapse"], tmp_path / "sub")
    for image_file in (folder / "images").iterdir():
        with Image.open(image_file) as image:
            assert image.size == (512, 512)
    assert json.loads((folder / "submission.json").read_text())["generation"]["size"] == 512


def test_seeds_of_a_prompt_share_one_picture(submission):
    folder = submission("identity-collapse", "collage")
    for prompt_id in ("01", "40", "75"):
        files = [(folder / "images" / f"{prompt_id}_s{s}.png").read_bytes() for s in (0, 1, 2)]
        assert files[0] == files[1] == files[2]


# --- geometry ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10])
@pytest.mark.parametrize("image_size", [(512, 512), (198, 244), (512, 288), (240, 320)])
def test_subjects_stand_in_their_column_bottom_aligned_aspect_kept(n, image_size):
    boxes = [B.subject_box(image_size, k, n, SIZE) for k in range(n)]
    width, height = image_size
    for k, (left, top, right, bottom) in enumerate(boxes):
        # inside column k of N equal columns: its centre is, and it does not cross its neighbours
        assert k * SIZE / n <= (left + right) / 2 <= (k + 1) * SIZE / n
        if k:
            assert boxes[k - 1][2] <= left
        h, w = bottom - top, right - left
        assert h <= 0.7 * SIZE
        # tall enough, unless the column's width is what limits it
        assert h >= 0.6 * SIZE or w >= 0.85 * (SIZE // n)
        # aspect kept up to rounding: w = W*s + e1, h = H*s + e2 with |e| <= 1/2
        assert abs(w * height - h * width) <= 0.5 * (width + height)
    assert len({b[3] for b in boxes}) == 1  # one baseline for all
    assert boxes[0][3] > 0.9 * SIZE


# --- what each baseline shows --------------------------------------------------------------------


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_collage_shows_subject_k_in_column_k(benchmarks, submission, benchmark):
    data = benchmarks[benchmark]
    folder = submission(benchmark, "collage")
    for prompt in data.prompt_rows.values():
        pixels = picture(folder, prompt["prompt_id"])
        refs = layout_refs(data, prompt)
        n = len(refs)
        for k, (ref_id, item_ref) in enumerate(refs):
            image = data.references[ref_id]["image"]
            box = B.subject_box(image.size, k, n, SIZE)
            hide = B.item_box(data.references[item_ref]["image"].size, k, n, SIZE) if item_ref else None
            assert shows(pixels, image, box, hide), (prompt["prompt_id"], k, ref_id)
            if item_ref:
                assert item_at(data, pixels, k, n, item_ref), (prompt["prompt_id"], k, item_ref)


@pytest.mark.parametrize("benchmark", ["charis", "identity-collapse"])
def test_collage_column_colours_follow_the_layout(benchmarks, submission, benchmark):
    """A coarse view of the same fact: column k's mean colour is that of reference k, pasted."""
    data = benchmarks[benchmark]
    folder = submission(benchmark, "collage")
    for prompt in list(data.prompt_rows.values())[:20]:
        pixels = picture(folder, prompt["prompt_id"])
        refs = layout_refs(data, prompt)
        n = len(refs)
        for k, (ref_id, _) in enumerate(refs):
            image = data.references[ref_id]["image"]
            expected = np.full((SIZE, SIZE, 3), 128, dtype=np.uint8)
            left, top, right, bottom = B.subject_box(image.size, k, n, SIZE)
            expected[top:bottom, left:right] = resized(image, (left, top, right, bottom))
            got, want = column_crops(pixels, n)[k], column_crops(expected, n)[k]
            assert np.allclose(got.reshape(-1, 3).mean(0), want.reshape(-1, 3).mean(0))


@pytest.mark.parametrize("benchmark", ["identity-collapse"])
def test_swap_columns_are_a_derangement_of_the_collage_columns(benchmarks, submission, benchmark):
    data = benchmarks[benchmark]
    collage, swap = submission(benchmark, "collage"), submission(benchmark, "swap")
    for prompt in data.prompt_rows.values():
        n = prompt["n_subjects"]
        before = column_crops(picture(collage, prompt["prompt_id"]), n)
        after = column_crops(picture(swap, prompt["prompt_id"]), n)
        # each swapped column is exactly one collage column, never its own, and all are used
        mapping = [[j for j in range(n) if np.array_equal(a, before[j])] for a in after]
        assert all(len(m) == 1 for m in mapping), prompt["prompt_id"]
        targets = [m[0] for m in mapping]
        assert sorted(targets) == list(range(n))
        assert all(j != k for k, j in enumerate(targets))


def test_swap_cogcanvas_moves_every_person_with_their_item(benchmarks, submission):
    data = benchmarks["cogcanvas"]
    swap = submission("cogcanvas", "swap")
    for prompt in data.prompt_rows.values():
        refs = layout_refs(data, prompt)
        item_of = dict(refs)
        n = len(refs)
        pixels = picture(swap, prompt["prompt_id"])
        shown = []
        for k in range(n):
            # the item first: it tells which person's pixels it covers
            items = [item for _, item in refs if item_at(data, pixels, k, n, item)]
            assert len(items) == 1, (prompt["prompt_id"], k)
            people = identify(data, pixels, k, n, [r for r, _ in refs], items[0])
            assert len(people) == 1, (prompt["prompt_id"], k)
            assert item_of[people[0]] == items[0]  # the item stayed with its person
            shown.append(people[0])
        layout = [r for r, _ in refs]
        assert sorted(shown) == sorted(layout)
        assert all(seen != laid for seen, laid in zip(shown, layout))  # nobody in their own position


def test_swap_charis_is_the_collage_mirrored(benchmarks, submission):
    data = benchmarks["charis"]
    for prompt_id in data.prompt_rows:
        collage = picture(submission("charis", "collage"), prompt_id)
        assert np.array_equal(picture(submission("charis", "swap"), prompt_id), collage[:, ::-1])


def test_clone_repeats_the_leftmost_subject(benchmarks, submission):
    data = benchmarks["identity-collapse"]
    clone, collage = submission("identity-collapse", "clone"), submission("identity-collapse", "collage")
    for prompt in data.prompt_rows.values():
        columns = column_crops(picture(clone, prompt["prompt_id"]), prompt["n_subjects"])
        first = column_crops(picture(collage, prompt["prompt_id"]), prompt["n_subjects"])[0]
        assert all(np.array_equal(c, first) for c in columns), prompt["prompt_id"]


def test_clone_cogcanvas_keeps_each_slots_item(benchmarks, submission):
    data = benchmarks["cogcanvas"]
    clone = submission("cogcanvas", "clone")
    for prompt in data.prompt_rows.values():
        refs = layout_refs(data, prompt)
        n = len(refs)
        pixels = picture(clone, prompt["prompt_id"])
        for k, (_, item) in enumerate(refs):
            assert identify(data, pixels, k, n, [r for r, _ in refs], item) == [refs[0][0]]
            assert item_at(data, pixels, k, n, item)


def test_clone_charis_is_the_collage(benchmarks, submission):
    for prompt_id in benchmarks["charis"].prompt_rows:
        collage = picture(submission("charis", "collage"), prompt_id)
        assert np.array_equal(picture(submission("charis", "clone"), prompt_id), collage)


def test_background_cogcanvas_is_the_resized_background_reference(benchmarks, submission):
    data = benchmarks["cogcanvas"]
    folder = submission("cogcanvas", "background")
    for prompt in data.prompt_rows.values():
        reference = data.references[prompt["background_ref_id"]]["image"]
        assert np.array_equal(picture(folder, prompt["prompt_id"]), np.asarray(reference.resize((SIZE, SIZE), LANCZOS)))


@pytest.mark.parametrize("benchmark", ["charis", "identity-collapse"])
def test_background_without_a_background_reference_is_the_grey_canvas(benchmarks, submission, benchmark):
    folder = submission(benchmark, "background")
    for prompt_id in list(benchmarks[benchmark].prompt_rows)[:10]:
        assert (picture(folder, prompt_id) == 128).all()


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_blank_is_the_grey_canvas_everywhere(benchmarks, submission, benchmark):
    folder = submission(benchmark, "blank")
    for prompt_id in list(benchmarks[benchmark].prompt_rows)[:10]:
        assert (picture(folder, prompt_id) == 128).all()


def test_noise_is_uniform_and_differs_between_prompts(benchmarks, submission):
    folder = submission("identity-collapse", "noise")
    first, second = (picture(folder, p) for p in list(benchmarks["identity-collapse"].prompt_rows)[:2])
    # uniform on 0..255: mean near 127.5 and every value drawn (128 x 128 x 3 samples)
    assert abs(first.mean() - 127.5) < 2 and len(np.unique(first)) == 256
    assert (first != second).mean() > 0.99
    # the generation seeds of one prompt share the picture
    assert np.array_equal(picture(folder, list(benchmarks["identity-collapse"].prompt_rows)[0], seed=2), first)


def test_copy_of_a_single_subject_is_the_reference_pixel_for_pixel(benchmarks, submission):
    data = benchmarks["charis"]
    folder = submission("charis", "copy")
    for prompt_id, prompt in data.prompt_rows.items():
        assert np.array_equal(
            picture(folder, prompt_id), np.asarray(data.references[prompt["subject_id"]]["image"].convert("RGB"))
        )


@pytest.mark.parametrize("benchmark", ["cogcanvas", "identity-collapse"])
def test_copy_of_several_subjects_is_the_collage(benchmarks, submission, benchmark):
    for prompt_id in list(benchmarks[benchmark].prompt_rows)[:10]:
        assert np.array_equal(
            picture(submission(benchmark, "copy"), prompt_id), picture(submission(benchmark, "collage"), prompt_id)
        )


@pytest.mark.parametrize("benchmark", ["cogcanvas", "identity-collapse"])
def test_impostor_shows_nobody_of_the_prompt_when_the_pool_allows(benchmarks, submission, benchmark):
    data = benchmarks[benchmark]
    folder = submission(benchmark, "impostor")
    if benchmark == "cogcanvas":
        pool = [r for r, row in data.references.items() if row["kind"] == "person"]
    else:
        pool = list(data.references)
    pool_identities = {identity_of(data, r) for r in pool}
    checked = {"outsiders only": 0, "mixed": 0}
    for prompt in data.prompt_rows.values():
        refs = layout_refs(data, prompt)
        n = len(refs)
        prompt_identities = [identity_of(data, r) for r, _ in refs]
        pixels = picture(folder, prompt["prompt_id"])
        shown = []
        for k, (_, item) in enumerate(refs):
            found = identify(data, pixels, k, n, pool, item)
            assert len(found) == 1, (prompt["prompt_id"], k, found)
            shown.append(identity_of(data, found[0]))
            if item:
                assert item_at(data, pixels, k, n, item)  # items stay where the collage has them
        assert len(set(shown)) == n  # distinct impostors
        assert all(s != p for s, p in zip(shown, prompt_identities))  # everyone replaced
        pure = len(pool_identities - set(prompt_identities)) >= n
        assert B.impostor_is_pure(data, prompt) == pure
        if pure:
            assert not set(shown) & set(prompt_identities), prompt["prompt_id"]
            checked["outsiders only"] += 1
        else:
            # all outsiders are used before any prompt subject is moved
            assert pool_identities - set(prompt_identities) <= set(shown)
            checked["mixed"] += 1
    assert all(checked.values()), checked  # both cases occur in the samples


def test_impostor_charis_is_another_subject_of_the_same_type(benchmarks, submission):
    data = benchmarks["charis"]
    folder = submission("charis", "impostor")
    for prompt in data.prompt_rows.values():
        found = identify(data, picture(folder, prompt["prompt_id"]), 0, 1, list(data.references), None)
        assert len(found) == 1 and found[0] != prompt["subject_id"], prompt["prompt_id"]
        assert data.references[found[0]]["type"] == prompt["type"]


def test_pick_impostors_moves_everyone_and_prefers_outsiders():
    rng = B._rng(0, "test")
    for current, pool in [
        (["a", "b"], ["a", "b", "c", "d"]),
        (["a", "b", "c"], ["a", "b", "c", "d"]),
        (["a", "b"], ["a", "b"]),
        (["a", "b", "c", "d", "e"], list("abcdef")),
    ]:
        for _ in range(20):
            chosen = B.pick_impostors(current, pool, rng)
            assert len(set(chosen)) == len(current)
            assert all(c != x for c, x in zip(chosen, current))
            outsiders = set(pool) - set(current)
            assert set(chosen) & outsiders == outsiders or set(chosen) <= outsiders
    with pytest.raises(ValueError, match="no other identity"):
        B.pick_impostors(["a"], ["a"], rng)


# --- determinism and safety ----------------------------------------------------------------------


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_two_runs_give_identical_bytes(benchmarks, submission, tmp_path, benchmark):
    data = benchmarks[benchmark]
    again = B.make_baseline("impostor", data, tmp_path / "again", size=SIZE, seed=0)
    assert folder_bytes(again) == folder_bytes(submission(benchmark, "impostor"))
    # the seed is what chooses the impostors
    prompts = list(data.prompt_rows.values())
    assert any(B.impostor_slots(data, p, 0) != B.impostor_slots(data, p, 1) for p in prompts)


def test_an_existing_output_is_refused_unless_overwrite(benchmarks, tmp_path):
    data = benchmarks["identity-collapse"]
    out = tmp_path / "sub"
    B.make_baseline("background", data, out, size=SIZE)
    with pytest.raises(FileExistsError, match="already exists"):
        B.make_baseline("collage", data, out, size=SIZE)
    assert json.loads((out / "submission.json").read_text())["model"] == "baseline-background"
    B.make_baseline("collage", data, out, size=SIZE, overwrite=True)
    assert json.loads((out / "submission.json").read_text())["model"] == "baseline-collage"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"]  # no staging folders left behind


def test_a_failure_leaves_nothing_half_written(benchmarks, tmp_path, monkeypatch):
    data = benchmarks["identity-collapse"]
    calls = []

    def failing(*args):
        calls.append(1)
        if len(calls) > 3:
            raise RuntimeError("disk on fire")
        return B.background(*args)

    monkeypatch.setitem(B.RENDERERS, "collage", failing)
    with pytest.raises(RuntimeError):
        B.make_baseline("collage", data, tmp_path / "sub", size=SIZE)
    assert list(tmp_path.iterdir()) == []


def test_bad_arguments_are_refused(benchmarks, tmp_path):
    data = benchmarks["charis"]
    with pytest.raises(ValueError, match="unknown baseline 'blur'; choose one of collage, swap"):
        B.make_baseline("blur", data, tmp_path / "a")
    with pytest.raises(ValueError, match="size must be"):
        B.make_baseline("collage", data, tmp_path / "a", size=8)
    with pytest.raises(ValueError, match="seed must be"):
        B.make_baseline("collage", data, tmp_path / "a", seed="0")
    assert list(tmp_path.iterdir()) == []


def test_baseline_from_folder_checks_the_benchmark(benchmarks, tmp_path):
    folder = benchmarks["identity-collapse"].folder
    with pytest.raises(BenchmarkDataError, match="holds the identity-collapse benchmark, not charis"):
        B.baseline_from_folder("collage", "charis", folder, tmp_path / "x", cache_dir=str(tmp_path / "cache"))
    assert not (tmp_path / "x").exists()
    out = B.baseline_from_folder(
        "background", "identity-collapse", folder, tmp_path / "x", size=SIZE, cache_dir=str(tmp_path / "cache")
    )
    assert json.loads((out / "submission.json").read_text())["model"] == "baseline-background"


@pytest.mark.parametrize("name", B.BASELINES)
def test_the_submission_validator_accepts_every_baseline(benchmarks, submission, name):
    validate_submission = pytest.importorskip("idbench.evaluate_pkg.submission").validate_submission
    data = benchmarks["cogcanvas"]
    with validate_submission(submission("cogcanvas", name), data) as checked:
        assert [(e.prompt_id, e.seed) for e in checked.entries] == data.required_pairs


def test_the_cli_offers_every_baseline():
    from idbench.cli import make_parser

    parser = make_parser()
    commands = next(
        a for a in parser._actions if a.dest == "command" or getattr(a, "choices", None) and "baseline" in a.choices
    )
    name = next(a for a in commands.choices["baseline"]._actions if a.dest == "name")
    from idbench.benchmarks.cogcanvas.retrieval import RANKERS

    assert tuple(name.choices) == B.BASELINES + RANKERS


@pytest.mark.parametrize("benchmark", ["identity-collapse", "charis"])
def test_mannequin_draws_each_subject_flat_in_its_references_colours(benchmarks, submission, benchmark):
    # On the grey canvas a mannequin picture holds no reference pixel: each column is grey plus at most
    # three flat colours (head, body, legs), one figure per subject, and the body's colour is the mean
    # of the reference's middle band (its central half), computed here with numpy alone.
    data = benchmarks[benchmark]
    folder = submission(benchmark, "mannequin")
    for prompt_id in list(data.prompt_rows)[:8]:
        pixels = picture(folder, prompt_id)
        refs = layout_refs(data, data.prompt_rows[prompt_id])
        crops = column_crops(pixels, len(refs))
        for crop, (ref_id, _) in zip(crops, refs):
            colours = {tuple(c) for c in crop.reshape(-1, 3)} - {(128, 128, 128)}
            assert 1 <= len(colours) <= 3, f"{prompt_id}: {len(colours)} colours in a figure's column"
            reference = np.asarray(
                data.references[ref_id]["image"].convert("RGB").resize((32, 32), Image.Resampling.BOX), dtype=np.float64
            )
            middle = reference[11:22, 8:24].reshape(-1, 3).mean(axis=0)
            assert any(np.abs(np.array(c) - middle).max() <= 1 for c in colours), (
                f"{prompt_id}: no body in {ref_id}'s colour"
            )


def test_strangers_are_no_reference_of_the_benchmark_and_one_face_repeats_in_the_clone(benchmarks, submission):
    import imagehash

    from idbench.builders.build import SAMPLES_DIR

    # Identity Collapse's sample pool holds one of the three shipped strangers (oca_man_face): the other two
    # are shown, found here by pHash against every reference, independently of the module.
    data = benchmarks["identity-collapse"]
    pool = [imagehash.phash(e["image"]) for e in data.references.values()]
    outside = [
        f
        for f in B.STRANGER_FILES
        if min(imagehash.phash(Image.open(SAMPLES_DIR / f)) - code for code in pool) > B.STRANGER_PHASH_DISTANCE
    ]
    assert len(B.strangers(data)) == len(outside) >= 1
    assert B.strangers(data) is B.strangers(data)  # found once per benchmark, not once per prompt
    prompt = next(r for r in data.prompt_rows.values() if r["n_subjects"] == 4)
    for name in ("stranger", "stranger-clone"):
        picture = np.asarray(B.RENDERERS[name](data, prompt, SIZE), dtype=np.int16)
        crops = column_crops(picture, 4)
        repeated = all(np.array_equal(crops[0], c) for c in crops[1:])
        # stranger: neighbours differ (two strangers alternate); the clone: one face everywhere; never a
        # pool picture.
        assert repeated == (name == "stranger-clone" or len(outside) == 1)
        for k, crop in enumerate(crops):
            shown = imagehash.phash(Image.fromarray(crop.astype(np.uint8)))
            assert min(shown - code for code in pool) > B.STRANGER_PHASH_DISTANCE, (name, k)

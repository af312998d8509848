"""Baseline submissions: pictures made without a generative model, for the demo and for metric sanity.

Every baseline is a known answer to "what must the metrics say", built from the benchmark's own
reference images with plain PIL:

==========  ==========================================================  ===================================
baseline    picture                                                     what the metrics must show
==========  ==========================================================  ===================================
collage     the prompt's reference subjects pasted onto its background  identity near its best (an anchor,
            in the prompt's layout (CogCanvas: each person with the     not a generation); positions and
            reference of its bound item pasted small at its lower side) bindings right
swap        the collage's subjects in other positions: rotated by one   identity as for the collage;
            slot (a derangement), items staying with their persons;     position and binding checks fail
            CHARIS (one subject): the collage mirrored horizontally
impostor    each subject replaced by another identity of the pool,      identity drops (for position-blind
            chosen deterministically from ``seed``                      metrics only where
                                                                        :func:`impostor_is_pure`); layout,
                                                                        items, background unchanged
clone       the leftmost subject repeated N times (CogCanvas: every     the homogenization failure: SCR
            slot keeps its own item)                                    rises, matched ID-Sim drops
background  the background alone (CogCanvas: the background reference   no subject at all: the floor of
            resized to the canvas; otherwise the empty grey canvas)     identity metrics
blank       a uniform mid-grey canvas, whatever the benchmark           nothing at all: the floor of every
                                                                        metric (judged ones included)
noise       seeded uniform RGB noise, a new picture per prompt          nothing recognisable: near the
                                                                        floor, with no constant features
copy        a single-subject prompt (CHARIS): the reference itself, at  the ceiling: identical features,
            its own size and pixels; a multi-subject prompt: the        cosine 1 (multi-subject: the
            collage, the closest thing to a copy a picture can be       collage's values)
crossed     the collage's subjects rotated by one slot while the items  identity and position-blind
            stay in their columns, so every identity holds another      binding as for the collage; a
            person's item (no items: the same picture as ``swap``)      binding grounded on the located
                                                                        identity fails
crowd       the prompt's subjects in its layout, then one image of      the paper's ID-Sim as for the
            every other identity of the pool, each in a column of its   collage (surplus faces ignored);
            own: a submitter padding the picture with faces             a padding-proof identity score
                                                                        falls
mannequin   the prompt followed without copying a pixel: each subject   never flagged as a copy; no face,
            drawn as a flat figure (head, body, legs) in colours        so identity near the floor; count,
            measured on its reference, at its place, in a pose and      layout and background kept: the
            scale of its own; each CogCanvas item as a flat shape in    model-free stand-in for "follows
            its colour; on the prompt's background                      the prompt, keeps no identity"
stranger    every subject replaced by a drawn person from outside the   never flagged as a copy; faces
            benchmark (shipped with the package, neighbours differ),    found but nobody's: identity near
            items as flat shapes, on the prompt's background; refused   the floor, counts and layout kept
            where the benchmark holds every stranger (CHARIS samples)
stranger-   one stranger in every slot, items and background as for     never a copy; collapse metrics see
clone       ``stranger``                                                one face repeated
==========  ==========================================================  ===================================

Layout (:func:`compose`): the canvas is split into N equal-width columns, left to right; each subject is
scaled, aspect kept, to fit its column (``COLUMN_FILL`` of the width) and ``SUBJECT_HEIGHT`` of the
canvas, centred in its column and standing on a common baseline ``BOTTOM_MARGIN`` above the bottom edge.
Because columns have equal widths, the same subject renders identically in any column, so the column
crops of ``swap`` are exactly a permutation of the collage's (on the grey canvas).

Seeds: a picture depends on the prompt and the baseline's ``seed`` only, never on the generation seed,
so Identity Collapse's three seeds per prompt get byte-identical images (seed-to-seed variance is zero,
which is the honest value for a deterministic "model").

What a prompt shows (its subjects left to right, its background, how impostors are drawn) is the
benchmark's :class:`Layout`, which its spec names (``BenchmarkSpec.baselines``); the layouts of the
three benchmarks live in their suites (``evaluate_pkg/suites/<b>.py``, ``BASELINES``).

CHARIS and Identity Collapse have no background reference: their pictures use a plain mid-grey canvas.
CHARIS has a single subject: its ``clone`` equals its ``collage`` (there is nothing to homogenize).
``copy`` is the one baseline that ignores ``size`` on single-subject prompts: a resized reference would
no longer have the reference's features, and "an exact copy scores 1" is what it is there to show.
docs/metric-sanity.md lists what every metric scores on every baseline (measured by the sanity battery).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random
import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

import idbench
from idbench.atomic import atomic_directory
from idbench.evaluate_pkg.baseline_names import BASELINES as _BASELINE_NAMES
from idbench.evaluate_pkg.data import BenchmarkData, BenchmarkDataError, load_benchmark_data

BASELINES = _BASELINE_NAMES  # re-exported: callers import it from here

# --- geometry ------------------------------------------------------------------------------------

NEUTRAL_GREY = (128, 128, 128)
SUBJECT_HEIGHT = 0.65  # of the canvas: subjects fill the lower two thirds, as in a group photo
BOTTOM_MARGIN = 0.05  # of the canvas: a common baseline the subjects stand on
COLUMN_FILL = 0.9  # of a column's width: neighbours never touch, so per-subject crops stay clean
ITEM_WIDTH = 0.4  # of a column's width, for a CogCanvas item
ITEM_HEIGHT = 0.2  # of the canvas: small, but large enough for a detector crop
RESAMPLE = Image.Resampling.LANCZOS
MIN_SIZE, MAX_SIZE = 64, 4096

Box = tuple[int, int, int, int]  # left, top, right, bottom (PIL's convention: right/bottom exclusive)


def columns(n: int, size: int) -> list[tuple[int, int]]:
    """The N equal-width columns of a ``size`` canvas, left to right, as (left, right) pixel bounds.

    Widths are all ``size // n`` (the few leftover pixels go to the outer margins) so that a subject
    renders identically whichever column it stands in.
    """
    if n < 1:
        raise ValueError(f"a picture needs at least one column, got {n}")
    width = size // n
    left = (size - n * width) // 2
    return [(left + k * width, left + (k + 1) * width) for k in range(n)]


def _fit(image_size: tuple[int, int], max_width: float, max_height: float) -> tuple[int, int]:
    """The largest size with the image's aspect ratio inside (max_width, max_height), at least 1x1."""
    width, height = image_size
    scale = min(max_width / width, max_height / height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def _baseline(size: int) -> int:
    return size - round(size * BOTTOM_MARGIN)


def subject_box(image_size: tuple[int, int], k: int, n: int, size: int) -> Box:
    """Where a subject of ``image_size`` lands in column ``k`` of ``n``: centred, on the baseline."""
    left, right = columns(n, size)[k]
    width, height = _fit(image_size, (right - left) * COLUMN_FILL, size * SUBJECT_HEIGHT)
    x = left + (right - left - width) // 2
    bottom = _baseline(size)
    return (x, bottom - height, x + width, bottom)


def item_box(item_size: tuple[int, int], k: int, n: int, size: int) -> Box:
    """Where a CogCanvas item lands in column ``k``: the column's lower right, over the person's side.

    It stays inside the column (so it moves with its person in ``swap``) and inside the same inner
    margin as the subject, on the same baseline, where the person would hold or wear it.
    """
    left, right = columns(n, size)[k]
    width, height = _fit(item_size, (right - left) * ITEM_WIDTH, size * ITEM_HEIGHT)
    x1 = right - ((right - left) - round((right - left) * COLUMN_FILL)) // 2
    bottom = _baseline(size)
    return (x1 - width, bottom - height, x1, bottom)


def _has_alpha(image: Image.Image) -> bool:
    return image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info)


def _paste(canvas: Image.Image, image: Image.Image, box: Box) -> None:
    """Paste ``image`` resized to ``box``; a transparent reference is pasted through its alpha."""
    size = (box[2] - box[0], box[3] - box[1])
    if _has_alpha(image):
        rgba = image.convert("RGBA").resize(size, RESAMPLE)
        canvas.paste(rgba.convert("RGB"), box[:2], rgba)
    else:
        canvas.paste(image.convert("RGB").resize(size, RESAMPLE), box[:2])


def fit_background(background: Image.Image | None, size: int) -> Image.Image:
    """The empty canvas: the background reference resized to ``size`` x ``size``, else plain grey.

    The reference is stretched rather than cropped so that the whole scene stays in the picture (what
    BG-Sim compares against); benchmark backgrounds are near 4:3, so the distortion is mild.
    """
    if background is None:
        return Image.new("RGB", (size, size), NEUTRAL_GREY)
    return background.convert("RGB").resize((size, size), RESAMPLE)


def compose(
    background: Image.Image | None,
    subjects: Sequence[Image.Image],
    size: int,
    *,
    items: Sequence[Image.Image | None] | None = None,
) -> Image.Image:
    """Paste ``subjects`` left to right, one per equal-width column, onto ``background``.

    ``items`` (CogCanvas), one per subject or None, are pasted after all subjects at each column's
    lower right (:func:`item_box`), so an item is never hidden by its person.
    """
    canvas = fit_background(background, size)
    n = len(subjects)
    if items is not None and len(items) != n:
        raise ValueError(f"{len(items)} items for {n} subjects")
    for k, subject in enumerate(subjects):
        _paste(canvas, subject, subject_box(subject.size, k, n, size))
    for k, item in enumerate(items or ()):
        if item is not None:
            _paste(canvas, item, item_box(item.size, k, n, size))
    return canvas


# --- what a prompt shows -------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """One subject of a picture, in a column.

    ``identity`` is what "the same subject" means for impostors (a CogCanvas person entity, else the
    subject id); ``ref_id`` is the reference image pasted; ``item_ref_id`` the bound CogCanvas item.
    """

    identity: str
    ref_id: str
    item_ref_id: str | None = None


def _no_background(prompt: dict) -> str | None:
    return None


@dataclass(frozen=True)
class Layout:
    """How a benchmark's prompts become baseline pictures; its spec names it (``BenchmarkSpec.baselines``,
    ``"module:attr"``), so this module knows no benchmark by name.

    ``slots(data, prompt)``: the prompt's subjects, left to right as the prompt lays them out.
    ``background_ref_id(prompt)``: the reference id of its background, or None (a grey canvas).
    ``impostors(data, slots, rng)``: the slots with every subject replaced by another identity; None
    uses :func:`pick_impostors` over the whole reference pool (identity = reference id).
    ``pool(data)``: one slot per identity of the benchmark (``crowd``); None: one per reference.
    """

    slots: Callable[[BenchmarkData, dict], list[Slot]]
    background_ref_id: Callable[[dict], str | None] = _no_background
    impostors: Callable[[BenchmarkData, list[Slot], random.Random], list[Slot]] | None = None
    #: every identity of the pool, one slot each (``crowd``); None: every reference is an identity
    pool: Callable[[BenchmarkData], list[Slot]] | None = None


def layout(data: BenchmarkData) -> Layout:
    if data.spec.baselines is None:
        raise BenchmarkDataError(f"no baselines for benchmark {data.name!r} (its spec names no baselines layout)")
    return data.spec.load("baselines")


def prompt_slots(data: BenchmarkData, prompt: dict) -> list[Slot]:
    """The prompt's subjects, left to right as the prompt lays them out."""
    return layout(data).slots(data, prompt)


def reference_image(data: BenchmarkData, ref_id: str, prompt: dict) -> Image.Image:
    try:
        return data.references[ref_id]["image"]
    except KeyError:
        where = f"prompt {prompt['prompt_id']}"
        raise BenchmarkDataError(f"{where}: reference {ref_id!r} is not in the benchmark") from None


def background_image(data: BenchmarkData, prompt: dict) -> Image.Image | None:
    """The prompt's background reference (as its layout says), or None (a grey canvas)."""
    ref_id = layout(data).background_ref_id(prompt)
    return reference_image(data, ref_id, prompt) if ref_id else None


def render(data: BenchmarkData, prompt: dict, slots: Sequence[Slot], size: int) -> Image.Image:
    """The picture of ``slots`` (left to right) on the prompt's background."""
    subjects = [reference_image(data, s.ref_id, prompt) for s in slots]
    items = [reference_image(data, s.item_ref_id, prompt) if s.item_ref_id else None for s in slots]
    return compose(background_image(data, prompt), subjects, size, items=items if any(items) else None)


def _rng(seed: int, *parts: str) -> random.Random:
    """A generator fixed by ``seed`` and the parts (e.g. the prompt id), independent of hash salting."""
    digest = hashlib.sha256(json.dumps([seed, *parts]).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def rotate(slots: Sequence[Slot]) -> list[Slot]:
    """Every slot moved one column left, the leftmost to the right end: a derangement for N >= 2."""
    return list(slots[1:]) + list(slots[:1])


def pick_impostors(current: Sequence[str], pool: Sequence[str], rng: random.Random) -> list[str]:
    """A replacement for each of ``current``, never itself, all distinct.

    Identities outside ``current`` come first; when the pool has fewer outsiders than slots, the
    outsiders take random slots and the remaining slots get a derangement of their own subjects, so
    every slot still shows someone else (the layout then holds prompt subjects in wrong places).
    """
    taken = set(current)
    outsiders = [p for p in dict.fromkeys(pool) if p not in taken]
    rng.shuffle(outsiders)
    n = len(current)
    if len(outsiders) >= n:
        return outsiders[:n]
    order = list(range(n))
    rng.shuffle(order)
    chosen: list[str | None] = [None] * n
    for k, outsider in zip(order, outsiders):
        chosen[k] = outsider
    rest = order[len(outsiders) :]
    if len(rest) == 1:
        # Every other slot holds an outsider, so any other subject of the prompt is still unused.
        others = [c for c in current if c != current[rest[0]]]
        if not others:
            raise ValueError(f"no impostor for {current[rest[0]]!r}: the pool holds no other identity")
        chosen[rest[0]] = rng.choice(others)
    else:
        for i, k in enumerate(rest):
            chosen[k] = current[rest[(i + 1) % len(rest)]]
    return chosen  # type: ignore[return-value]


def impostor_slots(data: BenchmarkData, prompt: dict, seed: int) -> list[Slot]:
    """The collage's slots with every subject replaced by another identity (items kept in place)."""
    slots = prompt_slots(data, prompt)
    rng = _rng(seed, "impostor", prompt["prompt_id"])
    own = layout(data).impostors
    if own is not None:
        return own(data, slots, rng)
    chosen = pick_impostors([s.identity for s in slots], list(data.references), rng)
    return [Slot(i, i) for i in chosen]


def impostor_is_pure(data: BenchmarkData, prompt: dict, seed: int = 0) -> bool:
    """Whether the impostor picture of ``prompt`` shows nobody of the prompt.

    When the pool has fewer outsiders than the prompt has subjects, some prompt subjects stand in
    other subjects' places; position-blind metrics (Hungarian-matched ID-Sim, SCR) still find those
    subjects, so metric sanity checks that expect identity to drop should select pure prompts.
    """
    shown = {s.identity for s in impostor_slots(data, prompt, seed)}
    return not shown & {s.identity for s in prompt_slots(data, prompt)}


# --- the baselines -------------------------------------------------------------------------------


def collage(data: BenchmarkData, prompt: dict, size: int, seed: int = 0) -> Image.Image:
    """The prompt's subjects in its layout on its background (CHARIS: the one subject, centred)."""
    return render(data, prompt, prompt_slots(data, prompt), size)


def swap(data: BenchmarkData, prompt: dict, size: int, seed: int = 0) -> Image.Image:
    """The collage's subjects rotated by one column; with one subject (CHARIS), the collage mirrored."""
    slots = prompt_slots(data, prompt)
    if len(slots) < 2:
        return ImageOps.mirror(collage(data, prompt, size, seed))
    return render(data, prompt, rotate(slots), size)


def impostor(data: BenchmarkData, prompt: dict, size: int, seed: int = 0) -> Image.Image:
    """The collage with each subject replaced by a different identity of the pool."""
    return render(data, prompt, impostor_slots(data, prompt, seed), size)


def clone(data: BenchmarkData, prompt: dict, size: int, seed: int = 0) -> Image.Image:
    """The leftmost subject in every column; CogCanvas slots keep their own items."""
    slots = prompt_slots(data, prompt)
    first = slots[0]
    return render(data, prompt, [replace(s, identity=first.identity, ref_id=first.ref_id) for s in slots], size)


def crossed(data: BenchmarkData, prompt: dict, size: int, seed: int = 0) -> Image.Image:
    """The collage's subjects rotated by one column, each item left in its column: every identity stands
    with another person's item (the binding failure the paper names). Without items, ``swap``."""
    slots = prompt_slots(data, prompt)
    if len(slots) < 2:
        return swap(data, prompt, size, seed)
    moved = rotate(slots)
    return render(data, prompt, [replace(m, item_ref_id=s.item_ref_id) for m, s in zip(moved, slots)], size)


def crowd(data: BenchmarkData, prompt: dict, size: int, seed: int = 0) -> Image.Image:
    """The prompt's subjects in its layout (with their items), then every other identity of the pool."""
    slots = prompt_slots(data, prompt)
    own = layout(data).pool
    pool = own(data) if own is not None else [Slot(r, r) for r in data.references]
    shown = {s.identity for s in slots}
    return render(data, prompt, slots + [p for p in pool if p.identity not in shown], size)


def background(data: BenchmarkData, prompt: dict, size: int, seed: int = 0) -> Image.Image:
    """No subject: the background reference resized to the canvas, or the empty grey canvas."""
    return fit_background(background_image(data, prompt), size)


def blank(data: BenchmarkData, prompt: dict, size: int, seed: int = 0) -> Image.Image:
    """A uniform mid-grey canvas: no subject, no background, no texture."""
    return Image.new("RGB", (size, size), NEUTRAL_GREY)


def noise(data: BenchmarkData, prompt: dict, size: int, seed: int = 0) -> Image.Image:
    """Uniform RGB noise, fixed by ``seed`` and the prompt id (every prompt gets its own picture)."""
    rng = np.random.default_rng(_rng(seed, "noise", prompt["prompt_id"]).getrandbits(64))
    return Image.fromarray(rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8), "RGB")


def copy(data: BenchmarkData, prompt: dict, size: int, seed: int = 0) -> Image.Image:
    """One subject: its reference image, own size and pixels (``size`` is ignored); several: the collage.

    A picture cannot copy N references at once; the collage (each reference pasted whole) is the
    closest thing, so multi-subject prompts get it and score what the collage scores.
    """
    slots = prompt_slots(data, prompt)
    if len(slots) != 1:
        return collage(data, prompt, size, seed)
    return reference_image(data, slots[0].ref_id, prompt).convert("RGB")


def _colours(image: Image.Image, bands: int) -> list[tuple[int, int, int]]:
    """The mean colour of ``bands`` horizontal bands of the image's central half (where a subject
    stands in a portrait-like reference), top to bottom; transparent pixels left out."""
    rgba = image.convert("RGBA").resize((32, 32), Image.Resampling.BOX)
    pixels = np.asarray(rgba, dtype=np.float64)[:, 8:24]
    out = []
    for band in np.array_split(pixels, bands, axis=0):
        seen = band[band[..., 3] > 127][:, :3]
        out.append(tuple(int(v) for v in (seen.mean(axis=0) if len(seen) else NEUTRAL_GREY)))
    return out


def figure(reference: Image.Image, box: Box, rng: random.Random) -> Image.Image:
    """A flat figure in ``box``-sized RGBA: a head, a body and legs in the colours of the reference's
    top, middle and lower bands, leaning and shrunk by ``rng`` (a pose and scale of its own). Drawn
    with shapes only, so no pixel, edge or texture of the reference is in it."""
    from PIL import ImageDraw

    width, height = max(8, box[2] - box[0]), max(8, box[3] - box[1])
    head, body, legs = _colours(reference, 3)
    scale = rng.uniform(0.7, 0.95)
    lean = rng.uniform(-0.12, 0.12) * width
    w, h = width * scale, height * scale
    x0, y0 = (width - w) / 2, height - h
    picture = Image.new("RGBA", (width, height), (0, 0, 0, 0))
    draw = ImageDraw.Draw(picture)
    cx = x0 + w / 2
    draw.ellipse((cx - w * 0.16 + lean, y0, cx + w * 0.16 + lean, y0 + h * 0.22), fill=head + (255,))
    draw.polygon(
        [
            (cx - w * 0.3 + lean * 0.6, y0 + h * 0.24),
            (cx + w * 0.3 + lean * 0.6, y0 + h * 0.24),
            (cx + w * 0.36, y0 + h * 0.62),
            (cx - w * 0.36, y0 + h * 0.62),
        ],
        fill=body + (255,),
    )
    draw.rectangle((cx - w * 0.28, y0 + h * 0.62, cx - w * 0.04, y0 + h), fill=legs + (255,))
    draw.rectangle((cx + w * 0.04, y0 + h * 0.62, cx + w * 0.28, y0 + h), fill=legs + (255,))
    return picture


def _flat_items(canvas: Image.Image, data: BenchmarkData, prompt: dict, slots: Sequence[Slot], size: int) -> None:
    """Each CogCanvas item of ``slots`` as a flat ellipse in its reference's colour, at its place."""
    from PIL import ImageDraw

    for k, slot in enumerate(slots):
        if slot.item_ref_id:
            item = reference_image(data, slot.item_ref_id, prompt)
            x0, y0, x1, y1 = item_box(item.size, k, len(slots), size)
            ImageDraw.Draw(canvas).ellipse((x0, y0, x1, y1), fill=_colours(item, 1)[0])


def mannequin(data: BenchmarkData, prompt: dict, size: int, seed: int = 0) -> Image.Image:
    """The prompt followed without its references' pixels: a flat figure per subject in the colours of
    its reference (:func:`figure`), each item a flat ellipse in its colour, on the prompt's background."""
    slots = prompt_slots(data, prompt)
    rng = _rng(seed, "mannequin", prompt["prompt_id"])
    canvas = fit_background(background_image(data, prompt), size)
    n = len(slots)
    for k, slot in enumerate(slots):
        reference = reference_image(data, slot.ref_id, prompt)
        box = subject_box(reference.size, k, n, size)
        drawn = figure(reference, box, rng)
        canvas.paste(drawn.convert("RGB"), box[:2], drawn)
    _flat_items(canvas, data, prompt, slots, size)
    return canvas


# Drawn people shipped with the package (CHARIS sample subjects; licences in samples/LICENSES.md) on whom
# dlib's HOG detector, upsampling once, finds a face when pasted in a 2-5 column layout at 512 px
# (oca_man_face and the flat old man at every width, the flat woman at most). The other drawn people
# of the samples show no face it finds (oca_happy_woman, oca_man_kempson) or lose it in narrow columns.
STRANGER_FILES = (
    "subjects/human/cartoon/oca_man_face.jpg",
    "subjects/human/vector/fluent_flat_old_man.jpg",
    "subjects/human/vector/fluent_flat_woman.jpg",
)
# pHash distance (of 64 bits) at or under which a stranger counts as one of the benchmark's references
# (the copy check's own pixel threshold, copies.PHASH_MAX_DISTANCE): a re-encoded or resized copy of a
# stranger in the pool would make the baseline a copier.
STRANGER_PHASH_DISTANCE = 10


# strangers() per benchmark object: it hashes every reference, so once per benchmark, not per prompt
# (1,361 prompts x 1,952 references at CogCanvas's paper size). Held weakly: the entry goes with the data.
_STRANGERS: dict[int, tuple[weakref.ref, list[Image.Image]]] = {}


def strangers(data: BenchmarkData) -> list[Image.Image]:
    """The shipped strangers (``STRANGER_FILES``) that are none of ``data``'s references, in that order.

    Raises :class:`BenchmarkDataError` when every one is in the benchmark (CHARIS built from the samples
    holds them all as subjects): a "stranger" pasted from the pool would be a copy, not a stranger."""
    held = _STRANGERS.get(id(data))
    if held is not None and held[0]() is data:
        return held[1]
    found, key = _find_strangers(data), id(data)
    _STRANGERS[key] = (weakref.ref(data, lambda _: _STRANGERS.pop(key, None)), found)
    return found


def _find_strangers(data: BenchmarkData) -> list[Image.Image]:
    from importlib import resources

    import imagehash

    from idbench.evaluate_pkg.images import subject_mask

    taken = [imagehash.phash(entry["image"]) for entry in data.references.values()]
    out = []
    for name in STRANGER_FILES:
        image = Image.open(io.BytesIO((resources.files("idbench.samples") / name).read_bytes())).convert("RGB")
        code = imagehash.phash(image)
        if all(code - other > STRANGER_PHASH_DISTANCE for other in taken):
            # Cut from its white page (the copy check's subject mask), as a person stands in a scene.
            alpha = Image.fromarray(subject_mask(np.asarray(image)).astype(np.uint8) * 255)
            out.append(Image.merge("RGBA", (*image.split(), alpha)))
    if not out:
        raise BenchmarkDataError(
            f"no stranger for {data.name}: every shipped stranger ({', '.join(STRANGER_FILES)}) is one of its "
            "references, so pasting one would copy the benchmark"
        )
    return out


def _stranger_picture(data: BenchmarkData, prompt: dict, size: int, seed: int, *, one_face: bool) -> Image.Image:
    """Each subject of the prompt shown as a stranger (the k-th slot the (offset + k)-th stranger, or
    with ``one_face`` the same one in every slot), items as flat shapes, on the prompt's background.

    The strangers are heads and shoulders: each stands at the top of its subject's place rather than on
    the baseline, so the item at the column's lower right never hides its face."""
    slots = prompt_slots(data, prompt)
    faces = strangers(data)
    offset = _rng(seed, "stranger", prompt["prompt_id"]).randrange(len(faces))
    canvas = fit_background(background_image(data, prompt), size)
    shown = [faces[offset if one_face else (offset + k) % len(faces)] for k in range(len(slots))]
    top = _baseline(size) - round(size * SUBJECT_HEIGHT)
    for k, person in enumerate(shown):
        x0, y0, x1, y1 = subject_box(person.size, k, len(slots), size)
        _paste(canvas, person, (x0, top, x1, top + y1 - y0))
    _flat_items(canvas, data, prompt, slots, size)
    return canvas


def stranger(data: BenchmarkData, prompt: dict, size: int, seed: int = 0) -> Image.Image:
    """Every subject replaced by a drawn person from outside the benchmark (neighbours differ), each
    item a flat shape in its colour, on the prompt's background: faces, but nobody's, and no copy."""
    return _stranger_picture(data, prompt, size, seed, one_face=False)


def stranger_clone(data: BenchmarkData, prompt: dict, size: int, seed: int = 0) -> Image.Image:
    """As :func:`stranger` with one stranger in every slot: the homogenization failure without a copy."""
    return _stranger_picture(data, prompt, size, seed, one_face=True)


RENDERERS: dict[str, Callable[[BenchmarkData, dict, int, int], Image.Image]] = {
    "collage": collage,
    "swap": swap,
    "impostor": impostor,
    "clone": clone,
    "background": background,
    "blank": blank,
    "noise": noise,
    "copy": copy,
    "crossed": crossed,
    "crowd": crowd,
    "mannequin": mannequin,
    "stranger": stranger,
    "stranger-clone": stranger_clone,
}

NOTES = {
    "collage": "Not a generative model: the prompt's reference subjects pasted onto its background in the "
    "prompt's layout, an upper anchor for identity, position and binding metrics.",
    "swap": "Not a generative model: the collage with every subject moved one slot (items stay with their "
    "persons; a single subject is mirrored), so identity metrics should match the collage's while "
    "position and binding checks fail.",
    "impostor": "Not a generative model: the collage with each subject replaced by a different identity of "
    "the benchmark's pool, so identity metrics should drop while layout and background stay.",
    "clone": "Not a generative model: the prompt's leftmost subject pasted into every slot, the "
    "homogenization failure that collapse metrics must catch.",
    "background": "Not a generative model: the prompt's background alone (a grey canvas where the benchmark "
    "has none), the floor of every identity metric.",
    "blank": "Not a generative model: a uniform mid-grey canvas for every prompt, the floor of every metric.",
    "noise": "Not a generative model: seeded uniform RGB noise, a different picture per prompt.",
    "copy": "Not a generative model: the reference image itself for a single-subject prompt (the ceiling of "
    "similarity metrics), the collage for a multi-subject one.",
    "crossed": "Not a generative model: the collage with every subject moved one slot while the items stay in "
    "their places, so each identity holds another person's item; position-blind binding checks pass, "
    "binding grounded on the located identity must fail.",
    "crowd": "Not a generative model: the collage followed by one image of every other identity of the pool, "
    "a picture padded with faces; identity scores that ignore surplus faces keep the collage's value.",
    "mannequin": "Not a generative model: the prompt followed without copying a pixel of its references: "
    "each subject a flat figure in its reference's colours, at its place, in a pose and scale of its own, "
    "each item a flat shape in its colour, on the prompt's background. Not a copy; it keeps no identity.",
    "stranger": "Not a generative model: every subject replaced by a drawn person from outside the benchmark "
    "(neighbours differ), each item a flat shape in its colour, on the prompt's background: faces that are "
    "nobody's of the prompt, and no copy of a reference.",
    "stranger-clone": "Not a generative model: one drawn person from outside the benchmark in every slot, items "
    "as flat shapes, on the prompt's background: the homogenization failure without copying a reference.",
}

# --- writing a submission ------------------------------------------------------------------------

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def image_path(prompt_id: str, seed: int) -> str:
    """The manifest's file for a pair, relative to the submission folder."""
    return f"images/{prompt_id}_s{seed}.png"


def submission_metadata(name: str, data: BenchmarkData, size: int, seed: int) -> dict:
    """The submission.json of a baseline."""
    return {
        "benchmark": data.name,
        "model": f"baseline-{name}",
        "link": "",
        "license": "same as the benchmark's references",
        "generation": {"baseline": name, "size": size, "seed": seed},
        "notes": NOTES[name],
        "idbench_version": idbench.__version__,
    }


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    # Level 1: a few % larger than the default 6, four times faster. Pillow writes no timestamp, so
    # the same pixels give the same bytes.
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def make_baseline(
    name: str,
    data: BenchmarkData,
    out: Path,
    *,
    size: int = 512,
    seed: int = 0,
    overwrite: bool = False,
) -> Path:
    """Write the ``name`` baseline of ``data`` as a submission folder ``out``; returns ``out``.

    ``out`` holds ``submission.json``, ``manifest.csv`` (``prompt_id,seed,file``, one row per required
    pair, in ``data.required_pairs`` order) and ``images/<prompt_id>_s<seed>.png`` (``size`` x ``size``
    RGB; ``copy`` of a single-subject prompt: the reference's own size). Everything is written into a temporary sibling folder first and moved into place when
    complete; an existing ``out`` is refused unless ``overwrite``, and then replaced only at the end.
    """
    if name not in RENDERERS:
        raise ValueError(f"unknown baseline {name!r}; choose one of {', '.join(BASELINES)}")
    if isinstance(size, bool) or not isinstance(size, int) or not MIN_SIZE <= size <= MAX_SIZE:
        raise ValueError(f"size must be an integer from {MIN_SIZE} to {MAX_SIZE}, got {size!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    out = Path(out)
    for prompt_id, _ in data.required_pairs:
        if not _SAFE_ID.fullmatch(prompt_id):
            raise BenchmarkDataError(f"prompt id {prompt_id!r} cannot name an image file")
    with atomic_directory(out, overwrite=overwrite) as staging:
        (staging / "images").mkdir()
        rows = []
        rendered: tuple[str, bytes] | None = None  # pairs come grouped by prompt: render each prompt once
        for prompt_id, pair_seed in data.required_pairs:
            if rendered is None or rendered[0] != prompt_id:
                picture = RENDERERS[name](data, data.prompt_rows[prompt_id], size, seed)
                rendered = (prompt_id, _png(picture))
            file = image_path(prompt_id, pair_seed)
            (staging / file).write_bytes(rendered[1])
            rows.append((prompt_id, pair_seed, file))
        with (staging / "manifest.csv").open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(("prompt_id", "seed", "file"))
            writer.writerows(rows)
        metadata = submission_metadata(name, data, size, seed)
        (staging / "submission.json").write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    return out


def baseline_from_folder(
    name: str,
    benchmark: str,
    data_dir: str | Path,
    out: str | Path,
    *,
    size: int = 512,
    seed: int = 0,
    overwrite: bool = False,
    cache_dir: str | None = None,
) -> Path:
    """``idbench baseline NAME BENCHMARK --data DIR --out DIR``: load, check the benchmark, write."""
    data = load_benchmark_data(data_dir, cache_dir=cache_dir)
    if data.name != benchmark:
        raise BenchmarkDataError(f"{data_dir} holds the {data.name} benchmark, not {benchmark}")
    return make_baseline(name, data, Path(out), size=size, seed=seed, overwrite=overwrite)

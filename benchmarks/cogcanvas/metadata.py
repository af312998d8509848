"""Typed reference metadata read off the images by a multimodal LLM (CogCanvas, paper 001, sections 3.3-3.4).

The CogCanvas sampler conditions on per-reference metadata: which interactions an item affords (only a
wearable item can be worn), how large it is (the size x interaction-strength diversity grid), what kind
of scene a background is. The paper has an MLLM extract these fields for every reference, plus the
demographic attributes of every identity, which feed the audit of the identity pool. This module does
that through the project's judge layer (:mod:`idbench.evaluate_pkg.judge`), so the answers are schema-checked,
retried and cached like every other judged answer.

Three steps, each usable on its own:

1. :func:`extract_metadata` sends one request per reference image (all in one ``judge.ask`` call, so an
   asynchronous client runs them concurrently) and returns a :class:`MetadataReport` with one entry per
   image. An answer that is malformed, fails the schema or contradicts itself (a landmark scene without a
   landmark name, an item that affords nothing) leaves that image's metadata empty and the entry marked
   failed with the reason: the image stays in the report and in the pool, never dropped for it.
2. :func:`merge_metadata` fills the builder's reference rows with the extracted values. A value a
   curator wrote is never replaced unless ``overwrite=True``; where the two disagree, the disagreement is
   reported either way.
3. :func:`demographic_balance` counts the identity pool by gender, age group and ethnicity (and their
   pairs) and flags groups far below parity: the audit the paper ran before freezing its pool.

The vocabularies are the builder's (:mod:`idbench.benchmarks.cogcanvas.spec`), so whatever is extracted is
something the sampler and the dataset schema accept. Ethnicity: the paper names the attribute but not
its categories; the seven groups of the FairFace face-attribute dataset are used (plus ``unclear``),
a common choice for perceived-ethnicity labels of face images.

Example::

    refs = ref_inputs(reference_rows)                 # rows with ref_id, kind, name, image={"bytes": ...}
    report = extract_metadata(judge, refs)            # one request per image
    merged = merge_metadata(reference_rows, report)   # curated values kept; conflicts listed
    audit = demographic_balance(merged.rows)          # counts, shares, under-represented groups
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import pandas as pd

from idbench.benchmarks.cogcanvas.spec import (
    AGE_GROUPS,
    ITEM_INTERACTIONS,
    ITEM_KINDS,
    KINDS,
    SCENE_TYPES,
    SIZE_CATEGORIES,
)
from idbench.evaluate_pkg.judge.types import Judge, JudgeAnswer, JudgeRequest

# --- vocabularies ---------------------------------------------------------------------------------

UNCLEAR = "unclear"  # what the model answers when the picture does not allow a reading
GENDER_PRESENTATIONS = ("female", "male", UNCLEAR)
# FairFace's seven perceived-ethnicity groups (Karkkainen and Joo, 2021), snake-cased, plus "unclear".
ETHNICITIES = (
    "white",
    "black",
    "east_asian",
    "southeast_asian",
    "south_asian",
    "middle_eastern",
    "latino_hispanic",
    UNCLEAR,
)

# What each age group means, told to the model (the builder's groups carry no ages of their own).
AGE_GUIDE = {
    "child": "younger than about 18",
    "young_adult": "about 18 to 30",
    "adult": "about 30 to 60",
    "senior": "older than about 60",
}
# The paper's size axis runs from small handheld to large wearable; the builder has three steps.
SIZE_GUIDE = {
    "small": "handheld: fits in one hand, or a small accessory (cup, phone, book, watch, hat, shoes, handbag)",
    "medium": "held in both arms, or one garment worn on the body (chair, guitar, suitcase, dress, coat)",
    "large": "as big as a person or bigger, or a full-body outfit (bicycle, sofa, car, statue, costume)",
}
# When a person can plausibly do each interaction with an item; keys are the builder's ITEM_INTERACTIONS.
AFFORDANCE_GUIDE = {
    "hold": "pick it up and hold it in the hands",
    "wear": "put it on the body: clothing, shoes, hats, jewellery, glasses, bags worn on the body",
    "carry": "carry it along while walking",
    "sit_on": "sit on it (a chair, a bench, a bicycle)",
    "lean_on": "lean against it while standing (it must be large and stable enough)",
    "use": "operate it for its purpose (play the guitar, type on the laptop, ride the bicycle)",
    "point_at": "point at it from a distance",
    "look_at": "look at it",
    "stand_beside": "stand next to it (it must be at least roughly person-sized, or placed on the ground)",
}
SCENE_GUIDE = {
    "landmark": "a famous, nameable place or monument (a named bridge, tower, temple, bay)",
    "landscape": "natural scenery without a named landmark (mountains, beach, forest, fields)",
    "cityscape": "streets, squares, buildings or a skyline that are not one named landmark",
    "indoor": "inside a room or building",
}
assert set(AGE_GUIDE) == set(AGE_GROUPS), "AGE_GUIDE must describe exactly the builder's age groups"
assert set(SIZE_GUIDE) == set(SIZE_CATEGORIES), "SIZE_GUIDE must describe exactly the builder's size categories"
assert set(AFFORDANCE_GUIDE) == set(ITEM_INTERACTIONS), "AFFORDANCE_GUIDE must cover exactly ITEM_INTERACTIONS"
assert set(SCENE_GUIDE) == set(SCENE_TYPES), "SCENE_GUIDE must describe exactly the builder's scene types"

# --- the questions ------------------------------------------------------------------------------------

TASKS = {
    "person": "curation.metadata.identity",
    "object": "curation.metadata.item",
    "fashion": "curation.metadata.item",
    "background": "curation.metadata.background",
}


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    """An object schema with every property required and nothing else allowed (OpenAI strict mode)."""
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


IDENTITY_SCHEMA = _closed(
    {
        "age_group": {"type": "string", "enum": list(AGE_GROUPS)},
        "gender": {"type": "string", "enum": list(GENDER_PRESENTATIONS), "description": "gender presentation"},
        "ethnicity": {"type": "string", "enum": list(ETHNICITIES)},
        "apparel": {"type": "array", "items": {"type": "string"}},
    }
)
ITEM_SCHEMA = _closed(
    {
        "size_category": {"type": "string", "enum": list(SIZE_CATEGORIES)},
        "interactions": {"type": "array", "items": {"type": "string", "enum": list(ITEM_INTERACTIONS)}},
    }
)
BACKGROUND_SCHEMA = _closed(
    {
        "scene_type": {"type": "string", "enum": list(SCENE_TYPES)},
        "landmark": {"type": ["string", "null"]},
    }
)
SCHEMAS: dict[str, dict[str, Any]] = {
    "person": IDENTITY_SCHEMA,
    "object": ITEM_SCHEMA,
    "fashion": ITEM_SCHEMA,
    "background": BACKGROUND_SCHEMA,
}
# The reference-table columns each kind's extraction fills (``apparel`` has no column: report only).
FIELDS: dict[str, tuple[str, ...]] = {
    "person": ("age_group", "gender", "ethnicity"),
    "object": ("size_category", "interactions"),
    "fashion": ("size_category", "interactions"),
    "background": ("scene_type", "landmark"),
}

SYSTEM = (
    "You annotate reference images for an image-generation benchmark. Report only what the image "
    "itself shows. Reply with one JSON object that matches the given schema and nothing else."
)


def _options(guide: Mapping[str, str]) -> str:
    return "\n".join(f"  - {name}: {meaning}" for name, meaning in guide.items())


def identity_prompt() -> str:
    """The question for a person reference. The curator's label is not shown: the audit must rest on
    what the picture shows, not on words someone wrote next to it."""
    return (
        "This image is the reference photo of one person.\n"
        f"- age_group, the person's apparent age:\n{_options(AGE_GUIDE)}\n"
        "- gender: the gender the person presents as, as a viewer would read it from the picture (not a "
        f"claim about who they are); one of {', '.join(GENDER_PRESENTATIONS)}.\n"
        "- ethnicity: the perceived ethnic group, one of "
        f"{', '.join(ETHNICITIES)}; use {UNCLEAR} when the picture does not allow a reasonable reading.\n"
        "- apparel: the clothing and accessories visible on the person, each a short noun phrase with its "
        'colour ("red jacket", "black-rimmed glasses"); an empty list when none is visible.'
    )


def item_prompt(kind: str, name: str | None) -> str:
    """The question for an object or fashion item; its label helps the model tell what the item is."""
    label = f' The curator calls it "{name}".' if name else ""
    return (
        f"This image is the reference of one {kind} item for people to interact with.{label}\n"
        f"- size_category:\n{_options(SIZE_GUIDE)}\n"
        "- interactions: every interaction below that a person in a photo could plausibly have with this "
        f"item (at least one; list each once):\n{_options(AFFORDANCE_GUIDE)}"
    )


def background_prompt(name: str | None) -> str:
    """The question for a background scene; its label helps name a landmark the model half-recognises."""
    label = f' The curator calls it "{name}".' if name else ""
    return (
        f"This image is a background scene in which people will be placed.{label}\n"
        f"- scene_type:\n{_options(SCENE_GUIDE)}\n"
        "- landmark: the landmark's usual name when the scene shows a famous, nameable place "
        "(required when scene_type is landmark), otherwise null."
    )


@dataclass(frozen=True)
class RefInput:
    """One reference image to annotate. ``name`` is the manifest's label (used for items and backgrounds)."""

    ref_id: str
    kind: str
    image: bytes
    name: str | None = None


def ref_inputs(rows: Iterable[Mapping[str, Any]]) -> list[RefInput]:
    """Inputs from reference rows as the builder makes them (``image`` = ``{"bytes": ..., "path": ...}``
    or raw bytes)."""
    inputs = []
    for row in rows:
        image = row["image"]
        data = image.get("bytes") if isinstance(image, Mapping) else image
        inputs.append(RefInput(str(row["ref_id"]), str(row["kind"]), data, row.get("name")))
    return inputs


def metadata_request(ref: RefInput) -> JudgeRequest:
    """The one request for ``ref``: its kind's question, schema and the image."""
    if ref.kind == "person":
        prompt = identity_prompt()
    elif ref.kind in ITEM_KINDS:
        prompt = item_prompt(ref.kind, ref.name)
    elif ref.kind == "background":
        prompt = background_prompt(ref.name)
    else:
        raise ValueError(f"reference {ref.ref_id!r}: kind {ref.kind!r} is not one of {', '.join(KINDS)}")
    schema = SCHEMAS[ref.kind]
    return JudgeRequest(task=TASKS[ref.kind], prompt=prompt, schema=schema, images=(ref.image,), system=SYSTEM)


# --- reading answers ------------------------------------------------------------------------------------


class MetadataAnswerError(ValueError):
    """An answer that cannot be used as metadata (wrong shape, unknown value, contradicts itself)."""


def _choice(value: Mapping[str, Any], key: str, allowed: Sequence[str]) -> str:
    found = value.get(key)
    if found not in allowed:
        raise MetadataAnswerError(f"{key}: {found!r} is not one of {', '.join(allowed)}")
    return found


def _strings(value: Mapping[str, Any], key: str) -> list[str]:
    found = value.get(key)
    if not isinstance(found, list) or not all(isinstance(x, str) for x in found):
        raise MetadataAnswerError(f"{key}: expected a list of strings, found {found!r}")
    return [x.strip() for x in found if x.strip()]


def parse_metadata(kind: str, value: Any) -> dict[str, Any]:
    """The metadata in an answer ``value`` for a reference of ``kind``; raises :class:`MetadataAnswerError`.

    The client already checks the schema; this checks it again (a scripted or custom judge may not) and
    adds the rules a schema does not say: an item affords at least one interaction (the sampler cannot
    bind a person to it otherwise), a landmark scene names its landmark. Interactions come back once
    each, in the builder's order; an empty landmark becomes None.
    """
    if not isinstance(value, Mapping):
        raise MetadataAnswerError(f"expected a JSON object, found {type(value).__name__}")
    if kind == "person":
        apparel = list(dict.fromkeys(_strings(value, "apparel")))
        return {
            "age_group": _choice(value, "age_group", AGE_GROUPS),
            "gender": _choice(value, "gender", GENDER_PRESENTATIONS),
            "ethnicity": _choice(value, "ethnicity", ETHNICITIES),
            "apparel": apparel,
        }
    if kind in ITEM_KINDS:
        size = _choice(value, "size_category", SIZE_CATEGORIES)
        named = _strings(value, "interactions")
        unknown = sorted(set(named) - set(ITEM_INTERACTIONS))
        if unknown:
            raise MetadataAnswerError(f"interactions: unknown {unknown}; known: {', '.join(ITEM_INTERACTIONS)}")
        if not named:
            raise MetadataAnswerError("interactions: the item affords none, so no person could be bound to it")
        return {"size_category": size, "interactions": [name for name in ITEM_INTERACTIONS if name in named]}
    if kind == "background":
        scene = _choice(value, "scene_type", SCENE_TYPES)
        landmark = value.get("landmark")
        if landmark is not None and not isinstance(landmark, str):
            raise MetadataAnswerError(f"landmark: expected a name or null, found {landmark!r}")
        landmark = (landmark or "").strip() or None
        if scene == "landmark" and landmark is None:
            raise MetadataAnswerError("scene_type is landmark but no landmark is named")
        return {"scene_type": scene, "landmark": landmark}
    raise ValueError(f"kind {kind!r} is not one of {', '.join(KINDS)}")


# Every field any kind yields, in the flat audit rows.
REPORT_FIELDS = (
    "age_group",
    "gender",
    "ethnicity",
    "apparel",
    "size_category",
    "interactions",
    "scene_type",
    "landmark",
)

# --- extraction -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RefMetadata:
    """The outcome for one reference image: its metadata, or why there is none."""

    ref_id: str
    kind: str
    values: Mapping[str, Any] = field(default_factory=dict)  # empty when failed
    error: str | None = None
    cached: bool = False
    attempts: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None

    def row(self) -> dict[str, Any]:
        """A flat, JSON-ready record for the audit report (every field of every kind; None where n/a)."""
        record: dict[str, Any] = {
            "ref_id": self.ref_id,
            "kind": self.kind,
            "status": "ok" if self.ok else "failed",
            "error": self.error,
            "cached": self.cached,
            "attempts": self.attempts,
        }
        for name in REPORT_FIELDS:
            record[name] = self.values.get(name)
        return record


@dataclass(frozen=True)
class MetadataReport:
    """What :func:`extract_metadata` found: one entry per input image, in input order."""

    model: str
    entries: tuple[RefMetadata, ...]

    def __getitem__(self, ref_id: str) -> RefMetadata:
        for entry in self.entries:
            if entry.ref_id == ref_id:
                return entry
        raise KeyError(f"no metadata entry for reference {ref_id!r}")

    @property
    def failed(self) -> list[RefMetadata]:
        return [e for e in self.entries if not e.ok]

    @property
    def values(self) -> dict[str, dict[str, Any]]:
        """ref_id -> extracted values, for the images whose extraction succeeded."""
        return {e.ref_id: dict(e.values) for e in self.entries if e.ok}

    def rows(self) -> list[dict[str, Any]]:
        return [e.row() for e in self.entries]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary plus every row: what the builder writes as the metadata audit."""
        return {
            "model": self.model,
            "images": len(self.entries),
            "extracted": len(self.entries) - len(self.failed),
            "failed": len(self.failed),
            "requests": len(self.entries),
            "by_kind": dict(Counter(e.kind for e in self.entries)),
            "failures": [{"ref_id": e.ref_id, "kind": e.kind, "error": e.error} for e in self.failed],
            "rows": self.rows(),
        }


def _check_inputs(references: Sequence[RefInput]) -> None:
    """Bad input is the caller's error, raised before anything is asked (not a judge failure)."""
    seen: set[str] = set()
    for ref in references:
        if ref.ref_id in seen:
            raise ValueError(f"reference {ref.ref_id!r} appears twice")
        seen.add(ref.ref_id)
        if ref.kind not in KINDS:
            raise ValueError(f"reference {ref.ref_id!r}: kind {ref.kind!r} is not one of {', '.join(KINDS)}")
        if not isinstance(ref.image, bytes) or not ref.image:
            raise ValueError(f"reference {ref.ref_id!r}: the image must be non-empty bytes")


def extract_metadata(judge: Judge, references: Sequence[RefInput]) -> MetadataReport:
    """Ask ``judge`` for the metadata of every reference: one request per image, all in one ``ask`` call.

    Every input gets an entry. A failed request (transport, malformed JSON, schema) or an unusable answer
    gives an entry with ``error`` set and no values; nothing is dropped. Raises ``ValueError`` for bad
    input (duplicate ref_id, unknown kind, empty image) before asking anything.
    """
    _check_inputs(references)
    if not references:
        return MetadataReport(judge.model, ())
    answers = judge.ask([metadata_request(ref) for ref in references])
    if len(answers) != len(references):
        raise RuntimeError(f"the judge returned {len(answers)} answers for {len(references)} requests")
    return MetadataReport(judge.model, tuple(_entry(ref, answer) for ref, answer in zip(references, answers)))


def _entry(ref: RefInput, answer: JudgeAnswer) -> RefMetadata:
    common = {"ref_id": ref.ref_id, "kind": ref.kind, "cached": answer.cached, "attempts": answer.attempts}
    if not answer.ok:
        return RefMetadata(error=f"judge: {answer.error}", **common)
    try:
        values = parse_metadata(ref.kind, answer.value)
    except MetadataAnswerError as err:
        return RefMetadata(error=f"invalid answer: {err}", **common)
    return RefMetadata(values=values, **common)


# --- merging into the reference rows -----------------------------------------------------------------------


@dataclass(frozen=True)
class Conflict:
    """A curated value and an extracted one that disagree; ``applied`` when the extracted one won."""

    ref_id: str
    field: str
    curated: Any
    extracted: Any
    applied: bool


@dataclass(frozen=True)
class MergeResult:
    """Reference rows with metadata filled in, and what happened on the way."""

    rows: list[dict[str, Any]]
    filled: list[tuple[str, str, Any]]  # (ref_id, field, value) written where the row had none
    conflicts: list[Conflict]
    missing: list[str]  # ref_ids with no usable extraction (failed or not asked): left as they were
    reconciled: list[str]  # item entities whose extracted size/interactions were made to agree across images

    def as_dict(self) -> dict[str, Any]:
        return {
            "filled": [{"ref_id": r, "field": f, "value": v} for r, f, v in self.filled],
            "conflicts": [vars(c) for c in self.conflicts],
            "missing": list(self.missing),
            "reconciled": list(self.reconciled),
        }


def _empty(value: Any) -> bool:
    if isinstance(value, str):
        return not value.strip()
    return value is None or (isinstance(value, (list, tuple)) and not value)


def _same(a: Any, b: Any) -> bool:
    """Equal as metadata: strings case- and space-insensitively, lists as sets."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return {str(x).strip().casefold() for x in a} == {str(x).strip().casefold() for x in b}
    if isinstance(a, str) and isinstance(b, str):
        return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()
    return a == b


def merge_metadata(
    rows: Sequence[Mapping[str, Any]],
    extracted: MetadataReport | Mapping[str, Mapping[str, Any]],
    overwrite: bool = False,
) -> MergeResult:
    """Fill ``rows`` (the builder's reference rows, with ``ref_id`` and ``kind``) from ``extracted``.

    Only the columns of the row's kind are touched (:data:`FIELDS`). An empty cell is filled; a curated
    value is kept unless ``overwrite``, and every disagreement is listed as a :class:`Conflict` either
    way. Rows are copied, never changed in place; their order is kept.

    The sampler needs every image of one item to agree on size and interactions. Images annotated
    separately can disagree, so for each object/fashion entity the values filled from extraction are
    made to agree: the most common size (the larger on a tie), and the interactions every image affords
    (all that any affords if they share none). Curated values are left as they are.
    """
    values = extracted.values if isinstance(extracted, MetadataReport) else {k: dict(v) for k, v in extracted.items()}
    out: list[dict[str, Any]] = []
    filled: list[tuple[str, str, Any]] = []
    conflicts: list[Conflict] = []
    missing: list[str] = []
    from_model: set[tuple[str, str]] = set()  # (ref_id, field) whose value came from extraction
    for row in rows:
        row = dict(row)
        ref_id, kind = str(row["ref_id"]), row.get("kind")
        found = values.get(ref_id)
        if found is None or kind not in FIELDS:
            missing.append(ref_id)
            out.append(row)
            continue
        for name in FIELDS[kind]:
            if name not in found:
                continue
            new, old = found[name], row.get(name)
            if _empty(old):
                if not _empty(new):
                    row[name] = list(new) if isinstance(new, (list, tuple)) else new
                    filled.append((ref_id, name, row[name]))
                    from_model.add((ref_id, name))
            elif not _same(old, new):
                conflicts.append(Conflict(ref_id, name, old, new, applied=overwrite))
                if overwrite:
                    row[name] = list(new) if isinstance(new, (list, tuple)) else new
                    from_model.add((ref_id, name))
        out.append(row)
    reconciled = _reconcile_items(out, from_model)
    return MergeResult(out, filled, conflicts, missing, reconciled)


def _reconcile_items(rows: list[dict[str, Any]], from_model: set[tuple[str, str]]) -> list[str]:
    """Make the extracted size/interactions of each item entity agree across its images (in place)."""
    by_entity: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("kind") in ITEM_KINDS and row.get("entity_id"):
            by_entity.setdefault(str(row["entity_id"]), []).append(row)
    changed = []
    for entity_id, members in by_entity.items():
        touched = False
        sizes = [r["size_category"] for r in members if r.get("size_category") in SIZE_CATEGORIES]
        if len(set(sizes)) > 1:
            counts = Counter(sizes)
            size = max(counts, key=lambda s: (counts[s], SIZE_CATEGORIES.index(s)))
            for r in members:
                if (r["ref_id"], "size_category") in from_model and r["size_category"] != size:
                    r["size_category"], touched = size, True
        sets = [set(r["interactions"]) for r in members if not _empty(r.get("interactions"))]
        if len({frozenset(s) for s in sets}) > 1:
            agreed = set.intersection(*sets) or set.union(*sets)
            ordered = [name for name in ITEM_INTERACTIONS if name in agreed]
            for r in members:
                if (r["ref_id"], "interactions") in from_model and set(r["interactions"]) != agreed:
                    r["interactions"], touched = ordered, True
        if touched:
            changed.append(entity_id)
    return changed


# --- the demographic audit ------------------------------------------------------------------------------

BALANCE_AXES = ("gender", "age_group", "ethnicity")
DEFAULT_GROUPS: dict[str, tuple[str, ...]] = {
    "gender": tuple(g for g in GENDER_PRESENTATIONS if g != UNCLEAR),
    "age_group": AGE_GROUPS,
    "ethnicity": tuple(e for e in ETHNICITIES if e != UNCLEAR),
}
UNKNOWN = "(unknown)"


@dataclass(frozen=True)
class BalanceReport:
    """The identity pool by gender, age group, ethnicity and their pairs.

    ``table`` has one row per (axis, group): ``count`` identities, ``share`` of the identities whose value
    on that axis is known, ``parity`` (1 / number of groups on the axis), and ``under_represented`` when
    the share is below ``min_ratio`` x parity. ``(unknown)`` rows count identities without a value (or
    ``unclear``); they are never flagged. ``inconsistent`` lists identities whose images disagree on an
    axis (the most common value is used).
    """

    table: pd.DataFrame
    n_identities: int
    min_ratio: float
    inconsistent: dict[str, list[str]]  # entity_id -> axes on which its images disagree

    @property
    def flagged(self) -> list[tuple[str, str]]:
        rows = self.table[self.table["under_represented"]]
        return list(zip(rows["axis"], rows["group"]))

    def as_dict(self) -> dict[str, Any]:
        return {
            "identities": self.n_identities,
            "min_ratio": self.min_ratio,
            "under_represented": [{"axis": a, "group": g} for a, g in self.flagged],
            "inconsistent": self.inconsistent,
            "table": self.table.to_dict(orient="records"),
        }

    def format(self) -> str:
        """Plain-text lines for the build report."""
        lines = [f"identity pool: {self.n_identities} identities (flagged below {self.min_ratio:g} x parity)"]
        for axis, rows in self.table.groupby("axis", sort=False):
            parts = [
                f"{g}={c} ({s:.0%}){' LOW' if low else ''}" if s == s else f"{g}={c}"
                for g, c, s, low in zip(rows["group"], rows["count"], rows["share"], rows["under_represented"])
            ]
            lines.append(f"  {axis}: " + ", ".join(parts))
        return "\n".join(lines)


def _known(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip()) and value.strip() != UNCLEAR


def demographic_balance(
    rows: Iterable[Mapping[str, Any]],
    min_ratio: float = 0.5,
    groups: Mapping[str, Sequence[str]] | None = None,
    pairs: bool = True,
) -> BalanceReport:
    """Audit the identity pool: counts and shares per group, and the groups far below parity.

    ``rows`` are reference rows; only ``kind == "person"`` rows count, once per identity (``entity_id``,
    else ``ref_id``), with each axis's most common value over the identity's images. The groups of an
    axis are ``groups[axis]`` (default: the extraction vocabulary without ``unclear``) plus any other
    value found, so a pool labelled with its own words is still audited. With ``pairs``, the pairs of
    axes (gender x age_group, ...) are audited the same way over the product of their groups.

    >>> demographic_balance(rows).flagged  # doctest: +SKIP
    [('ethnicity', 'black'), ('gender x age_group', 'female x child'), ...]
    """
    if not 0 <= min_ratio <= 1:
        raise ValueError(f"min_ratio must be in [0, 1], got {min_ratio}")
    wanted = {**DEFAULT_GROUPS, **{k: tuple(v) for k, v in (groups or {}).items()}}
    images: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("kind") == "person":
            images.setdefault(str(row.get("entity_id") or row["ref_id"]), []).append(row)

    identity: dict[str, dict[str, str | None]] = {}
    inconsistent: dict[str, list[str]] = {}
    for entity_id, members in sorted(images.items()):
        values: dict[str, str | None] = {}
        for axis in BALANCE_AXES:
            seen = [str(r[axis]).strip() for r in members if _known(r.get(axis))]
            counts = Counter(seen)
            values[axis] = max(counts, key=lambda v: (counts[v], -seen.index(v))) if counts else None
            if len(counts) > 1:
                inconsistent.setdefault(entity_id, []).append(axis)
        identity[entity_id] = values

    axes: list[tuple[str, ...]] = [(a,) for a in BALANCE_AXES]
    if pairs:
        axes += list(combinations(BALANCE_AXES, 2))
    records = []
    for combo in axes:
        per_axis = []
        for axis in combo:
            found = sorted({v[axis] for v in identity.values() if v[axis] is not None} - set(wanted[axis]))
            per_axis.append(list(wanted[axis]) + found)
        keys: list[tuple[str, ...]] = [()]
        for options in per_axis:
            keys = [k + (o,) for k in keys for o in options]
        counts: Counter[tuple[str, ...]] = Counter()
        unknown = 0
        for v in identity.values():
            key = tuple(v[axis] for axis in combo)
            if any(part is None for part in key):
                unknown += 1
            else:
                counts[key] += 1
        known = sum(counts.values())
        parity = 1 / len(keys) if keys else float("nan")
        name = " x ".join(combo)
        for key in keys:
            share = counts[key] / known if known else float("nan")
            records.append(
                {
                    "axis": name,
                    "group": " x ".join(key),
                    "count": counts[key],
                    "share": share,
                    "parity": parity,
                    "under_represented": bool(known and share < min_ratio * parity),
                }
            )
        records.append(
            {
                "axis": name,
                "group": UNKNOWN,
                "count": unknown,
                "share": float("nan"),
                "parity": float("nan"),
                "under_represented": False,
            }
        )
    table = pd.DataFrame.from_records(
        records, columns=["axis", "group", "count", "share", "parity", "under_represented"]
    )
    return BalanceReport(table, len(identity), min_ratio, inconsistent)

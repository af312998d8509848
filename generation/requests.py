"""What an adapter is asked to draw: one :class:`GenerationRequest` per row of the benchmark's template.

The rows are those of the manifest that :func:`idbench.evaluate_pkg.submission.write_template` writes
(``prompt_id, seed, file``), so a generated submission puts each image exactly where the template says.

Reference order and roles (:func:`reference_roles`), built from the walk the baselines already make of a
prompt's subjects (:func:`idbench.evaluate_pkg.baselines.prompt_slots`) and its background:

- **CogCanvas**: the persons by slot letter (``person A``, ``person B``, ... up to E), then each person's
  bound item in the same order (``person A's item``, ...), then ``background``. The prompt text names the
  persons by these letters ("person B (the old man ...) looks at ..."), left to right as it lays them
  out, so the letter is what ties an image to its words; the layout order is the prompt's to say.
- **CHARIS**: its one ``subject``.
- **Identity Collapse**: ``subject 1``, ``subject 2``, ... in the order the prompt mentions them.
- Any other benchmark with a baselines layout: ``subject k`` in layout order, items, then background.

The text-to-image task (CogCanvas' ``text-to-image`` track) gets the same prompt with no references.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from idbench.builders.spec import DEFAULT_TASK
from idbench.evaluate_pkg.baselines import layout, prompt_slots, reference_image
from idbench.evaluate_pkg.data import BenchmarkData, BenchmarkDataError
from idbench.evaluate_pkg.submission import MANIFEST_COLUMNS, MANIFEST_NAME

# The side of the square images asked for unless the user says otherwise: what the paper-era models
# (FLUX, Qwen-Image, OmniGen2) generate natively, and within the validator's limits.
DEFAULT_RESOLUTION = 1024
# Tasks whose images are drawn from the prompt alone.
TEXT_ONLY_TASKS = frozenset({"text-to-image"})
# Tasks that hold images at all (retrieval holds a ranking, nothing to generate).
IMAGE_TASKS = frozenset({DEFAULT_TASK, "text-to-image"})


@dataclass(frozen=True)
class Reference:
    """One reference image handed to the model, with the role it plays in the prompt."""

    role: str  # "person A", "person A's item", "background", "subject", "subject 2"
    ref_id: str
    image: Image.Image = field(repr=False, compare=False)


@dataclass(frozen=True)
class GenerationRequest:
    """One image to generate: the template row it fills and everything the model needs to draw it."""

    benchmark: str
    prompt_id: str
    seed: int
    file: str  # where the image goes, relative to the submission folder (the manifest's ``file``)
    prompt: str
    references: tuple[Reference, ...]
    resolution: int
    task: str = DEFAULT_TASK

    @property
    def images(self) -> list[Image.Image]:
        """The reference images in their documented order (what a multi-reference pipeline takes as ``image=``)."""
        return [r.image for r in self.references]

    @property
    def roles(self) -> list[str]:
        return [r.role for r in self.references]


def manifest_rows(manifest: Path) -> list[tuple[str, int, str]]:
    """The ``(prompt_id, seed, file)`` rows of a template's manifest, in file order."""
    with Path(manifest).open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if tuple(sorted(reader.fieldnames or ())) != tuple(sorted(MANIFEST_COLUMNS)):
            raise BenchmarkDataError(
                f"{manifest}: expected the columns {', '.join(MANIFEST_COLUMNS)}, found {reader.fieldnames}"
            )
        return [(row["prompt_id"], int(row["seed"]), row["file"]) for row in reader]


def _slot_letters(prompt: dict) -> dict[str, str]:
    """entity id -> the person's letter, for prompts that name persons by slot (CogCanvas); else empty."""
    return {p["entity_id"]: p["slot"] for p in prompt.get("persons") or () if p.get("slot")}


def reference_roles(data: BenchmarkData, prompt: dict) -> list[tuple[str, str]]:
    """The prompt's ``(role, ref_id)`` pairs in the documented order (module docstring): subjects, their
    items, then the background."""
    slots = prompt_slots(data, prompt)
    letters = _slot_letters(prompt)
    if letters and all(s.identity in letters for s in slots):
        slots = sorted(slots, key=lambda s: letters[s.identity])
        names = [f"person {letters[s.identity]}" for s in slots]
    elif len(slots) == 1:
        names = ["subject"]
    else:
        names = [f"subject {k}" for k in range(1, len(slots) + 1)]
    roles = [(name, s.ref_id) for name, s in zip(names, slots)]
    roles += [(f"{name}'s item", s.item_ref_id) for name, s in zip(names, slots) if s.item_ref_id]
    background = layout(data).background_ref_id(prompt)
    if background:
        roles.append(("background", background))
    return roles


def prompt_references(data: BenchmarkData, prompt: dict, task: str = DEFAULT_TASK) -> tuple[Reference, ...]:
    """The prompt's reference images with their roles; none for a text-only task."""
    if task in TEXT_ONLY_TASKS:
        return ()
    return tuple(
        Reference(role, ref_id, reference_image(data, ref_id, prompt)) for role, ref_id in reference_roles(data, prompt)
    )


def check_task(data: BenchmarkData, task: str) -> None:
    """Refuse a task the benchmark does not offer, or one that holds no images."""
    if task not in data.spec.tasks:
        raise BenchmarkDataError(f"{data.name} offers the tasks {', '.join(data.spec.tasks)}, not {task!r}")
    if task not in IMAGE_TASKS:
        raise BenchmarkDataError(
            f"task {task!r} holds no images, nothing to generate; generate one of {', '.join(sorted(IMAGE_TASKS))}"
        )


def check_resolution(resolution: int) -> int:
    if not isinstance(resolution, int) or not 16 <= resolution <= 4096:
        raise BenchmarkDataError(f"resolution {resolution!r}: expected a side in pixels between 16 and 4096")
    return resolution


def build_requests(
    data: BenchmarkData,
    rows: list[tuple[str, int, str]],
    *,
    resolution: int = DEFAULT_RESOLUTION,
    task: str = DEFAULT_TASK,
) -> list[GenerationRequest]:
    """One request per manifest row, references decoded once per prompt and shared by its seeds."""
    check_task(data, task)
    check_resolution(resolution)
    prompts = data.prompt_rows
    cache: dict[str, tuple[Reference, ...]] = {}
    out = []
    for prompt_id, seed, file in rows:
        if prompt_id not in prompts:
            raise BenchmarkDataError(f"{MANIFEST_NAME}: prompt_id {prompt_id!r} is not in {data.name}")
        prompt = prompts[prompt_id]
        if prompt_id not in cache:
            cache[prompt_id] = prompt_references(data, prompt, task)
        out.append(
            GenerationRequest(data.name, prompt_id, seed, file, prompt["prompt"], cache[prompt_id], resolution, task)
        )
    return out

"""The run: every missing image of a submission generated, written atomically, and recorded.

:func:`generate_submission` makes the submission folder with the benchmark's template (the very
manifest ``idbench template`` writes) when it does not exist, then walks the manifest's rows (or the
first ``limit``): a row whose image file exists is skipped, so a rerun after kill -9 or Ctrl-C
generates only what is missing. Each image is encoded to a temporary file in its own folder and moved
into place with ``os.replace``: a file at a manifest path is always a whole image. ``submission.json``
is rewritten the same way after every run with the generation record (:func:`record`).

Under ``accelerate launch`` (several processes), the main process writes the template, every process
takes the same list of missing rows and generates every ``num_processes``-th of them from its own
index, and the main process writes ``submission.json`` once all are done: each image is written once,
and since every image is seeded by its own CPU generator, the images are those of a one-process run.

A ``shard`` (:mod:`idbench.shards`: ``--shard K/N``, a Slurm job array, a Kubernetes indexed Job) takes
only its own rows, with no rendezvous with the other shards: each may create the folder (the first
template renamed into place wins; the others continue it, as a rerun would), writes only its own
images, and rewrites ``submission.json`` (the same record but for the time per image). A killed shard
rerun generates only its missing images; ``accelerate launch`` inside a shard splits the shard's rows.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Protocol

from PIL import Image

from idbench import settings
from idbench.atomic import OutputExistsError, temporary_stem, write_atomically, write_text_atomically
from idbench.builders.spec import DEFAULT_TASK
from idbench.evaluate_pkg.data import BenchmarkData
from idbench.evaluate_pkg.images import size_problem
from idbench.evaluate_pkg.submission import (
    MANIFEST_NAME,
    MAX_JSON_DEPTH,
    MAX_METADATA_BYTES,
    METADATA_NAME,
    SubmissionError,
    check_resume_folder,
    json_depth,
    write_template,
)
from idbench.generation.adapters import UNREPORTED_SEED_RULE, GeneratorError, generation_record
from idbench.generation.requests import DEFAULT_RESOLUTION, GenerationRequest, build_requests, check_task
from idbench.shards import Shard, unit_key

# The libraries whose versions make an image reproducible, recorded when installed.
RECORDED_LIBRARIES = ("idbench", "torch", "diffusers", "transformers", "accelerate", "pillow", "numpy")


class GenerationRunError(GeneratorError):
    """A submission folder that a run cannot continue, or an adapter that gave no image."""


class ProcessGroup(Protocol):
    """What a run needs of its processes (``accelerate.PartialState`` has it): who it is, and a barrier."""

    process_index: int
    num_processes: int
    is_main_process: bool

    def wait_for_everyone(self) -> None: ...


class SingleProcess:
    """The one-process group: index 0 of 1, nothing to wait for."""

    process_index = 0
    num_processes = 1
    is_main_process = True

    def wait_for_everyone(self) -> None:
        return None


# Images after which a run estimates its whole time (the first image also pays for warm-up).
ESTIMATE_AFTER = 3


@dataclass(frozen=True)
class RunReport:
    """What one run did: images generated now, skipped as already there, and the seconds it spent on them."""

    out: Path
    generated: int
    skipped: int
    total: int  # rows of the manifest considered (all of them, or --limit)
    seconds: float

    @property
    def seconds_per_image(self) -> float | None:
        return self.seconds / self.generated if self.generated else None


def library_versions(names: Iterable[str] = RECORDED_LIBRARIES) -> dict[str, str]:
    """name -> installed version, for those installed; plus Python's."""
    versions = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return versions


def record(adapter_name: str, adapter: Any, *, resolution: int, task: str, seconds_per_image: float | None) -> dict:
    """The generation record of ``submission.json``: the adapter's own report, how seeds and sizes were set."""
    own = generation_record(adapter)
    return {
        "adapter": adapter_name,
        **own,
        "resolution": resolution,
        "task": task,
        # Only an adapter that says how it seeds (the built-in pipelines: SEED_RULE) gets a rule on record.
        "seed_rule": own.get("seed_rule", UNREPORTED_SEED_RULE),
        "seconds_per_image": round(seconds_per_image, 4) if seconds_per_image is not None else None,
        "libraries": library_versions(),
    }


def _read_metadata(out: Path) -> dict:
    """submission.json as a dict, read within a submission's bounds (size, nesting: parsed only then)."""
    path = out / METADATA_NAME
    try:
        if path.stat().st_size > MAX_METADATA_BYTES:
            raise GenerationRunError(
                f"{path}: {path.stat().st_size} bytes, over the {MAX_METADATA_BYTES}-byte limit; remove {out} to start over"
            )
        text = path.read_text(encoding="utf-8")
        if json_depth(text) > MAX_JSON_DEPTH:
            raise GenerationRunError(
                f"{path}: nested {json_depth(text)} levels deep, over the limit of {MAX_JSON_DEPTH}; remove {out} to start over"
            )
        metadata = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise GenerationRunError(f"{out / METADATA_NAME}: unreadable ({err}); remove {out} to start over") from None
    if not isinstance(metadata, dict):
        raise GenerationRunError(f"{out / METADATA_NAME}: not a JSON object; remove {out} to start over")
    return metadata


def prepare_folder(data: BenchmarkData, out: Path, task: str) -> dict:
    """The submission folder's metadata: a fresh template when ``out`` does not exist, else the one there,
    checked to be a submission of this benchmark and task (a rerun continues it)."""
    return _prepare(data, out, task)[0]


def _prepare(data: BenchmarkData, out: Path, task: str) -> tuple[dict, list[tuple[str, int, str]]]:
    """:func:`prepare_folder`'s metadata and the manifest's rows, once both are checked with a submission's
    rules (:func:`~idbench.evaluate_pkg.submission.check_resume_folder`); the first problem is one line."""
    if not out.exists():
        try:
            write_template(data, out, task=task)
        except OutputExistsError:  # made meanwhile by another shard of the run: continued like any folder
            pass
    if not (out / MANIFEST_NAME).is_file() or not (out / METADATA_NAME).is_file():
        raise GenerationRunError(
            f"{out} exists but is not a submission folder ({MANIFEST_NAME} and {METADATA_NAME}); choose another --out"
        )
    metadata = _read_metadata(out)
    if metadata.get("benchmark") != data.name:
        raise GenerationRunError(
            f"{out} is a submission of {metadata.get('benchmark')!r}, not {data.name}; choose another --out"
        )
    if metadata.get("task", DEFAULT_TASK) != task:
        raise GenerationRunError(
            f"{out} holds the {metadata.get('task', DEFAULT_TASK)} task, not {task}; choose another --out"
        )
    try:
        rows = check_resume_folder(out, data)
    except SubmissionError as err:
        more = f" (and {err.total - 1} more problem(s))" if err.total > 1 else ""
        raise GenerationRunError(
            f"{out} cannot be continued: {err.problems[0]}{more}; fix it, or choose another --out"
        ) from None
    return metadata, rows


def image_path(out: Path, file: str) -> Path:
    """The manifest's ``file`` inside ``out``; a name that leaves the folder is refused."""
    path = (out / file).resolve()
    if not path.is_relative_to(out.resolve()) or path == out.resolve():
        raise GenerationRunError(f"{out / MANIFEST_NAME}: file {file!r} is not a file inside the submission folder")
    return path


def write_image_atomically(image: Image.Image, path: Path) -> None:
    """PNG-encode ``image`` to a temporary file beside ``path``, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda stream: image.save(stream, format="PNG"))


def write_json_atomically(payload: dict, path: Path) -> None:
    write_text_atomically(path, json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


def remove_stale_temporaries(out: Path, files: Iterable[str]) -> int:
    """Remove the temporary files a killed run left beside the images it was writing; return how many.

    Only names of the form :func:`write_image_atomically` makes for these manifest files are touched.
    Each folder is listed once, so this stays linear in the manifest.
    """
    wanted: dict[Path, set[str]] = {}
    for file in files:
        path = image_path(out, file)
        wanted.setdefault(path.parent, set()).add(temporary_stem(path.name))
    removed = 0
    for folder, names in wanted.items():
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            name = entry.name
            if (
                name.startswith(".")
                and name.endswith(".tmp")
                and name[1:].rsplit(".", 2)[0] in names
                and entry.is_file()
            ):
                entry.unlink(missing_ok=True)
                removed += 1
    return removed


def estimate_line(done: int, seconds: float, remaining: int) -> str:
    """After the first images: the time per image and what the rest of the run should take."""
    per_image = seconds / done
    left = per_image * remaining
    return f"generate: {done} images in {seconds:.1f} s ({per_image:.2f} s per image); about {_duration(left)} for the {remaining} left"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# Modes an adapter may return: 8-bit samples, which become RGB without loss of range. 16-bit, 32-bit and
# float images ("I;16", "I", "F") would be clipped by that conversion (almost all white): refused.
ADAPTER_MODES = frozenset(
    {"1", "L", "LA", "La", "P", "PA", "RGB", "RGBA", "RGBa", "RGBX", "CMYK", "YCbCr", "LAB", "HSV"}
)


def _checked_image(image: Any, request: GenerationRequest, adapter_name: str) -> Image.Image:
    """The adapter's image as it will be written, once held to the rules of a submitted image (size,
    aspect ratio: :func:`~idbench.evaluate_pkg.images.size_problem`; an 8-bit mode); the first that
    fails stops the run in one line naming the adapter, the row and the rule, before anything is written."""
    where = f"adapter {adapter_name}, prompt_id {request.prompt_id!r} seed {request.seed}"
    if not isinstance(image, Image.Image):
        raise GenerationRunError(f"{where}: gave a {type(image).__name__}, not a PIL image")
    problem = size_problem(*image.size, submitted=True)
    if problem is None and image.mode not in ADAPTER_MODES:
        problem = f"mode {image.mode!r}, not an 8-bit image (expected RGB, RGBA, L, P, ...)"
    if problem:
        raise GenerationRunError(
            f"{where}: the image is {problem}; a submission may not hold it, so the run stopped before writing it"
        )
    return image if image.mode in ("RGB", "L") else image.convert("RGB")


def _batches(requests: list[GenerationRequest], size: int) -> Iterable[list[GenerationRequest]]:
    for start in range(0, len(requests), size):
        yield requests[start : start + size]


def _generate(adapter: Any, batch: list[GenerationRequest]) -> list[Any]:
    if len(batch) > 1 and callable(getattr(adapter, "generate_batch", None)):
        images = list(adapter.generate_batch(batch))
        if len(images) != len(batch):
            raise GenerationRunError(
                f"adapter {type(adapter).__name__}: generate_batch gave {len(images)} images for {len(batch)} requests"
            )
        return images
    return [adapter(request) for request in batch]


def _progress(total: int, show: bool | None):
    """A tqdm bar (rate and ETA) on a terminal; silent otherwise (the run prints its summary)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="image", desc="generate", disable=not (sys.stderr.isatty() if show is None else show))


def _model_name(model_id: Any) -> str:
    """A model id as submission.json's model name: a Hub id as it is, a local folder by its own name (not the
    user's path), within the validator's 100 characters."""
    if not isinstance(model_id, str) or not model_id:
        return ""
    name = Path(model_id).name if Path(model_id).expanduser().is_dir() else model_id
    return name[:100]


def process_group_if_launched(device: str):
    """accelerate's ``PartialState`` when started by ``accelerate launch`` / torchrun with several processes
    (no model or optimizer to prepare: generation only needs who is who and a barrier); None otherwise."""
    if settings.world_size() <= 1:
        return None
    from accelerate import PartialState

    return PartialState(cpu=device == "cpu")


def generate_submission(
    data: BenchmarkData,
    adapter: Callable[[GenerationRequest], Image.Image],
    out: str | os.PathLike,
    *,
    adapter_name: str | None = None,
    model_name: str | None = None,
    resolution: int = DEFAULT_RESOLUTION,
    task: str = DEFAULT_TASK,
    limit: int | None = None,
    batch_size: int = 1,
    progress: bool | None = None,
    processes: ProcessGroup | None = None,
    shard: Shard | None = None,
    say: Callable[[str], None] | None = None,
) -> RunReport:
    """Generate every missing image of the submission ``out`` for ``data`` with ``adapter``; see the module docstring.

    ``adapter`` is any callable (request -> PIL image) or an adapter object (docs/generation.md);
    ``limit`` takes the first N rows of the manifest (a trial: the submission then fails validation
    for the rows left out); ``model_name`` is ``submission.json``'s ``model`` (default: the adapter's
    model id, else its name). ``processes``: the process group of a distributed run (an
    ``accelerate.PartialState``); this process generates its share. ``shard``: this run generates only the
    rows of that shard (the module docstring). ``say`` gets the run's estimate line after the first images
    (default: stderr, or above the bar on a terminal).
    """
    check_task(data, task)
    if limit is not None and limit < 1:
        raise GenerationRunError(f"--limit {limit}: expected a positive number of images")
    if batch_size < 1:
        raise GenerationRunError(f"--batch-size {batch_size}: expected a positive number")
    group = processes or SingleProcess()
    out = Path(out)
    adapter_name = (
        adapter_name or getattr(adapter, "name", "") or getattr(adapter, "__name__", "") or type(adapter).__name__
    )
    if group.is_main_process:
        metadata, rows = _prepare(data, out, task)  # the template is written once, by the main process
    group.wait_for_everyone()
    if not group.is_main_process:
        metadata, rows = _prepare(data, out, task)
    rows = rows[:limit]
    if shard is not None:
        rows = [row for row in rows if shard.owns(unit_key(row[0], row[1]))]
    missing = [row for row in rows if not image_path(out, row[2]).is_file()]
    if group.is_main_process:
        remove_stale_temporaries(out, [row[2] for row in missing])
    # Every process must see the same missing rows before any of them writes one.
    group.wait_for_everyone()
    share = missing[group.process_index :: group.num_processes]
    requests = build_requests(data, share, resolution=resolution, task=task)
    started = time.perf_counter()
    done = 0
    try:
        with _progress(len(requests), progress) as bar:
            tell = say or (bar.write if not bar.disable else (lambda line: print(line, file=sys.stderr, flush=True)))
            for batch in _batches(requests, batch_size):
                for request, image in zip(batch, _generate(adapter, batch)):
                    write_image_atomically(_checked_image(image, request, adapter_name), image_path(out, request.file))
                    done += 1
                    bar.update(1)
                if done >= ESTIMATE_AFTER and done - len(batch) < ESTIMATE_AFTER and done < len(requests):
                    tell(estimate_line(done, time.perf_counter() - started, len(requests) - done))
    finally:
        seconds = time.perf_counter() - started
        if group.num_processes == 1:
            _write_record(
                out, metadata, adapter_name, adapter, model_name, resolution, task, seconds, done, 1, batch_size, shard
            )
    if group.num_processes > 1:
        group.wait_for_everyone()  # every share is written before the record says the run is done
        if group.is_main_process:
            _write_record(
                out,
                metadata,
                adapter_name,
                adapter,
                model_name,
                resolution,
                task,
                seconds,
                done,
                group.num_processes,
                batch_size,
                shard,
            )
            # The main process reports the whole run: every share's images, its own time per image.
            generated = sum(image_path(out, row[2]).is_file() for row in missing)
            return RunReport(out, generated, len(rows) - len(missing), len(rows), seconds * generated / max(done, 1))
    return RunReport(out, done, len(rows) - len(missing), len(rows), seconds)


def _write_record(
    out: Path,
    metadata: dict,
    adapter_name: str,
    adapter: Any,
    model_name: str | None,
    resolution: int,
    task: str,
    seconds: float,
    done: int,
    processes: int,
    batch_size: int,
    shard: Shard | None = None,
) -> None:
    """submission.json with the generation record, written after every run, stopped or not, so the record
    says what the images were made with. In a distributed run the time per image is the main process's;
    in a sharded one, that of the shard that wrote last (each shard rewrites the record)."""
    previous = metadata.get("generation", {}) if isinstance(metadata.get("generation"), dict) else {}
    per_image = seconds / done if done else previous.get("seconds_per_image")
    generation = record(adapter_name, adapter, resolution=resolution, task=task, seconds_per_image=per_image)
    generation["batch_size"] = batch_size  # a batch may differ from one at a time by a level of 255 (float sums)
    if processes > 1:
        generation["processes"] = processes
    if shard is not None and shard.count > 1:
        generation["shards"] = shard.count  # the same for every shard; which shard wrote last is not recorded
    own = generation_record(adapter)
    name = model_name or metadata.get("model") or _model_name(own.get("model_id")) or adapter_name
    write_json_atomically(metadata | {"model": name, "generation": generation}, out / METADATA_NAME)

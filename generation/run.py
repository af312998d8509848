"""The run: every missing image of a submission generated, written atomically, and recorded.

:func:`generate_submission` makes the submission folder with the benchmark's template (the very
manifest ``idbench template`` writes) when it does not exist, then walks the manifest's rows (or the
first ``limit``): a row whose image file exists is skipped, so a rerun after kill -9 or Ctrl-C
generates only what is missing. Each image is encoded to a temporary file in its own folder and moved
into place with ``os.replace``: a file at a manifest path is always a whole image. ``submission.json``
is rewritten the same way after every run with the generation record (:func:`record`).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Callable, Iterable

from PIL import Image

from idbench.builders.spec import DEFAULT_TASK
from idbench.evaluate_pkg.data import BenchmarkData
from idbench.evaluate_pkg.submission import MANIFEST_NAME, METADATA_NAME, write_template
from idbench.generation.adapters import SEED_RULE, GeneratorError, generation_record
from idbench.generation.requests import DEFAULT_RESOLUTION, GenerationRequest, build_requests, check_task, manifest_rows

# The libraries whose versions make an image reproducible, recorded when installed.
RECORDED_LIBRARIES = ("idbench", "torch", "diffusers", "transformers", "accelerate", "pillow", "numpy")


class GenerationRunError(GeneratorError):
    """A submission folder that a run cannot continue, or an adapter that gave no image."""


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
    return {
        "adapter": adapter_name,
        **generation_record(adapter),
        "resolution": resolution,
        "task": task,
        "seed_rule": SEED_RULE,
        "seconds_per_image": round(seconds_per_image, 4) if seconds_per_image is not None else None,
        "libraries": library_versions(),
    }


def _read_metadata(out: Path) -> dict:
    try:
        metadata = json.loads((out / METADATA_NAME).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise GenerationRunError(f"{out / METADATA_NAME}: unreadable ({err}); remove {out} to start over") from None
    if not isinstance(metadata, dict):
        raise GenerationRunError(f"{out / METADATA_NAME}: not a JSON object; remove {out} to start over")
    return metadata


def prepare_folder(data: BenchmarkData, out: Path, task: str) -> dict:
    """The submission folder's metadata: a fresh template when ``out`` does not exist, else the one there,
    checked to be a submission of this benchmark and task (a rerun continues it)."""
    if not out.exists():
        write_template(data, out, task=task)
    elif not (out / MANIFEST_NAME).is_file() or not (out / METADATA_NAME).is_file():
        raise GenerationRunError(f"{out} exists but is not a submission folder ({MANIFEST_NAME} and {METADATA_NAME}); choose another --out")
    metadata = _read_metadata(out)
    if metadata.get("benchmark") != data.name:
        raise GenerationRunError(f"{out} is a submission of {metadata.get('benchmark')!r}, not {data.name}; choose another --out")
    if metadata.get("task", DEFAULT_TASK) != task:
        raise GenerationRunError(f"{out} holds the {metadata.get('task', DEFAULT_TASK)} task, not {task}; choose another --out")
    return metadata


def image_path(out: Path, file: str) -> Path:
    """The manifest's ``file`` inside ``out``; a name that leaves the folder is refused."""
    path = (out / file).resolve()
    if not path.is_relative_to(out.resolve()):
        raise GenerationRunError(f"{out / MANIFEST_NAME}: file {file!r} is outside the submission folder")
    return path


def write_image_atomically(image: Image.Image, path: Path) -> None:
    """PNG-encode ``image`` to a temporary file beside ``path``, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            image.save(stream, format="PNG")
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_json_atomically(payload: dict, path: Path) -> None:
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _checked_image(image: Any, request: GenerationRequest, adapter_name: str) -> Image.Image:
    if not isinstance(image, Image.Image):
        raise GenerationRunError(
            f"adapter {adapter_name} gave a {type(image).__name__} for prompt {request.prompt_id} seed {request.seed}, not a PIL image"
        )
    return image if image.mode in ("RGB", "L") else image.convert("RGB")


def _batches(requests: list[GenerationRequest], size: int) -> Iterable[list[GenerationRequest]]:
    for start in range(0, len(requests), size):
        yield requests[start : start + size]


def _generate(adapter: Any, batch: list[GenerationRequest]) -> list[Any]:
    if len(batch) > 1 and callable(getattr(adapter, "generate_batch", None)):
        images = list(adapter.generate_batch(batch))
        if len(images) != len(batch):
            raise GenerationRunError(f"adapter {type(adapter).__name__}: generate_batch gave {len(images)} images for {len(batch)} requests")
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
) -> RunReport:
    """Generate every missing image of the submission ``out`` for ``data`` with ``adapter``; see the module docstring.

    ``adapter`` is any callable (request -> PIL image) or an adapter object (docs/generation.md);
    ``limit`` takes the first N rows of the manifest (a trial: the submission then fails validation
    for the rows left out); ``model_name`` is ``submission.json``'s ``model`` (default: the adapter's
    model id, else its name).
    """
    check_task(data, task)
    if limit is not None and limit < 1:
        raise GenerationRunError(f"--limit {limit}: expected a positive number of images")
    if batch_size < 1:
        raise GenerationRunError(f"--batch-size {batch_size}: expected a positive number")
    out = Path(out)
    adapter_name = adapter_name or getattr(adapter, "name", "") or getattr(adapter, "__name__", "") or type(adapter).__name__
    metadata = prepare_folder(data, out, task)
    rows = manifest_rows(out / MANIFEST_NAME)[:limit]
    missing = [row for row in rows if not image_path(out, row[2]).is_file()]
    requests = build_requests(data, missing, resolution=resolution, task=task)
    started = time.perf_counter()
    done = 0
    try:
        with _progress(len(requests), progress) as bar:
            for batch in _batches(requests, batch_size):
                for request, image in zip(batch, _generate(adapter, batch)):
                    write_image_atomically(_checked_image(image, request, adapter_name), image_path(out, request.file))
                    done += 1
                    bar.update(1)
    finally:
        seconds = time.perf_counter() - started
        # Written after every run, stopped or not, so the record says what the images were made with.
        previous = metadata.get("generation", {}) if isinstance(metadata.get("generation"), dict) else {}
        per_image = seconds / done if done else previous.get("seconds_per_image")
        generation = record(adapter_name, adapter, resolution=resolution, task=task, seconds_per_image=per_image)
        own = generation_record(adapter)
        name = model_name or metadata.get("model") or _model_name(own.get("model_id")) or adapter_name
        write_json_atomically(metadata | {"model": name, "generation": generation}, out / METADATA_NAME)
    return RunReport(out, done, len(rows) - len(missing), len(rows), seconds)

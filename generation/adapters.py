"""Model adapters: what turns a :class:`~idbench.generation.requests.GenerationRequest` into an image.

The protocol is small on purpose (docs/generation.md, "Writing an adapter"):

- an **adapter** is any callable ``adapter(request) -> PIL.Image.Image``;
- it may also have ``generate_batch(requests) -> list[PIL.Image.Image]`` (the run then hands it up to
  ``--batch-size`` requests at once) and ``generation_record() -> dict`` (what it loaded and how it
  samples: model id, revision, pipeline class, dtype, steps, guidance), which goes into the submission's
  generation record;
- a **factory** is a class: the registry instantiates it with one :class:`GeneratorOptions` (the
  command line's model id, revision, device, ...). A plain function is an adapter, used as it is.

An adapter is found by name (:func:`load_generator`): the built-in names (:data:`BUILTIN`), names
registered in this process (:func:`register_generator`), the ``idbench.generators`` entry point group
of installed packages (so a user's package plugs in without editing idbench), or ``module:attr``.

Built-in (docs/generation.md, "Built-in adapters"): ``diffusers-t2i``, a text-to-image diffusers
pipeline (any ``AutoPipelineForText2Image`` model); ``diffusers-image-list``, the multi-reference
pipelines that take the references as one list ``image=[...]`` (FLUX.2, FLUX.2 klein,
Qwen-Image-Edit-Plus); ``diffusers-omnigen``, OmniGen (``input_images=`` and ``<img><|image_k|></img>``
placeholders added to the prompt, :func:`omnigen_prompt`); ``diffusers-kontext``, FLUX.1 Kontext (one
``image=``: several references become one grid collage, :func:`reference_collage`). All load a Hub id
at a revision the user pins (``--revision``: idbench does not guess one) or a local folder, seed every
image with a fresh CPU ``torch.Generator`` (:data:`SEED_RULE`), and downscale references whose longest
side exceeds ``GeneratorOptions.reference_side`` (:func:`fit_reference`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import json
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from PIL import Image

from idbench import settings
from idbench.errors import IdbenchError
from idbench.generation.requests import GenerationRequest

ENTRY_POINT_GROUP = "idbench.generators"
SEED_RULE = "torch.Generator('cpu').manual_seed(seed): a fresh CPU generator per (prompt_id, seed) image, seed = the benchmark's seed"
# What the record says of an adapter that reports no seed rule of its own (a plain function): the harness hands
# it the seed and cannot know what it does with it.
UNREPORTED_SEED_RULE = (
    "request.seed (the benchmark's seed) handed to the adapter; how it seeds its sampling is its own and not reported"
)
DTYPES = ("float32", "bfloat16", "float16")


class GeneratorError(IdbenchError, ValueError):
    """An adapter that cannot be found, loaded or run as asked; the message says what to do."""


@runtime_checkable
class Generator(Protocol):
    """An adapter: one request in, one image out."""

    def __call__(self, request: GenerationRequest) -> Image.Image: ...


@dataclass(frozen=True)
class GeneratorOptions:
    """What the command line tells a factory; None leaves the adapter's own default."""

    model_id: str | None = None
    revision: str | None = None
    device: str = "cpu"
    dtype: str | None = None
    steps: int | None = None
    guidance: float | None = None
    ignore_references: bool = False
    # Longest side of a reference image handed to the pipeline; larger ones are downscaled (aspect kept,
    # Lanczos). None: as the benchmark gives them. The multi-reference pipelines VAE-encode every reference
    # at up to a megapixel, so this bounds their time and memory.
    reference_side: int | None = None


_REGISTERED: dict[str, Any] = {}


def register_generator(name: str, adapter_or_factory: Any) -> None:
    """Make ``name`` resolve to an adapter (a callable) or a factory (a class taking GeneratorOptions)."""
    _REGISTERED[name] = adapter_or_factory


def _builtin() -> dict[str, str]:
    # name -> "module:attr", imported only when chosen (diffusers and torch are an extra).
    return {
        "diffusers-t2i": "idbench.generation.adapters:DiffusersTextToImage",
        "diffusers-image-list": "idbench.generation.adapters:DiffusersImageList",
        "diffusers-omnigen": "idbench.generation.adapters:DiffusersOmniGen",
        "diffusers-kontext": "idbench.generation.adapters:DiffusersKontext",
    }


BUILTIN = tuple(_builtin())


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {point.name: point for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def known_generators() -> list[str]:
    """Every name :func:`load_generator` resolves without ``module:attr``."""
    return sorted({*_builtin(), *_REGISTERED, *_entry_points()})


def _import_attr(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    # As `python -m` and uvicorn do: a module in the current folder imports (the console script's path lacks it).
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except ImportError as err:
        raise GeneratorError(f"adapter {spec!r}: cannot import {module_name!r} ({err})") from None
    except AttributeError:
        raise GeneratorError(f"adapter {spec!r}: {module_name!r} has no {attr!r}") from None
    return target


def resolve_generator(name: str) -> Any:
    """The adapter or factory that ``name`` names (see the module docstring for the order)."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in _builtin():
        return _import_attr(_builtin()[name])
    points = _entry_points()
    if name in points:
        try:
            return points[name].load()
        except Exception as err:
            raise GeneratorError(
                f"adapter {name!r} (entry point {points[name].value}, group {ENTRY_POINT_GROUP}) failed to load: {err}"
            ) from None
    if ":" in name:
        return _import_attr(name)
    raise GeneratorError(f"unknown adapter {name!r}; known: {', '.join(known_generators())}, or give module:attr")


def load_generator(name: str, options: GeneratorOptions | None = None) -> Callable[[GenerationRequest], Image.Image]:
    """The ready adapter for ``name``: a factory (class) is instantiated with ``options``."""
    target = resolve_generator(name)
    if isinstance(target, type):
        target = target(options or GeneratorOptions())
    if not callable(target):
        raise GeneratorError(
            f"adapter {name!r} is a {type(target).__name__}, not a callable taking a GenerationRequest"
        )
    return target


def generation_record(adapter: Any) -> dict:
    """What the adapter reports about itself (``generation_record()``), or {} when it reports nothing."""
    report = getattr(adapter, "generation_record", None)
    record = report() if callable(report) else {}
    if not isinstance(record, dict):
        raise GeneratorError(
            f"adapter {type(adapter).__name__}: generation_record() gave a {type(record).__name__}, not a dict"
        )
    return record


# --- diffusers ---------------------------------------------------------------------------------


def download_command(model_id: str, revision: str | None) -> str:
    return f"hf download {model_id}" + (f" --revision {revision}" if revision else " --revision <commit>")


def _is_local(model_id: str) -> bool:
    return Path(model_id).expanduser().is_dir()


def load_pipeline(loader: Any, options: GeneratorOptions, adapter: str) -> Any:
    """``loader.from_pretrained`` of a local folder, or of a Hub id at the pinned revision, from the local cache
    only when offline; a missing model is one error naming the command that gets it."""
    import torch

    if not options.model_id:
        raise GeneratorError(f"adapter {adapter}: name the model with --model-id (a Hub id or a local folder)")
    local = _is_local(options.model_id)
    if not local and not options.revision:
        raise GeneratorError(
            f"adapter {adapter}: pin the revision of {options.model_id} with --revision <commit> (idbench does not guess one; "
            "the model card's 'Files and versions' tab lists the commits)"
        )
    dtype = options.dtype or "float32"
    if dtype not in DTYPES:
        raise GeneratorError(f"--dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    kwargs: dict[str, Any] = {"dtype": getattr(torch, dtype)}  # diffusers 0.42 name (torch_dtype is deprecated)
    if not local:
        kwargs["revision"] = options.revision
    try:
        import diffusers
        import transformers

        # "Loading pipeline components" and "Loading weights" bars: the run's own bar over images is the one that counts.
        diffusers.utils.logging.disable_progress_bar()
        transformers.utils.logging.disable_progress_bar()
        with warnings.catch_warnings():  # diffusers 0.42 passes huggingface_hub an argument it deprecated: noise
            warnings.filterwarnings("ignore", message=".*local_dir_use_symlinks.*")
            pipeline = loader.from_pretrained(
                str(Path(options.model_id).expanduser()) if local else options.model_id, **kwargs
            )
    except (OSError, ValueError) as err:
        if local:
            raise GeneratorError(
                f"adapter {adapter}: {options.model_id} is not a diffusers pipeline folder ({' '.join(str(err).split())[:300]})"
            ) from None
        raise GeneratorError(
            f"adapter {adapter}: {options.model_id} at revision {options.revision} is not in the local Hugging Face cache "
            f"(or not a diffusers pipeline); get it with: {download_command(options.model_id, options.revision)}"
        ) from None
    if callable(getattr(pipeline, "set_progress_bar_config", None)):
        pipeline.set_progress_bar_config(disable=True)  # the run shows one bar over images, not one per image
    return pipeline.to(options.device)


def _call_default(pipeline: Any, argument: str) -> Any:
    """The default of ``argument`` in the pipeline's ``__call__`` (what it samples with when not told), or None."""
    try:
        parameter = inspect.signature(pipeline.__call__).parameters.get(argument)
    except (TypeError, ValueError):
        return None
    return None if parameter is None or parameter.default is inspect.Parameter.empty else parameter.default


# --- references, made ready for a pipeline (pure functions of the images) ---------------------------

# The cell side of a Kontext collage when no reference side is given: each reference is fitted into a
# square of this side, so a collage of up to 9 references stays within 1536 x 1536 pixels.
COLLAGE_CELL = 512
COLLAGE_BACKGROUND = (255, 255, 255)


def fit_reference(image: Image.Image, side: int | None) -> Image.Image:
    """``image`` with its longest side at most ``side`` (aspect kept, Lanczos); unchanged when it already
    fits or ``side`` is None. RGB either way (the pipelines take RGB)."""
    image = image if image.mode == "RGB" else image.convert("RGB")
    if side is None or max(image.size) <= side:
        return image
    scale = side / max(image.size)
    size = tuple(max(1, round(length * scale)) for length in image.size)
    return image.resize(size, Image.Resampling.LANCZOS)


def check_reference_side(side: int | None) -> int | None:
    if side is not None and (not isinstance(side, int) or side < 16):
        raise GeneratorError(f"reference side {side!r}: expected a number of pixels of at least 16, or none")
    return side


def collage_grid(count: int) -> tuple[int, int]:
    """``(columns, rows)`` of the collage of ``count`` references: ceil(sqrt(count)) columns, as many rows
    as needed (1 -> 1x1, 2 -> 2x1, 3-4 -> 2x2, 5-6 -> 3x2, 7-9 -> 3x3)."""
    columns = 1
    while columns * columns < count:
        columns += 1
    return columns, -(-count // columns)


def reference_collage(images: list[Image.Image], cell: int = COLLAGE_CELL) -> Image.Image:
    """One canvas holding ``images`` in order, left to right then top to bottom on a :func:`collage_grid`:
    each scaled (up or down, aspect kept, Lanczos) to fit a ``cell`` x ``cell`` square and centred in it,
    on white. One image is returned as it is (RGB)."""
    if not images:
        raise GeneratorError("a collage needs at least one reference image")
    if len(images) == 1:
        return images[0] if images[0].mode == "RGB" else images[0].convert("RGB")
    columns, rows = collage_grid(len(images))
    canvas = Image.new("RGB", (columns * cell, rows * cell), COLLAGE_BACKGROUND)
    for index, image in enumerate(images):
        image = image.convert("RGB")
        scale = cell / max(image.size)
        fitted = image.resize(
            tuple(max(1, min(cell, round(length * scale))) for length in image.size), Image.Resampling.LANCZOS
        )
        column, row = index % columns, index // columns
        canvas.paste(fitted, (column * cell + (cell - fitted.width) // 2, row * cell + (cell - fitted.height) // 2))
    return canvas


def omnigen_placeholder(index: int) -> str:
    """OmniGen's marker of the ``index``-th input image (1-based), as its pipeline parses it."""
    return f"<img><|image_{index}|></img>"


def omnigen_prompt(prompt: str, roles: list[str]) -> str:
    """The benchmark prompt followed by one placeholder per reference, in order, named by its role:
    ``"<prompt> References: person A: <img><|image_1|></img>, person A's item: <img><|image_2|></img>."``
    No references: the prompt as it is."""
    if not roles:
        return prompt
    named = ", ".join(f"{role}: {omnigen_placeholder(k)}" for k, role in enumerate(roles, start=1))
    return f"{prompt.rstrip()} References: {named}."


OMNIGEN_PROMPT_RULE = (
    "prompt + ' References: ' + ', '.join(f'{role}: <img><|image_{k}|></img>') + '.', k = 1.. in the request's order"
)


class _DiffusersAdapter:
    """Shared by the diffusers adapters: loading, seeding, reference sizing, batching and the generation record."""

    name = ""
    loader_name = "DiffusionPipeline"

    def __init__(self, options: GeneratorOptions, pipeline: Any = None, call_arguments: dict[str, Any] | None = None):
        self.options = options
        check_reference_side(options.reference_side)
        # Further keyword arguments of every pipeline call (a family's own: max_sequence_length, ...), recorded.
        self.call_arguments = dict(call_arguments or {})
        if pipeline is None:
            import diffusers

            pipeline = load_pipeline(getattr(diffusers, self.loader_name), options, self.name)
        self.pipeline = pipeline

    @classmethod
    def from_pipeline(
        cls, pipeline: Any, call_arguments: dict[str, Any] | None = None, **options: Any
    ) -> _DiffusersAdapter:
        """An adapter around a pipeline built in Python (a notebook, a test); ``options`` as GeneratorOptions
        (``steps=``, ``reference_side=``, ...), ``call_arguments`` added to every pipeline call."""
        return cls(GeneratorOptions(**options), pipeline=pipeline, call_arguments=call_arguments)

    def references(self, request: GenerationRequest) -> list[Image.Image]:
        """The request's reference images in order, each within ``reference_side``."""
        return [fit_reference(image, self.options.reference_side) for image in request.images]

    def sampling_arguments(self, request: GenerationRequest) -> dict[str, Any]:
        import torch

        arguments: dict[str, Any] = {
            "prompt": request.prompt,
            "height": request.resolution,
            "width": request.resolution,
            "generator": torch.Generator("cpu").manual_seed(request.seed),
        }
        if self.options.steps is not None:
            arguments["num_inference_steps"] = self.options.steps
        if self.options.guidance is not None:
            arguments["guidance_scale"] = self.options.guidance
        return arguments | self.call_arguments

    def __call__(self, request: GenerationRequest) -> Image.Image:
        return self.pipeline(**self.sampling_arguments(request)).images[0]

    def generate_batch(self, requests: list[GenerationRequest]) -> list[Image.Image]:
        """Text-only requests of one size in one pipeline call (a list of prompts, one seeded CPU generator
        per image); anything else (references, mixed sizes) one request at a time, as ``__call__`` does."""
        if len(requests) < 2 or any(r.references for r in requests) or len({r.resolution for r in requests}) > 1:
            return [self(request) for request in requests]
        each = [self.sampling_arguments(request) for request in requests]
        arguments = each[0] | {"prompt": [a["prompt"] for a in each], "generator": [a["generator"] for a in each]}
        images = list(self.pipeline(**arguments).images)
        if len(images) != len(requests):
            raise GeneratorError(
                f"{type(self.pipeline).__name__} gave {len(images)} images for a batch of {len(requests)} prompts"
            )
        return images

    def references_record(self) -> dict:
        """What the adapter does with references, for the generation record."""
        return {}

    def generation_record(self) -> dict:
        import diffusers

        options = asdict(self.options)
        dtype = getattr(self.pipeline, "dtype", None)
        return {
            # str(): a pipeline loaded from a Path keeps that Path as its name_or_path
            "model_id": str(options["model_id"] or getattr(self.pipeline, "name_or_path", None) or ""),
            "revision": options["revision"] or "",
            "pipeline_class": type(self.pipeline).__name__,
            "dtype": str(dtype).removeprefix("torch.") if dtype is not None else (options["dtype"] or ""),
            "steps": options["steps"]
            if options["steps"] is not None
            else _call_default(self.pipeline, "num_inference_steps"),
            "guidance": options["guidance"]
            if options["guidance"] is not None
            else _call_default(self.pipeline, "guidance_scale"),
            "device": options["device"],
            "diffusers": diffusers.__version__,
            "seed_rule": SEED_RULE,
            **(
                {"call_arguments": json.loads(json.dumps(self.call_arguments, default=str))}
                if self.call_arguments
                else {}
            ),
            **self.references_record(),
        }

    def _reference_side_record(self) -> dict:
        side = self.options.reference_side
        return {
            "reference_side": side,
            "reference_resize": "longest side at most reference_side, aspect kept, Lanczos" if side else "none",
        }


class DiffusersTextToImage(_DiffusersAdapter):
    """``diffusers-t2i``: a text-to-image pipeline, the prompt alone. A request with references is refused
    (the scores would be a text-to-image model's under a reference task) unless ``ignore_references``."""

    name = "diffusers-t2i"
    loader_name = "AutoPipelineForText2Image"

    def _check(self, request: GenerationRequest) -> GenerationRequest:
        if request.references and not self.options.ignore_references:
            raise GeneratorError(
                f"adapter {self.name} draws from text alone, but prompt {request.prompt_id} of {request.benchmark} comes with "
                f"{len(request.references)} reference image(s) ({', '.join(request.roles)}): generate --task text-to-image, "
                "or pass --ignore-references to score a text-only model on the reference task"
            )
        return replace(request, references=())

    def __call__(self, request: GenerationRequest) -> Image.Image:
        return super().__call__(self._check(request))

    def generate_batch(self, requests: list[GenerationRequest]) -> list[Image.Image]:
        return super().generate_batch([self._check(request) for request in requests])

    def references_record(self) -> dict:
        return {"references": "ignored" if self.options.ignore_references else "none"}


class DiffusersImageList(_DiffusersAdapter):
    """``diffusers-image-list``: a pipeline whose ``image=`` takes a list of reference images (FLUX.2 and
    FLUX.2 klein: ``Flux2Pipeline`` / ``Flux2KleinPipeline``; ``QwenImageEditPlusPipeline``). The
    references go in the request's documented order; a text-only request passes no ``image``."""

    name = "diffusers-image-list"

    def sampling_arguments(self, request: GenerationRequest) -> dict[str, Any]:
        arguments = super().sampling_arguments(request)
        if request.references:
            arguments["image"] = self.references(request)
        return arguments

    def references_record(self) -> dict:
        return {
            "references": "image= a list, in the request's order (docs/generation.md)",
            **self._reference_side_record(),
        }


class DiffusersOmniGen(_DiffusersAdapter):
    """``diffusers-omnigen``: ``OmniGenPipeline``. The references go as ``input_images=`` in the request's
    order and the prompt names each by its role with OmniGen's placeholder (:func:`omnigen_prompt`).

    OmniGenPipeline (diffusers 0.42.1) samples the references' VAE latents from torch's *global* random
    generator, not from the ``generator`` it is given; so that the same seed gives the same image, the
    adapter seeds the global generator with the row's seed before every call (recorded)."""

    name = "diffusers-omnigen"

    def sampling_arguments(self, request: GenerationRequest) -> dict[str, Any]:
        arguments = super().sampling_arguments(request)
        if request.references:
            arguments["prompt"] = omnigen_prompt(request.prompt, request.roles)
            arguments["input_images"] = self.references(request)
        return arguments

    def __call__(self, request: GenerationRequest) -> Image.Image:
        import torch

        torch.manual_seed(request.seed)
        return super().__call__(request)

    def generate_batch(self, requests: list[GenerationRequest]) -> list[Image.Image]:
        return [self(request) for request in requests]  # one global seed per call: no batching

    def references_record(self) -> dict:
        return {
            "references": "input_images= a list, in the request's order; placeholders appended to the prompt",
            "prompt_rule": OMNIGEN_PROMPT_RULE,
            "global_seed_rule": "torch.manual_seed(seed) before each call (OmniGenPipeline samples the reference latents from the global generator)",
            **self._reference_side_record(),
        }


class DiffusersKontext(_DiffusersAdapter):
    """``diffusers-kontext``: ``FluxKontextPipeline``, which takes one ``image=``. One reference passes as it
    is (within ``reference_side``); several become one collage (:func:`reference_collage`): a grid of
    ceil(sqrt(n)) columns filled left to right, then top to bottom, in the request's order, each reference
    fitted into a square cell of ``reference_side`` pixels (default :data:`COLLAGE_CELL`)."""

    name = "diffusers-kontext"
    loader_name = "FluxKontextPipeline"

    def collage_cell(self) -> int:
        return self.options.reference_side or COLLAGE_CELL

    def sampling_arguments(self, request: GenerationRequest) -> dict[str, Any]:
        # FluxKontextPipeline rescales height x width to its max_area (default 1024 x 1024) whatever size is asked:
        # the asked square is the area, so the image comes out at the resolution of the request.
        arguments = {"max_area": request.resolution * request.resolution} | super().sampling_arguments(request)
        if len(request.references) == 1:
            arguments["image"] = self.references(request)[0]
        elif request.references:
            arguments["image"] = reference_collage(request.images, self.collage_cell())
        return arguments

    def references_record(self) -> dict:
        return {
            "references": "one reference as it is; several: one collage, left to right then top to bottom in the request's order",
            "collage": f"ceil(sqrt(n)) columns of {self.collage_cell()} px square cells, each reference fitted (aspect kept, Lanczos) and centred, on white",
            **self._reference_side_record(),
        }


def _visible_devices() -> str:
    devices = settings.cuda_visible_devices()
    return "CUDA_VISIBLE_DEVICES unset" if devices is None else f"CUDA_VISIBLE_DEVICES={devices!r}"


def _device_problem(device: str) -> str | None:
    """Why ``device`` cannot be used here, or None (CUDA asked for on a machine without one is one line)."""
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return f"--device {device}: no CUDA device is available here ({_visible_devices()}); use --device cpu"
    return None


def check_device(device: str) -> None:
    problem = _device_problem(device)
    if problem:
        raise GeneratorError(problem)

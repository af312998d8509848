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

Built-in: ``diffusers-t2i``, a text-to-image diffusers pipeline (any ``AutoPipelineForText2Image``
model) and ``diffusers-image-list``, the multi-reference pipelines that take the references as one list
``image=[...]`` (FLUX.2, FLUX.2 klein, Qwen-Image-Edit-Plus). Both load a Hub id at a revision the
user pins (``--revision``: idbench does not guess one) or a local folder, and seed every image with a
fresh CPU ``torch.Generator`` (:data:`SEED_RULE`).
"""

from __future__ import annotations

import importlib
import inspect
import json
import importlib.metadata
import os
import sys
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from PIL import Image

from idbench.errors import IdbenchError
from idbench.generation.requests import GenerationRequest

ENTRY_POINT_GROUP = "idbench.generators"
SEED_RULE = "torch.Generator('cpu').manual_seed(seed): a fresh CPU generator per (prompt_id, seed) image, seed = the benchmark's seed"
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


_REGISTERED: dict[str, Any] = {}


def register_generator(name: str, adapter_or_factory: Any) -> None:
    """Make ``name`` resolve to an adapter (a callable) or a factory (a class taking GeneratorOptions)."""
    _REGISTERED[name] = adapter_or_factory


def _builtin() -> dict[str, str]:
    # name -> "module:attr", imported only when chosen (diffusers and torch are an extra).
    return {
        "diffusers-t2i": "idbench.generation.adapters:DiffusersTextToImage",
        "diffusers-image-list": "idbench.generation.adapters:DiffusersImageList",
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
        except Exception as err:  # noqa: BLE001 - a broken plugin is the user's to fix: one line
            raise GeneratorError(f"adapter {name!r} (entry point {points[name].value}, group {ENTRY_POINT_GROUP}) failed to load: {err}") from None
    if ":" in name:
        return _import_attr(name)
    raise GeneratorError(f"unknown adapter {name!r}; known: {', '.join(known_generators())}, or give module:attr")


def load_generator(name: str, options: GeneratorOptions | None = None) -> Callable[[GenerationRequest], Image.Image]:
    """The ready adapter for ``name``: a factory (class) is instantiated with ``options``."""
    target = resolve_generator(name)
    if isinstance(target, type):
        target = target(options or GeneratorOptions())
    if not callable(target):
        raise GeneratorError(f"adapter {name!r} is a {type(target).__name__}, not a callable taking a GenerationRequest")
    return target


def generation_record(adapter: Any) -> dict:
    """What the adapter reports about itself (``generation_record()``), or {} when it reports nothing."""
    report = getattr(adapter, "generation_record", None)
    record = report() if callable(report) else {}
    if not isinstance(record, dict):
        raise GeneratorError(f"adapter {type(adapter).__name__}: generation_record() gave a {type(record).__name__}, not a dict")
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
            pipeline = loader.from_pretrained(str(Path(options.model_id).expanduser()) if local else options.model_id, **kwargs)
    except (OSError, EnvironmentError, ValueError) as err:
        if local:
            raise GeneratorError(f"adapter {adapter}: {options.model_id} is not a diffusers pipeline folder ({' '.join(str(err).split())[:300]})") from None
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


class _DiffusersAdapter:
    """Shared by the diffusers adapters: loading, seeding and the generation record."""

    name = ""
    loader_name = "DiffusionPipeline"

    def __init__(self, options: GeneratorOptions, pipeline: Any = None, call_arguments: dict[str, Any] | None = None):
        self.options = options
        # Further keyword arguments of every pipeline call (a family's own: max_sequence_length, ...), recorded.
        self.call_arguments = dict(call_arguments or {})
        if pipeline is None:
            import diffusers

            pipeline = load_pipeline(getattr(diffusers, self.loader_name), options, self.name)
        self.pipeline = pipeline

    @classmethod
    def from_pipeline(cls, pipeline: Any, call_arguments: dict[str, Any] | None = None, **options: Any) -> "_DiffusersAdapter":
        """An adapter around a pipeline built in Python (a notebook, a test); ``options`` as GeneratorOptions,
        ``call_arguments`` added to every pipeline call."""
        return cls(GeneratorOptions(**options), pipeline=pipeline, call_arguments=call_arguments)

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

    def generation_record(self) -> dict:
        import diffusers

        options = asdict(self.options)
        dtype = getattr(self.pipeline, "dtype", None)
        return {
            "model_id": options["model_id"] or getattr(self.pipeline, "name_or_path", None) or "",
            "revision": options["revision"] or "",
            "pipeline_class": type(self.pipeline).__name__,
            "dtype": str(dtype).removeprefix("torch.") if dtype is not None else (options["dtype"] or ""),
            "steps": options["steps"] if options["steps"] is not None else _call_default(self.pipeline, "num_inference_steps"),
            "guidance": options["guidance"] if options["guidance"] is not None else _call_default(self.pipeline, "guidance_scale"),
            "device": options["device"],
            "diffusers": diffusers.__version__,
            **({"call_arguments": json.loads(json.dumps(self.call_arguments, default=str))} if self.call_arguments else {}),
        }


class DiffusersTextToImage(_DiffusersAdapter):
    """``diffusers-t2i``: a text-to-image pipeline, the prompt alone. A request with references is refused
    (the scores would be a text-to-image model's under a reference task) unless ``ignore_references``."""

    name = "diffusers-t2i"
    loader_name = "AutoPipelineForText2Image"

    def __call__(self, request: GenerationRequest) -> Image.Image:
        if request.references and not self.options.ignore_references:
            raise GeneratorError(
                f"adapter {self.name} draws from text alone, but prompt {request.prompt_id} of {request.benchmark} comes with "
                f"{len(request.references)} reference image(s) ({', '.join(request.roles)}): generate --task text-to-image, "
                "or pass --ignore-references to score a text-only model on the reference task"
            )
        return super().__call__(request)

    def generation_record(self) -> dict:
        return super().generation_record() | {"references": "ignored" if self.options.ignore_references else "none"}


class DiffusersImageList(_DiffusersAdapter):
    """``diffusers-image-list``: a pipeline whose ``image=`` takes a list of reference images (FLUX.2 and
    FLUX.2 klein: ``Flux2Pipeline`` / ``Flux2KleinPipeline``; ``QwenImageEditPlusPipeline``). The
    references go in the request's documented order; a text-only request passes no ``image``."""

    name = "diffusers-image-list"

    def sampling_arguments(self, request: GenerationRequest) -> dict[str, Any]:
        arguments = super().sampling_arguments(request)
        if request.references:
            arguments["image"] = request.images
        return arguments

    def generation_record(self) -> dict:
        return super().generation_record() | {"references": "image= a list, in the request's order (docs/generation.md)"}


def _device_problem(device: str) -> str | None:
    """Why ``device`` cannot be used here, or None (CUDA asked for on a machine without one is one line)."""
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return f"--device {device}: no CUDA device is available here ({os.environ.get('CUDA_VISIBLE_DEVICES', 'CUDA_VISIBLE_DEVICES unset')}); use --device cpu"
    return None


def check_device(device: str) -> None:
    problem = _device_problem(device)
    if problem:
        raise GeneratorError(problem)

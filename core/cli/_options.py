"""What several commands share: argument types and groups, and the errors of flag combinations."""

from __future__ import annotations

import argparse

from idbench.errors import IdbenchError
from idbench.evaluate_pkg.models.profiles import DEFAULT_PROFILE, PROFILES

PROFILE_CHOICES = tuple(PROFILES)


class ScoringErrorForCli(IdbenchError, ValueError):
    """A flag combination the CLI refuses (half a judge configuration, --hub-eval-results without --dataset-id)."""


class HubArgumentError(IdbenchError):
    """Options of the Hub-backed commands that do not go together."""


def benchmark_name(name: str) -> str:
    """argparse type of a benchmark argument: a name the registry knows (built-in, registered or from an
    ``idbench.benchmarks`` entry point); otherwise argparse's one-line error lists those that exist."""
    from idbench.builders.registry import UnknownBenchmarkError, get_benchmark

    try:
        return get_benchmark(name).name
    except UnknownBenchmarkError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_profile_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup, help: str | None = None) -> None:
    parser.add_argument("--profile", choices=PROFILE_CHOICES, default=DEFAULT_PROFILE, help=help)


def metric_names(text: str | None) -> list[str] | None:
    """--metrics a,b,c; None (the whole suite) when not given."""
    return text.split(",") if text else None


def add_judge_arguments(
    parser: argparse.ArgumentParser,
    what: str = "the VLM judge of the judged metrics (CHARIS score, Attr-VQA); without one they are reported as not run",
) -> None:
    group = parser.add_argument_group("judge", what)
    group.add_argument(
        "--judge-url",
        help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1, or several servers of the model, comma-separated: "
        "the requests are spread over them (default: $IDBENCH_JUDGE_URL)",
    )
    group.add_argument(
        "--judge-model",
        help="the served model's name (default: $IDBENCH_JUDGE_MODEL); the key comes from $IDBENCH_JUDGE_API_KEY",
    )
    group.add_argument(
        "--judge-concurrency", type=int, default=8, help="requests in flight at once, per server (default: %(default)s)"
    )


def judge_config(args: argparse.Namespace):
    """The judge from --judge-url/--judge-model or $IDBENCH_JUDGE_URL/$IDBENCH_JUDGE_MODEL; None if neither.

    Half a configuration (a URL without a model) is an error, not a quiet "not run".
    """
    from idbench import settings

    if not (args.judge_url or args.judge_model or settings.judge_configured()):
        return None
    from idbench.evaluate_pkg.judge import JudgeConfig

    try:
        return JudgeConfig.from_env(args.judge_url, args.judge_model, concurrency=args.judge_concurrency)
    except (TypeError, ValueError) as error:
        raise ScoringErrorForCli(str(error)) from None


def add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    """The model and sampling flags of `generate` and `run`."""
    parser.add_argument(
        "--model",
        required=True,
        metavar="ADAPTER",
        help="an adapter: diffusers-t2i, diffusers-image-list, diffusers-omnigen, diffusers-kontext, a name from the "
        "idbench.generators entry points, or module:attr",
    )
    parser.add_argument("--model-id", help="the model the adapter loads: a Hub id or a local folder")
    parser.add_argument("--revision", help="the Hub commit of --model-id (required for a Hub id; never guessed)")
    parser.add_argument("--name", help="the model name in submission.json (default: the model id, else the adapter)")
    parser.add_argument("--task", metavar="TASK", help="reference (default) or text-to-image, as the benchmark offers")
    parser.add_argument(
        "--resolution", type=int, default=1024, help="the side of the square images, in pixels (default 1024)"
    )
    parser.add_argument("--device", default="cpu", help="where the adapter runs (cpu, cuda, cuda:1, ...)")
    parser.add_argument(
        "--dtype", choices=("float32", "bfloat16", "float16"), help="the pipeline's dtype (default float32)"
    )
    parser.add_argument("--steps", type=int, help="inference steps (default: the pipeline's)")
    parser.add_argument("--guidance", type=float, help="guidance scale (default: the pipeline's)")
    parser.add_argument(
        "--batch-size", type=int, default=1, help="requests per call, for adapters that batch (default 1)"
    )
    parser.add_argument(
        "--reference-side",
        type=int,
        metavar="PX",
        help="downscale references longer than PX on their longest side before the model sees them (default: as given; recorded)",
    )
    parser.add_argument(
        "--ignore-references",
        action="store_true",
        help="let a text-only adapter run the reference task from the prompts alone (recorded)",
    )


def generator_options(args: argparse.Namespace) -> dict:
    """The adapter's options from the flags of add_generation_arguments, but the device (each command's own)."""
    return dict(
        model_id=args.model_id,
        revision=args.revision,
        dtype=args.dtype,
        steps=args.steps,
        guidance=args.guidance,
        ignore_references=args.ignore_references,
        reference_side=args.reference_side,
    )

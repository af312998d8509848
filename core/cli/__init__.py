"""The ``idbench`` command line: one module per command (or group of commands), each with its arguments
(``add_<command>(commands)``) and a handler of a few lines that calls the library (``cmd_<command>``);
this module assembles the parser and turns errors into one line and an exit code."""

from __future__ import annotations

import argparse
import sys

from idbench.cli import (
    analysis,
    baseline,
    build,
    demo,
    env,
    generate,
    leaderboard,
    models,
    publish,
    queue,
    run,
    score,
    submission,
    worker,
)
from idbench.cli._options import HubArgumentError, ScoringErrorForCli, benchmark_name
from idbench.errors import IdbenchError, disk_full, failed_path, storage_failure

__all__ = ["HubArgumentError", "ScoringErrorForCli", "benchmark_name", "main", "make_parser"]

# In the order `idbench --help` lists them.
COMMANDS = (
    demo.add_demo,
    build.add_build,
    publish.add_publish,
    submission.add_template,
    submission.add_validate,
    generate.add_generate,
    run.add_run,
    score.add_score,
    score.add_merge,
    baseline.add_baseline,
    queue.add_submit,
    analysis.add_alignment,
    analysis.add_compare,
    queue.add_withdraw,
    worker.add_worker,
    queue.add_jobs,
    queue.add_rescore,
    leaderboard.add_serve,
    leaderboard.add_sync,
    leaderboard.add_standings,
    models.add_models,
    env.add_env,
)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _add_global_options(parser: argparse.ArgumentParser) -> None:
    """Options of the main parser, given before the command: ``idbench -v worker --once``."""
    from idbench import __version__  # from the installed distribution's metadata

    parser.add_argument("--version", action="version", version=f"idbench {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show idbench's log messages (job claims and outcomes, ...) on stderr; same as --log-level INFO",
    )
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        metavar="LEVEL",
        help=f"level of idbench's log messages on stderr: {', '.join(LOG_LEVELS)} (default: WARNING)",
    )


def _configure_logging(args: argparse.Namespace) -> None:
    """Send idbench's log records at the asked level to stderr; other libraries stay at WARNING.

    Nothing changes without -v / --log-level (Python then prints warnings and errors only). The level
    goes on the ``idbench`` logger, the parent of every module's logger, so the libraries' own INFO
    chatter (http clients, datasets) stays out; basicConfig leaves a root handler that is already
    there (an application embedding main()) alone.
    """
    level = args.log_level or ("INFO" if args.verbose else None)
    if level is None:
        return
    import logging

    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("idbench").setLevel(level)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="idbench",
        description="Benchmarks for identity preservation in reference-guided and multi-subject image generation.",
    )
    _add_global_options(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_command in COMMANDS:
        add_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return _run_command(args)
    except KeyboardInterrupt:
        # Ctrl-C is the user stopping a long run, not a bug: one line, no traceback, and the shell's
        # exit status for SIGINT (128 + 2). Results are written atomically, so nothing is half-written.
        _close_progress_bars()  # else the line lands after a half-drawn bar, on the same terminal line
        print(_interrupted_line(args), file=sys.stderr)
        return 130


def _close_progress_bars() -> None:
    """Close the progress bars still open (the interrupted stage's): the scorer's bars clear themselves."""
    tqdm = sys.modules.get("tqdm")  # none were drawn if tqdm was never imported; never import it here
    if tqdm is None:
        return
    for bar in list(getattr(tqdm.tqdm, "_instances", ())):
        bar.close()


# Commands whose work lands in the feature cache as it goes: what an interrupted run keeps.
_CACHE_KEEPING = {
    "score": "the features computed so far are kept in the feature cache{where} and a rerun resumes from there; no results were written",
    "worker": "the features computed so far are kept in the leaderboard's feature cache and a rerun resumes from there; "
    "the job's results were not written",
    "demo": "the features computed so far are kept in the leaderboard's feature cache and a rerun resumes from there",
    "generate": "every image written so far is whole and kept in {out}; the same command generates only the missing ones",
    "run": "the images written so far are kept in {out}/submission and the features in the feature cache; "
    "the same command resumes from there",
}


def _interrupted_line(args: argparse.Namespace) -> str:
    """The one line an interrupted command ends with: what it kept, and that a rerun resumes."""
    kept = _CACHE_KEEPING.get(args.command)
    if kept is None:
        return f"idbench {args.command}: interrupted"
    cache = getattr(args, "cache_dir", None)
    runner = sys.modules.get("idbench.evaluate_pkg.runner")  # imported by then when scoring began; never import it here
    if cache is None and args.command == "score" and runner is not None:
        cache = runner.default_cache_dir()
    return f"idbench {args.command}: interrupted; " + kept.format(
        where=f" ({cache})" if cache else "", out=getattr(args, "out", "")
    )


def _run_command(args: argparse.Namespace) -> int:
    _configure_logging(args)
    import datasets

    # The builder writes a handful of small tables and the scorer loads small models: their per-step
    # progress bars would drown the report (the scorer shows its own per stage).
    datasets.disable_progress_bars()
    if args.command in ("score", "demo", "run", "worker"):  # a worker's jobs say their own stages (idbench.progress)
        import transformers

        transformers.utils.logging.disable_progress_bar()
    try:
        return args.func(args)
    except IdbenchError as err:
        # Input problems are the user's to fix: the message names the culprit; no traceback.
        problems = getattr(err, "problems", None)  # a submission's problems, one line each
        if problems:
            total = getattr(err, "total", len(problems))  # a SubmissionError lists at most MAX_PROBLEMS of them
            print(f"idbench {args.command}: error: {total} problem(s), nothing was written:", file=sys.stderr)
            for line in str(err).splitlines():
                print(f"  {line}", file=sys.stderr)
        else:
            print(f"idbench {args.command}: error: {err}", file=sys.stderr)
        return 2
    except Exception as err:
        if not storage_failure(err):  # a full or failing disk, a file SQLite cannot read or write
            raise
        path = failed_path(err)
        where = f" at {path}" if path and path not in str(err) else ""
        text = " ".join(str(err).split()) or type(err).__name__
        if disk_full(err):
            print(
                f"idbench {args.command}: error: disk full{where} ({text}); the command stopped there: "
                "free space and run it again",
                file=sys.stderr,
            )
        else:
            print(
                f"idbench {args.command}: error: a file could not be read or written{where} ({text}); the command stopped "
                "there: check the disk and run it again",
                file=sys.stderr,
            )
        return 2

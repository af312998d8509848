"""Reading the JSON records of the Hub repos with bounds, and the one schema check of each kind of record.

The requests and results repos of a public deployment can be written by more than the code that
should write them (docs/deploy.md, "Who can write each repo"): a maintainer by hand, a worker of an
older version, a leaked token. Every reader of those repos (the workers, ``jobs --hub``, the Space's
mirror) therefore goes through this module, so that they agree on which records are valid:

- :func:`load_record` reads one file's bytes as a JSON object with a **size limit** checked before
  anything is decoded, a **nesting limit** checked before it is parsed (by a linear scan of the
  brackets outside strings: a 200 KB record nested 100,000 levels deep is refused without
  recursion), and **finite numbers only** (``NaN``, ``Infinity`` and ``1e308``-style overflows are
  refused, as are integers beyond 64 bits);
- :func:`request_problems` and :func:`result_problems` check a decoded request record
  (``<benchmark>/<slug>/<hash12>.json``) and result record (``.../<hash12>/aggregates.json``):
  types, text lengths, the path the content belongs at, timestamps and attempts;
- :func:`checked_request` / :func:`checked_result` do both and raise one :class:`MalformedRecord`;
  :func:`read_request` does it for a file of a snapshot folder, reading no more than the limit;
- :func:`lease_end` is the moment a RUNNING request's lease ends, capped at
  ``MAX_LEASE_SECONDS`` after the record was last written;
- :func:`samples_problem` checks a result's parquet files from their footer alone.

Decisions (docs/hub-queue.md, "Records the readers refuse"):

- a timestamp must be ISO 8601 **with a time zone**, not before ``EARLIEST_TIME`` (2020) and not more
  than ``MAX_FUTURE_SECONDS`` (a day) after ``now``: ``submitted_at: "0000"`` or ``"9999-..."`` is
  malformed, so it cannot sort a request to the front of the queue;
- a ``lease_until`` far in the future is **not** malformed but capped: the lease counts as ended
  ``MAX_LEASE_SECONDS`` after ``updated_at`` (else ``submitted_at``). A malformed RUNNING record would
  be skipped by every worker and never end; a capped one is claimed again when the cap passes, and
  the ordinary fault ladder (attempts, then PARKED) takes it from there.

Example::

    record = checked_request("identity-collapse/m/0123456789ab.json", data, now=time.time())
    if record["state"] == "RUNNING" and lease_end(record) < time.time(): ...
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from idbench.errors import IdbenchError
from idbench.evaluate_pkg.models.profiles import PLUMBING_PROFILES
from idbench.evaluate_pkg.results import AGGREGATES_FILE, SAMPLES_FILE
from idbench.evaluate_pkg.submission import json_depth, metadata_text_problems
from idbench.leaderboard.hub import request_path, result_folder
from idbench.leaderboard.judges import check_copies, check_judge

# --- limits ------------------------------------------------------------------------------------------

MAX_REQUEST_BYTES = 64 * 1024  # a request record is a dozen short fields: a few hundred bytes in practice
MAX_RESULT_BYTES = 4 * 1024 * 1024  # aggregates.json: every metric per breakdown cell, tens of KB in practice
MAX_RECORD_DEPTH = 32  # aggregates nest subject_breakdowns -> axis -> cell -> metric -> stats: 5 levels
MAX_INT = 2**63 - 1  # counts and sizes; a larger integer is no count of ours
MAX_FIELD_CHARS = 300  # model, benchmark, versions, task, worker id, profile: one short line each
MAX_REASON_CHARS = 2000  # a failure or withdrawal reason (the worker cuts its reasons to 300)
MAX_RECORD_ATTEMPTS = 100  # queue.protocol.MAX_ATTEMPTS is 3; anything near this bound is a hand-edited record
MAX_LEASE_SECONDS = 24 * 3600  # the worker's lease is 600 s, extended by heartbeats from updated_at
MAX_FUTURE_SECONDS = 24 * 3600  # clock skew between a worker and the reader, generously
EARLIEST_TIME = datetime(2020, 1, 1, tzinfo=UTC).timestamp()
# The parquet files beside aggregates.json: their footer is read, never their rows, at mirror time.
MAX_SAMPLES_BYTES = 512 * 1024 * 1024
MAX_SAMPLES_ROWS = 50_000_000

REQUEST_STATES = ("PENDING", "RUNNING", "FINISHED", "FAILED", "PARKED", "WITHDRAWN")
# The fields of a request record (queue.hub.Request); any other field makes the record malformed.
REQUEST_FIELDS = (
    "schema",
    "model",
    "benchmark",
    "benchmark_version",
    "content_hash",
    "state",
    "submitted_at",
    "task",
    "metadata",
    "updated_at",
    "attempts",
    "worker",
    "lease_until",
    "reason",
    "files",
    "owner",
    "requester",
)
REQUIRED_REQUEST_FIELDS = ("model", "benchmark", "benchmark_version", "content_hash", "state", "submitted_at")
REQUEST_SCHEMA = 1
# What proves where a result came from and what it was scored with: a result without them is not shown.
RESULT_PROVENANCE = (
    "model",
    "benchmark",
    "benchmark_version",
    "suite_version",
    "idbench_version",
    "profile",
    "content_hash",
)
# The numbers of one metric's statistics (evaluate_pkg.report._ci): finite numbers or null.
STAT_NUMBERS = ("mean", "ci_low", "ci_high")
STAT_COUNTS = ("n", "n_nan", "n_prompts")
# No metric of the suites comes near this (similarities, rates, distances of a few hundred); a value such as
# 1e308 is finite but overflows the first sum, difference or percentage a page computes from it.
MAX_STAT_MAGNITUDE = 1e9
CONTENT_HASH = re.compile(r"[0-9a-f]{64}")


class MalformedRecord(IdbenchError, ValueError):
    """A Hub repo file that no reader may use; the message names its path and every problem found."""

    def __init__(self, path: str, problems: list[str] | str):
        self.path = path
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__(f"{path}: {'; '.join(self.problems)}")


# --- reading -----------------------------------------------------------------------------------------


class _NotFinite(ValueError):
    pass


def _refuse_constant(name: str) -> float:
    raise _NotFinite(f"holds {name}, which is not a number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(f"holds {text[:40]}, beyond the range of a number")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 19:  # before int(): Python refuses 4,300+ digits with a ValueError of its own
        raise _NotFinite(f"holds an integer of {len(text)} digits, beyond 64 bits")
    value = int(text)
    if abs(value) > MAX_INT:
        raise _NotFinite(f"holds the integer {text}, beyond 64 bits")
    return value


def load_record(
    path: str, data: bytes, *, max_bytes: int = MAX_REQUEST_BYTES, max_depth: int = MAX_RECORD_DEPTH
) -> dict[str, Any]:
    """The JSON object in ``data`` (the file at repo path ``path``), read within bounds.

    Raises :class:`MalformedRecord` naming ``path`` when the file is over ``max_bytes`` (checked
    before decoding), nested deeper than ``max_depth`` (checked before parsing, without recursion),
    not UTF-8 JSON, holds a non-finite number or an integer beyond 64 bits, or is not an object.
    Work is linear in ``min(len(data), max_bytes)``.
    """
    if len(data) > max_bytes:
        raise MalformedRecord(path, f"{len(data)} bytes, over the {max_bytes}-byte limit of this record")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise MalformedRecord(path, f"not UTF-8 text ({error.reason} at byte {error.start})") from None
    depth = json_depth(text)
    if depth > max_depth:
        raise MalformedRecord(path, f"nested {depth} levels deep, over the limit of {max_depth}")
    try:
        record = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_bounded_int)
    except _NotFinite as error:
        raise MalformedRecord(path, str(error)) from None
    except json.JSONDecodeError as error:
        raise MalformedRecord(path, f"not readable JSON ({error})") from None
    except (ValueError, RecursionError) as error:  # cannot happen within the bounds above; the last guard
        raise MalformedRecord(path, f"not readable JSON ({type(error).__name__})") from None
    if not isinstance(record, dict):
        raise MalformedRecord(path, f"not a JSON object (a JSON {type(record).__name__})")
    return record


def read_record(folder: Path, path: str, *, max_bytes: int = MAX_REQUEST_BYTES) -> dict[str, Any]:
    """:func:`load_record` of the file ``folder/path``, reading at most ``max_bytes + 1`` bytes of it."""
    try:
        with open(Path(folder) / path, "rb") as file:
            data = file.read(max_bytes + 1)
    except OSError as error:
        raise MalformedRecord(path, f"cannot be read ({error.strerror or type(error).__name__})") from None
    if len(data) > max_bytes:  # the size it reports is a lower bound: the rest was never read
        raise MalformedRecord(path, f"over the {max_bytes}-byte limit of this record")
    return load_record(path, data, max_bytes=max_bytes)


# --- field checks ------------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_time(value: Any) -> float | None:
    """Epoch seconds of an ISO 8601 time with a time zone; None for anything else (no zone, not a time)."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        moment = datetime.fromisoformat(value)
        return moment.timestamp() if moment.tzinfo is not None else None
    except (ValueError, OverflowError, OSError):
        return None


def _time_problem(record: dict[str, Any], key: str, now: float, *, future: bool = False) -> str | None:
    """Why ``record[key]`` is not a sane time (absent is the caller's business); None when it is.

    ``future``: the time may lie any distance ahead (a lease, capped by :func:`lease_end` instead).
    """
    value = record.get(key)
    if value is None:
        return None
    moment = parse_time(value)
    shown = repr(value)[:80]
    if moment is None:
        return f"field {key!r} is not an ISO 8601 time with a time zone: {shown}"
    if moment < EARLIEST_TIME:
        return f"field {key!r} is {shown}, before 2020"
    if not future and moment > now + MAX_FUTURE_SECONDS:
        return f"field {key!r} is {shown}, more than {MAX_FUTURE_SECONDS // 3600} hours in the future"
    return None


def _text_problem(record: dict[str, Any], key: str, limit: int, *, required: bool) -> str | None:
    value = record.get(key)
    if value is None:
        return f"missing or non-text field {key!r}" if required else None
    if not isinstance(value, str) or (required and not value.strip()):
        return f"missing or non-text field {key!r}" if required else f"field {key!r} is not text"
    if len(value) > limit:
        return f"field {key!r} is {len(value)} characters long, over the limit of {limit}"
    return None


def _metadata_problems(record: dict[str, Any]) -> list[str]:
    metadata = record.get("metadata")
    if metadata is None:
        return []
    if not isinstance(metadata, dict):
        return ["field 'metadata' is not an object"]
    problems = [
        f"field 'metadata.{key}' is not text"
        for key in ("family", "link", "model")
        if metadata.get(key) is not None and not isinstance(metadata[key], str)
    ]
    return problems + [f"metadata: {problem}" for problem in metadata_text_problems(metadata)]


def _hash_problem(record: dict[str, Any]) -> str | None:
    digest = record.get("content_hash")
    if isinstance(digest, str) and not CONTENT_HASH.fullmatch(digest):
        return f"field 'content_hash' is not a sha256 hex digest: {digest[:80]!r}"
    return None


# --- request records ---------------------------------------------------------------------------------


def request_problems(path: str, record: dict[str, Any], now: float) -> list[str]:
    """What is wrong with the request record ``record`` found at repo path ``path``; [] when it is valid.

    Checks what ``queue.hub.Request`` holds: the required text fields, no unknown field, the state,
    attempts in ``0..MAX_RECORD_ATTEMPTS``, text lengths, the metadata's text limits, the content hash,
    the path the model/benchmark/hash belong at and the record's own zip, and the timestamps (see the
    module's decisions; ``now`` is epoch seconds).
    """
    problems = [
        p for key in REQUIRED_REQUEST_FIELDS if (p := _text_problem(record, key, MAX_FIELD_CHARS, required=True))
    ]
    problems += [f"unknown field {key[:40]!r}" for key in sorted(set(record) - set(REQUEST_FIELDS))]
    for key in ("task", "worker", "files", "owner", "requester"):
        problems += [p] if (p := _text_problem(record, key, MAX_FIELD_CHARS, required=False)) else []
    problems += [p] if (p := _text_problem(record, "reason", MAX_REASON_CHARS, required=False)) else []
    if "schema" in record and record["schema"] != REQUEST_SCHEMA:
        problems.append(f"field 'schema' is {record['schema']!r}, not {REQUEST_SCHEMA}")
    if isinstance(record.get("state"), str) and record["state"] not in REQUEST_STATES:
        problems.append(f"state {record['state'][:40]!r} is none of {', '.join(REQUEST_STATES)}")
    attempts = record.get("attempts", 0)
    if not _is_int(attempts) or not 0 <= attempts <= MAX_RECORD_ATTEMPTS:
        problems.append(f"attempts {attempts!r:.40} is not a count from 0 to {MAX_RECORD_ATTEMPTS}")
    problems += [p] if (p := _hash_problem(record)) else []
    problems += _metadata_problems(record)
    for key in ("submitted_at", "updated_at"):
        problems += [p] if (p := _time_problem(record, key, now)) else []
    problems += [p] if (p := _time_problem(record, "lease_until", now, future=True)) else []
    if problems:  # the path checks below need the fields to be well-formed text
        return problems
    expected = request_path(record["benchmark"], record["model"], record["content_hash"])
    if path != expected:
        problems.append(f"its model, benchmark and content_hash belong at {expected}")
    if record.get("files") is not None and record["files"] != path.removesuffix(".json") + ".zip":
        problems.append(f"files {record['files']!r} is not the record's own zip ({path.removesuffix('.json')}.zip)")
    return problems


def checked_request(path: str, data: bytes, now: float | None = None) -> dict[str, Any]:
    """The request record in ``data`` (at repo path ``path``) when it is valid; else :class:`MalformedRecord`.

    The dict holds the record's fields as written (no defaults filled in): ``queue.hub.Request(path=path,
    **record)`` takes it as it is. ``now`` defaults to the clock.
    """
    record = load_record(path, data, max_bytes=MAX_REQUEST_BYTES)
    problems = request_problems(path, record, time.time() if now is None else now)
    if problems:
        raise MalformedRecord(path, ["malformed request record: " + problems[0], *problems[1:]])
    return record


def read_request(folder: Path, path: str, now: float | None = None) -> dict[str, Any]:
    """:func:`checked_request` of the file ``folder/path`` (a snapshot's record), reading at most the limit."""
    record = read_record(folder, path, max_bytes=MAX_REQUEST_BYTES)
    problems = request_problems(path, record, time.time() if now is None else now)
    if problems:
        raise MalformedRecord(path, ["malformed request record: " + problems[0], *problems[1:]])
    return record


def lease_end(record: dict[str, Any]) -> float | None:
    """When a request's lease ends (epoch seconds), or None when it has none (or an unreadable one).

    Capped at ``MAX_LEASE_SECONDS`` after the record's ``updated_at`` (else ``submitted_at``): a
    ``lease_until`` of 9999-12-31 ends a day after the record was written, and the request is then
    claimed again like any other whose worker died.
    """
    until = parse_time(record.get("lease_until"))
    if until is None:
        return None
    written = parse_time(record.get("updated_at")) or parse_time(record.get("submitted_at"))
    return until if written is None else min(until, written + MAX_LEASE_SECONDS)


def lease_expired(record: dict[str, Any], now: float) -> bool:
    """Whether a RUNNING request's lease has ended at ``now`` (no readable lease: ended)."""
    end = lease_end(record)
    return end is None or end < now


def contested_hashes(records: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, list[str]]:
    """``{content hash: [paths]}`` of the hashes that two or more of the ``(path, record)`` claim.

    The mirror shows none of such a hash's records (``hub_mirror.prove``); a worker can leave them
    unclaimed for the same reason (scoring a forged copy only adds a second, conflicting result).
    """
    paths: dict[str, list[str]] = {}
    for path, record in records:
        paths.setdefault(record.get("content_hash"), []).append(path)
    return {digest: sorted(found) for digest, found in paths.items() if isinstance(digest, str) and len(found) > 1}


# --- result records ----------------------------------------------------------------------------------


def _fine_stats(stats: dict[str, Any]) -> bool:
    """The common case, checked fast (a result holds thousands of statistics blocks): every field fine."""
    for key in STAT_NUMBERS:
        value = stats.get(key)
        if value is not None and not (
            type(value) in (int, float) and -MAX_STAT_MAGNITUDE <= value <= MAX_STAT_MAGNITUDE
        ):
            return False  # a NaN fails the comparison too
    for key in STAT_COUNTS:
        value = stats.get(key)
        if value is not None and not (type(value) is int and 0 <= value):
            return False
    return True


def _stats_problems(where: str, stats: Any) -> list[str]:
    if not isinstance(stats, dict):
        return [f"{where} is not an object of statistics"]
    if _fine_stats(stats):
        return []
    problems = [
        f"{where}.{key} is {stats[key]!r:.40}, not a finite number within +-{MAX_STAT_MAGNITUDE:g}"
        for key in STAT_NUMBERS
        if stats.get(key) is not None and not (_is_number(stats[key]) and abs(stats[key]) <= MAX_STAT_MAGNITUDE)
    ]
    problems += [
        f"{where}.{key} is {stats[key]!r:.40}, not a count"
        for key in STAT_COUNTS
        if stats.get(key) is not None and (not _is_int(stats[key]) or stats[key] < 0)
    ]
    return problems


def _aggregates_problems(aggregates: Any) -> list[str]:
    """The statistics blocks of ``aggregates`` (overall, and every cell of every breakdown) hold numbers."""
    if not isinstance(aggregates, dict) or not isinstance(aggregates.get("overall"), dict):
        return ["field 'aggregates' is missing or has no 'overall' object"]
    problems = []
    for metric, stats in aggregates["overall"].items():
        problems += _stats_problems(f"aggregates.overall.{metric[:60]}", stats)
    for group in ("breakdowns", "subject_breakdowns"):
        axes = aggregates.get(group)
        if axes is None:
            continue
        if not isinstance(axes, dict) or not all(isinstance(cells, dict) for cells in axes.values()):
            problems.append(f"field 'aggregates.{group}' is not an object of axes of cells")
            continue
        for axis, cells in axes.items():
            for cell, metrics in cells.items():
                if not isinstance(metrics, dict):
                    problems.append(f"aggregates.{group}.{axis[:40]}.{cell[:40]} is not an object of metrics")
                    continue
                for metric, stats in metrics.items():
                    problems += _stats_problems(f"aggregates.{group}.{axis[:40]}.{cell[:40]}.{metric[:40]}", stats)
    return problems


def result_problems(path: str, record: dict[str, Any], now: float) -> list[str]:
    """What is wrong with the result record (``aggregates.json``) at repo path ``path``; [] when valid.

    The provenance fields (``RESULT_PROVENANCE``) are present short text; it lives at
    ``result_folder(benchmark, model, content_hash)``; it is no plumbing (tiny- or paper-random-profile) result; every
    statistic is null or a finite number within ``MAX_STAT_MAGNITUDE`` (1e308 is refused); ``models``
    and ``not_run`` are objects, ``judge`` and ``copies`` pass ``leaderboard.judges``' checks;
    ``scored_at`` is a sane time; ``samples`` names the parquet beside it.
    """
    problems = [p for key in RESULT_PROVENANCE if (p := _text_problem(record, key, MAX_FIELD_CHARS, required=True))]
    problems += [p] if (p := _text_problem(record, "task", MAX_FIELD_CHARS, required=False)) else []
    problems += [p] if (p := _hash_problem(record)) else []
    if record.get("plumbing") or record.get("profile") in PLUMBING_PROFILES:
        problems.append("a plumbing (random-weight profile) result: such numbers are never published")
    problems += _aggregates_problems(record.get("aggregates"))
    for key in ("models", "not_run"):
        if record.get(key) is not None and not isinstance(record[key], dict):
            problems.append(f"field {key!r} is not an object")
    problems += [
        p for key, check in (("judge", check_judge), ("copies", check_copies)) if (p := check(record.get(key)))
    ]
    problems += _metadata_problems(record)
    problems += [p] if (p := _time_problem(record, "scored_at", now)) else []
    if problems:
        return problems
    parts, folder = path.split("/"), result_folder(record["benchmark"], record["model"], record["content_hash"])
    if parts[0] != record["benchmark"]:
        problems.append(f"benchmark {record['benchmark']!r} does not match its folder {parts[0]!r}")
    elif len(parts) != 4 or parts[2] != record["content_hash"][:12]:
        problems.append(
            f"content hash {record['content_hash'][:12]}... does not match its folder {parts[2] if len(parts) > 2 else path!r}"
        )
    elif path != f"{folder}/{AGGREGATES_FILE}":
        problems.append(f"its model, benchmark and content_hash belong at {folder}/{AGGREGATES_FILE}")
    samples = record.get("samples")
    if samples is not None and samples != f"{folder}/{SAMPLES_FILE}":
        problems.append(f"field 'samples' names {str(samples)[:200]!r}, not the {SAMPLES_FILE} beside it")
    return problems


def checked_result(path: str, data: bytes, now: float | None = None) -> dict[str, Any]:
    """The result record in ``data`` (at repo path ``path``) when it is valid; else :class:`MalformedRecord`."""
    record = load_record(path, data, max_bytes=MAX_RESULT_BYTES)
    problems = result_problems(path, record, time.time() if now is None else now)
    if problems:
        raise MalformedRecord(path, problems)
    return record


# --- the parquet files beside a result ---------------------------------------------------------------


def samples_problem(file: Path, *, max_bytes: int = MAX_SAMPLES_BYTES, max_rows: int = MAX_SAMPLES_ROWS) -> str | None:
    """Why the parquet ``file`` beside a result cannot be shown (None when it can): over ``max_bytes``,
    a footer pyarrow cannot read, or more than ``max_rows`` rows. Reads the footer only, never a row."""
    import pyarrow.parquet as pq  # the Space has it (pandas reads the parquet files with it)

    try:
        size = Path(file).stat().st_size
        if size > max_bytes:
            return f"{Path(file).name} is {size} bytes, over the limit of {max_bytes}"
        metadata = pq.ParquetFile(file).metadata
    except Exception as error:
        return f"{Path(file).name} is not a readable parquet file ({type(error).__name__}: {str(error)[:200]})"
    if metadata.num_rows > max_rows:
        return f"{Path(file).name} has {metadata.num_rows} rows, over the limit of {max_rows}"
    return None

"""Shards of one scoring run, and the merge that turns them into the run's results.

``idbench score ... --shard K/N`` scores shard K's images (:mod:`idbench.shards`) into the feature cache
and the judge's answer cache (both shared by the shards: a folder on a shared file system), then writes
one record, ``OUT/shards/K-of-N.json``, saying what it scored and with which options. It writes nothing
else into OUT, so the shards of an array never touch each other's files.

``idbench merge OUT`` checks that the records make one run (every shard of one split, present once;
the same submission, benchmark build and options), then scores the whole submission once more with
those caches: every feature, copy search and judge answer is read back, not computed, so the merge
costs reading and arithmetic only. Its results.parquet, aggregates.json and report are therefore
those of a single process (the same code, the same order), with one difference in the floats: an
encoder's output for an image depends, in its last bits, on the other images of its batch (the matrix
products are blocked by batch), and a shard's batches hold other images than one process's. With
``--batch-size 1`` nothing depends on the batch and the merge equals a single process bit for bit
(tests/scoring/test_shards_merge.py); with larger batches the means agree to float32 rounding (about
1e-8 on the tests' cosines). ``aggregates.json``'s ``features`` counts say what each run read and
computed. The records stay in ``OUT/shards``; a second merge writes the same file again.

A shard's feature cache on a disk the merge cannot see is not an error: the merge computes what it
does not find, and says how much it computed.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from idbench import settings
from idbench.atomic import OutputExistsError, write_text_atomically
from idbench.errors import IdbenchError
from idbench.evaluate_pkg.context import ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.shards import MAX_SHARDS, Shard, unit_key

SHARDS_DIR = "shards"
MAX_RECORD_BYTES = 1 << 20  # a record is a few hundred bytes; anything larger was not written by a shard
_NAME = re.compile(r"(\d+)-of-(\d+)\.json")
# The options every shard of one run must share (the device and the DataLoader's workers may differ).
SHARED_OPTIONS = ("profile", "metrics", "dtype", "batch_size", "models_dir")


class MergeError(IdbenchError, ValueError):
    """Shard records that do not make one complete run, or an output folder that holds none."""


def record_path(out: Path, shard: Shard) -> Path:
    return Path(out) / SHARDS_DIR / f"{shard.index}-of-{shard.count}.json"


def shard_record(
    shard: Shard,
    summary: dict[str, Any],
    *,
    submission: Path,
    data: Path,
    cache_dir: Path,
    options: ScoreOptions,
) -> dict[str, Any]:
    """What ``OUT/shards/K-of-N.json`` holds: the shard, what it scored, and how (no secret: the judge's
    API key stays in the environment, as in :class:`~idbench.evaluate_pkg.judge.JudgeConfig`, and its
    URLs are recorded as :func:`recorded_judge` has them)."""
    judge = options.judge
    return {
        "shard": {"index": shard.index, "count": shard.count, "from": shard.source},
        "benchmark": summary["benchmark"],
        "images": summary["images"],
        "submission": str(Path(submission).resolve()),
        "submission_sha256": summary["submission_sha256"],
        "data": str(Path(data).resolve()),
        "build": summary["build"],
        "cache_dir": str(Path(cache_dir).resolve()),
        "options": {name: getattr(options, name) for name in SHARED_OPTIONS},
        "judge": recorded_judge(judge),
        "features": summary["features"],
    }


def recorded_judge(judge: Any) -> dict[str, Any] | None:
    """A JudgeConfig as a shard's record keeps it: every field, its URLs as ``settings.redact_url`` shows
    them (a key-shaped path segment masked: the record lies beside the results). None for no judge."""
    if not dataclasses.is_dataclass(judge):
        return None
    record = dataclasses.asdict(judge)
    record["base_url"] = settings.redact_url(record["base_url"])
    record["replica_urls"] = [settings.redact_url(url) for url in record.get("replica_urls", ())]
    return record


def judge_for_merge(out: Path, recorded: dict[str, Any] | None) -> Any:
    """The JudgeConfig the merge scores with: the shards' recorded one, each URL the record keeps masked
    taken back from ``$IDBENCH_JUDGE_URL`` (the URL whose masked form is the record's). The merge reads
    the shards' answers from the cache, but asks the server what it does not find there, so it needs the
    real address; without it, a one-line MergeError says what to set."""
    if not recorded:
        return None
    from idbench.evaluate_pkg.judge import JudgeConfig

    given = [url for url in re.split(r"[,\s]+", settings.judge_url()) if url]

    def unmasked(url: str) -> str:
        if settings.REDACTED not in url.split("/"):
            return url
        found = next((candidate for candidate in given if settings.redact_url(candidate) == url), None)
        if found is None:
            raise MergeError(
                f"merge {out}: the shards' judge URL {url} has a key-shaped path segment, masked in their "
                f"records; set ${settings.JUDGE_URL} to that URL to merge"
            )
        return found

    replicas = tuple(unmasked(url) for url in recorded.get("replica_urls", ()))
    return JudgeConfig(**{**recorded, "base_url": unmasked(recorded["base_url"]), "replica_urls": replicas})


def write_shard_record(out: Path, record: dict[str, Any]) -> Path:
    """Write one shard's record atomically (a killed shard leaves none: the merge then names it missing)."""
    shard = Shard(record["shard"]["index"], record["shard"]["count"])
    path = record_path(out, shard)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path


def score_shard(
    submission: Path,
    data: Path,
    out: Path,
    options: ScoreOptions,
    shard: Shard,
    *,
    cache_dir: Path | None = None,
    overwrite: bool = False,
    accelerator: Any = None,
    progress: bool = True,
) -> tuple[dict[str, Any], Path | None]:
    """Score ``shard``'s images of ``submission`` into the caches and write its record in ``out``.

    Returns the shard's summary and its record's path (None on the non-main processes of an ``accelerate
    launch``, which leave the record to the main one). A shard whose record exists has finished: refused
    unless ``overwrite``. Without ``cache_dir``, the default feature cache (this machine's) is used.
    """
    from idbench.evaluate_pkg.runner import default_cache_dir, score_submission

    if record_path(out, shard).exists() and not overwrite:
        raise OutputExistsError(
            f"{record_path(out, shard)} exists: shard {shard} has finished; pass --overwrite to score it again"
        )
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    summary = score_submission(
        Path(submission),
        data,
        None,
        options,
        cache_dir=cache_dir,
        accelerator=accelerator,
        shard=shard,
        progress=progress,
    )
    if accelerator is not None:
        accelerator.wait_for_everyone()
        accelerator.end_training()
        if not accelerator.is_main_process:
            return summary, None
    record = shard_record(shard, summary, submission=submission, data=data, cache_dir=cache_dir, options=options)
    return summary, write_shard_record(out, record)


def read_records(out: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every ``OUT/shards/K-of-N.json``, read within bounds; a malformed one is one error naming it."""
    folder = Path(out) / SHARDS_DIR
    if not folder.is_dir():
        raise MergeError(f"merge {out}: no {SHARDS_DIR}/ folder; `idbench score ... --out {out} --shard K/N` writes it")
    records = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):  # a record being written (atomic writes stage beside it)
            continue
        match = _NAME.fullmatch(path.name)
        if match is None or not path.is_file():
            raise MergeError(f"merge {out}: {path} is not a shard record (K-of-N.json)")
        if len(records) >= MAX_SHARDS:
            raise MergeError(f"merge {out}: more than {MAX_SHARDS} records in {folder}")
        if path.stat().st_size > MAX_RECORD_BYTES:
            raise MergeError(f"merge {out}: {path} is {path.stat().st_size} bytes, not a shard record")
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            index, count = int(record["shard"]["index"]), int(record["shard"]["count"])
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
            raise MergeError(f"merge {out}: {path} is unreadable ({err})") from None
        if (index, count) != (int(match.group(1)), int(match.group(2))):
            raise MergeError(f"merge {out}: {path} holds the record of shard {index}/{count}")
        records.append((path, record))
    if not records:
        raise MergeError(f"merge {out}: {folder} holds no shard record")
    return records


def _one_run(out: Path, records: list[tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    """The first record, once every other says the same run (same split, submission, data, options)."""
    first_path, first = records[0]
    counts = {r["shard"]["count"] for _, r in records}
    if len(counts) > 1:
        listing = ", ".join(f"{p.name} ({r['shard']['count']} shards)" for p, r in records)
        raise MergeError(f"merge {out}: records of different splits overlap ({listing}); keep one run's shards")
    for path, record in records[1:]:
        for field in ("benchmark", "submission_sha256", "data", "build", "cache_dir", "options", "judge"):
            if _what_answers(record, field) != _what_answers(first, field):
                raise MergeError(
                    f"merge {out}: {path.name} and {first_path.name} differ in {field!r} "
                    f"({record.get(field)!r} vs {first.get(field)!r}); the shards of one run share it"
                )
    return first


def _what_answers(record: dict[str, Any], field: str) -> Any:
    """A record's ``field``; for the judge, without how it was reached (its servers, concurrency, retries):
    each node's shard may ask its own local server of the same model, and that is still one run."""
    value = record.get(field)
    if field == "judge" and isinstance(value, dict):
        from idbench.evaluate_pkg.judge.client import TRANSPORT_SETTINGS

        value = {k: v for k, v in value.items() if k not in TRANSPORT_SETTINGS}
    return value


def check_complete(out: Path, records: list[tuple[Path, dict[str, Any]]], required: list[tuple[str, int]]) -> None:
    """Refuse, in one line, a set of records with a shard missing (naming it and its rows)."""
    count = records[0][1]["shard"]["count"]
    present = {r["shard"]["index"] for _, r in records}
    missing = [k for k in range(count) if k not in present]
    if not missing:
        return
    owners = [Shard(k, count) for k in missing]
    rows = [pair for pair in required if any(shard.owns(unit_key(*pair)) for shard in owners)]
    shown = ", ".join(str(k) for k in missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
    example = f", e.g. prompt_id {rows[0][0]!r} seed {rows[0][1]}" if rows else ""
    raise MergeError(
        f"merge {out}: shard(s) {shown} of {count} have not finished (no {SHARDS_DIR}/{missing[0]}-of-{count}.json): "
        f"{len(rows)} of {len(required)} (prompt_id, seed) rows unscored{example}; run them, then merge again"
    )


def merge(out: Path, *, device: str = "cpu", num_workers: int = 0, progress: bool = True) -> dict[str, Any]:
    """Check ``OUT/shards`` (see the module docstring) and write the whole run's results into ``out``."""
    from idbench.evaluate_pkg.runner import build_record, score_submission, submission_fingerprint
    from idbench.evaluate_pkg.submission import validate_submission

    out = Path(out)
    records = read_records(out)
    run = _one_run(out, records)
    data = load_benchmark_data(Path(run["data"]))
    if build_record(data) != run["build"]:
        raise MergeError(f"merge {out}: {run['data']} is not the benchmark build its shards scored against; rebuild it")
    check_complete(out, records, data.required_pairs)
    with validate_submission(Path(run["submission"]), data) as submission:
        if submission_fingerprint(submission) != run["submission_sha256"]:
            raise MergeError(
                f"merge {out}: {run['submission']} changed since its shards scored it (its images or rows differ); "
                "score its shards again"
            )
    options = ScoreOptions(
        **{**run["options"], "metrics": tuple(run["options"]["metrics"]) if run["options"]["metrics"] else None},
        device=device,
        num_workers=num_workers,
        judge=judge_for_merge(out, run["judge"]),
    )
    return score_submission(
        Path(run["submission"]),
        data,
        out,
        options,
        cache_dir=Path(run["cache_dir"]),
        overwrite=True,
        progress=progress,
        carry=SHARDS_DIR,
    )

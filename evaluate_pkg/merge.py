"""Shards of one scoring run, and the merge that turns them into the run's results.

``idbench score ... --shard K/N`` scores shard K's images (:mod:`idbench.shards`) with its own feature
cache and judge answer cache (``--cache-dir``: shared by the shards or each node's own, as the cluster
allows), then writes into ``OUT/shards`` everything the merge needs from it:

- ``K-of-N/``, the shard's folder: a copy of every feature-store entry the shard read or computed (its
  images' features, the references' and prompts' it used, its copy searches; the cache's own layout under
  ``features/``) and of every judge answer it used (``judge/answers/``, signed as in the answer cache; shard
  0's include the answers to the judge's control questions), listed with their sizes and sha256 in
  ``K-of-N/manifest.json`` (:func:`seal_folder`); written whole or not at all (``idbench.atomic``);
- ``K-of-N.json``, its record: what it scored and with which options, and the manifest's sha256; written
  last, so a shard killed before it has no record and the merge names it missing.

The shards of an array never touch each other's files. ``idbench merge OUT`` checks that the records make
one run (every shard of one split, present once; the same submission, benchmark build and options; each
folder what its record says), then scores the whole submission once more, reading features and judge
answers from the shards' folders only, never a cache (:class:`_FolderStore`, :class:`_FolderAnswers`):
nothing is computed, so the merge costs reading and arithmetic. It runs the code a single
``idbench score`` runs, in the same order, over the same stored values, so its results.parquet,
aggregates.json (aggregates and intervals, notes, copy check, evidence) and report are those of a
single process, with one difference in the floats: an encoder's output for an image depends, in its last
bits, on the other images of its batch (the matrix products are blocked by batch), and a shard's batches
hold other images than one process's. With ``--batch-size 1`` nothing depends on the batch and the merge
equals a single process bit for bit (tests/scoring/test_shards_merge.py, with one cache for all shards
and with a cache per shard); with larger batches the means agree to float32 rounding (about 1e-8 on the
tests' cosines). Why a replay and not a concatenation of per-image rows: the suites' run-level notes
(prompts truncated, judge summaries, references without a face...) are computed over the images of a
run, and no rule rebuilds them from the shards' notes. ``aggregates.json``'s ``features`` says what the
merge read and computed, and under ``shards`` what each shard read from its cache and computed.

A feature missing from every folder (a folder sealed again by hand) is computed, counted, and not kept. A
judge answer missing from them (one the shard's judge failed to give) is asked of the judge; when the
judge cannot answer (down, unreachable, out of budget) the merge stops in one line rather than write
numbers the shards' run would not have (:class:`_MergeJudge`).

Everything in ``OUT/shards`` is input like any other (anyone who can write the folder can change it), so
it is checked before it is used. A record: a canonical name (``K-of-N.json``, ASCII digits, no leading
zero, K below N, so that each shard has exactly one name), a regular file of at most
:data:`MAX_RECORD_BYTES` bytes, JSON nested at most :data:`MAX_RECORD_DEPTH` deep with finite numbers and
no key twice, and the schema of :func:`shard_record` with strict types (``true`` is not a number, a count is
a whole number within bounds); its own shard must be the one its name says, and its rows (``images`` and
``rows_sha256``) must be exactly the rows the split gives that shard of the submission, so a record copied
to a shard that never ran is refused. A folder (:func:`check_folder`): its manifest the one the record
names (sha256), of at most :data:`MAX_MANIFEST_BYTES` bytes; every file it lists there, regular, of at
most :data:`MAX_FILE_BYTES` bytes, with the listed size and sha256; no other file, no link. Every refusal
is one :class:`MergeError` line naming the file (and the field). The features are as trustworthy as the
folder (as a shared cache's were); the judge's answers stay signed, and one not signed with the run's key
is asked again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shlex
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from idbench import settings
from idbench.atomic import OutputExistsError, atomic_directory, sweep_staging, write_text_atomically
from idbench.errors import IdbenchError
from idbench.evaluate_pkg.context import ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.features import Features, FeatureStore
from idbench.evaluate_pkg.results import SHARDS_FOLDER
from idbench.shards import MAX_SHARDS, Shard, rows_sha256, shard_of, unit_key
from idbench.untrusted import UntrustedInput, load_json, read_regular_file

SHARDS_DIR = SHARDS_FOLDER  # the name this module and its callers have used
MAX_RECORD_BYTES = 1 << 20  # a record is a few hundred bytes; anything larger was not written by a shard
MAX_RECORD_DEPTH = 8  # a record nests 3 levels (features -> computed -> a role's count)
# K-of-N.json in ASCII digits without leading zeros: one name per shard (no 00-of-2.json beside 0-of-2.json,
# no digit of another script, which \d would accept).
_NAME = re.compile(r"(0|[1-9][0-9]{0,5})-of-([1-9][0-9]{0,5})\.json")
# The shard's folder beside its record (K-of-N/), and what it holds: the manifest, and files in the feature
# cache's layout (features/<model key>/v<version>/<ab>/<key>.npz) and the answer cache's (judge/answers/...).
_FOLDER = re.compile(r"(0|[1-9][0-9]{0,5})-of-([1-9][0-9]{0,5})")
MANIFEST = "manifest.json"
FEATURES, ANSWERS = "features", "judge/answers"
_FOLDER_FILE = re.compile(
    r"features/[A-Za-z0-9_@-][A-Za-z0-9._@-]*/v[A-Za-z0-9._@+-]+/([0-9a-f]{2})/\1[0-9a-f]{62}\.npz"
    r"|judge/answers/([0-9a-f]{2})/\2[0-9a-f]{62}\.json"
)
MAX_MANIFEST_BYTES = 64 << 20  # ~150 bytes a file: some 400,000 files, far above a shard's
MAX_FILE_BYTES = 256 << 20  # one feature entry (a patch grid, a mask) is a few MB; a judge answer a few KB
# The options every shard of one run must share (the device and the DataLoader's workers may differ).
SHARED_OPTIONS = ("profile", "metrics", "dtype", "batch_size", "models_dir")


class MergeError(IdbenchError, ValueError):
    """Shard records that do not make one complete run, or an output folder that holds none."""


def record_path(out: Path, shard: Shard) -> Path:
    return Path(out) / SHARDS_DIR / f"{shard.index}-of-{shard.count}.json"


def folder_path(out: Path, shard: Shard) -> Path:
    """The shard's folder beside its record: what the merge reads of its features and judge answers."""
    return Path(out) / SHARDS_DIR / f"{shard.index}-of-{shard.count}"


def shard_record(
    shard: Shard,
    summary: dict[str, Any],
    *,
    submission: Path,
    data: Path,
    cache_dir: Path,
    options: ScoreOptions,
    folder: dict[str, Any],
) -> dict[str, Any]:
    """What ``OUT/shards/K-of-N.json`` holds: the shard, what it scored, and how (no secret: the judge's
    API key stays in the environment, as in :class:`~idbench.evaluate_pkg.judge.JudgeConfig`, and its
    URLs are recorded as :func:`recorded_judge` has them); ``folder``: :func:`seal_folder`'s account of
    the shard's folder (its manifest's sha256). ``cache_dir`` is recorded to say where the shard's cache
    was; the shards of a run may each have their own."""
    judge = options.judge
    return {
        "shard": {"index": shard.index, "count": shard.count, "from": shard.source},
        "benchmark": summary["benchmark"],
        "images": summary["images"],
        "rows_sha256": summary["rows_sha256"],
        "submission": str(Path(submission).resolve()),
        "submission_sha256": summary["submission_sha256"],
        "data": str(Path(data).resolve()),
        "build": summary["build"],
        "cache_dir": str(Path(cache_dir).resolve()),
        "options": {name: getattr(options, name) for name in SHARED_OPTIONS},
        "judge": recorded_judge(judge),
        "features": summary["features"],
        "folder": folder,
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


def judge_for_merge(out: Path, recorded: dict[str, Any] | None, where: Path | None = None) -> Any:
    """The JudgeConfig the merge scores with: the shards' recorded one, each URL the record keeps masked
    taken back from ``$IDBENCH_JUDGE_URL`` (the URL whose masked form is the record's). The merge reads
    the shards' answers from their folders, but asks the server what it does not find there, so it needs the
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
    try:
        return JudgeConfig(**{**recorded, "base_url": unmasked(recorded["base_url"]), "replica_urls": replicas})
    except (
        TypeError,
        ValueError,
    ) as err:  # a record's judge that no JudgeConfig takes (read_records checked the types)
        whose = f"{where}: field" if where is not None else "the shards' field"
        raise MergeError(f"merge {out}: {whose} 'judge' is not a judge's settings ({err})") from None


class _MergeJudge:
    """The merge's judge: the shards' one, asked only what the shards' folders lack, and allowed no answer it
    could not get. An answer the judge could not give (``JudgeStats.unanswered``: down, unreachable, out of
    budget, an HTTP error) would make the merge write other numbers than the shards' run, silently; so it
    stops the merge with one :class:`MergeError` line instead. An answer the judge gave but that did not
    parse is a failure the shards' run had as well, and is kept as one."""

    def __init__(self, judge: Any, out: Path):
        self._judge, self._out = judge, out

    def __getattr__(self, name: str) -> Any:  # model, config, stats: what the runner records
        return getattr(self._judge, name)

    def ask(self, requests: Sequence[Any]) -> list[Any]:
        before = self._judge.stats.unanswered
        answers = self._judge.ask(requests)
        missing = self._judge.stats.unanswered - before
        if missing:
            error = next((a.error for a in answers if not a.ok), "") or ""
            error = " ".join(error.split())[:200]
            config = self._judge.config
            raise MergeError(
                f"merge {self._out}: {missing} judge answers are not in the shards' folders and the judge "
                f"{config.model!r} at {settings.redact_urls(', '.join(config.urls))} could not give them ({error}); "
                "nothing was written: start the judge (or point $IDBENCH_JUDGE_URL at it) and merge again"
            )
        return answers


def write_shard_record(out: Path, record: dict[str, Any]) -> Path:
    """Write one shard's record atomically (a killed shard leaves none: the merge then names it missing)."""
    shard = Shard(record["shard"]["index"], record["shard"]["count"])
    path = record_path(out, shard)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path


# --- what a shard keeps for the merge ---------------------------------------------------------------


class _ShardStore(FeatureStore):
    """A shard's feature store: its cache, and the entries the shard used (read or computed), by their path
    under the cache, for :func:`write_folder` to copy."""

    def __init__(self, root: Path, accelerator: Any = None):
        super().__init__(root, accelerator=accelerator)
        self.used: set[Path] = set()

    def cached_batches(self, model_key, version, items, compute_batches, progress=None) -> dict[str, Features]:
        found = super().cached_batches(model_key, version, items, compute_batches, progress)
        for key in items:
            path = self._path(model_key, version, key)
            if self.accelerator is not None and self.accelerator.is_main_process and not path.is_file():
                self.save(model_key, version, key, found[key])  # computed by a process on another node's disk
            self.used.add(path)
        return found


class _UsedAnswers:
    """A judge's answer cache that notes the keys of the answers it served or stored (the shard's)."""

    def __init__(self, cache: Any):
        self.cache, self.used = cache, set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cache, name)

    def read_many(self, keys: Iterable[str]) -> tuple[dict[str, Any], int]:
        found, refused = self.cache.read_many(keys)
        self.used.update(found)
        return found, refused

    def put(self, key: str, **entry: Any) -> None:
        self.cache.put(key, **entry)
        self.used.add(key)

    def __repr__(self) -> str:
        return repr(self.cache)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def seal_folder(folder: Path) -> dict[str, Any]:
    """List every file of a shard's folder (but the manifest) with its size and sha256 in
    ``folder/manifest.json``; returns the record's ``folder`` field (the manifest's sha256, the count and
    size of the files), which the merge checks the folder against."""
    folder = Path(folder)
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p != folder / MANIFEST):
        data = path.read_bytes()
        files[path.relative_to(folder).as_posix()] = {"bytes": len(data), "sha256": _sha256(data)}
    text = json.dumps({"files": files}, indent=0, sort_keys=True) + "\n"
    write_text_atomically(folder / MANIFEST, text)
    return {
        "manifest_sha256": _sha256(text.encode()),
        "files": len(files),
        "bytes": sum(f["bytes"] for f in files.values()),
    }


def write_folder(out: Path, shard: Shard, store: _ShardStore, answers: _UsedAnswers | None) -> dict[str, Any]:
    """Copy the feature entries and judge answers the shard used into its folder ``OUT/shards/K-of-N/``,
    atomically (replacing an earlier one); returns :func:`seal_folder`'s account of it for the record. An
    answer the answer cache does not hold (one the judge failed to give) is not there to copy: the merge
    asks for it again."""
    sources = {Path(FEATURES) / path.relative_to(store.root): path for path in store.used}
    for key in answers.used if answers is not None else ():
        entry = answers.path / key[:2] / f"{key}.json"  # the answer cache's layout (judge/cache.py)
        if entry.is_file():
            sources[Path(ANSWERS) / key[:2] / f"{key}.json"] = entry
    with atomic_directory(folder_path(out, shard), overwrite=True) as staging:
        for relative, source in sorted(sources.items()):
            (staging / relative).parent.mkdir(parents=True, exist_ok=True)
            (staging / relative).write_bytes(source.read_bytes())
        return seal_folder(staging)


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
    """Score ``shard``'s images of ``submission`` with the caches, then write its folder and its record in
    ``out`` (the module's docstring).

    Returns the shard's summary (with ``folder``: :func:`seal_folder`'s account) and its record's path (None
    on the non-main processes of an ``accelerate launch``, which leave both to the main one). A shard whose
    record exists has finished: refused unless ``overwrite``. Without ``cache_dir``, the default feature
    cache (this machine's) is used; the shards of a run may each use their own.
    """
    from idbench.evaluate_pkg.runner import default_cache_dir, make_judge, score_submission

    if record_path(out, shard).exists() and not overwrite:
        raise OutputExistsError(
            f"{record_path(out, shard)} exists: shard {shard} has finished; pass --overwrite to score it again"
        )
    if record_path(out, shard).parent.is_dir():  # the staging folders of killed shards (ours, or a day old)
        sweep_staging(record_path(out, shard).parent, depth=0)
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    store = _ShardStore(cache_dir, accelerator=accelerator)
    judge, answers = options.judge, None
    if dataclasses.is_dataclass(judge):  # a JudgeConfig: its client, whose answers the folder keeps
        judge = make_judge(judge, cache_dir)
        judge.cache = answers = _UsedAnswers(judge.cache)
    summary = score_submission(
        Path(submission),
        data,
        None,
        dataclasses.replace(options, judge=judge),
        cache_dir=cache_dir,
        accelerator=accelerator,
        shard=shard,
        progress=progress,
        store=store,
    )
    if accelerator is not None:
        accelerator.wait_for_everyone()
        accelerator.end_training()
        if not accelerator.is_main_process:
            return summary, None
    folder = write_folder(out, shard, store, answers)
    record = shard_record(
        shard, summary, submission=submission, data=data, cache_dir=cache_dir, options=options, folder=folder
    )
    return {**summary, "folder": folder}, write_shard_record(out, record)


def read_records(out: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every ``OUT/shards/K-of-N.json``, each read within bounds and checked against the record's schema
    (the module's docstring); the first that is not a shard's record is one :class:`MergeError` naming it.
    The shards' folders (``K-of-N/``) beside them are checked by :func:`check_folder`."""
    folder = Path(out) / SHARDS_DIR
    if not folder.is_dir():
        raise MergeError(f"merge {out}: no {SHARDS_DIR}/ folder; `idbench score ... --out {out} --shard K/N` writes it")
    records = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):  # a record being written (atomic writes stage beside it)
            continue
        if _FOLDER.fullmatch(path.name) and path.is_dir() and not path.is_symlink():
            continue  # a shard's folder: read with its record (check_folder)
        match = _NAME.fullmatch(path.name)
        if match is None:
            raise MergeError(
                f"merge {out}: {path} is not a shard record: its name is not K-of-N.json "
                "(ASCII digits, no leading zero)"
            )
        index, count = int(match.group(1)), int(match.group(2))
        if not index < count <= MAX_SHARDS:
            raise MergeError(
                f"merge {out}: {path} is not a shard record: there is no shard {index} of {count} "
                f"(K runs from 0 to N-1, N to {MAX_SHARDS})"
            )
        if len(records) >= MAX_SHARDS:
            raise MergeError(f"merge {out}: more than {MAX_SHARDS} records in {folder}")
        try:
            record = load_json(read_regular_file(path, MAX_RECORD_BYTES), max_depth=MAX_RECORD_DEPTH)
        except UntrustedInput as err:
            raise MergeError(f"merge {out}: {path} is not a shard record: {err}") from None
        except OSError as err:
            raise MergeError(f"merge {out}: {path} is unreadable ({err.strerror or err})") from None
        problem = record_problem(record)
        if problem is not None:
            raise MergeError(f"merge {out}: {path}: {problem}")
        if (record["shard"]["index"], record["shard"]["count"]) != (index, count):
            raise MergeError(
                f"merge {out}: {path}: field 'shard' says shard {record['shard']['index']}/{record['shard']['count']}, "
                f"but the file is named for shard {index}/{count}"
            )
        records.append((path, record))
    if not records:
        raise MergeError(f"merge {out}: {folder} holds no shard record")
    return records


# --- the record's schema ------------------------------------------------------------------------------
# Each check takes a value and returns what is wrong with it (None: nothing). ``bool`` is never a number.

Check = Callable[[Any], "str | None"]
_MAX_TEXT = 4096
_MAX_COUNT = 1 << 40  # images, features: far above any benchmark, far below a float's exact integers
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True) if not isinstance(value, dict | list) else type(value).__name__
    text = {"dict": "an object", "list": "an array"}.get(text, text)
    return text if len(text) <= 60 else text[:57] + "..."


def _whole(low: int, high: int) -> Check:
    def check(value: Any) -> str | None:
        if type(value) is not int:
            return f"expected a whole number, found {_shown(value)}"
        if not low <= value <= high:
            return f"{value} is outside {low} to {high}"
        return None

    return check


def _number(low: float, high: float) -> Check:
    def check(value: Any) -> str | None:
        if type(value) not in (int, float):
            return f"expected a number, found {_shown(value)}"
        if not low <= value <= high:  # NaN is not in any range
            return f"{value} is outside {low:g} to {high:g}"
        return None

    return check


def _text(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"expected a string, found {_shown(value)}"
    if len(value) > _MAX_TEXT or "\x00" in value:
        return f"a string of {len(value)} characters or with a NUL, not a name or a path"
    return None


def _hex64(value: Any) -> str | None:
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        return f"expected a sha256 (64 hex digits), found {_shown(value)}"
    return None


def _optional(check: Check) -> Check:
    return lambda value: None if value is None else check(value)


def _texts(value: Any) -> str | None:
    if not isinstance(value, list) or len(value) > 1000:
        return f"expected an array of strings, found {_shown(value)}"
    return next((f"[{i}]: {p}" for i, item in enumerate(value) if (p := _text(item)) is not None), None)


def _object(fields: dict[str, Check], *, optional: Sequence[str] = ()) -> Check:
    """An object with exactly ``fields`` (those in ``optional`` may be missing), each passing its check."""

    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return f"expected an object, found {_shown(value)}"
        unknown = sorted(set(value) - set(fields))
        if unknown:
            return f"unknown field {unknown[0][:60]!r}"
        for name, field_check in fields.items():
            if name not in value:
                if name in optional:
                    continue
                return f"field {name!r} is missing"
            problem = field_check(value[name])
            if problem is not None:
                if problem.startswith("field '"):  # a nested field: field 'shard.index': ...
                    return f"field '{name}.{problem[7:]}"
                return f"field {name!r}: {problem}"
        return None

    return check


def _counts(value: Any) -> str | None:
    """A role -> count object (the features cached and computed)."""
    if not isinstance(value, dict) or len(value) > 100:
        return f"expected an object of counts, found {_shown(value)}"
    for name, count in value.items():
        problem = _text(name) or _whole(0, _MAX_COUNT)(count)
        if problem is not None:
            return f"{name[:60]!r}: {problem}"
    return None


def _any_object(value: Any) -> str | None:
    return None if isinstance(value, dict) else f"expected an object, found {_shown(value)}"


def _judge_fields() -> dict[str, Check]:
    """The checks of a recorded JudgeConfig's fields, by their declared types."""
    from idbench.evaluate_pkg.judge import JudgeConfig

    by_type: dict[str, Check] = {
        "str": _text,
        "str | None": _optional(_text),
        "int": _whole(0, 1 << 31),
        "int | None": _optional(_whole(0, 1 << 62)),
        "float": _number(0, 1e9),
        "float | None": _optional(_number(0, 1e12)),
        "tuple[str, ...]": _texts,
    }
    return {f.name: by_type[str(f.type)] for f in dataclasses.fields(JudgeConfig)}


def _judge(value: Any) -> str | None:
    if value is None:
        return None
    fields = _judge_fields()
    return _object(fields, optional=[name for name in fields if name not in ("base_url", "model")])(value)


RECORD_SCHEMA: Check = _object(
    {
        "shard": _object({"index": _whole(0, MAX_SHARDS - 1), "count": _whole(1, MAX_SHARDS), "from": _text}),
        "benchmark": _text,
        "images": _whole(0, _MAX_COUNT),
        "rows_sha256": _hex64,
        "submission": _text,
        "submission_sha256": _hex64,
        "data": _text,
        "build": _any_object,  # compared whole with the build's own record
        "cache_dir": _text,
        "options": _object(
            {
                "profile": _text,
                "metrics": _optional(_texts),
                "dtype": _optional(_text),
                "batch_size": _whole(1, 1 << 16),
                "models_dir": _optional(_text),
            }
        ),
        "judge": _judge,
        "features": _object({"cached": _counts, "computed": _counts}),
        "folder": _object({"manifest_sha256": _hex64, "files": _whole(0, _MAX_COUNT), "bytes": _whole(0, 1 << 62)}),
    }
)


def record_problem(record: Any) -> str | None:
    """What makes ``record`` (parsed JSON) not a shard's record, as ``field 'x': ...``; None when it is one."""
    return RECORD_SCHEMA(record)


def _one_run(out: Path, records: list[tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    """The first record, once every other says the same run (same split, submission, data, options)."""
    first_path, first = records[0]
    counts = {r["shard"]["count"] for _, r in records}
    if len(counts) > 1:
        listing = ", ".join(f"{p.name} ({r['shard']['count']} shards)" for p, r in records)
        raise MergeError(f"merge {out}: records of different splits overlap ({listing}); keep one run's shards")
    for path, record in records[1:]:
        for field in ("benchmark", "submission_sha256", "data", "build", "options", "judge"):
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


# --- the shards' folders ------------------------------------------------------------------------------


def _manifest_problem(manifest: Any) -> str | None:
    """What makes a parsed ``manifest.json`` not a shard folder's manifest; None when it is one."""
    if not isinstance(manifest, dict) or set(manifest) != {"files"} or not isinstance(manifest["files"], dict):
        return "not a manifest (an object with one field, 'files')"
    entry = _object({"bytes": _whole(0, MAX_FILE_BYTES), "sha256": _hex64})
    for name, listed in manifest["files"].items():
        if not _FOLDER_FILE.fullmatch(name):
            return f"{_shown(name)} is not a feature entry's or a judge answer's name"
        problem = entry(listed)
        if problem is not None:
            return f"{_shown(name)}: {problem}"
    return None


def _files_in(folder: Path) -> set[str]:
    """The files under ``folder`` (but its manifest), as ``a/b`` names; a link or anything but a regular file
    or a folder below it is refused (:class:`UntrustedInput` naming it)."""
    found = set()
    for root, folders, files in os.walk(folder):  # does not follow links to folders: they are refused below
        for name in folders + files:
            path = Path(root) / name
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise UntrustedInput(f"{path} is a symbolic link")
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise UntrustedInput(f"{path} is not a regular file")
        found.update((Path(root) / name).relative_to(folder).as_posix() for name in files)
    return found - {MANIFEST}


def _read_within(path: Path, limit: int) -> bytes:
    """``path``'s bytes (:func:`~idbench.untrusted.read_regular_file`), a refusal naming the file."""
    try:
        return read_regular_file(path, limit)
    except UntrustedInput as err:
        raise UntrustedInput(f"{path}: {err}") from None


def check_folder(out: Path, path: Path, record: dict[str, Any]) -> Path:
    """The folder of the shard whose record is ``path``, once it is exactly what the record says (the
    module's docstring): its manifest the record's (sha256, files, bytes), every file the manifest lists
    present with its size and sha256, no other file, no link. Each file is read once, within its bound.
    Anything else is one :class:`MergeError` line naming the file."""
    folder, again = path.with_suffix(""), f"score shard {path.stem.replace('-of-', '/')} again (with --overwrite)"
    manifest_path = folder / MANIFEST
    try:
        if folder.is_symlink():
            raise UntrustedInput(f"{folder} is a symbolic link, not the shard's own folder")
        text = _read_within(manifest_path, MAX_MANIFEST_BYTES)
        if _sha256(text) != record["folder"]["manifest_sha256"]:
            raise UntrustedInput(
                f"{manifest_path} is not the manifest {path.name} records (another sha256): the folder of another "
                "shard or run, or changed since"
            )
        try:
            manifest = load_json(text, max_depth=4)
        except UntrustedInput as err:
            raise UntrustedInput(f"{manifest_path}: {err}") from None
        problem = _manifest_problem(manifest)
        listed = manifest["files"] if problem is None else {}
        summed = {"files": len(listed), "bytes": sum(f["bytes"] for f in listed.values())}
        if problem is None and summed != {k: record["folder"][k] for k in summed}:
            problem = f"lists {summed['files']} files of {summed['bytes']} bytes, not what {path.name} says"
        if problem is not None:
            raise UntrustedInput(f"{manifest_path}: {problem}")
        found = _files_in(folder)
        missing, extra = sorted(set(listed) - found), sorted(found - set(listed))
        if missing:
            raise UntrustedInput(f"{folder / missing[0]} is missing ({len(missing)} of the files listed are)")
        if extra:
            raise UntrustedInput(
                f"{folder / extra[0]} is not in {manifest_path} ({len(extra)} files are not): a shard's folder "
                "holds only what it wrote"
            )
        for name, want in sorted(listed.items()):
            data = _read_within(folder / name, MAX_FILE_BYTES)
            if len(data) != want["bytes"] or _sha256(data) != want["sha256"]:
                raise UntrustedInput(
                    f"{folder / name} is not the file its manifest lists ({len(data)} bytes, {want['bytes']} "
                    "listed, another sha256): damaged or changed since the shard wrote it"
                )
    except UntrustedInput as err:
        raise MergeError(f"merge {out}: {err}; {again}") from None
    except FileNotFoundError as err:
        raise MergeError(f"merge {out}: {err.filename or folder} is missing ({path.name}'s folder); {again}") from None
    except OSError as err:
        raise MergeError(f"merge {out}: {err.filename or folder} is unreadable ({err.strerror or err})") from None
    return folder


class _FolderStore(FeatureStore):
    """The merge's feature store: the shards' folders (:func:`check_folder`), read-only. A feature in none of
    them is computed and kept for this merge only. Its counts add what each shard read and computed."""

    def __init__(self, folders: Sequence[Path], shards: Mapping[str, dict[str, Any]]):
        super().__init__(folders[0] / FEATURES)
        self.roots = [Path(folder) / FEATURES for folder in folders]
        self.shards = dict(shards)
        self._computed: dict[Path, Features] = {}

    def load(self, model_key: str, version: int | str, item_key: str) -> Features | None:
        relative = self._path(model_key, version, item_key).relative_to(self.root)
        if relative in self._computed:
            return self._computed[relative]
        for root in self.roots:
            if (root / relative).is_file():
                with np.load(root / relative, allow_pickle=False) as archive:
                    return {name: archive[name] for name in archive.files}
        return None

    def save(self, model_key: str, version: int | str, item_key: str, features: Features) -> None:
        self._computed[self._path(model_key, version, item_key).relative_to(self.root)] = features

    def counts(self) -> dict[str, Any]:
        return {**super().counts(), "shards": self.shards}


class _FolderAnswers:
    """The merge's judge answers: each shard's folder an answer cache (signed entries: one not signed with
    this run's key is refused and asked again), read in turn; nothing is stored."""

    def __init__(self, folders: Sequence[Path]):
        from idbench.evaluate_pkg.judge import AnswerCache

        self.caches = [AnswerCache(folder / ANSWERS) for folder in folders if (folder / ANSWERS).is_dir()]

    def read_many(self, keys: Iterable[str]) -> tuple[dict[str, Any], int]:
        """The answers among ``keys`` found in any folder, and how many entries were refused."""
        keys, found, refused = list(dict.fromkeys(keys)), {}, 0
        for cache in self.caches:
            more, bad = cache.read_many([key for key in keys if key not in found])
            found.update(more)
            refused += bad
        return found, refused

    def put(self, key: str, **entry: Any) -> None:
        """An answer the merge had to ask: used, not kept (the merge writes no cache)."""

    def __repr__(self) -> str:
        return f"_FolderAnswers({len(self.caches)} shards' answers)"


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
        f"{len(rows)} of {len(required)} (prompt_id, seed) rows unscored{example}; run them "
        f"({shard_command(out, records[0][1], missing[0])}), then merge again"
    )


def shard_command(out: Path, record: dict[str, Any], index: int) -> str:
    """The ``idbench score`` command that runs shard ``index`` as a finished shard's ``record`` was run: the same
    submission, data, output and shared options (a judge's options are the user's to add: its key is no record's)."""
    from idbench.invocation import command
    from idbench.names import terminal_safe

    options = record["options"]
    parts = [
        "score",
        shlex.quote(record["submission"]),
        "--data",
        shlex.quote(record["data"]),
        "--out",
        shlex.quote(str(out)),
        "--profile",
        options["profile"],
        "--batch-size",
        str(options["batch_size"]),
    ]
    if options.get("metrics"):
        metrics = options["metrics"]
        parts += ["--metrics", shlex.quote(metrics if isinstance(metrics, str) else ",".join(metrics))]
    if options.get("dtype"):
        parts += ["--dtype", str(options["dtype"])]
    if options.get("models_dir"):
        parts += ["--models-dir", shlex.quote(str(options["models_dir"]))]
    parts += ["--shard", f"{index}/{record['shard']['count']}"]
    judged = " with the same judge options" if record.get("judge") else ""
    # The record is a file anyone with the folder could have written: its text reaches the terminal escaped.
    return f"`{terminal_safe(command(' '.join(parts)))}`{judged}"


def check_rows(out: Path, records: list[tuple[Path, dict[str, Any]]], pairs: Sequence[tuple[str, int]]) -> None:
    """Refuse, in one line, a record whose rows are not its shard's: ``pairs`` are the submission's
    ``(prompt_id, seed)`` rows, split as the shards split them (:func:`idbench.shards.shard_of`)."""
    count = records[0][1]["shard"]["count"]
    rows: dict[int, list[tuple[str, int]]] = {}
    for prompt_id, seed in pairs:
        rows.setdefault(shard_of(unit_key(prompt_id, seed), count), []).append((prompt_id, seed))
    for path, record in records:
        index = record["shard"]["index"]
        mine = rows.get(index, [])
        if record["images"] != len(mine) or record["rows_sha256"] != rows_sha256(mine):
            raise MergeError(
                f"merge {out}: {path}: fields 'images' and 'rows_sha256' are not shard {index}/{count}'s rows of the "
                f"submission ({record['images']} recorded, {len(mine)} in the split): a record copied from another "
                f"shard, or of another submission; score shard {index}/{count} again"
            )


def _check_options(out: Path, path: Path, run: dict[str, Any], data: Any) -> None:
    """Refuse, in one line naming the record's field, what the records say alike but no scoring takes:
    a submission folder that is not there, a profile, metric or dtype idbench does not know."""
    from idbench.evaluate_pkg.models.profiles import PROFILES
    from idbench.evaluate_pkg.models.registry import compute_dtype

    def refuse(field: str, problem: str) -> MergeError:
        return MergeError(f"merge {out}: {path}: field {field!r}: {problem}")

    if not Path(run["submission"]).is_dir():
        raise refuse("submission", f"{run['submission']} is not a folder (the submission the shards scored)")
    options = run["options"]
    if options["profile"] not in PROFILES:
        raise refuse("options.profile", f"unknown profile {options['profile'][:60]!r}; known: {', '.join(PROFILES)}")
    known = [m.name for m in data.spec.metric_suite]
    unknown = [m for m in options["metrics"] or () if m not in known]
    if unknown:
        raise refuse("options.metrics", f"unknown metric {unknown[0][:60]!r} for {data.name}")
    if options["dtype"] is not None:
        try:
            compute_dtype("cpu", options["dtype"])
        except ValueError as err:
            raise refuse("options.dtype", str(err)) from None


def merge(out: Path, *, device: str = "cpu", num_workers: int = 0, progress: bool = True) -> dict[str, Any]:
    """Check ``OUT/shards`` (see the module docstring) and write the whole run's results into ``out``."""
    from idbench.evaluate_pkg.runner import build_record, score_submission, submission_fingerprint
    from idbench.evaluate_pkg.submission import validate_submission

    out = Path(out)
    records = read_records(out)
    run = _one_run(out, records)
    first = records[0][0]
    judge_config = judge_for_merge(out, run["judge"], first)  # a recorded judge no JudgeConfig takes: refused first
    try:
        data = load_benchmark_data(Path(run["data"]))
    except IdbenchError as err:
        raise MergeError(f"merge {out}: {first}: field 'data': {err}") from None
    if build_record(data) != run["build"]:
        raise MergeError(f"merge {out}: {run['data']} is not the benchmark build its shards scored against; rebuild it")
    check_complete(out, records, data.required_pairs)
    _check_options(out, first, run, data)
    with validate_submission(Path(run["submission"]), data) as submission:
        if submission_fingerprint(submission) != run["submission_sha256"]:
            raise MergeError(
                f"merge {out}: {run['submission']} changed since its shards scored it (its images or rows differ); "
                "score its shards again"
            )
        check_rows(out, records, [(entry.prompt_id, entry.seed) for entry in submission.entries])
    folders = [check_folder(out, path, record) for path, record in records]
    store = _FolderStore(folders, {path.stem: record["features"] for path, record in records})
    judge = None
    if judge_config is not None:
        from idbench.evaluate_pkg.judge import OpenAIJudge

        judge = _MergeJudge(OpenAIJudge(judge_config, cache=_FolderAnswers(folders)), out)
    options = ScoreOptions(
        **{**run["options"], "metrics": tuple(run["options"]["metrics"]) if run["options"]["metrics"] else None},
        device=device,
        num_workers=num_workers,
        judge=judge,
    )
    return score_submission(
        Path(run["submission"]),
        data,
        out,
        options,
        overwrite=True,
        progress=progress,
        carry=SHARDS_DIR,
        store=store,
    )

"""The judge's answer cache: a folder of one file per answer, named by a hash of everything that shapes it.

Judging is the slow and (with a hosted API) the paid part of scoring, so a rerun or a run resumed after
a crash must not ask a question it already has the answer to. An answer is reused only when the
question is the same in every respect that can change it; :func:`answer_key` hashes exactly these:

- the model name the endpoint serves (not the URL: the same weights behind another host or port
  give the same answers, and a local server that moves ports should not invalidate the cache);
- the system text, the full prompt text and the JSON schema (canonical JSON, keys sorted);
- the images, as the sha256 of their bytes **as given** by the metric (before the client downsizes
  and re-encodes them), together with the client's image settings (longest side, encoding version):
  hashing what was given lets a cache hit skip decoding the image at all;
- the decoding parameters: temperature, max_tokens and the structured-output mode actually used;
- a request's ``repeat`` number, when it is not 0 (the judge card asks a few questions a second time
  to see whether the judge answers them the same way: that second answer must be a new one).

Only deterministic requests (temperature 0) are read or written: at any other temperature a second
answer is a new sample, not a repeat. Only usable (parsed, schema-valid) answers are stored; a failure
is never cached, so a rerun asks again.

The cache is a folder with one small JSON file per answer, ``<root>/<key[:2]>/<key>.json``, each written
to a temporary name beside it and renamed into place. Nothing is locked and no file is ever written in
place, so any number of processes may read and write it at once, on one machine or on many nodes over a
network file system (a cluster's shards share it: docs/cluster.md). SQLite, which held the answers
before, cannot promise that: its locks and its write-ahead log's shared memory do not hold across the
hosts of a network file system. Two writers of one key wrote answers to the same deterministic
question, so whichever rename lands last is a valid answer. An entry is read within a size bound and
only from a regular file; one that is not valid JSON, names another key or is too large is logged and
asked again, never served. A SQLite cache left by an earlier idbench (``answers.sqlite3`` beside the
folder) is imported once, so no paid answer is lost. The cache holds questions' hashes and answers
only, never a credential.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import sqlite3
import stat
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from idbench import settings
from idbench.atomic import write_text_atomically

logger = logging.getLogger(__name__)

# Bump when the meaning of a key changes (what is hashed, or how images are prepared), so that old
# answers are simply never found again rather than mistaken for answers to the new question.
KEY_VERSION = "idbench-judge-answer-v1"

FOLDER = "answers"  # settings.judge_cache_dir() / FOLDER, or <cache-dir>/judge/FOLDER
LEGACY_FILE = "answers.sqlite3"  # the SQLite cache of earlier versions, beside the folder: imported once
_IMPORTED_MARK = ".imported-" + LEGACY_FILE  # in the folder: the size and mtime of the file last imported
# An answer is a reply of at most max_tokens tokens (1,024 by default): a few KB. A larger entry was not
# written by this cache, and reading it whole could cost any amount of memory.
MAX_ENTRY_BYTES = 4 << 20
_KEY = re.compile(r"[0-9a-f]{64}")
_ENTRY = re.compile(r"[0-9a-f]{64}\.json")


def default_cache_path() -> Path:
    """``$IDBENCH_CACHE/judge/answers``, else ``~/.cache/idbench/judge/answers`` (a folder).

    The same root as the feature cache (``idbench.evaluate_pkg.runner``), so one variable moves every cache
    of a run (the test suite points it at a temporary folder).
    """
    return settings.judge_cache_dir() / FOLDER


def image_hash(data: bytes) -> str:
    """The sha256 hex digest of an image's bytes as the metric handed them over."""
    return hashlib.sha256(data).hexdigest()


def answer_key(
    *,
    model: str,
    system: str | None,
    prompt: str,
    schema: Mapping[str, Any],
    image_hashes: Sequence[str],
    temperature: float,
    max_tokens: int,
    structured: str,
    image_settings: str,
    repeat: int = 0,
) -> str:
    """The cache key of one request: sha256 hex of the canonical JSON of everything that shapes the answer.

    ``structured`` is the mode actually sent (``"json_schema"``, ``"json_object"`` or ``"none"``),
    ``image_settings`` names how the client prepares images (longest side, encoding): the same
    source image prepared differently is a different question to the model.
    """
    content = {
        "version": KEY_VERSION,
        "model": model,
        "system": system,
        "prompt": prompt,
        "schema": schema,
        "images": list(image_hashes),
        "temperature": float(temperature),
        "max_tokens": int(max_tokens),
        "structured": structured,
        "image_settings": image_settings,
    }
    if repeat:  # left out at 0, so every key of an ordinary question is what it always was
        content["repeat"] = int(repeat)
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedAnswer:
    """One stored answer: the reply text and its parsed JSON value."""

    raw: str
    value: Any
    model: str
    created: float


class AnswerCache:
    """Judge answers on disk, by :func:`answer_key`: one file per answer (see the module's docstring).
    Usable from several threads, processes and hosts at once.

    Example::

        cache = AnswerCache(default_cache_path())
        judge = OpenAIJudge(JudgeConfig.from_env(), cache=cache)
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        if self.path.is_file():
            raise ValueError(
                f"judge answer cache {self.path}: a file, not a folder (an earlier idbench's SQLite cache?); "
                f"pass the folder to use: a {LEGACY_FILE} beside it is imported"
            )
        self.path.mkdir(parents=True, exist_ok=True)
        self._import_legacy(self.path.parent / LEGACY_FILE)

    def _entry(self, key: str) -> Path:
        if not _KEY.fullmatch(key):  # keys name files: only answer_key()'s hex digests are accepted
            raise ValueError(f"not an answer key: {key[:80]!r}")
        return self.path / key[:2] / f"{key}.json"

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedAnswer]:
        """The stored answers among ``keys`` (missing or unusable ones are absent from the result)."""
        found: dict[str, CachedAnswer] = {}
        for key in dict.fromkeys(keys):
            hit = self._read(key)
            if hit is not None:
                found[key] = hit
        return found

    def get(self, key: str) -> CachedAnswer | None:
        return self._read(key)

    def _read(self, key: str) -> CachedAnswer | None:
        path = self._entry(key)
        try:
            # Non-blocking, then checked to be a regular file: a FIFO or a device planted under an
            # entry's name must not hang or flood the reader.
            handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as err:
            logger.warning("judge answer cache: cannot read %s (%s); asking again", path, err)
            return None
        try:
            if not stat.S_ISREG(os.fstat(handle).st_mode):
                logger.warning("judge answer cache: %s is not a regular file; asking again", path)
                return None
            with os.fdopen(handle, "rb", closefd=False) as stream:
                data = stream.read(MAX_ENTRY_BYTES + 1)
        finally:
            os.close(handle)
        if len(data) > MAX_ENTRY_BYTES:
            logger.warning("judge answer cache: %s is over %d bytes; asking again", path, MAX_ENTRY_BYTES)
            return None
        try:
            entry = json.loads(data)
            if entry["key"] != key or not isinstance(entry["raw"], str):
                raise ValueError("another key's entry, or no reply text")
            return CachedAnswer(
                raw=entry["raw"], value=entry["value"], model=str(entry["model"]), created=float(entry["created"])
            )
        except (ValueError, KeyError, TypeError) as err:
            logger.warning("judge answer cache: %s is damaged (%s); asking again", path, err)
            return None

    def put(self, key: str, *, model: str, task: str, raw: str, value: Any, created: float | None = None) -> None:
        """Store a usable answer (the caller stores only parsed, schema-valid, temperature-0 answers).

        Written to a temporary file in the entry's folder, then renamed over the entry: a reader sees
        the old entry or the new one, never a part. Not fsynced: an answer lost in a crash is asked again.
        """
        path = self._entry(key)
        entry = {
            "key": key,
            "model": model,
            "task": task,
            "raw": raw,
            "value": value,
            "created": time.time() if created is None else created,
        }
        path.parent.mkdir(exist_ok=True)
        write_text_atomically(path, json.dumps(entry, sort_keys=True, ensure_ascii=False), durable=False)

    def __len__(self) -> int:
        return sum(1 for path in self.path.glob("??/*.json") if _ENTRY.fullmatch(path.name))

    def _import_legacy(self, legacy: Path) -> None:
        """Copy the answers of an earlier version's SQLite file into the folder, once per version of that file.

        Entries already in the folder are kept (both are answers to the same question). A file that
        cannot be read is logged and left alone: its answers will be asked again, the scoring goes on.
        """
        if not legacy.is_file():
            return
        info = legacy.stat()
        signature = f"{info.st_size} {info.st_mtime_ns}"
        mark = self.path / _IMPORTED_MARK
        if mark.is_file() and mark.read_text(encoding="utf-8", errors="replace") == signature:
            return
        imported = 0
        try:
            with contextlib.closing(sqlite3.connect(f"{legacy.resolve().as_uri()}?mode=ro", uri=True)) as db:
                rows = db.execute("SELECT key, model, task, raw, value, created FROM answers")
                for key, model, task, raw, value, created in rows:
                    if _KEY.fullmatch(str(key)) and not self._entry(key).exists():
                        self.put(key, model=model, task=task, raw=raw, value=json.loads(value), created=created)
                        imported += 1
        except (sqlite3.Error, ValueError, TypeError) as err:
            logger.warning("judge answer cache: could not import %s (%s); its answers will be asked again", legacy, err)
            return
        write_text_atomically(mark, signature, durable=False)
        if imported:
            logger.info("judge answer cache: imported %d answers from %s into %s", imported, legacy, self.path)

    def close(self) -> None:
        """Nothing to release (no file stays open); kept so that ``with AnswerCache(...)`` reads naturally."""

    def __enter__(self) -> AnswerCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AnswerCache({str(self.path)!r})"

"""The judge's answer cache: one SQLite file, keyed by a content hash of everything that shapes an answer.

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

The file is safe to share between processes (several scoring workers on one machine): it runs in
WAL mode, so readers never wait for the writer, and a busy timeout makes concurrent writers queue
instead of failing. The cache holds questions' hashes and answers only, never a credential.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from idbench import settings

# Bump when the meaning of a key changes (what is hashed, or how images are prepared), so that old
# answers are simply never found again rather than mistaken for answers to the new question.
KEY_VERSION = "idbench-judge-answer-v1"

_BUSY_TIMEOUT_S = 60.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,   -- answer_key(): sha256 hex of the request's content
    model TEXT NOT NULL,    -- the endpoint's model name, for inspection and pruning
    task TEXT NOT NULL,     -- the request's task, for inspection
    raw TEXT NOT NULL,      -- the model's reply text, as received
    value TEXT NOT NULL,    -- the parsed, schema-valid JSON value, as JSON text
    created REAL NOT NULL   -- unix time the answer was stored
)
"""


def default_cache_path() -> Path:
    """``$IDBENCH_CACHE/judge/answers.sqlite3``, else ``~/.cache/idbench/judge/answers.sqlite3``.

    The same root as the feature cache (``idbench.evaluate_pkg.runner``), so one variable moves every cache
    of a run (the test suite points it at a temporary folder).
    """
    return settings.judge_cache_dir() / "answers.sqlite3"


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
    """Judge answers on disk, by :func:`answer_key`. Usable from several threads and processes.

    Example::

        cache = AnswerCache(default_cache_path())
        judge = OpenAIJudge(JudgeConfig.from_env(), cache=cache)
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection, guarded by a lock: the judge may run its event loop in a worker thread.
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None)
        self._db.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
        self._db.execute("PRAGMA journal_mode = WAL")
        # In WAL mode NORMAL keeps the file consistent after a crash and may lose only the last commits:
        # a lost answer is asked again, which is cheaper than an fsync per answer.
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute(_SCHEMA)

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedAnswer]:
        """The stored answers among ``keys`` (missing keys are absent from the result)."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, CachedAnswer] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):  # stay under SQLite's bound-parameter limit
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, raw, value, model, created FROM answers WHERE key IN ({marks})", chunk
                ).fetchall()
                for key, raw, value, model, created in rows:
                    found[key] = CachedAnswer(raw=raw, value=json.loads(value), model=model, created=created)
        return found

    def get(self, key: str) -> CachedAnswer | None:
        return self.get_many([key]).get(key)

    def put(self, key: str, *, model: str, task: str, raw: str, value: Any) -> None:
        """Store a usable answer (the caller stores only parsed, schema-valid, temperature-0 answers)."""
        encoded = json.dumps(value, sort_keys=True, ensure_ascii=False)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO answers (key, model, task, raw, value, created) VALUES (?, ?, ?, ?, ?, ?)",
                (key, model, task, raw, encoded, time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> AnswerCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AnswerCache({str(self.path)!r})"

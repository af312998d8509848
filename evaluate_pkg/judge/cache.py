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
question, so whichever rename lands last is a valid answer. A SQLite cache left by an earlier idbench
(``answers.sqlite3`` beside the folder) is imported once, so no paid answer is lost. The cache holds
questions' hashes and answers only, never a credential.

**Trust.** A cached answer is served as the judge's answer with no request sent, so whoever can write the
folder could otherwise decide the judge's verdicts: edit an entry, or plant one before a run (a key needs
only the public prompt, the image and the model name). Each entry is therefore signed: an HMAC-SHA256,
with the cache's key, over the canonical JSON of the entry (its key, model, task, reply text, value and
time). The key is ``$IDBENCH_JUDGE_CACHE_KEY`` when set, else a random one made once and kept in
``$IDBENCH_HOME/judge-cache.key`` (mode 0600): the shards of one run share it by sharing the home or
the variable (docs/cluster.md). An entry is served only when it is a regular file with one link, in a
real sub-folder of the cache (no symbolic link is followed below the cache's root), within a size
bound, JSON nested at most :data:`MAX_ENTRY_DEPTH` deep, naming its own key, and signed with this key.
Anything else (edited, planted, unsigned, signed with another key, reached through a link, damaged) is
refused: asked again, counted (:attr:`AnswerCache.refused`, ``JudgeStats.cache_refused``, which ``score``
and ``merge`` print) and logged, one line per lookup. The key decides who may write answers; the folder's
permissions only decide who may make the judge be asked again. An earlier version's SQLite file is
imported only when this user owns it and no one else may write it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import sqlite3
import stat
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from idbench import settings
from idbench.atomic import write_text_atomically
from idbench.errors import IdbenchError
from idbench.untrusted import UntrustedInput, load_json, read_regular_file

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
# An answer matches a judge's JSON schema: a few levels deep. A deeper entry was not written here, and
# parsing it could exhaust the stack.
MAX_ENTRY_DEPTH = 64
# What a signature covers, besides the entry: bump when the signed fields change.
MAC_VERSION = "idbench-judge-answer-mac-v1"
KEY_FILE = "judge-cache.key"  # in $IDBENCH_HOME, when $IDBENCH_JUDGE_CACHE_KEY is unset
_SIGNED = ("key", "model", "task", "raw", "value", "created")
_KEY = re.compile(r"[0-9a-f]{64}")
_ENTRY = re.compile(r"[0-9a-f]{64}\.json")


class CacheKeyError(IdbenchError, ValueError):
    """The answer cache's key cannot be read or made (one line naming the file)."""


def cache_key() -> bytes:
    """The key that signs the answer cache's entries: ``$IDBENCH_JUDGE_CACHE_KEY`` when set, else the one
    in ``$IDBENCH_HOME/judge-cache.key``, made (random, mode 0600) by the first process that needs it.

    Made under a temporary name and linked into place, so processes starting together over a shared home
    all read the one key that won, never a part of it.
    """
    given = settings.judge_cache_key()
    if given is not None:
        return given.encode("utf-8")
    path = settings.home() / KEY_FILE
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{KEY_FILE}.{secrets.token_hex(8)}.tmp")
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(handle, "w", encoding="ascii") as stream:
                stream.write(secrets.token_hex(32) + "\n")
                stream.flush()
                os.fsync(stream.fileno())
            with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
                os.link(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
        logger.info("judge answer cache: made its signing key in %s (mode 0600)", path)
        return _read_key(path)
    except OSError as err:
        raise CacheKeyError(
            f"judge answer cache: cannot make its signing key {path} ({err.strerror or err}); "
            f"set ${settings.JUDGE_CACHE_KEY} or a writable ${settings.HOME}"
        ) from None


def _read_key(path: Path) -> bytes:
    try:
        with path.open("rb") as stream:
            text = stream.read(4097).strip()
            mode = os.fstat(stream.fileno()).st_mode
    except FileNotFoundError:
        raise
    except OSError as err:
        raise CacheKeyError(f"judge answer cache: cannot read its signing key {path} ({err.strerror or err})") from None
    if not 32 <= len(text) <= 4096:
        raise CacheKeyError(
            f"judge answer cache: {path} holds {len(text)} characters, not a signing key; remove it to make a new one "
            "(the answers signed with the old one will be asked again)"
        )
    if mode & 0o077:
        logger.warning(
            "judge answer cache: %s may be read by others (mode %o): whoever reads it can sign answers; chmod 600 it",
            path,
            stat.S_IMODE(mode),
        )
    return text


def sign(secret: bytes, entry: Mapping[str, Any]) -> str:
    """The HMAC-SHA256 (hex) of an entry's signed fields as canonical JSON, with the cache's key ``secret``."""
    signed = {name: entry.get(name) for name in _SIGNED}
    text = json.dumps([MAC_VERSION, signed], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hmac.new(secret, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


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

    def __init__(self, path: str | os.PathLike[str], *, signing_key: bytes | str | None = None):
        self.path = Path(path)
        if self.path.is_file():
            raise ValueError(
                f"judge answer cache {self.path}: a file, not a folder (an earlier idbench's SQLite cache?); "
                f"pass the folder to use: a {LEGACY_FILE} beside it is imported"
            )
        # The key entries are signed with (the module's docstring): cache_key() unless given (tests).
        if signing_key is None:
            signing_key = cache_key()
        self._secret = signing_key.encode("utf-8") if isinstance(signing_key, str) else bytes(signing_key)
        # Entries refused so far, by reason (read by the judge's statistics and the tests).
        self.refused: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.path.mkdir(parents=True, exist_ok=True)
        self._import_legacy(self.path.parent / LEGACY_FILE)

    def _entry(self, key: str) -> Path:
        if not _KEY.fullmatch(key):  # keys name files: only answer_key()'s hex digests are accepted
            raise ValueError(f"not an answer key: {key[:80]!r}")
        return self.path / key[:2] / f"{key}.json"

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedAnswer]:
        """The stored answers among ``keys`` (missing or refused ones are absent from the result)."""
        return self.read_many(keys)[0]

    def read_many(self, keys: Iterable[str]) -> tuple[dict[str, CachedAnswer], int]:
        """The stored answers among ``keys``, and how many entries among them were refused (see the module's
        docstring: each is asked again). One log line says what was refused, if anything."""
        found: dict[str, CachedAnswer] = {}
        refused: Counter[str] = Counter()
        example = ""
        for key in dict.fromkeys(keys):
            try:
                hit = self._read(key)
            except _Refused as why:
                refused[why.reason] += 1
                example = example or f"{self._entry(key)}: {why.detail}"
                continue
            if hit is not None:
                found[key] = hit
        if refused:
            with self._lock:
                self.refused.update(refused)
            reasons = ", ".join(f"{count} {reason}" for reason, count in refused.most_common())
            logger.warning(
                "judge answer cache %s: %d entries refused and asked again (%s), e.g. %s",
                self.path,
                refused.total(),
                reasons,
                example,
            )
        return found, refused.total()

    def get(self, key: str) -> CachedAnswer | None:
        """The stored answer of ``key``; None when there is none or it is refused (logged, counted)."""
        return self.read_many([key])[0].get(key)

    def _read(self, key: str) -> CachedAnswer | None:
        """The entry of ``key``: None when absent; raises :class:`_Refused` when one is there but is not served."""
        path = self._entry(key)
        try:
            # The sub-folder is opened without following a link, and the entry inside it: nothing below the
            # cache's root may lead out of it.
            folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            return None
        except OSError as err:
            if path.parent.is_symlink():
                raise _Refused("through a link", f"{path.parent.name}/ is a symbolic link") from None
            raise _Refused("unreadable", err.strerror or str(err)) from None
        try:
            data = read_regular_file(path.name, MAX_ENTRY_BYTES, dir_fd=folder)
            entry = load_json(data, max_depth=MAX_ENTRY_DEPTH)
        except FileNotFoundError:
            return None
        except UntrustedInput as err:
            text = str(err)
            reason = "through a link" if "link" in text else "damaged"
            raise _Refused(reason, text) from None
        except OSError as err:
            raise _Refused("unreadable", err.strerror or str(err)) from None
        finally:
            os.close(folder)
        if not isinstance(entry, dict) or entry.get("key") != key:
            raise _Refused("damaged", "another key's entry, or not an entry")
        mac = entry.get("mac")
        if mac is None:
            raise _Refused("unsigned", "no signature")
        if not isinstance(mac, str) or not _KEY.fullmatch(mac):  # compare_digest takes ASCII text only
            raise _Refused("not signed with this cache's key", "a signature that is not one")
        if not hmac.compare_digest(mac, sign(self._secret, entry)):
            raise _Refused("not signed with this cache's key", "edited, planted, or signed with another key")
        raw, model, created = entry.get("raw"), entry.get("model"), entry.get("created")
        if not isinstance(raw, str) or not isinstance(model, str) or type(created) not in (int, float):
            raise _Refused("damaged", "a field of the wrong type")
        return CachedAnswer(raw=raw, value=entry.get("value"), model=model, created=float(created))

    def put(self, key: str, *, model: str, task: str, raw: str, value: Any, created: float | None = None) -> None:
        """Store a usable answer (the caller stores only parsed, schema-valid, temperature-0 answers).

        Signed with the cache's key, written to a temporary file in the entry's folder, then renamed over
        the entry: a reader sees the old entry or the new one, never a part. Not fsynced: an answer lost
        in a crash is asked again. A value that is not JSON (a NaN, say) raises ValueError.
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
        # Signed as a reader will see it: the entry as JSON read back (a tuple becomes a list, say).
        text = json.dumps(entry, sort_keys=True, ensure_ascii=False, allow_nan=False)
        entry = json.loads(text)
        entry["mac"] = sign(self._secret, entry)
        if path.parent.is_symlink():  # a link planted in place of a sub-folder: replaced, never written through
            with contextlib.suppress(FileNotFoundError):
                path.parent.unlink()
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
        if info.st_uid != os.getuid() or info.st_mode & 0o022:
            # Its answers would be signed as ours: only a file no one else may have written is imported.
            logger.warning(
                "judge answer cache: %s is not this user's own file (or others may write it); not imported", legacy
            )
            return
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
        except (sqlite3.Error, ValueError, TypeError, RecursionError) as err:
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


class _Refused(Exception):
    """An entry that is there but is not served: ``reason`` groups it in the log line and the counts."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail

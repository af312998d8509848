"""The results store: one SQLite file (WAL) under ``IDBENCH_HOME`` plus folders of files next to it.

Layout of ``home`` (``$IDBENCH_HOME``, default ``~/.idbench``)::

    leaderboard.sqlite3          submissions, jobs, results, refused uploads (this module)
    submissions/<content_hash>/  each queued submission, stored as a manifest folder (leaderboard.queue)
    results/<sub_id>/<job_id>/   what ``score_submission`` wrote for one job (leaderboard.worker)
    features/                    the feature cache every job shares, so a re-claimed job resumes
    logs/                        one traceback file per failed job

The embedded store needs no service: every command and the app open the same file, found through
``IDBENCH_HOME`` alone. Each operation is one short transaction on a fresh connection, so a Store
is safe to use from several processes (and to pass to one: it holds only its path). Writers take the
lock with ``BEGIN IMMEDIATE`` and wait up to ``BUSY_TIMEOUT_S`` for each other instead of failing.

Every result row keeps what it was computed with: benchmark version (a digest of the built folder),
metric-suite version, profile, whether that profile is a plumbing check, and the encoders' ids and
revisions. Results are never overwritten: a rescore inserts new rows and flips ``current``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from idbench import settings
from idbench.builders.spec import DEFAULT_TASK
from idbench.errors import IdbenchError, disk_full, storage_failure
from idbench.names import ANONYMOUS, name_key, rate_identity, submitter_identity

DB_NAME = "leaderboard.sqlite3"
BUSY_TIMEOUT_S = 60.0
# PARKED: a job whose attempts all ended in faults of the workers (models, GPU memory, judge, disk,
# killed workers). It is not the submitter's fault, so it is not FAILED; no worker takes it again until
# an admin requeues it (``idbench rescore --submission ID``) once the workers are fixed.
JOB_STATES = ("PENDING", "RUNNING", "FINISHED", "FAILED", "PARKED")

# Schema migrations, applied in order; the schema_version table records how many have run. Never edit
# one that has shipped: append a new one (ALTER TABLE / CREATE TABLE) instead.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE submissions (
        id                INTEGER PRIMARY KEY AUTOINCREMENT,
        benchmark         TEXT NOT NULL,
        benchmark_version TEXT NOT NULL,
        data_dir          TEXT NOT NULL,
        model_name        TEXT NOT NULL,
        metadata_json     TEXT NOT NULL,
        content_hash      TEXT NOT NULL UNIQUE,
        stored_path       TEXT NOT NULL,
        submitter         TEXT,
        created_at        REAL NOT NULL
    );
    CREATE TABLE jobs (
        id                INTEGER PRIMARY KEY AUTOINCREMENT,
        submission_id     INTEGER NOT NULL REFERENCES submissions(id),
        state             TEXT NOT NULL CHECK (state IN ('PENDING', 'RUNNING', 'FINISHED', 'FAILED')),
        reason            TEXT,
        attempts          INTEGER NOT NULL DEFAULT 0,
        lease_owner       TEXT,
        lease_expires_at  REAL,
        created_at        REAL NOT NULL,
        started_at        REAL,
        finished_at       REAL
    );
    CREATE INDEX jobs_by_state ON jobs (state, created_at, id);
    CREATE TABLE results (
        id                INTEGER PRIMARY KEY AUTOINCREMENT,
        submission_id     INTEGER NOT NULL REFERENCES submissions(id),
        job_id            INTEGER NOT NULL REFERENCES jobs(id),
        benchmark         TEXT NOT NULL,
        benchmark_version TEXT NOT NULL,
        suite_version     TEXT NOT NULL,
        profile           TEXT NOT NULL,
        plumbing          BOOLEAN NOT NULL,
        models_json       TEXT NOT NULL,
        idbench_version   TEXT NOT NULL,
        aggregates_json   TEXT NOT NULL,
        not_run_json      TEXT NOT NULL,
        results_path      TEXT NOT NULL,
        created_at        REAL NOT NULL,
        current           BOOLEAN NOT NULL
    );
    CREATE INDEX results_current ON results (benchmark, current);
    -- at most one current result per submission, whatever the interleaving of workers
    CREATE UNIQUE INDEX results_one_current ON results (submission_id) WHERE current;
    """,
    # 2: an admin can withdraw a submission. Nothing is deleted (files, jobs and results stay, for an
    # audit or an undo); a withdrawn submission leaves the rankings and is not rescored.
    """
    ALTER TABLE submissions ADD COLUMN withdrawn_at REAL;
    ALTER TABLE submissions ADD COLUMN withdrawn_reason TEXT;
    CREATE INDEX submissions_by_submitter ON submissions (submitter, created_at);
    """,
    # 3: the task a submission holds (its submission.json "task"): each task ranks on its own track, so
    # a text-to-image row never appears in the reference-based ranking. Earlier rows are reference-based.
    """
    ALTER TABLE submissions ADD COLUMN task TEXT NOT NULL DEFAULT 'reference';
    """,
    # 4: the PARKED job state. SQLite cannot alter a CHECK constraint, so the jobs table is rebuilt
    # (SQLite's documented procedure: new table, copy, drop, rename; foreign keys are off while
    # migrating and checked before the commit, see Store._migrate). Rows and ids are kept as they were.
    """
    CREATE TABLE jobs_v4 (
        id                INTEGER PRIMARY KEY AUTOINCREMENT,
        submission_id     INTEGER NOT NULL REFERENCES submissions(id),
        state             TEXT NOT NULL CHECK (state IN ('PENDING', 'RUNNING', 'FINISHED', 'FAILED', 'PARKED')),
        reason            TEXT,
        attempts          INTEGER NOT NULL DEFAULT 0,
        lease_owner       TEXT,
        lease_expires_at  REAL,
        created_at        REAL NOT NULL,
        started_at        REAL,
        finished_at       REAL
    );
    INSERT INTO jobs_v4 (id, submission_id, state, reason, attempts, lease_owner, lease_expires_at, created_at, started_at, finished_at)
        SELECT id, submission_id, state, reason, attempts, lease_owner, lease_expires_at, created_at, started_at, finished_at FROM jobs;
    DROP TABLE jobs;
    ALTER TABLE jobs_v4 RENAME TO jobs;
    CREATE INDEX jobs_by_state ON jobs (state, created_at, id);
    """,
    # 5: the judge of every run (summary["judge"] without its run statistics, and its key apart, indexed:
    # rows with different keys never share a ranking on a judged metric) and the copy check
    # (summary["copies"]). NULL for unjudged runs and for results scored before these were kept.
    """
    ALTER TABLE results ADD COLUMN judge_json TEXT;
    ALTER TABLE results ADD COLUMN judge_key TEXT;
    ALTER TABLE results ADD COLUMN copies_json TEXT;
    CREATE INDEX results_by_judge ON results (benchmark, judge_key);
    """,
    # 6: uploads the app refused for their own content (invalid, over its size budget, past the validation
    # deadline): when and whose (the rate-limit identity, a digest for a client), so the rate limit counts
    # them with the submissions (leaderboard.admission). Nothing of the upload itself is kept.
    """
    CREATE TABLE refused_uploads (
        id                INTEGER PRIMARY KEY AUTOINCREMENT,
        identity          TEXT NOT NULL,
        reason            TEXT NOT NULL,
        created_at        REAL NOT NULL
    );
    CREATE INDEX refused_uploads_by_identity ON refused_uploads (identity, created_at);
    """,
    # 7: the standings (leaderboard.board): each board's rank intervals and tiers, computed when the
    # results change and read by the pages, which resample nothing. ``store_version`` is the results'
    # version they were computed on (leaderboard.ranking.store_version); derived data, recomputed at will.
    """
    CREATE TABLE standings (
        benchmark         TEXT NOT NULL,
        task              TEXT NOT NULL,
        view              TEXT NOT NULL,
        metric            TEXT NOT NULL,
        cell              TEXT NOT NULL,
        judge             TEXT NOT NULL,
        store_version     TEXT NOT NULL,
        computed_at       REAL NOT NULL,
        board_json        TEXT NOT NULL,
        PRIMARY KEY (benchmark, task, view, metric, cell, judge)
    );
    """,
)


def default_home() -> Path:
    """``$IDBENCH_HOME``, else ``~/.idbench``: the one place every command and the app look."""
    return settings.home()


def iso(timestamp: float | None) -> str | None:
    """A stored epoch time as ISO 8601 UTC (seconds), for people; None stays None."""
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Job:
    """A claimed job: enough to score it and to prove, when reporting back, that the lease is still ours.

    ``lease_owner`` and ``attempts`` together are the fencing token: a worker whose lease expired and
    whose job was re-claimed can no longer finish or fail it.
    """

    id: int
    submission_id: int
    attempts: int
    lease_owner: str
    benchmark: str
    data_dir: Path
    stored_path: Path
    model_name: str


class UnknownIdError(IdbenchError, KeyError):
    """No submission or job has the id asked for (the message names it)."""

    def __str__(self) -> str:  # KeyError's own str() would wrap the message in quotes
        return str(self.args[0]) if self.args else ""


class RateLimitError(IdbenchError, ValueError):
    """A submitter reached the submission rate limit; nothing was stored or queued."""


class LeaseLostError(RuntimeError):
    """The job was re-claimed by another worker (our lease expired); our outcome is not recorded."""


class StoreError(IdbenchError, OSError):
    """The store's file or folder could not be read or written: a full disk, an I/O error, a read-only or
    missing folder, a database locked past the busy timeout, a damaged file. Not the user's input, but
    nothing to show a traceback for: the message is one line naming the path, and the CLI prints it.
    The SQLite (or OS) error is kept as ``__cause__`` (``idbench.errors.disk_full`` looks through it)."""


def _storage_failure(err: BaseException, os_errors: bool = False) -> bool:
    """Whether ``err`` is the disk's or the file's failure (``idbench.errors.storage_failure``: SQLite's, or an
    ``OSError`` of a full or failing device) rather than a bug of ours; with ``os_errors`` any ``OSError``."""
    if isinstance(err, StoreError):
        return False
    if isinstance(err, OSError) and os_errors:
        return True
    return storage_failure(err, chain=False)


def store_error(path: Path, err: BaseException) -> StoreError:
    """``err`` (SQLite's or the OS's) as one line naming ``path`` and what to do."""
    text = " ".join(str(err).split()) or type(err).__name__
    hint = "free space on its disk and rerun" if disk_full(err) else "check its disk, folder and permissions, and rerun"
    return StoreError(f"the leaderboard store {path} could not be read or written ({text}): {hint}")


@contextmanager
def _storage_errors(path: Path, os_errors: bool = False) -> Iterator[None]:
    """Turn the disk's and the file's failures met inside the block into one :class:`StoreError` naming ``path``.

    SQLite's and a full or failing device's (``idbench.errors.storage_failure``), and with ``os_errors`` any
    ``OSError`` (a folder made here); a missing or unreadable file a block reads of its own keeps its error.
    """
    try:
        yield
    except (sqlite3.DatabaseError, OSError) as err:
        if not _storage_failure(err, os_errors):
            raise
        raise store_error(path, err) from err


class Store:
    """The leaderboard database and folders under ``home`` (created, and migrated, on first use).

    Example::

        store = Store()                      # $IDBENCH_HOME or ~/.idbench
        store.list_jobs()                    # [{"id": 1, "state": "PENDING", ...}, ...]
        store.current_results("identity-collapse")   # a DataFrame, one row per ranked submission
    """

    def __init__(self, home: Path | None = None):
        self.home = Path(home).expanduser() if home is not None else default_home()
        self.path = self.home / DB_NAME
        with _storage_errors(self.home, os_errors=True):
            self.home.mkdir(parents=True, exist_ok=True)
        with _storage_errors(self.path):
            self._migrate()

    # --- folders ------------------------------------------------------------------------------------

    @property
    def submissions_dir(self) -> Path:
        return self.home / "submissions"

    @property
    def results_dir(self) -> Path:
        return self.home / "results"

    @property
    def features_dir(self) -> Path:
        """The feature cache the store's worker scores with: the one of every run, ``$IDBENCH_CACHE/features``
        (``idbench env`` names it), not a folder of the store's own."""
        from idbench import settings

        return settings.features_cache_dir()

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    # --- connections --------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: no implicit transactions; every operation says BEGIN itself.
        connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        connection.row_factory = sqlite3.Row
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        connection.execute("PRAGMA foreign_keys = ON")
        return connection

    @contextmanager
    def transaction(self, immediate: bool = True) -> Iterator[sqlite3.Connection]:
        """One transaction on a fresh connection: committed on success, rolled back on any error.

        ``immediate`` takes the write lock up front, so a read-then-write (a claim) cannot interleave
        with another writer's; readers use ``immediate=False``.
        A failure of the file or its disk (full, an I/O error, read-only, locked past the busy timeout),
        met here or by the statements of the block, is one :class:`StoreError` naming the file.
        """
        with _storage_errors(self.path):
            connection = self._connect()
            try:
                connection.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
                try:
                    yield connection
                except BaseException:
                    with suppress(
                        sqlite3.Error
                    ):  # a failed disk may refuse the rollback too; SQLite rolls back on close
                        connection.execute("ROLLBACK")
                    raise
                connection.execute("COMMIT")
            finally:
                connection.close()

    def _migrate(self) -> None:
        connection = self._connect()
        try:
            # WAL lets the app read while a worker writes; the mode is stored in the file itself.
            connection.execute("PRAGMA journal_mode = WAL")
            # A migration may rebuild a table that others reference (3: jobs); with foreign keys on,
            # dropping the old table would fail. They are checked below, before the commit, instead.
            connection.execute("PRAGMA foreign_keys = OFF")
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                row = connection.execute("SELECT version FROM schema_version").fetchone()
                done = row["version"] if row else 0
                if row is None:
                    connection.execute("INSERT INTO schema_version (version) VALUES (0)")
                if done > len(MIGRATIONS):
                    raise RuntimeError(
                        f"{self.path}: schema version {done} is newer than this idbench knows ({len(MIGRATIONS)}); upgrade idbench"
                    )
                for number in range(done, len(MIGRATIONS)):
                    # executescript would COMMIT our transaction; run the statements one by one instead.
                    for statement in _statements(MIGRATIONS[number]):
                        connection.execute(statement)
                    connection.execute("UPDATE schema_version SET version = ?", (number + 1,))
                broken = connection.execute("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(
                        f"{self.path}: migration left {len(broken)} broken references, e.g. {tuple(broken[0])}"
                    )
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        finally:
            connection.close()

    def schema_version(self) -> int:
        with self.transaction(immediate=False) as db:
            return db.execute("SELECT version FROM schema_version").fetchone()["version"]

    # --- submissions --------------------------------------------------------------------------------

    def add_submission(
        self,
        *,
        benchmark: str,
        benchmark_version: str,
        data_dir: Path,
        model_name: str,
        metadata: dict,
        content_hash: str,
        stored_path: Path,
        submitter: str | None = None,
        rate_limit: tuple[int, float] | None = None,
        task: str = DEFAULT_TASK,
        client: str | None = None,
    ) -> tuple[int, int, bool]:
        """Insert a submission and its first PENDING job; returns ``(submission_id, job_id, duplicate)``.

        A submission whose content hash is already stored is not inserted again: its id and latest
        job come back with ``duplicate=True``. Checking and inserting in one IMMEDIATE transaction
        means two simultaneous submits of the same files queue one job. ``rate_limit`` ``(count,
        seconds)`` is checked in the same transaction (the submitter's earlier submissions in the
        window), so parallel uploads cannot slip past it; over the limit raises ``RateLimitError``.
        The limit counts per :func:`~idbench.names.rate_identity`: per ``client`` whenever the caller
        knows one (what the app knows of it, whatever submitter name is typed; only its digest is kept,
        in ``submission_clients``), else a named submitter by the name's key and anonymous submissions
        without a client as one pool.
        """
        with self.transaction() as db:
            existing = _duplicate(db, content_hash)
            if existing is not None:
                return existing[0], existing[1], True
            now = time.time()
            client_key = rate_identity(None, client)  # client:<digest>, or 'anonymous' when none is known
            if rate_limit is not None:
                count, window = rate_limit
                recent = _recent_submissions(db, rate_identity(submitter, client), now - window)
                if recent >= count:
                    raise RateLimitError(f"{recent} submissions in the last {window / 3600:g} h; the limit is {count}")
            cursor = db.execute(
                "INSERT INTO submissions (benchmark, benchmark_version, data_dir, model_name, metadata_json,"
                " content_hash, stored_path, submitter, created_at, task) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    benchmark,
                    benchmark_version,
                    str(data_dir),
                    model_name,
                    json.dumps(metadata, sort_keys=True),
                    content_hash,
                    str(stored_path),
                    submitter,
                    now,
                    task,
                ),
            )
            submission_id = cursor.lastrowid
            if client_key.startswith("client:"):  # named submitters' clients too: the limit counts by client
                _client_table(db)
                db.execute(
                    "INSERT INTO submission_clients (submission_id, client) VALUES (?, ?)", (submission_id, client_key)
                )
            job_id = insert_job(db, submission_id, now)
            return submission_id, job_id, False

    def count_recent_submissions(self, submitter: str | None, since: float, client: str | None = None) -> int:
        """How many submissions the client (else the named submitter, else the anonymous pool; see
        :func:`~idbench.names.rate_identity`) made at or after epoch time ``since`` (the rate limit)."""
        with self.transaction(immediate=False) as db:
            return _recent_submissions(db, rate_identity(submitter, client), since)

    def record_refusal(self, identity: str, reason: str) -> None:
        """Record an upload refused for its own content, of rate-limit ``identity``
        (:func:`~idbench.names.rate_identity`); ``reason`` is cut to 500 characters."""
        with self.transaction() as db:
            db.execute(
                "INSERT INTO refused_uploads (identity, reason, created_at) VALUES (?, ?, ?)",
                (identity, reason[:500], time.time()),
            )

    def count_recent_refusals(self, identity: str, since: float) -> int:
        """How many uploads of ``identity`` were refused at or after epoch time ``since``."""
        with self.transaction(immediate=False) as db:
            (count,) = db.execute(
                "SELECT COUNT(*) FROM refused_uploads WHERE identity = ? AND created_at >= ?", (identity, since)
            ).fetchone()
        return int(count)

    def submission_identities(self, benchmark: str) -> list[tuple[int, str, str | None, str]]:
        """``(id, model_name, submitter, identity)`` of every submission of ``benchmark`` not withdrawn:
        who owns which name (``identity`` as :func:`~idbench.names.submitter_identity` gives it)."""
        with self.transaction() as db:
            _client_table(db)
            rows = db.execute(
                "SELECT submissions.id, submissions.model_name, submissions.submitter, submission_clients.client"
                " FROM submissions LEFT JOIN submission_clients ON submission_clients.submission_id = submissions.id"
                " WHERE submissions.benchmark = ? AND submissions.withdrawn_at IS NULL ORDER BY submissions.id",
                (benchmark,),
            ).fetchall()
        # A name owns by its key; the client owns only an anonymous submission (named ones keep theirs too).
        return [
            (row[0], row[1], row[2], submitter_identity(row[2]) if name_key(row[2]) else (row[3] or ANONYMOUS))
            for row in rows
        ]

    def withdraw(self, submission_id: int, reason: str) -> None:
        """Take a submission off the rankings (an admin action); its files, jobs and results are kept.

        Its PENDING jobs are failed with the reason, so no worker scores it any more. KeyError names a
        missing id; withdrawing twice keeps the first time and reason.
        """
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM submissions WHERE id = ?", (submission_id,)).fetchone() is None:
                raise UnknownIdError(f"no submission with id {submission_id}")
            now = time.time()
            db.execute(
                "UPDATE submissions SET withdrawn_at = ?, withdrawn_reason = ? WHERE id = ? AND withdrawn_at IS NULL",
                (now, reason, submission_id),
            )
            db.execute(
                "UPDATE jobs SET state = 'FAILED', reason = ?, finished_at = ? WHERE submission_id = ? AND state = 'PENDING'",
                (f"withdrawn: {reason}", now, submission_id),
            )

    def find_duplicate(self, content_hash: str) -> tuple[int, int] | None:
        """``(submission_id, latest job_id)`` of the stored submission with this content hash, or None."""
        with self.transaction(immediate=False) as db:
            return _duplicate(db, content_hash)

    def submission(self, submission_id: int) -> dict[str, Any]:
        """One submission as a plain dict (``metadata`` decoded); KeyError names a missing id."""
        with self.transaction(immediate=False) as db:
            row = db.execute("SELECT * FROM submissions WHERE id = ?", (submission_id,)).fetchone()
        if row is None:
            raise UnknownIdError(f"no submission with id {submission_id}")
        out = dict(row)
        out["metadata"] = json.loads(out.pop("metadata_json"))
        return out

    # --- jobs ---------------------------------------------------------------------------------------

    def job(self, job_id: int) -> dict[str, Any]:
        """One job row as a plain dict; KeyError names a missing id."""
        with self.transaction(immediate=False) as db:
            row = db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise UnknownIdError(f"no job with id {job_id}")
        return dict(row)

    def list_jobs(self) -> list[dict[str, Any]]:
        """Every job with its submission's benchmark, model and submitter, oldest first."""
        with self.transaction(immediate=False) as db:
            rows = db.execute(
                "SELECT jobs.*, submissions.benchmark, submissions.model_name, submissions.submitter,"
                " submissions.content_hash, submissions.withdrawn_at FROM jobs JOIN submissions ON submissions.id = jobs.submission_id"
                " ORDER BY jobs.id"
            ).fetchall()
        return [dict(row) for row in rows]

    # --- results ------------------------------------------------------------------------------------

    def results(self, submission_id: int | None = None, current_only: bool = False) -> list[dict[str, Any]]:
        """Result rows (JSON columns decoded), oldest first; of one submission, or only current ones."""
        query, params = "SELECT * FROM results WHERE 1", []
        if submission_id is not None:
            query += " AND submission_id = ?"
            params.append(submission_id)
        if current_only:
            query += " AND current"
        with self.transaction(immediate=False) as db:
            rows = db.execute(query + " ORDER BY id", params).fetchall()
        return [_decode_result(dict(row)) for row in rows]

    # --- standings (leaderboard.board computes them; the store only keeps them) -----------------------

    def replace_standings(
        self,
        benchmark: str,
        task: str,
        version: str,
        boards: dict[tuple[str, str, str, str], str],
        expected_version: Any = None,
    ) -> bool:
        """Replace every stored board of one track with ``boards`` (``(view, metric, cell, judge) -> JSON``),
        computed on the results' ``version``; in one transaction. With ``expected_version``, nothing is
        written (False) when the results' version is no longer it: the results changed while the
        boards were computed, and a later refresh writes boards of the newer results."""
        with self.transaction() as db:
            if expected_version is not None and results_version(db) != tuple(expected_version):
                return False
            db.execute("DELETE FROM standings WHERE benchmark = ? AND task = ?", (benchmark, task))
            now = time.time()
            db.executemany(
                "INSERT INTO standings (benchmark, task, view, metric, cell, judge, store_version, computed_at, board_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(benchmark, task, *key, version, now, text) for key, text in sorted(boards.items())],
            )
        return True

    def standings(self, benchmark: str, task: str, metric: str, cell: str, judge: str) -> dict[str, str]:
        """The stored JSON of one board in each view it was computed for (view -> JSON); {} when none."""
        with self.transaction(immediate=False) as db:
            rows = db.execute(
                "SELECT view, board_json FROM standings WHERE benchmark = ? AND task = ? AND metric = ? AND cell = ?"
                " AND judge = ? ORDER BY view",
                (benchmark, task, metric, cell, judge),
            ).fetchall()
        return {str(view): str(text) for view, text in rows}

    def current_results(self, benchmark: str, task: str = DEFAULT_TASK) -> pd.DataFrame:
        """The current result of every scored submission of ``benchmark`` and ``task`` (one track: the
        reference-based task unless asked): one row each, newest first.

        Columns: the results row (``aggregates``, ``models``, ``not_run`` decoded to dicts; ``judge`` and
        ``copies`` to a dict or None, ``judge_key`` a string or None) plus the
        submission's ``model_name``, ``submitter``, ``metadata``, ``content_hash`` and ``task``.
        """
        with self.transaction(immediate=False) as db:
            rows = db.execute(
                "SELECT results.*, submissions.model_name, submissions.submitter, submissions.metadata_json,"
                " submissions.content_hash, submissions.task FROM results JOIN submissions ON submissions.id = results.submission_id"
                " WHERE results.benchmark = ? AND submissions.task = ? AND results.current AND submissions.withdrawn_at IS NULL"
                " ORDER BY results.id DESC",
                (benchmark, task),
            ).fetchall()
        records = []
        for row in rows:
            record = _decode_result(dict(row))
            record["metadata"] = json.loads(record.pop("metadata_json"))
            records.append(record)
        columns = [
            "id",
            "submission_id",
            "job_id",
            "benchmark",
            "benchmark_version",
            "suite_version",
            "profile",
            "plumbing",
            "models",
            "idbench_version",
            "aggregates",
            "not_run",
            "results_path",
            "created_at",
            "current",
            "model_name",
            "submitter",
            "metadata",
            "content_hash",
            "task",
            "judge",
            "judge_key",
            "copies",
        ]
        return pd.DataFrame(records, columns=columns)


def _statements(script: str) -> list[str]:
    """The statements of a migration script (no semicolons inside literals in our migrations)."""
    lines = [line for line in script.splitlines() if not line.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def results_version(db: sqlite3.Connection) -> tuple[int, int, int]:
    """(result rows, highest result id, withdrawn submissions) inside an open transaction: changes whenever
    the ranked results change (:func:`idbench.leaderboard.ranking.store_version` says why)."""
    count, top = db.execute("SELECT COUNT(*), COALESCE(MAX(id), 0) FROM results").fetchone()
    (withdrawn,) = db.execute("SELECT COUNT(*) FROM submissions WHERE withdrawn_at IS NOT NULL").fetchone()
    return int(count), int(top), int(withdrawn)


def insert_job(db: sqlite3.Connection, submission_id: int, now: float) -> int:
    """Insert a PENDING job inside an open transaction; its id."""
    cursor = db.execute(
        "INSERT INTO jobs (submission_id, state, attempts, created_at) VALUES (?, 'PENDING', 0, ?)",
        (submission_id, now),
    )
    return cursor.lastrowid


def _client_table(db: sqlite3.Connection) -> None:
    """The digest of each anonymous submission's client (``client:<sha256>``; never an address).

    Created on first use rather than as a migration: it only adds to what the rate limit counts, and
    a store without it simply has no per-client history yet.
    """
    db.execute(
        "CREATE TABLE IF NOT EXISTS submission_clients"
        " (submission_id INTEGER PRIMARY KEY REFERENCES submissions(id), client TEXT NOT NULL)"
    )


def _recent_submissions(db: sqlite3.Connection, identity: str, since: float) -> int:
    """Submissions of ``identity`` (:func:`~idbench.names.submitter_identity`) at or after ``since``."""
    if identity.startswith("submitter:"):
        # The key is NFKC + casefold, which SQL cannot compute: compare the window's names here.
        rows = db.execute(
            "SELECT submitter FROM submissions WHERE submitter IS NOT NULL AND created_at >= ?", (since,)
        ).fetchall()
        return sum(1 for (submitter,) in rows if f"submitter:{name_key(submitter)}" == identity)
    _client_table(db)
    if identity == ANONYMOUS:  # no client known (the local CLI): one pool, as before clients were kept
        anonymous = "SELECT COUNT(*) FROM submissions LEFT JOIN submission_clients ON submission_clients.submission_id = submissions.id"
        anonymous += (
            " WHERE (submissions.submitter IS NULL OR TRIM(submissions.submitter) = '') AND submissions.created_at >= ?"
        )
        (count,) = db.execute(anonymous + " AND submission_clients.client IS NULL", (since,)).fetchone()
    else:  # one client, whatever names it typed
        (count,) = db.execute(
            "SELECT COUNT(*) FROM submissions JOIN submission_clients ON submission_clients.submission_id = submissions.id"
            " WHERE submission_clients.client = ? AND submissions.created_at >= ?",
            (identity, since),
        ).fetchone()
    return int(count)


def _duplicate(db: sqlite3.Connection, content_hash: str) -> tuple[int, int] | None:
    row = db.execute(
        "SELECT submissions.id AS submission_id, MAX(jobs.id) AS job_id FROM submissions"
        " JOIN jobs ON jobs.submission_id = submissions.id WHERE submissions.content_hash = ?"
        " GROUP BY submissions.id",
        (content_hash,),
    ).fetchone()
    return (row["submission_id"], row["job_id"]) if row else None


def _decode_result(row: dict[str, Any]) -> dict[str, Any]:
    for column in ("aggregates", "models", "not_run"):
        row[column] = json.loads(row.pop(f"{column}_json"))
    for column in ("judge", "copies"):  # NULL: no judge ran, or scored before these were kept
        text = row.pop(f"{column}_json", None)
        row[column] = json.loads(text) if text else None
    row.setdefault("judge_key", None)
    row["plumbing"] = bool(row["plumbing"])
    row["current"] = bool(row["current"])
    return row

"""Submissions kept in a Hugging Face Hub dataset repo: ``owner/name``, ``owner/name@revision``, ``hf://datasets/...``.

A researcher who has pushed their generations (a manifest folder, or parquet shards) to a dataset
repo can submit it by its id instead of uploading a zip. :func:`fetch_submission` downloads only the
files a submission may hold (``submission.json``, ``manifest.csv``, images, parquet shards) and copies
them, as plain files, into a folder of ours, which the usual validator then checks. Before
downloading, the repo's file list is read (when online) and a repo over the size limit is refused
without fetching a byte; after, the copied bytes are counted again, so the limit holds offline too.

The copy matters: the Hub cache keeps files as symlinks into a shared blob store, and the validator
rightly refuses a symlink that leads out of the submission folder.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from idbench.atomic import atomic_directory
from idbench.errors import IdbenchError
from idbench.evaluate_pkg.submission import ZipLimits

HUB_PREFIX = "hf://datasets/"
# What a submission may hold; anything else in the repo (scripts, notebooks, model files) is not fetched.
ALLOWED_PATTERNS = (
    "submission.json",
    "manifest.csv",
    "*.parquet",
    "**/*.parquet",
    *(p for ext in ("png", "jpg", "jpeg", "webp", "PNG", "JPG", "JPEG", "WEBP") for p in (f"*.{ext}", f"**/*.{ext}")),
)
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}")
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/]{0,127}")


class HubSubmissionError(IdbenchError, ValueError):
    """The repo id is malformed, the repo cannot be reached or read, or it holds too much."""


@dataclass(frozen=True)
class RepoRef:
    repo_id: str
    revision: str | None = None  # None: the default branch

    def __str__(self) -> str:
        return self.repo_id + (f"@{self.revision}" if self.revision else "")


def is_hub_ref(text: str) -> bool:
    """True for ``hf://datasets/owner/name[@rev]``: the one spelling the CLI reads as a Hub repo.

    A bare ``owner/name`` could also be a relative path, so the CLI asks for the prefix; the app's
    repo-id field accepts either.
    """
    return text.startswith(HUB_PREFIX)


def parse_repo_ref(text: str) -> RepoRef:
    """``owner/name``, ``owner/name@revision`` or either with the ``hf://datasets/`` prefix -> RepoRef."""
    raw = text.strip()
    body = raw[len(HUB_PREFIX) :] if raw.startswith(HUB_PREFIX) else raw
    repo_id, _, revision = body.partition("@")
    if not _REPO_ID.fullmatch(repo_id) or ".." in repo_id:
        raise HubSubmissionError(f"{raw!r} is not a dataset repo id (expected owner/name or owner/name@revision)")
    if revision and (not _REVISION.fullmatch(revision) or ".." in revision):
        raise HubSubmissionError(f"{raw!r}: {revision!r} is not a branch, tag or commit")
    return RepoRef(repo_id, revision or None)


def _allowed(path: str) -> bool:
    parts = PurePosixPath(path).parts
    if not parts or any(part in ("", ".", "..") or part.startswith(".") for part in parts):
        return False  # hidden files and folders (.git, .gitattributes, .cache) are not submission content
    return any(PurePosixPath(path).match(pattern) for pattern in ALLOWED_PATTERNS)


def _check_remote_size(ref: RepoRef, max_bytes: int, max_files: int) -> str | None:
    """The commit the revision points at, after refusing a repo whose submission files are too big.

    Returns None when offline (the cached snapshot is then used as it is, and sized after the copy).
    """
    from huggingface_hub import HfApi
    from huggingface_hub import constants as hub_constants
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    if hub_constants.HF_HUB_OFFLINE:
        return None
    try:
        info = HfApi().dataset_info(ref.repo_id, revision=ref.revision, files_metadata=True)
    except (RepositoryNotFoundError, RevisionNotFoundError) as error:
        raise HubSubmissionError(
            f"{ref}: no such dataset repo or revision (or it is private): {type(error).__name__}"
        ) from None
    except (HfHubHTTPError, OSError) as error:
        raise HubSubmissionError(f"{ref}: the Hub could not be reached ({type(error).__name__})") from None
    files = [s for s in info.siblings or [] if _allowed(s.rfilename)]
    total = sum(s.size or 0 for s in files)
    if total > max_bytes:
        raise HubSubmissionError(f"{ref}: the submission files add up to {total} bytes, over the limit of {max_bytes}")
    if len(files) > max_files:
        raise HubSubmissionError(f"{ref}: {len(files)} files, over the limit of {max_files}")
    return info.sha


def fetch_submission(text: str, dest: Path, max_bytes: int | None = None) -> Path:
    """Download the submission in dataset repo ``text`` and copy its files into the new folder ``dest``.

    Returns ``dest``, which holds plain files only (no symlinks), at most ``max_bytes`` of them
    (default: the zip limit, ``$IDBENCH_MAX_UNPACKED_BYTES`` or 8 GiB) and at most the zip limit's
    number of files (``$IDBENCH_MAX_ZIP_MEMBERS``); on any
    error it is removed again and :class:`HubSubmissionError` says what went wrong. ``dest`` must not
    exist yet. The revision is pinned to the commit read first, so the files checked for size are
    the files downloaded.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    limits = ZipLimits.from_env(max_bytes)
    max_bytes, max_files = limits.max_bytes, limits.max_members
    ref = parse_repo_ref(text)
    commit = _check_remote_size(ref, max_bytes, max_files)
    try:
        snapshot = Path(
            snapshot_download(
                ref.repo_id, repo_type="dataset", revision=commit or ref.revision, allow_patterns=list(ALLOWED_PATTERNS)
            )
        )
    except LocalEntryNotFoundError:
        raise HubSubmissionError(
            f"{ref}: not in the local Hugging Face cache, and the Hub is offline (HF_HUB_OFFLINE)"
        ) from None
    except (HfHubHTTPError, OSError) as error:
        raise HubSubmissionError(f"{ref}: download failed ({type(error).__name__})") from None

    dest = Path(dest)
    with atomic_directory(dest) as staging:  # the folder is complete or absent
        total, count = 0, 0
        for source in sorted(snapshot.rglob("*")):
            relative = source.relative_to(snapshot).as_posix()
            if source.is_dir() or not _allowed(relative):
                continue
            count += 1
            total += source.stat().st_size  # the blob's size: stat follows the cache's symlink
            if total > max_bytes or count > max_files:
                raise HubSubmissionError(
                    f"{ref}: more than {max_bytes} bytes or {max_files} files of submission content"
                )
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)  # follows the symlink: a plain file of ours
        if count == 0:
            raise HubSubmissionError(
                f"{ref}: no submission files (submission.json, manifest.csv, images or parquet) in the repo"
            )
    return dest

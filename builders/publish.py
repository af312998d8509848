"""Publish a built benchmark folder to a Hugging Face dataset repo.

A built folder holds ``README.md`` (the card, whose YAML front matter declares the configs and their
``data_files`` globs), ``LICENSE`` (the per-image license table the card's ``license_link`` names),
``build_info.json`` and the parquet shards. :func:`publish` checks that the folder is complete and
self-consistent, and that the card's metadata passes :mod:`idbench.builders.card_check`, *before*
anything touches the network, then uploads exactly those files in one ``upload_folder`` commit:
hidden files, temporary files and anything the card does not reference stay local.

``eval.yaml`` (the Hub's Eval Results task declarations, written by ``idbench publish --eval-yaml``)
goes up in a second commit of its own, after the dataset's: the Hub validates it at push time and
does not know ``idbench`` as an evaluation framework yet (docs/publishing.md), so a refusal of it
must not keep the dataset off the Hub. When that second commit fails, :class:`EvalYamlRejected`
says the dataset is up and why eval.yaml was not accepted.

Authentication is huggingface_hub's own (``hf auth login`` or the ``HF_TOKEN`` environment
variable). This module never takes a token as an argument and never prints one.

The command line is ``idbench publish FOLDER --repo-id ORG/NAME [--private] [--dry-run]``.

Example::

    publish(Path("out/cogcanvas"), "my-org/cogcanvas", dry_run=True)   # what would be uploaded
    publish(Path("out/cogcanvas"), "my-org/cogcanvas")                  # upload it
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from datasets.data_files import resolve_pattern
from huggingface_hub import DatasetCard, HfApi, constants, get_token
from huggingface_hub.errors import HfHubHTTPError, HFValidationError
from huggingface_hub.utils import validate_repo_id

from idbench.builders.card_check import CardError, check_card_metadata
from idbench.errors import IdbenchError

CARD = "README.md"
BUILD_INFO = "build_info.json"
REPO_TYPE = "dataset"

# Names a builder or an editor leaves behind while writing; never published.
_TEMP_SUFFIXES = (".tmp", ".temp", ".part", ".partial", ".lock", "~")
# fnmatch metacharacters: upload_folder reads allow_patterns as globs, so a file name holding one
# would not stand for itself.
_GLOB_CHARS = frozenset("*?[]")


class PublishError(IdbenchError):
    """The folder cannot be published as it is; the message names the file or config at fault."""


class EvalYamlRejected(PublishError):
    """The dataset commit went up, the eval.yaml commit after it did not; ``uploaded`` lists what is up."""

    def __init__(self, message: str, uploaded: list[str]) -> None:
        super().__init__(message)
        self.uploaded = uploaded


def publish(
    folder: Path,
    repo_id: str,
    *,
    private: bool = False,
    dry_run: bool = False,
    api: HfApi | None = None,
) -> list[str]:
    """Upload a built dataset folder to the dataset repo ``repo_id``; return the uploaded paths, sorted.

    The folder is validated first (see :func:`plan_upload`). With ``dry_run=True`` nothing else
    happens: no network, no token needed, and the returned list is exactly what a real run uploads.
    Otherwise the repo is created if missing (``private`` only applies to a new repo) and the dataset
    files are uploaded in one ``upload_folder`` call. Shards on the Hub that match the card's
    ``data_files`` globs but are not part of this build are deleted in the same commit, so a stale
    shard from an earlier build cannot end up in ``load_dataset``. A folder's ``eval.yaml`` follows
    in a commit of its own; if the Hub refuses it, :class:`EvalYamlRejected` is raised with the
    dataset files (which are up) in ``uploaded``.

    ``api`` is for tests and for callers who configured their own client (endpoint, token);
    by default a plain :class:`HfApi` is used, which reads the user's login.
    """
    folder = Path(folder)
    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        raise PublishError(f"invalid dataset repo id {repo_id!r}: {err}") from None
    files = plan_upload(folder)
    if dry_run:
        return files

    if api is None:
        if constants.HF_HUB_OFFLINE:
            raise PublishError("huggingface_hub is in offline mode (HF_HUB_OFFLINE is set); unset it to publish")
        api = HfApi()
    # A client built with its own token is enough; otherwise the user's login or HF_TOKEN must be there.
    # Only whether a token exists is checked: it is never read into a message, a log or a return value.
    if not getattr(api, "token", None) and not get_token():
        raise PublishError(
            "no Hugging Face token found: run `hf auth login` (or set the HF_TOKEN environment variable) "
            "and try again; a dry run shows what would be uploaded without one"
        )

    card = _read_front_matter(folder)
    globs = sorted({pattern for _, pattern in _data_file_patterns(card)})
    dataset_files = [name for name in files if name != EVAL_YAML]
    try:
        api.create_repo(repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True)
        api.upload_folder(
            repo_id=repo_id,
            folder_path=folder,
            repo_type=REPO_TYPE,
            commit_message=_commit_message(folder),
            allow_patterns=dataset_files,
            delete_patterns=globs,
        )
    except HfHubHTTPError as err:
        raise PublishError(f"publishing {folder} to dataset repo {repo_id!r} failed: {err}") from err
    if EVAL_YAML in files:
        try:
            api.upload_file(
                path_or_fileobj=str(folder / EVAL_YAML),
                path_in_repo=EVAL_YAML,
                repo_id=repo_id,
                repo_type=REPO_TYPE,
                commit_message="Declare the benchmark's Eval Results tasks (eval.yaml)",
            )
        except HfHubHTTPError as err:
            why = " ".join(str(err).split())  # the Hub's reason, on one line
            raise EvalYamlRejected(
                f"the dataset is up on {repo_id!r} ({len(dataset_files)} files, one commit), but the Hub did not "
                f"accept {EVAL_YAML}: {why}. The Hub validates eval.yaml when it is pushed and knows only the "
                "evaluation frameworks of its list, which does not include idbench yet (see docs/publishing.md); "
                f"rerun with --eval-yaml once it does",
                dataset_files,
            ) from err
    return files


EVAL_YAML = "eval.yaml"


def plan_upload(folder: Path) -> list[str]:
    """Validate a built folder and list, sorted, the repo paths a publish uploads.

    The list holds ``README.md``, ``build_info.json``, the file the card's ``license_link`` names
    (``LICENSE``), every shard that one of the card's ``data_files`` globs matches and, when the folder
    has one, ``eval.yaml``. Raises :class:`PublishError` when the folder or either file is missing, the
    card's metadata fails :func:`~idbench.builders.card_check.check_card_metadata` (the error names
    the field), a glob is malformed or matches no shard, or ``build_info.json`` names a shard that is
    missing or that the card does not reach.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise PublishError(f"{folder}: no such folder (build the dataset first)")
    for name in (CARD, BUILD_INFO):
        if not (folder / name).is_file():
            raise PublishError(f"{folder / name}: missing; is {folder} a built dataset folder?")

    card = _read_front_matter(folder)
    try:
        linked = check_card_metadata(card, folder, CARD)
    except CardError as err:
        raise PublishError(str(err)) from None
    shards_by_config: dict[str, set[str]] = {}
    for config, pattern in _data_file_patterns(card):
        matched = _resolve(folder, config, pattern)
        if not matched:
            raise PublishError(
                f"{folder / CARD}: config {config!r}: data_files {pattern!r} matches no shard in {folder}"
            )
        shards_by_config.setdefault(config, set()).update(matched)

    _check_against_build_info(folder, shards_by_config)
    shards = set().union(*shards_by_config.values())
    for path in shards:
        if _GLOB_CHARS & set(path):
            raise PublishError(f"{folder / path}: file names must not contain any of {''.join(sorted(_GLOB_CHARS))}")
    # eval.yaml (the Hub's task declarations for its Eval Results) is uploaded when the folder has one:
    # `idbench publish --eval-yaml` writes it; the Hub validates it on push, so it is opt-in.
    extras = {EVAL_YAML} if (folder / EVAL_YAML).is_file() else set()
    return sorted({CARD, BUILD_INFO, *linked, *shards, *extras})


# ----------------------------------------------------------------------------------------------


def _read_front_matter(folder: Path) -> dict[str, Any]:
    path = folder / CARD
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise PublishError(f"{path}: no YAML front matter (the file must start with a '---' line)")
    try:
        end = next(i for i, line in enumerate(lines[1:], start=1) if line.strip() == "---")
    except StopIteration:
        raise PublishError(f"{path}: the YAML front matter is not closed by a '---' line") from None
    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as err:
        raise PublishError(f"{path}: the YAML front matter does not parse: {err}") from None
    if not isinstance(meta, dict):
        raise PublishError(f"{path}: the YAML front matter must be a mapping")
    try:  # huggingface_hub's own (offline) parse of the card, as the Hub's tools will read it
        DatasetCard(text)
    except ValueError as err:
        raise PublishError(f"{path}: huggingface_hub cannot read the card: {err}") from None
    configs = meta.get("configs")
    if not isinstance(configs, list) or not configs:
        raise PublishError(f"{path}: the front matter declares no `configs` (a list with data_files per config)")
    return meta


def _data_file_patterns(card: dict[str, Any]) -> list[tuple[str, str]]:
    """(config name, glob) for every data_files pattern of every config, in the card's order.

    Accepts the spellings the Hub accepts: a string, a list of strings, a list of
    ``{split, path}`` entries whose path is a string or a list, or a ``{split: path(s)}`` mapping.
    """
    pairs: list[tuple[str, str]] = []
    for index, entry in enumerate(card["configs"]):
        if not isinstance(entry, dict) or not entry.get("config_name"):
            raise PublishError(f"{CARD}: configs[{index}] has no config_name")
        name = str(entry["config_name"])
        data_files = entry.get("data_files")
        patterns = list(_flatten_data_files(data_files, name))
        if not patterns:
            raise PublishError(f"{CARD}: config {name!r} declares no data_files")
        pairs.extend((name, pattern) for pattern in patterns)
    return pairs


def _flatten_data_files(data_files: Any, config: str) -> Iterable[str]:
    if data_files is None:
        return
    if isinstance(data_files, str):
        yield data_files
    elif isinstance(data_files, dict):  # {split: path or [paths]}
        for paths in data_files.values():
            yield from _flatten_data_files(paths, config)
    elif isinstance(data_files, list):
        for item in data_files:
            if isinstance(item, dict):
                if "path" not in item:
                    raise PublishError(f"{CARD}: config {config!r}: a data_files entry has no path: {item!r}")
                yield from _flatten_data_files(item["path"], config)
            else:
                yield from _flatten_data_files(item, config)
    else:
        raise PublishError(
            f"{CARD}: config {config!r}: data_files must be a string, list or mapping, got {data_files!r}"
        )


def _resolve(folder: Path, config: str, pattern: str) -> set[str]:
    """The folder-relative POSIX paths a data_files glob matches, as `load_dataset` would resolve it.

    Uses the resolver of `datasets` itself, so what is validated here is what users will load.
    Patterns must stay inside the folder: no absolute paths, no '..', no URLs.
    """
    posix = PurePosixPath(pattern)
    if not pattern or posix.is_absolute() or ".." in posix.parts or "://" in pattern or "\\" in pattern:
        raise PublishError(
            f"{CARD}: config {config!r}: data_files {pattern!r} must be a relative path inside the folder"
        )
    root = folder.resolve()
    try:
        matches = resolve_pattern(pattern, base_path=str(root))
    except FileNotFoundError:
        return set()
    relative: set[str] = set()
    for match in matches:
        path = Path(match)
        try:
            rel = path.resolve().relative_to(root)  # a symlink out of the folder is refused below
        except ValueError:
            raise PublishError(f"{match}: config {config!r} reaches outside {folder}") from None
        rel_posix = PurePosixPath(path.relative_to(root).as_posix())
        if _is_hidden_or_temp(rel_posix) or _is_hidden_or_temp(PurePosixPath(rel.as_posix())):
            continue
        relative.add(rel_posix.as_posix())
    return relative


def _is_hidden_or_temp(path: PurePosixPath) -> bool:
    return any(part.startswith((".", "~")) or part.endswith(_TEMP_SUFFIXES) for part in path.parts)


def _load_build_info(folder: Path) -> dict[str, Any]:
    path = folder / BUILD_INFO
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise PublishError(f"{path}: not valid JSON: {err}") from None
    if not isinstance(info, dict):
        raise PublishError(f"{path}: must hold a JSON object")
    return info


def _check_against_build_info(folder: Path, shards_by_config: dict[str, set[str]]) -> None:
    """Cross-check the card's shards with those ``build_info.json`` recorded, when it records them.

    A shard the build wrote but no glob reaches would silently not be published; a shard a glob
    reaches but the build did not write is left over from an earlier build and would mix its rows
    into this one.
    """
    info = _load_build_info(folder)
    built = info.get("configs")
    if not isinstance(built, dict):
        return
    for config, record in built.items():
        if config not in shards_by_config:
            raise PublishError(f"{folder / BUILD_INFO}: config {config!r} was built but {CARD} does not declare it")
        listed = record.get("shards") if isinstance(record, dict) else None
        if listed is None:
            continue
        expected = {PurePosixPath(s).as_posix() for s in listed}
        for shard in sorted(expected):
            if not (folder / shard).is_file():
                raise PublishError(f"{folder / shard}: listed in {BUILD_INFO} for config {config!r} but missing")
        unreached = expected - shards_by_config[config]
        if unreached:
            raise PublishError(
                f"{folder / CARD}: config {config!r}: data_files do not match {', '.join(sorted(unreached))}"
            )
        stale = shards_by_config[config] - expected
        if stale:
            raise PublishError(
                f"{folder}: config {config!r}: {', '.join(sorted(stale))} match(es) the card's data_files but "
                f"{BUILD_INFO} does not list it; a leftover from an earlier build? Rebuild into an empty folder"
            )


def _commit_message(folder: Path) -> str:
    """One line saying what is published, from the provenance record."""
    info = _load_build_info(folder)
    parts = [f"idbench {info['idbench_version']}"] if info.get("idbench_version") else []
    if info.get("seed") is not None:
        parts.append(f"seed {info['seed']}")
    if info.get("sample_build"):
        parts.append("sample build")
    what = info.get("benchmark") or folder.name
    return f"Publish {what}" + (f" ({', '.join(parts)})" if parts else "")

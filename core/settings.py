"""Every environment variable idbench reads, in one table, and the only module that reads the environment.

Each variable is a :class:`Variable`: its name, its group, one sentence of meaning, the default it takes
when it is unset or empty, how its text is parsed, and whether it is a secret. The accessor functions
below read the environment each time they are called, never at import: tests (and a long-running
server) change variables between calls. A value that does not parse raises :class:`SettingError`, one
line naming the variable and the value.

The README's "Environment variables" table is :func:`markdown_table` (tests/test_settings.py checks they
match), and ``idbench env`` prints :func:`report`. tests/test_settings.py also checks that no other
module of the package touches ``os.environ`` or ``os.getenv``.

This module sits at the bottom of the layering (pyproject.toml's import-linter contract): it imports
nothing of idbench but :mod:`idbench.errors`, and nothing heavy, so every package may import it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from idbench.errors import IdbenchError


class SettingError(IdbenchError, ValueError):
    """An environment variable's value cannot be read: the message names the variable and the value."""


# --- parsers: text -> typed value; a ValueError's message says what would be accepted ---------------


def _text(text: str) -> str:
    return text


# A folder variable's bounds: idbench appends its own sub-paths (models/insightface/..., features/<key>/...)
# to it, so it stays well under the system's PATH_MAX (4096); a name is at most NAME_MAX (255) bytes.
MAX_FOLDER_CHARS = 1024
MAX_NAME_BYTES = 255


def _path(text: str) -> Path:
    """A folder: bounded in length, no NUL, and not a file (nor under one) where it exists."""
    if "\0" in text:
        raise ValueError("a path cannot hold a NUL character")
    if len(text) > MAX_FOLDER_CHARS:
        raise ValueError(f"a path of {len(text)} characters; a folder here is at most {MAX_FOLDER_CHARS}")
    path = Path(text).expanduser()
    longest = max(path.parts, key=lambda part: len(part.encode("utf-8", "surrogateescape")), default="")
    if len(longest.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        raise ValueError(
            f"a folder name of {len(longest.encode('utf-8', 'surrogateescape'))} bytes; a name is at most "
            f"{MAX_NAME_BYTES}"
        )
    for place in (path, *path.parents):  # the deepest part that exists must be a folder
        try:
            if place.is_dir():
                break
            if place.exists():
                where = "it is" if place == path else f"{str(place)!r} is"
                raise ValueError(f"{where} a file, not a folder")
        except OSError:  # not readable here: the command that uses it says so
            break
    return path


def _hf_path(text: str) -> Path:
    # huggingface_hub expands variables as well as ``~`` in its cache paths; do as it does.
    return Path(os.path.expandvars(text)).expanduser()


def _flag(text: str) -> bool:
    # huggingface_hub's own reading of its boolean variables: anything else is off, not an error.
    return text.strip().lower() in ("1", "true", "yes", "on")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError("expected a positive number")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise ValueError("expected a positive number")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("expected a number of seconds") from None
    if not value >= 0:
        raise ValueError("expected a number of seconds >= 0")
    return value


def _proxies(text: str) -> int:
    if not text.isdigit() or int(text) > 16:
        raise ValueError("give the number of reverse proxies in front of the app (0-16)")
    return int(text)


def _world_size(text: str) -> int:
    if not text.isdigit():
        raise ValueError("expected the number of processes, as accelerate launch / torchrun set it")
    return int(text)


def _whole_number(text: str) -> int:
    if not text.isdigit():
        raise ValueError("expected a whole number (0, 1, 2, ...)")
    return int(text)


def _rate_limit(text: str) -> tuple[int, float]:
    try:
        count, window = text.split("/")
        limit = int(count), float(window)
    except ValueError:
        raise ValueError("expected COUNT/SECONDS, e.g. 5/86400") from None
    if limit[0] < 1 or not limit[1] > 0:
        raise ValueError("COUNT and SECONDS must be positive")
    return limit


MIN_KEY_CHARS = 32


def _cache_key(text: str) -> str:
    if len(text) < MIN_KEY_CHARS:
        raise ValueError(
            f"a key of {len(text)} characters; use at least {MIN_KEY_CHARS} random ones "
            "(python -c 'import secrets; print(secrets.token_hex(32))')"
        )
    return text


def _benchmark_repos(text: str) -> dict[str, tuple[str, str | None]]:
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, ref = item.partition("=")
        repo, _, revision = ref.partition("@")
        if not name.strip() or not repo.strip():
            raise ValueError(f"{item!r} is not NAME=ORG/REPO[@REVISION]")
        out[name.strip()] = (repo.strip(), revision.strip() or None)
    return out


# --- the table ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variable:
    """One environment variable. ``default`` is text, parsed like a set value (None: no value at all);
    ``shown_default`` is what the README says when the default is computed elsewhere."""

    name: str
    group: str
    meaning: str
    default: str | None = None
    parse: Callable[[str], Any] = _text
    secret: bool = False
    shown_default: str | None = None

    def documented_default(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        return f"`{self.default}`" if self.default is not None else "unset"


VARIABLES: tuple[Variable, ...] = (
    # Folders.
    Variable(
        "IDBENCH_HOME",
        "folders",
        "The leaderboard's store, queue and submissions, and the default `--data` folders (`benchmarks/<benchmark>`).",
        "~/.idbench",
        _path,
    ),
    Variable(
        "IDBENCH_CACHE",
        "folders",
        "Root of the run caches: computed features under `features/`, the VLM judge's answers under `judge/` (one variable moves both). Earlier checkouts took it as the features folder itself: point it one level up to keep such a cache.",
        "~/.cache/idbench",
        _path,
    ),
    Variable(
        "IDBENCH_DATASETS_CACHE",
        "folders",
        "Arrow conversions of built benchmark folders, keyed by the folder's content.",
        "~/.cache/idbench/datasets",
        _path,
    ),
    Variable(
        "IDBENCH_MODELS",
        "folders",
        "idbench's own model folder (tiny models, the insightface pack).",
        "~/.cache/idbench/models",
        _path,
    ),
    # The VLM judge.
    Variable(
        "IDBENCH_JUDGE_URL",
        "judge",
        "Base URL of the OpenAI-compatible judge server (or several servers of the model, comma-separated), when `--judge-url` is not given.",
        None,
    ),
    Variable("IDBENCH_JUDGE_MODEL", "judge", "The judge's served model name, when `--judge-model` is not given.", None),
    Variable(
        "IDBENCH_JUDGE_REVISION",
        "judge",
        "The weights the judge serves (a Hub revision, a tag): part of its identity and cache key, never sent.",
        None,
    ),
    Variable(
        "IDBENCH_JUDGE_API_KEY",
        "judge",
        "The judge's API key (the variable `JudgeConfig.api_key_env` names; unset: a keyless local server).",
        None,
        secret=True,
    ),
    Variable(
        "IDBENCH_JUDGE_CACHE_KEY",
        "judge",
        "The key that signs the judge's cached answers (at least 32 characters); an entry signed with another key is asked again. Unset: a random key kept in `$IDBENCH_HOME/judge-cache.key` (mode 0600). Give every shard of a run the same one (docs/cluster.md).",
        None,
        _cache_key,
        secret=True,
    ),
    # Submissions.
    Variable(
        "IDBENCH_MAX_UNPACKED_BYTES",
        "submissions",
        "Most bytes a zipped submission may unpack to.",
        str(8 * 1024**3),
        _positive_int,
        shown_default="8 GiB",
    ),
    Variable(
        "IDBENCH_MAX_ZIP_MEMBERS", "submissions", "Most members a zipped submission may hold.", "100000", _positive_int
    ),
    Variable(
        "IDBENCH_MAX_COMPRESSION_RATIO",
        "submissions",
        "Most a zip member past 1 MiB may unpack to, as a multiple of its compressed size.",
        "100",
        _positive_float,
    ),
    # The leaderboard server.
    Variable(
        "IDBENCH_SUBMIT_RATE_LIMIT",
        "leaderboard",
        "New submissions allowed per submitter, as COUNT/SECONDS.",
        "5/86400",
        _rate_limit,
    ),
    Variable(
        "IDBENCH_SUBMIT_DEADLINE_S",
        "leaderboard",
        "Seconds the app gives one upload's validation before it stops it (the others wait at most this long).",
        "60",
        _positive_float,
    ),
    Variable(
        "IDBENCH_SUBMIT_MAX_PIXELS",
        "leaderboard",
        "Most pixels (width x height, summed over its images, read from their headers) one upload to the app may hold.",
        "1000000000",
        _positive_int,
        shown_default="1 gigapixel",
    ),
    Variable(
        "IDBENCH_ADMIN_TOKEN",
        "leaderboard",
        "Enables the app's withdraw and rescore actions for whoever types this token; unset: off.",
        None,
        secret=True,
    ),
    Variable(
        "IDBENCH_TRUSTED_PROXIES",
        "leaderboard",
        "Reverse proxies in front of the app that append to X-Forwarded-For (0: the header is ignored).",
        "0",
        _proxies,
    ),
    Variable(
        "IDBENCH_HUB_REQUESTS",
        "leaderboard",
        "The requests dataset repo (ORG/NAME) of a Hub-backed deployment; set with IDBENCH_HUB_RESULTS.",
        None,
    ),
    Variable(
        "IDBENCH_HUB_RESULTS",
        "leaderboard",
        "The results dataset repo (ORG/NAME) of a Hub-backed deployment; set with IDBENCH_HUB_REQUESTS.",
        None,
    ),
    Variable(
        "IDBENCH_HUB_REFRESH_S",
        "leaderboard",
        "Seconds between checks of the Hub repos' heads by the app's mirror (0: on every rerun).",
        "300",
        _seconds,
    ),
    Variable(
        "IDBENCH_HUB_STAND_IN",
        "leaderboard",
        "A folder that stands in for the Hub (tests, offline trials): repos live under `<folder>/<repo id>`.",
        None,
        _path,
    ),
    Variable(
        "IDBENCH_BENCHMARK_REPOS",
        "leaderboard",
        "The published benchmarks that uploads are validated against: NAME=ORG/REPO@REVISION, comma-separated.",
        None,
        _benchmark_repos,
    ),
    Variable(
        "IDBENCH_DATA_DIR",
        "leaderboard",
        "Folder of built benchmarks (`<folder>/<benchmark>`) for benchmarks not in IDBENCH_BENCHMARK_REPOS.",
        None,
        _path,
        shown_default="`$IDBENCH_HOME/benchmarks`",
    ),
    Variable("SPACE_ID", "leaderboard", "Set by the Hub in a Space's container: the app is running on a Space.", None),
    # Shards (idbench.shards, docs/cluster.md): the job array's variables, when no --shard is given.
    Variable(
        "IDBENCH_SHARD_COUNT",
        "shards",
        "How many shards a Kubernetes indexed Job runs (its `completions`): with `JOB_COMPLETION_INDEX`, the shard of "
        "`generate` / `score` without `--shard`.",
        None,
        _positive_int,
    ),
    Variable(
        "SLURM_ARRAY_TASK_ID",
        "shards",
        "Set by Slurm in a job array's task: less `SLURM_ARRAY_TASK_MIN`, the shard K of `generate` / `score` "
        "without `--shard`.",
        None,
        _whole_number,
    ),
    Variable("SLURM_ARRAY_TASK_MIN", "shards", "Set by Slurm: the array's first task id.", "0", _whole_number),
    Variable(
        "SLURM_ARRAY_TASK_COUNT",
        "shards",
        "Set by Slurm: the array's number of tasks, the shards' N.",
        None,
        _positive_int,
    ),
    Variable(
        "SLURM_ARRAY_TASK_STEP",
        "shards",
        "Set by Slurm: the array's id step; above 1 its ids do not number the shards, and it is refused.",
        "1",
        _positive_int,
    ),
    Variable(
        "JOB_COMPLETION_INDEX",
        "shards",
        "Set by Kubernetes in an indexed Job's pod: the shard K, of `IDBENCH_SHARD_COUNT`.",
        None,
        _whole_number,
    ),
    # Read as other tools read them.
    Variable(
        "WORLD_SIZE",
        "other tools",
        "Processes started by `accelerate launch` / torchrun; above 1, generation and scoring split the work.",
        "1",
        _world_size,
    ),
    Variable(
        "CUDA_VISIBLE_DEVICES",
        "other tools",
        "The GPUs this process may see (only quoted in an error when none is available).",
        None,
    ),
    Variable(
        "HF_ENDPOINT",
        "other tools",
        "The Hugging Face Hub's address, probed before downloading models.",
        "https://huggingface.co",
    ),
    Variable(
        "HF_HUB_OFFLINE", "other tools", "1/true/yes/on: never reach the Hub (downloads fail at once).", "0", _flag
    ),
    Variable(
        "HF_HUB_CACHE", "other tools", "The Hugging Face hub cache.", None, _hf_path, shown_default="`$HF_HOME/hub`"
    ),
    Variable(
        "HUGGINGFACE_HUB_CACHE", "other tools", "Older name of HF_HUB_CACHE, used when that is unset.", None, _hf_path
    ),
    Variable(
        "HF_HOME",
        "other tools",
        "Hugging Face's home folder (the hub cache is its `hub/`).",
        None,
        _hf_path,
        shown_default="`$XDG_CACHE_HOME/huggingface`",
    ),
    Variable(
        "XDG_CACHE_HOME", "other tools", "The user's cache folder, under which HF_HOME defaults.", "~/.cache", _hf_path
    ),
    Variable(
        "HF_TOKEN",
        "other tools",
        "The Hugging Face token (read by huggingface_hub, not idbench: `idbench publish`, the Space's queue).",
        None,
        secret=True,
    ),
)
BY_NAME: dict[str, Variable] = {variable.name: variable for variable in VARIABLES}

# The names other modules spell out (messages, docs); the settings are read through the functions below.
HOME, CACHE, DATASETS_CACHE, MODELS = "IDBENCH_HOME", "IDBENCH_CACHE", "IDBENCH_DATASETS_CACHE", "IDBENCH_MODELS"
JUDGE_URL, JUDGE_MODEL, JUDGE_REVISION, JUDGE_API_KEY = (
    "IDBENCH_JUDGE_URL",
    "IDBENCH_JUDGE_MODEL",
    "IDBENCH_JUDGE_REVISION",
    "IDBENCH_JUDGE_API_KEY",
)
JUDGE_CACHE_KEY = "IDBENCH_JUDGE_CACHE_KEY"
MAX_UNPACKED_BYTES, MAX_ZIP_MEMBERS, MAX_COMPRESSION_RATIO = (
    "IDBENCH_MAX_UNPACKED_BYTES",
    "IDBENCH_MAX_ZIP_MEMBERS",
    "IDBENCH_MAX_COMPRESSION_RATIO",
)
RATE_LIMIT, ADMIN_TOKEN, TRUSTED_PROXIES = "IDBENCH_SUBMIT_RATE_LIMIT", "IDBENCH_ADMIN_TOKEN", "IDBENCH_TRUSTED_PROXIES"
SUBMIT_DEADLINE_S, SUBMIT_MAX_PIXELS = "IDBENCH_SUBMIT_DEADLINE_S", "IDBENCH_SUBMIT_MAX_PIXELS"
HUB_REQUESTS, HUB_RESULTS, HUB_REFRESH_S, HUB_STAND_IN = (
    "IDBENCH_HUB_REQUESTS",
    "IDBENCH_HUB_RESULTS",
    "IDBENCH_HUB_REFRESH_S",
    "IDBENCH_HUB_STAND_IN",
)
BENCHMARK_REPOS, DATA_DIR, SPACE = "IDBENCH_BENCHMARK_REPOS", "IDBENCH_DATA_DIR", "SPACE_ID"


# --- reading ------------------------------------------------------------------------------------------


def _raw(name: str, environ: Mapping[str, str] | None) -> str | None:
    """The variable's text, None when unset or blank (an empty variable means its default)."""
    text = (os.environ if environ is None else environ).get(name)
    return text.strip() if text is not None and text.strip() else None


def _shown_value(text: str, limit: int = 80) -> str:
    """``repr(text)``, cut to ``limit`` characters with the length said (a 5,000-character value is one line)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def get(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """The typed value of the variable ``name`` now (``environ``: another mapping, for tests).

    A folder variable set to blanks is refused (``IDBENCH_HOME=""``, often an unset shell variable
    expanded, would otherwise quietly mean the default folder); other blank variables mean their default.
    """
    variable = BY_NAME[name]
    text = _raw(name, environ)
    if text is None and variable.parse is _path and (os.environ if environ is None else environ).get(name) is not None:
        default = f"the default {variable.default}" if variable.default else "no folder"
        raise SettingError(f"{name} is set but empty: give a folder, or unset it for {default}")
    if text is None:
        text = variable.default
    if text is None:
        return None
    try:
        return variable.parse(text)
    except ValueError as error:
        shown = "(a secret, not shown)" if variable.secret else _shown_value(text)
        raise SettingError(f"{name}={shown}: {error}") from None


def is_set(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``name`` is set to something other than blanks (its default is then not used)."""
    return _raw(name, environ) is not None


def home() -> Path:
    return get(HOME)


def cache_root() -> Path:
    return get(CACHE)


def features_cache_dir() -> Path:
    """``$IDBENCH_CACHE/features``: the feature cache of scoring runs."""
    return cache_root() / "features"


def judge_cache_dir() -> Path:
    """``$IDBENCH_CACHE/judge``: the judge's answer cache."""
    return cache_root() / "judge"


def datasets_cache_dir() -> Path:
    return get(DATASETS_CACHE)


def models_dir() -> Path:
    return get(MODELS)


def judge_url() -> str:
    return get(JUDGE_URL) or ""


def judge_model() -> str:
    return get(JUDGE_MODEL) or ""


def judge_revision() -> str | None:
    return get(JUDGE_REVISION)


def judge_cache_key() -> str | None:
    """``$IDBENCH_JUDGE_CACHE_KEY``: the key that signs the judge's cached answers, None when unset (the
    answer cache then keeps a random one in the home: ``idbench.evaluate_pkg.judge.cache.cache_key``)."""
    return get(JUDGE_CACHE_KEY)


def judge_configured() -> bool:
    """Whether the environment names a judge at all (its URL or its model)."""
    return bool(judge_url() or judge_model())


def api_key(variable: str = JUDGE_API_KEY) -> str | None:
    """The secret in ``variable`` (any name: ``JudgeConfig.api_key_env`` may name another), None when unset.

    The caller wraps it at once (the judge client's ``_Secret``) so that it never reaches a repr or a log.
    """
    text = os.environ.get(variable)
    return text if text else None


# --- judge URLs as recorded and shown ---------------------------------------------------------------
# The judge's key belongs in $IDBENCH_JUDGE_API_KEY, but some gateways take it in the URL, and a URL is
# written into results (aggregates.json, shard records), logs, the leaderboard and `idbench env`: a key
# there is a key published. So a URL is only ever shown through redact_url.

REDACTED = "***"
# How keys of common services begin (OpenAI sk-, Hugging Face hf_, GitHub, GitLab, Slack, AWS, Google, a JWT).
_KEY_PREFIX = re.compile(r"(sk|hf|ghp|gho|ghu|ghs|github_pat|glpat|xox[abeprs])[-_]|AKIA|AIza|eyJ")
# A run of a key's alphabet (hex, base64, base64url) long enough to be a random token, not a word.
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_+-]{24,}")


def looks_like_a_credential(segment: str) -> bool:
    """Whether one path segment (percent-decoded) may be a credential: it begins like a known key
    (``sk-``, ``hf_``...), holds a ``name=value`` pair (``key=``, ``token=``...), or holds a run of 24 or
    more letters, digits, ``-``, ``_`` or ``+`` mixing letters and digits (hex and base64 keys, UUIDs).
    It errs on the side of masking: a long slug such as a dated model name is masked too, which costs a
    readable path in a record, where the other error would cost a key."""
    if _KEY_PREFIX.match(segment) or "=" in segment:
        return True
    return any(any(c.isdigit() for c in run) and any(c.isalpha() for c in run) for run in _TOKEN_RUN.findall(segment))


def redact_url(url: str) -> str:
    """``url`` as it may be recorded or shown: scheme, host, port and path, with every path segment that
    :func:`looks_like_a_credential` replaced by ``***``. A user part (``user:password@``) is dropped; a
    query or a fragment, which a judge URL may not have (JudgeConfig refuses them), shows as ``?***`` or
    ``#***`` so a reader sees that one was there. Pure, and never raises: what cannot be parsed is ``***``."""
    from urllib.parse import unquote, urlsplit, urlunsplit

    try:
        parts = urlsplit(str(url).strip())
    except ValueError:  # an unbalanced IPv6 bracket, say
        return REDACTED
    host_and_port = parts.netloc.rpartition("@")[2]
    path = "/".join(REDACTED if looks_like_a_credential(unquote(s)) else s for s in parts.path.split("/"))
    query, fragment = (REDACTED if part else "" for part in (parts.query, parts.fragment))
    return urlunsplit((parts.scheme, host_and_port, path, query, fragment))


def redact_urls(text: str) -> str:
    """A list of URLs (comma- or space-separated, as $IDBENCH_JUDGE_URL takes several servers), each redacted."""
    return ", ".join(redact_url(part) for part in re.split(r"[,\s]+", text) if part)


def zip_limit(name: str) -> int | float:
    """One of the zip bounds (MAX_UNPACKED_BYTES, MAX_ZIP_MEMBERS, MAX_COMPRESSION_RATIO)."""
    assert name in (MAX_UNPACKED_BYTES, MAX_ZIP_MEMBERS, MAX_COMPRESSION_RATIO), name
    return get(name)


def submit_rate_limit() -> tuple[int, float]:
    """(count, seconds) of ``$IDBENCH_SUBMIT_RATE_LIMIT``."""
    return get(RATE_LIMIT)


def submit_deadline_s() -> float:
    """``$IDBENCH_SUBMIT_DEADLINE_S``: seconds one upload's validation may run in the app."""
    return get(SUBMIT_DEADLINE_S)


def submit_max_pixels() -> int:
    """``$IDBENCH_SUBMIT_MAX_PIXELS``: the pixels one upload to the app may hold, summed over its images."""
    return get(SUBMIT_MAX_PIXELS)


def admin_token() -> str:
    return get(ADMIN_TOKEN) or ""


def trusted_proxies(environ: Mapping[str, str] | None = None) -> int:
    return get(TRUSTED_PROXIES, environ)


def hub_repos_text() -> tuple[str, str]:
    """The requests and results repos as set ('' for unset); checking that both or neither are set is the app's."""
    return get(HUB_REQUESTS) or "", get(HUB_RESULTS) or ""


def hub_refresh_s() -> float:
    return get(HUB_REFRESH_S)


def hub_stand_in() -> Path | None:
    return get(HUB_STAND_IN)


def benchmark_repos() -> dict[str, tuple[str, str | None]]:
    """``$IDBENCH_BENCHMARK_REPOS`` as {benchmark: (dataset repo, revision or None)}."""
    return get(BENCHMARK_REPOS) or {}


def data_dir() -> Path | None:
    return get(DATA_DIR)


def on_a_space() -> bool:
    return is_set(SPACE)


def world_size() -> int:
    return get("WORLD_SIZE")


def cuda_visible_devices() -> str | None:
    """As set, blank included: an empty CUDA_VISIBLE_DEVICES means no GPU, not unset."""
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def hf_endpoint() -> str:
    return get("HF_ENDPOINT")


def hf_hub_offline() -> bool:
    return get("HF_HUB_OFFLINE")


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, resolved now as huggingface_hub resolves it (it reads its variables
    once, when first imported; reading them per call lets a test or a user point it elsewhere)."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if is_set(name):
            return get(name)
    hf_home = get("HF_HOME")
    return (hf_home if hf_home is not None else get("XDG_CACHE_HOME") / "huggingface") / "hub"


# --- documents: the README's table and `idbench env` ---------------------------------------------------


def markdown_table() -> str:
    """The README's table of environment variables (tests/test_settings.py checks that it is this)."""
    lines = ["| Variable | Default | Meaning |", "| --- | --- | --- |"]
    group = None
    for variable in VARIABLES:
        if variable.group != group:
            group = variable.group
            lines.append(f"| **{group}** | | |")
        secret = " Secret: `idbench env` shows only whether it is set." if variable.secret else ""
        lines.append(f"| `{variable.name}` | {variable.documented_default()} | {variable.meaning}{secret} |")
    return "\n".join(lines) + "\n"


def _shown(variable: Variable) -> str:
    where = "env" if is_set(variable.name) else "default"
    if variable.secret:
        return "set (hidden)" if where == "env" else "not set"
    if variable.name == "CUDA_VISIBLE_DEVICES" and cuda_visible_devices() is not None:
        return f"{cuda_visible_devices()!r} (env)"  # blank is a setting here: no GPU
    try:
        value = get(variable.name)
    except SettingError as error:
        return f"INVALID ({error})"
    if value is None:
        return "not set"
    if variable.name == RATE_LIMIT:
        value = f"{value[0]}/{value[1]:g}"
    if variable.name == JUDGE_URL:
        value = redact_urls(value)  # a key in the URL (user:password@, ?api-key=, a path token) is not printed
    return f"{value} ({where})"


_LIBRARIES = (
    "torch",
    "torchvision",
    "transformers",
    "diffusers",
    "accelerate",
    "datasets",
    "huggingface_hub",
    "streamlit",
    "open_clip",
    "insightface",
    "numpy",
    "PIL",
)


def _library_version(name: str) -> str:
    import importlib

    try:
        module = importlib.import_module(name)
    except Exception:  # not installed, or broken: either way, what a bug report needs to know
        return "not installed"
    return str(getattr(module, "__version__", "installed (no version)"))


def report() -> str:
    """What ``idbench env`` prints for a bug report: versions, the accelerator, and every setting with
    where its value comes from (``env`` or ``default``); secrets show only whether they are set."""
    import platform
    import sys
    from importlib.metadata import PackageNotFoundError, version

    try:
        idbench_version = version("idbench")
    except PackageNotFoundError:
        idbench_version = "not installed (run from a source tree)"
    lines = [
        f"idbench: {idbench_version}",
        f"python: {sys.version.split()[0]} ({sys.executable})",
        f"platform: {platform.platform()}",
    ]
    lines += [f"{name}: {_library_version(name)}" for name in _LIBRARIES]
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        if torch.cuda.is_available():
            lines.append(
                f"cuda: {torch.version.cuda}, {torch.cuda.device_count()} device(s): {torch.cuda.get_device_name(0)}"
            )
        else:
            lines.append("cuda: not available")
    lines.append("")
    lines.append("settings (docs: README, 'Environment variables'):")
    width = max(len(variable.name) for variable in VARIABLES)
    lines += [f"  {variable.name:<{width}}  {_shown(variable)}" for variable in VARIABLES]
    # The folders that several variables decide together, as the code resolves them.
    for what, resolve in (
        ("features cache", features_cache_dir),
        ("judge cache", judge_cache_dir),
        ("hub cache", hub_cache_dir),
    ):
        try:
            lines.append(f"  {what:<{width}}  {resolve()}")
        except SettingError as error:
            lines.append(f"  {what:<{width}}  INVALID ({error})")
    return "\n".join(lines)


def environment_copy() -> dict[str, str]:
    """This process's whole environment, for a child process that must see the same settings
    (leaderboard/admission.py's validation processes)."""
    return dict(os.environ)


def adopt_environment(environment: Mapping[str, str]) -> None:
    """Make this (child) process's environment exactly ``environment`` (from :func:`environment_copy`)."""
    os.environ.clear()
    os.environ.update(environment)

"""``submission.json``: the model's name and how its images were made, next to the images.

A JSON object::

    {"benchmark": "identity-collapse",      the benchmark's name (must be the data's)
     "model": "MyModel-v2",                 required, not blank
     "task": "reference",                   optional: reference (default), text-to-image or retrieval
     "family": "",                          the model family the leaderboard groups by
     "link": "https://...",                 paper / code / weights: http(s) or empty
     "license": "apache-2.0",               the licence of the generated images
     "generation": {"steps": 28, ...},      generation settings, free-form
     "notes": "",                           free text
     "idbench_version": "0.1.0"}            the version that wrote the template

``benchmark`` and ``model`` are required; a key outside ``METADATA_FIELDS`` is refused, so a typo such
as ``"modle"`` is reported instead of dropped. ``task`` must be one of the benchmark's ``spec.tasks``.
The file is at most ``MAX_METADATA_BYTES``, nested at most ``MAX_JSON_DEPTH`` deep (counted before it
is parsed), and the text fields the leaderboard shows are bounded by ``MAX_TEXT_CHARS`` and checked
for impersonation (:func:`metadata_text_problems`, also used by the leaderboard for its overrides).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from idbench.evaluate_pkg.data import BenchmarkData
from idbench.names import name_problems
from idbench.untrusted import json_depth  # one depth count, without parsing, for every untrusted JSON

from .problems import Problem

METADATA_NAME = "submission.json"
# metadata key -> (type, what it holds); "benchmark" and "model" are required, the rest optional.
METADATA_FIELDS: dict[str, tuple[type, str]] = {
    "benchmark": (str, "the benchmark's name"),
    "model": (str, "the model's name"),
    "task": (
        str,
        "what the submission holds: reference (default), text-to-image or retrieval, as the benchmark offers",
    ),
    "family": (str, "the model family the leaderboard groups by (e.g. 'FLUX.1 Kontext', 'OmniGen'), or empty"),
    "link": (str, "a link to the paper, code or weights (http(s), or empty)"),
    "license": (str, "the license of the generated images"),
    "generation": (dict, "generation settings (steps, guidance, resolution, sampler, ...)"),
    "notes": (str, "free text"),
    "idbench_version": (str, "the idbench version that wrote the template"),
}
REQUIRED_METADATA = ("benchmark", "model")
# Free-text fields the leaderboard shows are bounded, so a page stays readable and a row stays small.
MAX_TEXT_CHARS = {"model": 100, "family": 100, "link": 500, "license": 100, "notes": 2000}
# submission.json is read whole; this bound keeps a hostile one from filling memory.
MAX_METADATA_BYTES = 1024 * 1024
# submission.json may nest objects and arrays this deep (the template nests 2); checked before parsing.
MAX_JSON_DEPTH = 20


def _read_metadata(folder: Path, data: BenchmarkData, problems: list[Problem], *, require_model: bool = True) -> dict:
    def problem(message: str) -> None:
        problems.append(Problem(None, None, METADATA_NAME, message))

    path = folder / METADATA_NAME
    if not path.is_file():
        problem(f"missing; it holds the model name and generation settings ({', '.join(METADATA_FIELDS)})")
        return {}
    if path.stat().st_size > MAX_METADATA_BYTES:
        problem(f"{path.stat().st_size} bytes, over the {MAX_METADATA_BYTES}-byte limit")
        return {}
    try:
        text = path.read_text(encoding="utf-8")
        depth = json_depth(text)
        if depth > MAX_JSON_DEPTH:
            problem(f"nested {depth} levels deep, over the limit of {MAX_JSON_DEPTH}")
            return {}
        metadata = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        problem(f"not valid JSON ({err})")
        return {}
    except RecursionError:  # cannot happen below MAX_JSON_DEPTH; the last guard
        problem("nested too deep to be read")
        return {}
    if not isinstance(metadata, dict):
        problem(f"expected a JSON object, found {type(metadata).__name__}")
        return {}

    for key in sorted(metadata.keys() - METADATA_FIELDS.keys()):
        problem(f"unknown field {key!r}; the fields are {', '.join(METADATA_FIELDS)}")
    for key, (kind, description) in METADATA_FIELDS.items():
        if key not in metadata:
            if key in REQUIRED_METADATA:
                problem(f"missing field {key!r} ({description})")
        elif not isinstance(metadata[key], kind):
            expected = "a JSON object" if kind is dict else "a string"
            problem(f"field {key!r} should be {expected}, found {metadata[key]!r}")
    if require_model and isinstance(metadata.get("model"), str) and not metadata["model"].strip():
        problem("field 'model' is empty; fill in the model's name")
    benchmark = metadata.get("benchmark")
    if isinstance(benchmark, str) and benchmark != data.name:
        problem(f"field 'benchmark' is {benchmark!r}, but the data is {data.name!r}")
    task = metadata.get("task")
    if isinstance(task, str) and task not in data.spec.tasks:
        problem(f"field 'task' is {task!r}; {data.name} offers {', '.join(data.spec.tasks)}")
    problems.extend(Problem(None, None, METADATA_NAME, message) for message in metadata_text_problems(metadata))
    return metadata


def metadata_text_problems(metadata: Mapping[str, Any]) -> list[str]:
    """What is wrong with the free-text fields of ``metadata`` (lengths, the link's scheme); [] if fine.

    Shared by the validator and by the leaderboard, which lets a submitter override the model name,
    family and link: the same limits hold wherever the text comes from.
    """
    out = []
    for key, limit in MAX_TEXT_CHARS.items():
        value = metadata.get(key)
        if isinstance(value, str) and len(value) > limit:
            out.append(f"field {key!r} is {len(value)} characters long, over the limit of {limit}")
    link = metadata.get("link")
    # The leaderboard shows the link: only web links, never javascript: or file: URLs.
    if isinstance(link, str) and link and not re.fullmatch(r"https?://[^\s<>\"']+", link):
        problem = f"field 'link' should be an http(s) URL without spaces or quotes, or empty; found {link!r}"
        out.append(problem)
    # Names that could impersonate (control, bidi, zero-width or mixed-script characters) and links with
    # userinfo: the same rules as the leaderboard's queue (idbench.names), one line per field.
    for key in ("model", "family", "link"):
        value = metadata.get(key)
        if isinstance(value, str) and value and not any(p.startswith(f"field {key!r}") for p in out):
            out += name_problems(key, value)
    return out

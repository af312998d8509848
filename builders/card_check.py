"""An offline check of a dataset card's YAML front matter, run by ``idbench publish`` before any upload.

huggingface_hub's own card validation (``RepoCard.validate``) posts the card to the Hub's
``/api/validate-yaml`` endpoint, so it needs the network and a round trip per card; what it offers
offline is the parsing (``DatasetCard(text)``: the YAML must parse to a mapping). So the parse is
huggingface_hub's and the schema is ours: the fields our cards write, with the types the Hub's dataset
card metadata takes (``DatasetCardData``), the license an identifier of the Hub's list
(https://huggingface.co/docs/hub/repositories-licenses), ``license: other`` with a ``license_name``
and a ``license_link`` that reaches a file of the folder (the Hub asks for the license text in a
LICENSE file then) or a URL, and a size bucket the Hub knows. The ``configs``/``data_files`` globs
are checked by :mod:`idbench.builders.publish` against the shards themselves.

Every problem is one :class:`CardError` naming the card and the field.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

from idbench.errors import IdbenchError

# The Hub's license identifiers ("License identifier (to use in repo card)"), from
# https://huggingface.co/docs/hub/repositories-licenses.
HUB_LICENSES = frozenset(
    """
apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0 bigcode-openrail-m
afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause bsd-3-clause-clear c-uda cc cc0-1.0 cc-by-2.0
cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0 cc-by-nc-4.0 cc-by-nd-4.0
cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0 cc-by-nc-sa-4.0 cdla-sharing-1.0
cdla-permissive-1.0 cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0 epl-2.0 etalab-2.0 eupl-1.1 eupl-1.2 agpl-3.0
gfdl gpl gpl-2.0 gpl-3.0 lgpl lgpl-2.1 lgpl-3.0 isc h-research intel-research lppl-1.3c ms-pl apple-ascl
apple-amlr mpl-2.0 odc-by odbl openmdw-1.0 openrail++ osl-3.0 postgresql ofl-1.1 ncsa unlicense zlib pddl
lgpl-lr deepfloyd-if-license fair-noncommercial-research-license llama2 llama3 llama3.1 llama3.2 llama3.3
llama4 grok2-community gemma unknown other
""".split()
)

# The Hub's size_categories buckets (the same as idbench.builders.card's _SIZE_BUCKETS, plus the top one).
SIZE_CATEGORIES = frozenset(
    "n<1K 1K<n<10K 10K<n<100K 100K<n<1M 1M<n<10M 10M<n<100M 100M<n<1B 1B<n<10B 10B<n<100B 100B<n<1T n>1T".split()
)
# ISO 639-1/639-3 codes, optionally with a region or script (en, yue, pt-BR, zh-Hant).
_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
_URL = re.compile(r"^https?://[^\s/]+")

REQUIRED = ("pretty_name", "license", "language", "configs")


class CardError(IdbenchError):
    """The card's front matter is not what the Hub (or `load_dataset`) takes; the message names the field."""


def check_card_metadata(meta: dict[str, Any], folder: Path, card: str = "README.md") -> list[str]:
    """Check a parsed front matter against the schema above; return the folder files it links (LICENSE).

    ``folder`` is the folder to publish: a ``license_link`` that is a path must name a file in it (that
    file is then part of the upload). Raises :class:`CardError` at the first problem, naming the field.
    """
    where = f"{Path(folder) / card}: front matter"
    for key in REQUIRED:
        if key not in meta or meta[key] in (None, "", []):
            raise CardError(f"{where}: `{key}` is missing")
    if not isinstance(meta["pretty_name"], str):
        raise CardError(f"{where}: `pretty_name` must be a string, got {meta['pretty_name']!r}")

    licenses = _strings(meta["license"], "license", where)
    unknown = [lic for lic in licenses if lic not in HUB_LICENSES]
    if unknown:
        raise CardError(
            f"{where}: `license` {', '.join(map(repr, unknown))} is not a Hub license identifier "
            "(https://huggingface.co/docs/hub/repositories-licenses); use `other` with `license_name` and `license_link`"
        )
    linked: list[str] = []
    if "other" in licenses:
        for key in ("license_name", "license_link"):
            if not isinstance(meta.get(key), str) or not meta[key].strip():
                raise CardError(f"{where}: `license: other` needs `{key}` (a string)")
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", meta["license_name"]):
            raise CardError(
                f"{where}: `license_name` {meta['license_name']!r} must be lowercase letters, digits, '-' and '.'"
            )
        linked += _license_link(meta["license_link"], Path(folder), where)

    for code in _strings(meta["language"], "language", where):
        if not _LANGUAGE.match(code):
            raise CardError(f"{where}: `language` {code!r} is not a language code (ISO 639-1 or 639-3, e.g. en)")
    for key in ("task_categories", "tags"):
        if key in meta:
            _strings(meta[key], key, where)
    if "size_categories" in meta:
        for bucket in _strings(meta["size_categories"], "size_categories", where):
            if bucket not in SIZE_CATEGORIES:
                raise CardError(
                    f"{where}: `size_categories` {bucket!r} is not one of the Hub's ({', '.join(sorted(SIZE_CATEGORIES))})"
                )

    configs = meta["configs"]
    if not isinstance(configs, list):
        raise CardError(f"{where}: `configs` must be a list of {{config_name, data_files}} entries")
    names = []
    for index, entry in enumerate(configs):
        if not isinstance(entry, dict) or not isinstance(entry.get("config_name"), str) or not entry["config_name"]:
            raise CardError(f"{where}: `configs[{index}].config_name` is missing or not a string")
        if "default" in entry and not isinstance(entry["default"], bool):
            raise CardError(f"{where}: `configs[{index}].default` must be true or false, got {entry['default']!r}")
        names.append(entry["config_name"])
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise CardError(f"{where}: `configs` declares {', '.join(map(repr, duplicates))} more than once")
    if sum(bool(entry.get("default")) for entry in configs) > 1:
        raise CardError(f"{where}: `configs`: more than one config is marked `default: true`")
    return linked


def _strings(value: Any, key: str, where: str) -> list[str]:
    """A field that takes a string or a list of strings, as a list."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) and v for v in values):
        raise CardError(f"{where}: `{key}` must be a string or a list of strings, got {value!r}")
    return values


def _license_link(link: str, folder: Path, where: str) -> list[str]:
    """The folder file a relative ``license_link`` names (to upload with the card); [] for a URL."""
    if _URL.match(link):
        return []
    path = PurePosixPath(link.split("#", 1)[0])
    if not str(path) or path.is_absolute() or ".." in path.parts or "\\" in link:
        raise CardError(f"{where}: `license_link` {link!r} must be a URL or a file path inside the folder")
    if not (folder / path).is_file():
        raise CardError(f"{where}: `license_link` {link!r} names no file in {folder}")
    return [path.as_posix()]

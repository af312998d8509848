"""What a result row keeps of its judge and of its copy check (summary keys ``judge`` and ``copies``).

Pure functions over plain dicts, shared by the store (``queue.finish``), the Hub records and the
query layer. No scorer import: a Hub-backed Space does not install the scorer's dependencies.

- :func:`judge_record`: ``summary["judge"]`` minus its run statistics (call counts and timings change
  from run to run and say nothing about who judged), or None for an unjudged run.
- :func:`judge_key`: the judge's identity, rows with different keys are never ranked together on a
  judged metric. The scorer writes ``summary["judge"]["key"]``; a summary without one (scored before
  the judge card existed) gets :func:`fallback_key`: the model and the decoding settings that change
  answers, so two old rows share a key only when those agree.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from idbench.settings import redact_url

# Settings that change what the judge answers (concurrency does not): part of a fallback key.
DECODING_SETTINGS = ("temperature", "max_tokens", "max_image_side", "structured")
KEPT = ("model", "base_url", "settings", "key", "card", "calibrated", "incomplete")
MAX_JUDGE_BYTES = 64 * 1024  # a judge record is small (a card of a few control kinds): a bigger one is refused
MAX_COPIES_BYTES = 16 * 1024


def judge_record(judge: Any) -> dict[str, Any] | None:
    """The judge as the store keeps it: model, endpoint, settings, key, card, calibrated, incomplete. The
    endpoint as ``settings.redact_url`` shows it, whatever the summary holds (one scored before URLs were
    redacted may carry a key in its path)."""
    if not isinstance(judge, Mapping) or not judge.get("model"):
        return None
    out = {k: judge[k] for k in KEPT if k in judge}
    if isinstance(out.get("base_url"), str):
        out["base_url"] = redact_url(out["base_url"])
    out["key"] = judge_key(judge)
    return out


def fallback_key(judge: Mapping[str, Any]) -> str:
    """``"<model> temperature=0.0 max_tokens=512 ..."`` from the model and its decoding settings."""
    settings = judge.get("settings") or {}
    parts = [
        f"{name}={settings[name]}" for name in DECODING_SETTINGS if isinstance(settings, Mapping) and name in settings
    ]
    return " ".join([str(judge["model"]), *parts])


def judge_key(judge: Any) -> str | None:
    """The judge's key: the scorer's ``key`` when recorded, else :func:`fallback_key`; None without a judge."""
    if not isinstance(judge, Mapping) or not judge.get("model"):
        return None
    key = judge.get("key")
    return key if isinstance(key, str) and key else fallback_key(judge)


def judge_label(judge: Mapping[str, Any] | None) -> str:
    """How a page names a judge: ``"Qwen/Qwen2.5-VL-7B-Instruct (temperature 0.0, max_tokens 512)"``."""
    if not judge:
        return ""
    settings = judge.get("settings") or {}
    shown = [
        f"{name} {settings[name]}" for name in DECODING_SETTINGS if isinstance(settings, Mapping) and name in settings
    ]
    return f"{judge['model']} ({', '.join(shown)})" if shown else str(judge["model"])


def copies_mark(copies: Mapping[str, Any] | None) -> str:
    """The copy check in words: ``"copies references: 62 % of images"`` when marked, the share when
    not, ``"not checked"`` when the result has no copy check (scored before it existed)."""
    if not copies:
        return "not checked"
    share = copies.get("share")
    text = "n/a" if share is None else f"{100 * float(share):.0f} % of images"
    return f"copies references: {text}" if copies.get("marked") else f"copies {text} (below the mark)"


def judge_columns(judge: Any, copies: Any) -> tuple[str | None, str | None, str | None]:
    """``(judge_json, judge_key, copies_json)`` of a result: the judge without its run statistics and
    its key (NULL for an unjudged run), and the copy check (NULL when the scorer made none)."""
    record = judge_record(judge)
    return (
        None if record is None else json.dumps(record, sort_keys=True, default=str),
        judge_key(record),
        json.dumps(copies, sort_keys=True, default=str) if isinstance(copies, dict) else None,
    )


# --- validation of records read from a Hub repo (anyone's text) ------------------------------------


def _size(value: Any) -> int:
    return len(json.dumps(value, default=str).encode("utf-8"))


def check_judge(value: Any) -> str | None:
    """Why a Hub record's ``judge`` field cannot be loaded, or None when it can (absent is fine)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return "field 'judge' is not an object"
    if _size(value) > MAX_JUDGE_BYTES:
        return f"field 'judge' is larger than {MAX_JUDGE_BYTES} bytes"
    if not isinstance(value.get("model"), str) or not value["model"] or len(value["model"]) > 300:
        return "field 'judge.model' is missing or not a short string"
    for key, kind in (("key", str), ("base_url", str), ("settings", dict), ("card", dict), ("incomplete", dict)):
        if value.get(key) is not None and not isinstance(value[key], kind):
            return f"field 'judge.{key}' is not a {kind.__name__}"
    if value.get("calibrated") is not None and not isinstance(value["calibrated"], bool):
        return "field 'judge.calibrated' is not true or false"
    for metric, rate in (value.get("incomplete") or {}).items():
        if not isinstance(rate, (int, float)) or isinstance(rate, bool):
            return f"field 'judge.incomplete.{metric[:40]}' is not a number"
    return None


def check_copies(value: Any) -> str | None:
    """Why a Hub record's ``copies`` field cannot be loaded, or None when it can (absent is fine)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return "field 'copies' is not an object"
    if _size(value) > MAX_COPIES_BYTES:
        return f"field 'copies' is larger than {MAX_COPIES_BYTES} bytes"
    for key in ("images", "flagged"):
        if not isinstance(value.get(key), int) or isinstance(value[key], bool) or value[key] < 0:
            return f"field 'copies.{key}' is not a count"
    share = value.get("share")
    if share is not None and (not isinstance(share, (int, float)) or isinstance(share, bool) or not 0 <= share <= 1):
        return "field 'copies.share' is not a share in [0, 1]"
    if not isinstance(value.get("marked"), bool):
        return "field 'copies.marked' is not true or false"
    return None

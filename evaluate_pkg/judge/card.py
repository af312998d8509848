"""The judge card, the judge's identity key and the incomplete-metric marks of a scoring run.

``summary["judge"]`` (aggregates.json) holds, besides the model, endpoint, settings and statistics
of the submission's own judging (``runner.judge_summary``, taken before the controls):

- ``key``: :func:`judge_key`, who judged: model + revision (or endpoint host) + decoding settings.
  Rows with different keys are never ranked together on a judged metric.
- ``card``: :func:`card_from_run`, how the judge did on the controls of
  :mod:`idbench.evaluate_pkg.judge.controls`:
  ``controls`` per ``<check>.<kind>``: ``n`` (pairs or questions), ``correct``, ``failed``,
  ``accuracy`` = correct / n (a failed answer is not correct), ``expected`` (in words);
  ``accuracy``, the mean of the kinds' accuracies (each kind weighs the same); ``yes_rate`` (share of the answered controls the judge affirmed:
  "yes" to a question, "same subject" for a pair: exact / near_exact, a rating >= 3) beside
  ``expected_yes_rate`` (what a truthful judge's would be); ``failure_rate`` (failed / n);
  ``repeat``: ``n`` control requests asked again as new samples and ``agreement``, the share of
  those (both answered) with identical answers; ``floor`` (:data:`ACCURACY_FLOOR`); ``calibrated``
  and ``reason``; ``requests`` (answers, cached); ``evidence``: one small record per control.
- ``calibrated``: the card's verdict (True when no judged metric had controls to ask: nothing to
  disprove); ``reason``: why not.
- ``incomplete``: {judged metric: mean per-image judge-failure rate} for every judged metric above
  :data:`INCOMPLETE_ABOVE`.

A judge is **uncalibrated** when its accuracy on the controls is below :data:`ACCURACY_FLOOR`, or when
it gets no control of some kind right (a judge that fails every blank picture is lenient however well
it does on copies). The report then marks every judged metric "uncalibrated judge"; the numbers are
kept and shown, but are not to be ranked by default.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from idbench.builders.spec import FLOORED_SUFFIX
from idbench.evaluate_pkg.judge.controls import ControlRun, same_answer

#: A judge answering fewer controls than this right is uncalibrated.
ACCURACY_FLOOR = 0.8
#: A judged metric whose judge failed on more than this share of its images' questions is incomplete.
INCOMPLETE_ABOVE = 0.05
#: A leaderboard worker does not record a run whose judge failed on more than this share of the
#: submission's questions, or was found unreachable: the judged columns would describe the judge's
#: outage, not the model. The job goes back to the queue as a fault of the worker.
UNAVAILABLE_ABOVE = 0.5
#: The settings that make two judges' answers different, in the key's order.
KEY_SETTINGS = ("temperature", "max_tokens", "max_image_side", "structured")


def judge_key(judge: Mapping[str, Any] | None) -> str | None:
    """A stable identity of the judge from its ``summary["judge"]`` record: ``model@tag;settings``.

    The tag is the pinned ``revision`` when the record has one, else the endpoint's host (port, path
    and any credentials left out: the same server moved to another port is the same judge). The
    settings are :data:`KEY_SETTINGS`. A judge with no configuration (a scripted one) is its model
    name alone. Example: ``Qwen/Qwen2.5-VL-7B-Instruct@localhost;temperature=0.0;max_tokens=1024;
    max_image_side=768;structured=auto``.
    """
    if not judge:
        return None
    key = str(judge["model"])
    settings = judge.get("settings") or {}
    tag = settings.get("revision") or judge.get("revision")
    if not tag and judge.get("base_url"):
        tag = urlsplit(str(judge["base_url"])).hostname or ""
    if tag:
        key += f"@{tag}"
    parts = [f"{name}={settings[name]}" for name in KEY_SETTINGS if name in settings]
    return ";".join([key, *parts])


def card_from_run(run: ControlRun, floor: float = ACCURACY_FLOOR) -> dict[str, Any]:
    """The judge card of a control run (shape: the module docstring)."""
    controls: dict[str, dict[str, Any]] = {}
    for o in run.outcomes:
        entry = controls.setdefault(f"{o.check}.{o.kind}", {"n": 0, "correct": 0, "failed": 0, "expected": o.expected})
        entry["n"] += 1
        entry["correct"] += int(o.correct)
        entry["failed"] += int(o.failed)
        if entry["expected"] != o.expected:  # a VQA kind mixes yes and no questions
            entry["expected"] = "as built" if o.kind == "collage" else "reversed" if o.kind == "mirrored" else "mixed"
    for entry in controls.values():
        entry["accuracy"] = entry["correct"] / entry["n"] if entry["n"] else None
    n = len(run.outcomes)
    answered = [o for o in run.outcomes if not o.failed and o.says_yes is not None]
    known = [o for o in run.outcomes if o.expected_yes is not None]
    agree = [same_answer(a, b) for a, b in run.repeats]
    compared = [x for x in agree if x is not None]
    # The mean over kinds, each weighing the same: a blank picture asks every question of its prompt, and
    # pooled over questions a judge that always says "no" would pass on blanks alone.
    accuracy = sum(e["accuracy"] for e in controls.values()) / len(controls) if controls else None
    dead = sorted(kind for kind, entry in controls.items() if entry["n"] and not entry["correct"])
    problems = []
    if not n:
        problems.append("no control was asked")
    elif accuracy < floor:
        problems.append(f"control accuracy {accuracy:.3f} is below the floor {floor}")
    if dead:
        problems.append(f"no control right of kind {', '.join(dead)}")
    calibrated, reason = not problems, "; ".join(problems) or None
    return {
        "controls": controls,
        "accuracy": accuracy,
        "yes_rate": sum(o.says_yes for o in answered) / len(answered) if answered else None,
        "expected_yes_rate": sum(o.expected_yes for o in known) / len(known) if known else None,
        "failure_rate": sum(o.failed for o in run.outcomes) / n if n else 0.0,
        "repeat": {"n": len(run.repeats), "agreement": sum(compared) / len(compared) if compared else None},
        "floor": floor,
        "calibrated": calibrated,
        "reason": reason,
        "requests": {"answers": run.answers, "cached": run.cached},
        "evidence": _evidence(run),
    }


def _evidence(run: ControlRun) -> list[dict[str, Any]]:
    """One record per pair control; per VQA control picture, its questions' counts and answers."""
    out: list[dict[str, Any]] = []
    grouped: dict[tuple[str, str, str], dict[str, Any]] = {}
    for o in run.outcomes:
        if o.check != "attr_vqa":
            out.append(
                {
                    "control": f"{o.check}.{o.kind}",
                    "subject": o.subject,
                    "expected": o.expected,
                    "given": o.given,
                    "correct": o.correct,
                    **({"detail": o.detail} if o.failed else {}),
                }
            )
            continue
        record = grouped.get((o.check, o.kind, o.subject))
        if record is None:
            record = grouped[(o.check, o.kind, o.subject)] = {
                "control": f"{o.check}.{o.kind}",
                "subject": o.subject,
                "questions": 0,
                "correct": 0,
                "failed": 0,
                "given": Counter(),
            }
            out.append(record)
        record["questions"] += 1
        record["correct"] += int(o.correct)
        record["failed"] += int(o.failed)
        record["given"][o.given or "failed"] += 1
    for record in out:
        if isinstance(record.get("given"), Counter):
            record["given"] = dict(sorted(record["given"].items()))
    return out


def failure_rates(overall: Mapping[str, Mapping[str, Any]], judged: list[str]) -> dict[str, float]:
    """Judged metric -> the mean per-image judge-failure rate of its own ``<metric>.failure_rate``
    diagnostic, else of its family's (``attr_vqa.failure_rate`` for every ``attr_vqa*`` / ``igc*``); a
    copy-floored twin (``<metric>_floored``) has its metric's, whose answers it holds."""
    out = {}
    for metric in judged:
        if metric not in overall:
            continue
        stats = overall.get(f"{metric.removesuffix(FLOORED_SUFFIX)}.failure_rate") or overall.get(
            "attr_vqa.failure_rate" if metric.startswith(("attr_vqa", "igc")) else ""
        )
        if stats and stats.get("mean") is not None:
            out[metric] = float(stats["mean"])
    return out


def describe_judge(
    judge: Mapping[str, Any] | None, run: ControlRun | None, overall: Mapping[str, Mapping[str, Any]], judged: list[str]
) -> dict[str, Any] | None:
    """``summary["judge"]``: ``judge`` (runner.judge_summary) with ``key``, ``card``, ``calibrated``,
    ``reason`` and ``incomplete`` added; ``judged`` are the run's judged metrics."""
    if judge is None:
        return None
    out = dict(judge)
    out["key"] = judge_key(judge)
    card = card_from_run(run) if run is not None and run.outcomes else None
    out["card"] = card
    out["calibrated"] = card["calibrated"] if card else True
    out["reason"] = card["reason"] if card else None
    out["incomplete"] = {m: rate for m, rate in failure_rates(overall, judged).items() if rate > INCOMPLETE_ABOVE}
    out["incomplete_above"] = INCOMPLETE_ABOVE
    return out


def judge_unavailable(judge: Mapping[str, Any] | None) -> str | None:
    """Why a run's judge counts as unavailable (``summary["judge"]``: unreachable, or failing above
    :data:`UNAVAILABLE_ABOVE` of its answers), one line; None when it served, or no judge was asked."""
    stats = (judge or {}).get("stats") or {}
    if stats.get("unreachable"):
        return (
            f"the judge {judge.get('model')!r} was unreachable ({stats['unreachable']}); its answers were not recorded"
        )
    answers, failures = int(stats.get("answers") or 0), int(stats.get("failures") or 0)
    if answers and failures / answers > UNAVAILABLE_ABOVE:
        return (
            f"the judge {judge.get('model')!r} failed {failures} of {answers} answers ({failures / answers:.0%}), "
            f"over the {UNAVAILABLE_ABOVE:.0%} a leaderboard run accepts"
        )
    return None

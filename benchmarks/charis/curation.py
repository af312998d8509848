"""CHARIS's model stage of a build with ``--curate`` (after the shared image stages of
:mod:`idbench.curation.pipeline`): the VLM proposes 5-6-axis prompts per subject and a review export is
written for people, or the prompts of a reviewed export are taken as they are. Without a judge the
template prompts are kept and the stage is logged as skipped."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from idbench.benchmarks.charis.prompts import propose_charis_prompts, subject_inputs
from idbench.benchmarks.charis.review import export_review, import_review
from idbench.curation.pipeline import NO_JUDGE, Curation
from idbench.ekb import load_ekb


def curate_charis_prompts(
    subjects: Sequence[Mapping[str, Any]], template_prompts: Sequence[Mapping[str, Any]], run: Curation
) -> list[dict]:
    """The prompts of a reviewed export, or VLM proposals (with a review export), or the templates."""
    options, log = run.options, run.log
    if options.reviewed_prompts is not None:
        result = import_review(Path(options.reviewed_prompts))
        log.stages["charis_prompts"] = {
            "source": "reviewed export",
            **{k: v for k, v in result.as_dict().items() if k != "proposals"},
        }
        return [dict(p) for p in result.prompt_rows()]
    judge = run.judge
    if judge is None:
        log.stages["charis_prompts"] = NO_JUDGE + "; the template prompts are used"
        return [dict(p) for p in template_prompts]
    report = propose_charis_prompts(judge, subject_inputs(subjects), load_ekb(), max_attempts=options.max_attempts)
    images = {s["subject_id"]: s["image"]["bytes"] for s in subjects}
    log.stages["charis_prompts"] = {
        "source": "VLM proposals",
        "judge": judge.model,
        "proposals": len(report.proposals),
        "incomplete_subjects": [s.subject_id for s in report.incomplete],
        "requests": report.requests,
        "ask_calls": report.ask_calls,
    }
    log.files["charis_proposals.json"] = json.dumps(report.as_dict(), indent=2, ensure_ascii=False, default=str) + "\n"
    log.writers.append(lambda root: export_review(report.proposals, images, root / "review"))
    return [dict(p) for p in report.prompt_rows()]

"""CogCanvas's model stages of a build with ``--curate`` (after the shared image stages of
:mod:`idbench.curation.pipeline`): MLLM metadata for the references with the identity pool's audit, then
MLLM-written prompts checked by a verifier (paper 001, sections 3.3-3.4). The recipe calls them with the
build's :class:`~idbench.curation.pipeline.Curation`; without a judge each is logged as skipped."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from idbench.benchmarks.cogcanvas.metadata import demographic_balance, extract_metadata, merge_metadata, ref_inputs
from idbench.benchmarks.cogcanvas.prompt_synthesis import synthesize_prompts, tuple_from_record
from idbench.curation.pipeline import NO_JUDGE, Curation, judge_stats


def curate_cogcanvas_references(rows: Sequence[Mapping[str, Any]], run: Curation) -> list[dict]:
    """Reference rows with empty metadata filled by the MLLM (manifest values win); the identity audit.

    Without a judge the rows come back unchanged and the stage is logged as skipped. The audit of the
    identity pool runs either way (it needs no model).
    """
    out, log = [dict(r) for r in rows], run.log
    judge = run.judge
    if judge is None:
        log.stages["metadata"] = NO_JUDGE
    else:
        report = extract_metadata(judge, ref_inputs(out))
        merged = merge_metadata(out, report)
        out = [dict(r) for r in merged.rows]
        log.stages["metadata"] = {
            "judge": judge.model,
            "images": len(report.entries),
            "failed": [{"ref_id": e.ref_id, "error": e.error} for e in report.failed],
            "filled": len(merged.filled),
            "conflicts": len(merged.conflicts),
            "judge_stats": judge_stats(judge),
        }
        log.files["metadata.json"] = (
            json.dumps(
                {"extracted": report.as_dict(), "conflicts": [c.__dict__ for c in merged.conflicts]},
                indent=2,
                ensure_ascii=False,
                default=str,
            )
            + "\n"
        )
    audit = demographic_balance(out)
    log.stages["demographic_balance"] = {"flagged": [str(f) for f in audit.flagged]}
    log.files["demographic_balance.csv"] = audit.table.to_csv(index=False)
    log.files["demographic_balance.txt"] = audit.format() + "\n"
    return out


def curate_cogcanvas_prompts(
    prompts: Sequence[Mapping[str, Any]],
    retrieval: Sequence[Mapping[str, Any]],
    references: Sequence[Mapping[str, Any]],
    resampler: Callable[[Mapping[str, Any], int], tuple[dict, list[dict]]] | None,
    run: Curation,
) -> tuple[list[dict], list[dict]]:
    """Prompts whose text the MLLM wrote and a verifier passed, and the retrieval rows that go with them.

    A tuple the verifier finds implausible (interaction, layout or scene) is drawn again through
    ``resampler`` (:func:`idbench.benchmarks.cogcanvas.sampling.prompt_resampler`); its retrieval rows are then
    replaced by the new draw's. Prompts that never pass keep their (last) template text, flagged.
    """
    judge, log = run.judge, run.log
    if judge is None:
        log.stages["prompt_synthesis"] = NO_JUDGE
        return [dict(p) for p in prompts], [dict(r) for r in retrieval]
    refs = {r["ref_id"]: r for r in references}
    attempts: dict[str, int] = {}
    redrawn: dict[str, list[dict]] = {}  # prompt id -> retrieval rows of its latest draw

    def resample(t: Any, reasons: Sequence[str]) -> Any:
        attempts[t.prompt_id] = attempts.get(t.prompt_id, 0) + 1
        prompt, rows = resampler(t.record, attempts[t.prompt_id])
        redrawn[t.prompt_id] = rows
        return tuple_from_record(prompt, refs)

    report = synthesize_prompts(
        judge,
        [tuple_from_record(p, refs) for p in prompts],
        resample=resample if resampler is not None else None,
        max_attempts=run.options.max_attempts,
    )
    log.stages["prompt_synthesis"] = {
        "judge": judge.model,
        "prompts": len(prompts),
        "accepted": len(report.accepted),
        "given_up": [o.prompt_id for o in report.given_up],
        "redrawn": sorted(redrawn),
        "requests": {
            "writer": report.writer_requests,
            "verifier": report.verifier_requests,
            "ask_calls": report.ask_calls,
        },
    }
    log.files["prompt_synthesis.json"] = json.dumps(report.as_dict(), indent=2, ensure_ascii=False, default=str) + "\n"
    rows = [dict(r) for r in retrieval if r["prompt_id"] not in redrawn]
    rows += [dict(r) for prompt_id in sorted(redrawn) for r in redrawn[prompt_id]]
    order = {p["prompt_id"]: k for k, p in enumerate(prompts)}
    rows.sort(key=lambda r: order[r["prompt_id"]])  # stable: a prompt's rows keep their slot order
    return [dict(p) for p in report.prompt_rows(on_give_up="template")], rows

"""A ranking: the retrieval task's submission (``"task": "retrieval"`` in ``submission.json``).

No images: a folder (or a zip of it) with ``submission.json`` and ``rankings.csv``, whose header is
``prompt_id,slot,rank,ref_id`` and which holds one row per ranked candidate. Every row of the
benchmark's ``retrieval`` config is a slot to rank (a prompt's ``A``, ``A.item``, ``background``...):
its candidate ref ids get the ranks 1, 2, ... (best first), each at most once. A ranking may stop
early, since what is not ranked is never in a top k, but every slot needs one. The task and how it is
scored: docs/cogcanvas-tasks.md.
"""

from __future__ import annotations

from pathlib import Path

from idbench.evaluate_pkg.data import BenchmarkData

from .problems import Problem
from .shared import _SEED, _csv_rows, max_listing_rows

RANKINGS_NAME = "rankings.csv"
RANKING_COLUMNS = ("prompt_id", "slot", "rank", "ref_id")


def _read_rankings(path: Path, data: BenchmarkData, problems: list[Problem]) -> dict[tuple[str, str], tuple[str, ...]]:
    """A retrieval submission's ``rankings.csv``: (prompt_id, slot) -> ref ids by rank; every problem
    (unknown prompt or slot, a ref id that is not one of the slot's candidates or comes twice, ranks
    that are not 1, 2, ..., a slot without a ranking) is added to ``problems``, naming its row."""

    def problem(message: str, prompt_id: str | None = None, where: str = RANKINGS_NAME) -> None:
        problems.append(Problem(prompt_id, None, where, message))

    if "retrieval" not in data.tables:
        problem(f"{data.name} has no retrieval config; this build cannot score a ranking")
        return {}
    slots = {(r["prompt_id"], r["slot"]): r for r in data.tables["retrieval"]}
    if not path.is_file():
        problem(f"missing; a retrieval submission ranks each slot's candidates in it ({','.join(RANKING_COLUMNS)})")
        return {}
    candidates = sum(len(row["candidate_ref_ids"]) for row in slots.values())
    parsed = _csv_rows(
        path,
        RANKING_COLUMNS,
        lambda message, where=RANKINGS_NAME: problem(message, where=where),
        max_listing_rows(candidates),
    )
    if parsed is None:
        return {}
    prompts = {prompt_id for prompt_id, _ in slots}
    ref_ids = set(data.reference_table[data.spec.reference_id])  # the column alone: no image decoded
    ranked: dict[tuple[str, str], dict[int, str]] = {}
    seen: dict[tuple[str, str, str], str] = {}  # (prompt, slot, ref id) -> the row that ranked it
    for where, values in parsed:
        prompt_id, slot, rank, ref_id = (values[c] for c in RANKING_COLUMNS)
        key = (prompt_id, slot)
        if prompt_id not in prompts:
            problem(f"unknown prompt_id; {data.name} has no such prompt", prompt_id, where)
        elif key not in slots:
            known = ", ".join(s for p, s in slots if p == prompt_id)
            problem(f"unknown slot {slot!r} (this prompt's slots: {known})", prompt_id, where)
        elif not _SEED.fullmatch(rank) or int(rank) < 1:
            problem(f"slot {slot!r}: rank {rank!r} is not a positive integer", prompt_id, where)
        elif ref_id not in slots[key]["candidate_ref_ids"]:
            known = "unknown" if ref_id not in ref_ids else "not a candidate of this slot"
            candidates = ", ".join(slots[key]["candidate_ref_ids"])
            problem(f"slot {slot!r}: ref_id {ref_id!r} is {known} (candidates: {candidates})", prompt_id, where)
        elif (prompt_id, slot, ref_id) in seen:
            problem(
                f"slot {slot!r}: ref_id {ref_id!r} is ranked twice (first in {seen[(prompt_id, slot, ref_id)]})",
                prompt_id,
                where,
            )
        elif int(rank) in ranked.get(key, {}):
            problem(f"slot {slot!r}: rank {rank} is given twice", prompt_id, where)
        else:
            seen[(prompt_id, slot, ref_id)] = where
            ranked.setdefault(key, {})[int(rank)] = ref_id
    out = {}
    for key in slots:
        ranks = ranked.get(key)
        if not ranks:
            problem(f"slot {key[1]!r}: missing, no ranking of its candidates", key[0])
        elif sorted(ranks) != list(range(1, len(ranks) + 1)):
            problem(f"slot {key[1]!r}: ranks {sorted(ranks)} are not 1 to {len(ranks)} without gaps", key[0])
        else:
            out[key] = tuple(ranks[r] for r in sorted(ranks))
    return out

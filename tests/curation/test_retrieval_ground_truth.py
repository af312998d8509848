"""The CogCanvas retrieval config: each slot's ground truth is the reference whose own description is the query.

For an entity with several reference images (the sample's fashion items), the query is the ground
truth image's description, so a ranker that only reads the candidates' descriptions finds it first:
the ground truth is attribute-matched, not just "some image of the right entity". Scored with the
scoring engine's P@k / R@k.
"""

from __future__ import annotations

import re

import datasets

from idbench.builders.build import build
from idbench.evaluate_pkg.functional import retrieval_precision_recall


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def test_description_ranker_finds_every_ground_truth_first(tmp_path, fresh_cache):
    build("cogcanvas", out=tmp_path / "out")
    refs = {r["ref_id"]: r for r in datasets.load_dataset(str(tmp_path / "out"), "references", split="test", cache_dir=fresh_cache)}
    rows = datasets.load_dataset(str(tmp_path / "out"), "retrieval", split="test", cache_dir=fresh_cache)
    several = [r for r in rows if len(r["candidate_ref_ids"]) > 1]
    assert several, "the sample pool has entities with several reference images"
    scores = []
    for row in several:
        query = _words(row["query"])
        # Rank the entity's images by how many query words their own description shares (ties by id).
        ranked = sorted(row["candidate_ref_ids"], key=lambda ref: (-len(query & _words(refs[ref]["description"])), ref))
        scores.append(retrieval_precision_recall(ranked, {row["ground_truth_ref_id"]}, ks=(1,)))
    assert all(s["p@1"] == 1.0 and s["r@1"] == 1.0 for s in scores)
    # The query is not the same for every image of an entity: a fixed pick would score below 1.
    first_pick = [retrieval_precision_recall(sorted(r["candidate_ref_ids"]), {r["ground_truth_ref_id"]}, ks=(1,))["p@1"] for r in several]
    assert sum(first_pick) < len(several)

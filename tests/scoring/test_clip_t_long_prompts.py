"""CLIP-T on prompts past CLIP's 77 tokens: the cut flag and the whole-prompt variant, end to end.

References: open_clip's own tokenizer for the token counts (independent of the transformers tokenizer
the scorer uses), and the tiny CLIP model called directly, chunk by chunk, for clip_t_whole.
"""

from __future__ import annotations

import numpy as np
import open_clip
import pandas as pd
import pytest

from idbench.builders.build import build
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.context import Models, ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.functional.text import text_chunks
from idbench.evaluate_pkg.images import normalize_image
from idbench.evaluate_pkg.runner import score_submission

# Every test here loads a model, scores or runs a worker.
pytestmark = [pytest.mark.slow]

TINY = ScoreOptions(profile="tiny", metrics=("clip_t", "clip_t_whole"))


def open_clip_tokens(text: str) -> int:
    """Tokens open_clip gives ``text`` (start and end included), read without truncation."""
    ids = open_clip.tokenize([text], context_length=1024)[0]
    return int((ids != 0).sum())


@pytest.fixture(scope="module")
def cogcanvas(tmp_path_factory):
    root = tmp_path_factory.mktemp("cogcanvas-clip")
    build("cogcanvas", out=root / "data", n_prompts=16)
    data = load_benchmark_data(root / "data")
    make_baseline("collage", data, root / "collage", size=224)
    summary = score_submission(root / "collage", data, root / "scores", TINY, cache_dir=root / "cache", progress=False)
    return root, data, summary, pd.read_parquet(root / "scores" / "results.parquet")


def test_the_cut_flag_follows_the_token_count(cogcanvas):
    _, data, summary, rows = cogcanvas
    flags = rows[rows["metric"] == "clip_t.truncated"].set_index(["prompt_id", "seed"])["value"]
    assert len(flags) == len(rows[rows["metric"] == "clip_t"])
    for (prompt_id, _), flag in flags.items():
        assert flag == float(open_clip_tokens(data.prompt_rows[prompt_id]["prompt"]) > 77), prompt_id
    by_n = {}
    for (prompt_id, _), flag in flags.items():
        by_n.setdefault(data.prompt_rows[prompt_id]["n_persons"], []).append(flag)
    # Two persons fit; from three on every sample prompt is cut (what the papers' CLIP-T silently does).
    assert np.mean(by_n[2]) == 0.0 and all(np.mean(by_n[n]) == 1.0 for n in (3, 4, 5))
    share = summary["aggregates"]["overall"]["clip_t.truncated"]["mean"]
    assert share == pytest.approx(np.mean(flags.to_numpy()))


def test_whole_prompt_clip_t_against_the_model_called_by_hand(cogcanvas):
    root, data, _, rows = cogcanvas
    clip = Models(ScoreOptions(profile="tiny"))["clip"]
    manifest = pd.read_csv(root / "collage" / "manifest.csv")
    got = rows[rows["metric"] == "clip_t_whole"].set_index(["prompt_id", "seed"])["value"]
    plain = rows[rows["metric"] == "clip_t"].set_index(["prompt_id", "seed"])["value"]
    multi_chunk = 0
    for row in manifest[manifest["seed"] == 0].itertuples():  # every prompt: 2 to 5 persons
        key = (str(row.prompt_id), int(row.seed))
        prompt = data.prompt_rows[key[0]]["prompt"]
        chunks = text_chunks(prompt, open_clip_tokens)
        assert all(open_clip_tokens(c) <= 77 for c in chunks) and " ".join(chunks) == prompt
        image = normalize_image((root / "collage" / row.file).read_bytes(), where=row.file)
        embedding = clip.encode_batch(clip.collate([clip.preprocess(image)]))[0]["embedding"].astype(np.float64)
        texts = clip.encode_texts(chunks).astype(np.float64)
        by_hand = np.mean([e @ embedding / np.linalg.norm(e) / np.linalg.norm(embedding) for e in texts])
        assert got[key] == pytest.approx(by_hand, abs=1e-5)
        if len(chunks) == 1:  # a prompt that fits: the two variants agree
            assert got[key] == pytest.approx(plain[key], abs=1e-6)
        multi_chunk += len(chunks) > 1
    assert multi_chunk == 9  # the 3-, 4- and 5-person prompts of the 16 (4 + 3 + 2)

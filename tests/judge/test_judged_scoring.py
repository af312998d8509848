"""`idbench score --judge-url ...` end to end: the real client against the local scripted server.

The server answers every request with a value built from the request's own JSON schema, so it plays
a judge that follows instructions: CHARIS stage 1 sees the reference's type and style (read from
the prompt) and every attribute in both images; stage 2 marks a deterministic third of the features
as changed in shape; the holistic judge rates 3 of 4; Attr-VQA answers "yes" to every question.
Expected values are computed here from those rules, not read back from the code under test.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from openai_server import ScriptedServer, answer, malformed, user_text

from idbench.builders.build import build
from idbench.cli import main
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.runner import NO_JUDGE, select_metrics

# Every test here scores with models, but for test_without_a_judge_the_judged_metrics_are_not_run: no
# model, but seconds of computing (measured on one core), judged scoring over three built benchmarks.
pytestmark = [pytest.mark.slow]

SECRET = "sk-idbench-test-9f8e7d6c5b4a"


def _changed(feature: str) -> bool:
    """The scripted judge's rule: a feature is changed when the first byte of its name's sha256 is 0 mod 3."""
    return hashlib.sha256(feature.encode()).digest()[0] % 3 == 0


def _value(schema: dict, prompt: str, name: str = "") -> object:
    """An answer matching ``schema``, chosen the way the docstring of this module says."""
    if schema.get("type") == "object":
        props = schema.get("properties", {})
        if "answers" in props:  # Attr-VQA: "yes" to each asked id, once
            ids = props["answers"]["items"]["properties"]["question_id"]["enum"]
            return {"answers": [{"question_id": i, "answer": "yes"} for i in ids]}
        if "changed" in props:  # one CHARIS feature
            changed = _changed(name)
            return {
                "observation": "scripted",
                "in_reference": True,
                "in_generated": True,
                "changed": changed,
                "transformations": [],
                "harmful_changes": ["shape"] if changed else [],
            }
        return {key: _value(sub, prompt, key) for key, sub in props.items()}
    if schema.get("type") == "array":
        return []
    if schema.get("type") == "boolean":
        return True
    if schema.get("type") == "integer":
        return 3
    if "enum" in schema:
        found = re.search(r'type "([a-z_]+)" in "([a-z_0-9]+)" style', prompt)
        wanted = {"generated_type": found and found.group(1), "generated_style": found and found.group(2)}.get(name)
        return wanted if wanted in schema["enum"] else schema["enum"][0]
    return "scripted"


def follow_schema(body: dict):
    schema = body["response_format"]["json_schema"]["schema"]
    if "holistic" in body["response_format"]["json_schema"]["name"] and BROKEN_HOLISTIC:
        return malformed()
    return answer(_value(schema, user_text(body)))


BROKEN_HOLISTIC = False


@pytest.fixture(scope="module")
def built(tmp_path_factory, shared_features):
    """The two submissions, their encoder features and copy check scored once into the session's cache:
    each test's own cache (``seeded_cache``: its judge answers are its own) starts with them, so the
    tests pay for the judging, not for the copy check of the same pictures again."""
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.evaluate_pkg.runner import score_submission

    root = tmp_path_factory.mktemp("judged")
    for name in ("charis", "cogcanvas"):
        build(name, out=root / name)
        data = load_benchmark_data(root / name)
        make_baseline("collage" if name == "cogcanvas" else "clone", data, root / f"{name}-sub", size=64)
        options = ScoreOptions(profile="tiny", metrics=("clip_t",))
        score_submission(root / f"{name}-sub", data, None, options, cache_dir=shared_features, progress=False)
    return root


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("IDBENCH_JUDGE_API_KEY", SECRET)
    with ScriptedServer(follow_schema) as s:
        yield s


def _score(built: Path, benchmark: str, metrics: str, out: Path, url: str, cache: Path) -> dict:
    code = main(
        [
            "score",
            str(built / f"{benchmark}-sub"),
            "--data",
            str(built / benchmark),
            "--out",
            str(out),
            "--profile",
            "tiny",
            "--metrics",
            metrics,
            "--cache-dir",
            str(cache),
            "--judge-url",
            url,
            "--judge-model",
            "scripted-vlm",
            "--judge-concurrency",
            "16",
        ]
    )
    assert code == 0
    return json.loads((out / "aggregates.json").read_text())


def _expected_charis_scores(data) -> dict[str, float]:
    """Per prompt, the category score the scripted answers lead to under ekb/data/rules.yaml."""
    from idbench.ekb import load_ekb

    ekb = load_ekb()
    values = {c.name: c.score for c in ekb.categories.values()}
    out = {}
    for prompt_id, row in data.prompt_rows.items():
        levels: dict[str, list[bool]] = {}
        for feature in ekb.features_for(row["type"], row["style"]):
            levels.setdefault(ekb.level_of(feature.name), []).append(_changed(feature.name))
        shares = {level: sum(flags) / len(flags) for level, flags in levels.items()}
        # The rules, in order (rules.yaml): exact, near_exact (secondary <= 1/4), partial (core <= 1/2), mismatch.
        if not any(shares.values()):
            category = "exact"
        elif shares.get("decisive", 0) == 0 and shares.get("core", 0) == 0 and shares.get("secondary", 0) <= 0.25:
            category = "near_exact"
        elif shares.get("decisive", 0) == 0 and shares.get("core", 0) <= 0.5:
            category = "partial"
        else:
            category = "mismatch"
        out[prompt_id] = values[category]
    return out


def test_charis_judged_end_to_end_and_cached(built, server, tmp_path, seeded_cache):
    cache = seeded_cache()
    summary = _score(built, "charis", "charis_score,holistic_score", tmp_path / "out", server.base_url, cache)
    data = load_benchmark_data(built / "charis")
    results = pd.read_parquet(tmp_path / "out" / "results.parquet")
    scores = results[results["metric"] == "charis_score"].set_index("prompt_id")["value"].to_dict()
    assert scores == pytest.approx(_expected_charis_scores(data))
    assert set(results[results["metric"] == "holistic_score"]["value"]) == {0.75}
    overall = summary["aggregates"]["overall"]
    assert overall["charis_score.failure_rate"]["mean"] == 0 and overall["holistic_score.failure_rate"]["mean"] == 0
    assert summary["not_run"] == {} and summary["judge"]["model"] == "scripted-vlm"
    # Evidence per pair: the category and which features changed how.
    evidence = pd.read_parquet(tmp_path / "out" / "judge_evidence.parquet")
    first = json.loads(evidence[(evidence["metric"] == "charis_score")].iloc[0]["evidence"])
    assert first["category"] in {"exact", "near_exact", "partial", "mismatch"}
    assert all(f["status"] == ("changed" if _changed(name) else "unchanged") for name, f in first["features"].items())
    # Requests: per pair 1 + visible attributes (CHARIS) + 1 (holistic); nothing more.
    sent = len(server.requests)
    from idbench.ekb import load_ekb

    ekb = load_ekb()
    expected = sum(2 + len(ekb.attributes_for(r["type"], r["style"])) for r in data.prompt_rows.values())
    # The judge's controls (judge/controls.py) come on top, counted on its card, not in its statistics.
    assert (
        sent - summary["judge"]["card"]["requests"]["answers"] == expected == summary["judge"]["stats"]["requests_sent"]
    )
    # A rerun of the unchanged submission asks nothing: every answer comes from the cache.
    again = _score(built, "charis", "charis_score,holistic_score", tmp_path / "again", server.base_url, cache)
    assert len(server.requests) == sent and again["judge"]["stats"]["cache_hits"] == expected
    assert pd.read_parquet(tmp_path / "again" / "results.parquet")["value"].tolist() == results["value"].tolist()
    # The key was sent to the server and written nowhere.
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in server.requests[:3])
    for file in [*(tmp_path / "out").iterdir(), *(tmp_path / "cache").rglob("*")]:
        if file.is_file():
            assert SECRET.encode() not in file.read_bytes(), file


def test_failed_judge_answers_are_counted_never_scored(built, server, tmp_path, seeded_cache):
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.evaluate_pkg.judge import JudgeConfig
    from idbench.evaluate_pkg.runner import score_submission

    global BROKEN_HOLISTIC
    judge = JudgeConfig(base_url=server.base_url, model="scripted-vlm", max_retries=1, backoff_s=0.001, concurrency=16)
    options = ScoreOptions(profile="tiny", metrics=("holistic_score",), judge=judge)
    cache = seeded_cache()
    BROKEN_HOLISTIC = True  # every holistic answer is malformed JSON, retried once, then a failure
    try:
        summary = score_submission(
            built / "charis-sub",
            built / "charis",
            tmp_path / "out",
            options,
            cache_dir=cache,
            progress=False,
        )
    finally:
        BROKEN_HOLISTIC = False
    results = pd.read_parquet(tmp_path / "out" / "results.parquet")
    holistic = results[results["metric"] == "holistic_score"]["value"]
    # Intent to treat (suite 0.4): a failure is the lowest rating, 0, never a guess, and never left out
    # (left out, a judge failing on the hard pairs would lift the score); every one counted.
    assert len(holistic) == 29 * 7 and (holistic == 0.0).all()
    overall = summary["aggregates"]["overall"]
    assert overall["holistic_score.failure_rate"]["mean"] == 1.0 and overall["holistic_score"]["mean"] == 0.0
    assert summary["judge"]["incomplete"] == {"holistic_score": 1.0}
    stats = summary["judge"]["stats"]
    assert stats["failures"] == len(holistic) and stats["requests_sent"] == 2 * len(holistic)  # each tried twice
    # Failures are not cached: with the judge mended, a rerun asks again and scores.
    summary = score_submission(
        built / "charis-sub",
        built / "charis",
        tmp_path / "mended",
        options,
        cache_dir=cache,
        progress=False,
    )
    assert summary["aggregates"]["overall"]["holistic_score"]["mean"] == 0.75


def test_cogcanvas_attr_vqa_end_to_end(built, server, tmp_path, seeded_cache):
    summary = _score(
        built,
        "cogcanvas",
        "attr_vqa,igc,attr_vqa_paired,igc_paired",
        tmp_path / "out",
        server.base_url,
        seeded_cache(),
    )
    data = load_benchmark_data(built / "cogcanvas")
    results = pd.read_parquet(tmp_path / "out" / "results.parquet")
    values = {
        m: results[results["metric"] == m].set_index("prompt_id")["value"].to_dict() for m in set(results["metric"])
    }
    # The scripted judge answers "yes" to everything: it confirms every fact (the paper's Attr-VQA and
    # IGC give it 1 on every image), but never denies a negative, so the paired variants give it 0
    # wherever a prompt has a paired fact, and its yes-rate on the negatives is 1.
    for prompt_id, row in data.prompt_rows.items():
        assert values["attr_vqa"][prompt_id] == 1.0 and values["igc"][prompt_id] == 1.0
        assert values["attr_vqa_paired"][prompt_id] == 0.0 and values["igc_paired"][prompt_id] == 0.0
        assert values["attr_vqa.negative_yes_rate"][prompt_id] == 1.0
        assert sum(q["answer"] == "no" for q in row["questions"]) > 0 and all(
            q["negates"] for q in row["questions"] if q["answer"] == "no"
        )
    overall = summary["aggregates"]["overall"]
    assert overall["attr_vqa.failure_rate"]["mean"] == 0 and overall["igc.failure_rate"]["mean"] == 0
    # One request per image, plus the judge's controls (counted on its card).
    assert len(server.requests) - summary["judge"]["card"]["requests"]["answers"] == len(data.prompt_rows)
    assert summary["notes"]["attr_vqa"]["questions_version"] == data.build_info["questions_version"]


def test_without_a_judge_the_judged_metrics_are_not_run(built):
    metrics, not_run = select_metrics(load_benchmark_data(built / "charis"), None, judge=None)
    assert "charis_score" not in metrics and not_run["charis_score"] == NO_JUDGE
    assert {"clip_i", "dino_sim"} <= set(metrics)
    metrics, not_run = select_metrics(load_benchmark_data(built / "cogcanvas"), ("attr_vqa", "clip_t"), judge=None)
    assert metrics == ["clip_t"] and set(not_run) == {"attr_vqa"}


def test_half_a_judge_configuration_is_an_error(built, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("IDBENCH_JUDGE_MODEL", raising=False)
    code = main(
        [
            "score",
            str(built / "charis-sub"),
            "--data",
            str(built / "charis"),
            "--out",
            str(tmp_path / "o"),
            "--profile",
            "tiny",
            "--judge-url",
            "http://127.0.0.1:9/v1",
        ]
    )
    assert code == 2 and "--judge-model" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_judged_metrics_run_in_chunks_with_the_same_results(built, server, tmp_path, monkeypatch, seeded_cache):
    import idbench.benchmarks.charis.suite as charis_suite
    import idbench.benchmarks.cogcanvas.suite as cogcanvas_suite

    whole = _score(built, "cogcanvas", "attr_vqa,igc", tmp_path / "whole", server.base_url, seeded_cache("c1"))
    monkeypatch.setattr(cogcanvas_suite, "JUDGE_CHUNK", 10)  # 82 images: 9 chunks
    monkeypatch.setattr(charis_suite, "JUDGE_CHUNK", 50)
    chunked = _score(built, "cogcanvas", "attr_vqa,igc", tmp_path / "chunked", server.base_url, seeded_cache("c2"))
    assert chunked["aggregates"] == whole["aggregates"]
    assert chunked["notes"]["attr_vqa"]["requests"] == whole["notes"]["attr_vqa"]["requests"] == 82
    a = (
        pd.read_parquet(tmp_path / "whole" / "results.parquet")
        .sort_values(["prompt_id", "metric"])
        .reset_index(drop=True)
    )
    b = (
        pd.read_parquet(tmp_path / "chunked" / "results.parquet")
        .sort_values(["prompt_id", "metric"])
        .reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(a, b)
    charis = _score(built, "charis", "charis_score", tmp_path / "charis", server.base_url, seeded_cache("c3"))
    assert (
        charis["notes"]["charis_judge"]["pairs"] == 203
        and charis["aggregates"]["overall"]["charis_score.failure_rate"]["mean"] == 0
    )


def test_a_token_in_the_judge_urls_path_is_written_nowhere(server, tmp_path, seeded_cache, caplog):
    """Some gateways take the key in the URL's path: the run calls that URL, and records and logs it
    masked (settings.redact_url), in aggregates.json, report.md and every other file of the run."""
    import logging

    token = "sk-idbench-path-token-0123456789abcdef"
    build("charis", out=tmp_path / "charis", n_prompts=2)
    data = load_benchmark_data(tmp_path / "charis")
    make_baseline("clone", data, tmp_path / "charis-sub", size=64)
    url = server.base_url.replace("/v1", f"/{token}/v1")
    with caplog.at_level(logging.DEBUG, logger="idbench"):  # idbench's logs (httpx's own log the URL at INFO)
        summary = _score(tmp_path, "charis", "holistic_score", tmp_path / "out", url, seeded_cache())
    assert len(server.requests) > 0 and summary["aggregates"]["overall"]["holistic_score"]["mean"] == 0.75
    masked = server.base_url.replace("/v1", "/***/v1")
    assert summary["judge"]["base_url"] == masked and list(summary["judge"]["stats"]["by_endpoint"]) == [masked]
    written = [file for file in (tmp_path / "out").rglob("*") if file.is_file()]
    assert {"aggregates.json", "report.md"} <= {file.name for file in written}
    for file in written:
        assert token.encode() not in file.read_bytes(), file
    assert token not in caplog.text

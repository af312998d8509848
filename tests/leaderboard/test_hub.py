"""The Hub side of the leaderboard: eval.yaml, .eval_results files and the requests/results sync.

Nothing here reaches the network: sync runs either as a dry run with sockets disabled or against a
fake api object that records its calls.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from huggingface_hub import CommitOperationAdd, parse_eval_result_entries

from idbench.builders.registry import get_benchmark
from idbench.leaderboard import hub
from idbench.leaderboard.queue import claim, finish
from idbench.leaderboard.store import Store

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

COLLAPSE = get_benchmark("identity-collapse")
COGCANVAS = get_benchmark("cogcanvas")
CHARIS = get_benchmark("charis")
DATASET = "idbench/identity-collapse"
REVISION = "0123456789abcdef0123456789abcdef01234567"
SECRET = "hf_ThisIsNotARealTokenButMustNeverBePrinted"


def _stats(mean: float) -> dict[str, Any]:
    return {"mean": mean, "ci_low": mean - 0.01, "ci_high": mean + 0.01, "n": 45, "n_nan": 0}


def collapse_summary(profile: str = "standard", plumbing: bool = False) -> dict[str, Any]:
    """A scoring summary shaped like evaluate_pkg.runner.summarize's, for identity-collapse."""
    overall = {
        "clip_t_floored": _stats(0.25),
        "dino_sim_floored": _stats(0.5),
        "scr@0.5_floored": _stats(0.3),
        "scr@0.4": _stats(0.2),
    }
    sizes = {
        str(n): {
            "dino_sim_floored": _stats(0.5 - n / 100),
            "scr@0.5_floored": _stats(n / 100),
            "clip_t_floored": _stats(0.2),
        }
        for n in (2, 4, 6, 8, 10)
    }
    return {
        "benchmark": "identity-collapse",
        "submission": {"model": "my-model"},
        "profile": profile,
        "plumbing": plumbing,
        "sample_build": False,
        "suite_version": "s1",
        "idbench_version": "0.1.0",
        "aggregates": {
            "overall": overall,
            "breakdowns": {"n_subjects": sizes, "scene": {"neutral": {"dino_sim_floored": _stats(0.9)}}},
        },
        "not_run": {},
    }


# --- eval.yaml ---------------------------------------------------------------------------------------


def test_eval_yaml_declares_a_task_per_headline_metric_and_group_size():
    data = hub.eval_yaml(COLLAPSE)
    assert list(data) == ["name", "description", "evaluation_framework", "tasks"]
    assert data["name"] == COLLAPSE.title and data["evaluation_framework"] == "idbench"
    ids = [task["id"] for task in data["tasks"]]
    expected = []
    for metric in (
        "dino_sim_floored",
        "one_minus_scr_at_0.5_floored",
        "clip_t_floored",
    ):  # COLLAPSE.ranking, id-safe, SCR flipped
        expected += [metric] + [f"{metric}-n_subjects-{n}" for n in (2, 4, 6, 8, 10)]
    assert ids == expected and len(set(ids)) == len(ids)
    assert all(task == {"id": task["id"], "config": "prompts", "split": "test"} for task in data["tasks"])
    # Round-trips as plain YAML, in our order.
    assert yaml.safe_load(hub.dump_yaml(data)) == data


def test_eval_yaml_group_sizes_come_from_the_benchmark_and_are_absent_without_one():
    cog = [task["id"] for task in hub.eval_yaml(COGCANVAS)["tasks"]]
    assert "id_sim_floored" in cog and "id_sim_floored-n_persons-5" in cog and "id_sim_floored-n_persons-6" not in cog
    assert len(cog) == len(COGCANVAS.ranking) * (1 + 4)
    assert [task["id"] for task in hub.eval_yaml(CHARIS)["tasks"]] == [
        "charis_overall_floored",
        "charis_score_itt_floored",
        "dino_sim_floored",
        "clip_i_floored",
    ]  # the paper's charis_score: shown, never ranked


# --- .eval_results -----------------------------------------------------------------------------------


def test_entries_one_per_headline_metric_and_group_size_with_raw_values():
    source = {
        "url": "https://huggingface.co/spaces/idbench/leaderboard",
        "name": "idbench leaderboard",
        "user": "idbench",
    }
    entries = hub.eval_results_entries(collapse_summary(), COLLAPSE, DATASET, REVISION, source)
    declared = {task["id"] for task in hub.eval_yaml(COLLAPSE)["tasks"]}
    ids = [e["dataset"]["task_id"] for e in entries]
    assert len(ids) == len(set(ids)) == 3 * 6 and set(ids) == declared  # every declared task, nothing else
    assert all(
        e["dataset"] == {"id": DATASET, "task_id": e["dataset"]["task_id"], "revision": REVISION} for e in entries
    )
    by_id = {e["dataset"]["task_id"]: e for e in entries}
    assert by_id["dino_sim_floored"]["value"] == 0.5  # raw, not x100
    assert by_id["dino_sim_floored-n_subjects-4"]["value"] == pytest.approx(0.46)
    assert by_id["one_minus_scr_at_0.5_floored-n_subjects-10"]["value"] == pytest.approx(0.9)  # 1 - 0.1
    assert by_id["one_minus_scr_at_0.5_floored"]["notes"].startswith(
        "1 - Subject Collapse Rate (scr@0.5_floored), higher is better"
    )
    assert "higher is better" not in by_id["dino_sim_floored"]["notes"]
    assert "profile standard" in by_id["dino_sim_floored"]["notes"]
    assert by_id["clip_t_floored"]["source"] == source
    # the notes say what the interval resampled when the scorer recorded it
    summary = collapse_summary()
    summary["aggregates"]["ci"] = {"method": "percentile bootstrap over prompts", "unit": "prompt", "n_boot": 1000}
    summary["aggregates"]["overall"]["dino_sim_floored"]["n_prompts"] = 15
    recorded = {
        e["dataset"]["task_id"]: e for e in hub.eval_results_entries(summary, COLLAPSE, DATASET, REVISION, source)
    }
    assert "(percentile bootstrap over prompts, 15 prompts)" in recorded["dino_sim_floored"]["notes"]
    assert "prompts)" not in by_id["dino_sim_floored"]["notes"]  # older summaries: nothing claimed
    assert "date" not in by_id["clip_t_floored"]  # deterministic by default: the Hub uses the commit time
    # Group sizes sort numerically, after the overall entry of each metric.
    assert ids[:6] == ["dino_sim_floored"] + [f"dino_sim_floored-n_subjects-{n}" for n in (2, 4, 6, 8, 10)]
    # huggingface_hub parses them back.
    parsed = parse_eval_result_entries(entries)
    assert (
        parsed[0].dataset_id == DATASET
        and parsed[0].task_id == "dino_sim_floored"
        and parsed[0].source_user == "idbench"
    )


def test_metrics_the_run_did_not_compute_are_left_out():
    summary = collapse_summary()
    del summary["aggregates"]["overall"]["clip_t_floored"]
    for cell in summary["aggregates"]["breakdowns"]["n_subjects"].values():
        del cell["clip_t_floored"]
    summary["aggregates"]["overall"]["dino_sim_floored"]["mean"] = None  # all NaN
    ids = [e["dataset"]["task_id"] for e in hub.eval_results_entries(summary, COLLAPSE, DATASET, None, None)]
    assert "clip_t_floored" not in ids and "dino_sim_floored" not in ids and "dino_sim_floored-n_subjects-2" in ids
    assert all("revision" not in e["dataset"] for e in hub.eval_results_entries(summary, COLLAPSE, DATASET, None, None))


@pytest.mark.parametrize("profile, plumbing", [("tiny", True), ("tiny", False), ("standard", True)])
def test_plumbing_summaries_are_refused(tmp_path, profile, plumbing):
    with pytest.raises(hub.HubExportError, match="plumbing"):
        hub.write_eval_results(collapse_summary(profile, plumbing), COLLAPSE, tmp_path, DATASET)
    assert not (tmp_path / ".eval_results").exists()
    summary = collapse_summary()
    del summary["plumbing"]
    with pytest.raises(hub.HubExportError, match="plumbing"):
        hub.eval_results_entries(summary, COLLAPSE, DATASET, None, None)


def test_bad_inputs_are_refused_with_a_reason():
    with pytest.raises(hub.HubExportError, match="cogcanvas"):
        hub.eval_results_entries(collapse_summary(), COGCANVAS, DATASET, None, None)
    with pytest.raises(hub.HubExportError, match="dataset repo id"):
        hub.eval_results_entries(collapse_summary(), COLLAPSE, "not a repo id", None, None)
    with pytest.raises(hub.HubExportError, match="source_url"):
        hub.eval_results_entries(collapse_summary(), COLLAPSE, DATASET, None, {"name": "no url"})
    summary = collapse_summary()
    summary["aggregates"]["breakdowns"]["n_subjects"]["12"] = {"dino_sim_floored": _stats(0.1)}
    with pytest.raises(hub.HubExportError, match="does not declare"):
        hub.eval_results_entries(summary, COLLAPSE, DATASET, None, None)


def test_written_file_round_trips_and_is_deterministic(tmp_path):
    path = hub.write_eval_results(collapse_summary(), COLLAPSE, tmp_path / "repo", DATASET, REVISION, date="2025-01-15")
    assert path == tmp_path / "repo" / ".eval_results" / "identity-collapse.yaml"
    loaded = yaml.safe_load(path.read_text())
    assert loaded == hub.eval_results_entries(collapse_summary(), COLLAPSE, DATASET, REVISION, None, date="2025-01-15")
    assert loaded[0]["date"] == "2025-01-15"
    first = path.read_bytes()
    hub.write_eval_results(collapse_summary(), COLLAPSE, tmp_path / "repo", DATASET, REVISION, date="2025-01-15")
    assert path.read_bytes() == first


# --- sync --------------------------------------------------------------------------------------------


class FakeApi:
    """Records what sync asks of HfApi; has a token so sync does not look for the user's login."""

    token = SECRET

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def create_repo(self, repo_id: str, **kwargs: Any) -> None:
        self.calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))

    def create_commit(self, **kwargs: Any) -> None:
        self.calls.append(("create_commit", kwargs))


@pytest.fixture
def store(tmp_path) -> Store:
    """Three identity-collapse submissions: one scored for real, one scored with tiny, one still pending."""
    store = Store(tmp_path / "home")
    for k, (model, profile) in enumerate((("org/real-model", "standard"), ("tiny-model", "tiny"), ("queued", None))):
        store.add_submission(
            benchmark="identity-collapse",
            benchmark_version="v1",
            data_dir=Path("/nowhere"),
            model_name=model,
            metadata={"model": model, "contact": "secret@example.org"},
            content_hash=str(k + 1) * 64,
            stored_path=Path("/nowhere"),
            submitter="alice",
        )
        if profile is None:
            continue
        job = claim(store, "w", 60)
        out = tmp_path / "results" / str(job.id)
        out.mkdir(parents=True)
        pd.DataFrame({"prompt_id": ["01"], "seed": [0], "metric": ["dino_sim"], "value": [0.5]}).to_parquet(
            out / "results.parquet"
        )
        finish(store, job, collapse_summary(profile, plumbing=profile == "tiny"), out)
    return store


def _no_network(monkeypatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a dry run must not touch the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


REAL = "identity-collapse/org__real-model"
EXPECTED = [
    ("idbench/requests", f"{REAL}/{'1' * 12}.json"),
    ("idbench/requests", f"identity-collapse/queued/{'3' * 12}.json"),
    ("idbench/requests", f"identity-collapse/tiny-model/{'2' * 12}.json"),
    ("idbench/results", f"{REAL}/{'1' * 12}/aggregates.json"),
    ("idbench/results", f"{REAL}/{'1' * 12}/results.parquet"),
]


def test_dry_run_lists_the_repo_paths_without_network_or_token(store, monkeypatch, capsys):
    _no_network(monkeypatch)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    printed: list[str] = []
    operations = hub.sync(store, "idbench/requests", "idbench/results", dry_run=True, echo=printed.append)
    assert [(op.repo_id, op.path_in_repo) for op in operations] == EXPECTED
    assert printed == [f"{repo}: {path}" for repo, path in EXPECTED]
    assert not any("tiny" in op.path_in_repo for op in operations if op.repo_id == "idbench/results")
    # The default echo is print.
    hub.sync(store, "idbench/requests", "idbench/results", dry_run=True)
    assert capsys.readouterr().out.splitlines() == printed


def test_request_and_result_records_hold_metadata_only(store):
    operations = {op.path_in_repo: op for op in hub.sync_plan(store, "idbench/requests", "idbench/results")}
    request = json.loads(operations[EXPECTED[0][1]].data)
    assert set(request) == {"model", "benchmark", "benchmark_version", "content_hash", "task", "state", "submitted_at"}
    assert request["model"] == "org/real-model" and request["state"] == "FINISHED"
    assert json.loads(operations[EXPECTED[1][1]].data)["state"] == "PENDING"
    result = json.loads(operations[EXPECTED[3][1]].data)
    assert result["aggregates"]["overall"]["dino_sim_floored"]["mean"] == 0.5 and result["profile"] == "standard"
    assert result["samples"] == EXPECTED[4][1]
    assert operations[EXPECTED[4][1]].local_path.name == "results.parquet"
    everything = b"".join(op.data for op in operations.values() if op.data is not None)
    assert b"alice" not in everything and b"secret@example.org" not in everything


def test_a_text_to_image_result_is_synced_on_its_own_track(tmp_path):
    """The T2I track is not the reference-based one: its current result goes up too, marked with its task."""
    store = Store(tmp_path / "home")
    for k, task in ((1, "reference"), (2, "text-to-image")):
        store.add_submission(
            benchmark="identity-collapse",
            benchmark_version="v1",
            data_dir=Path("/nowhere"),
            model_name=f"m-{task}",
            metadata={"model": f"m-{task}"},
            content_hash=str(k) * 64,
            stored_path=Path("/nowhere"),
            task=task,
        )
        job = claim(store, "w", 60)
        out = tmp_path / "results" / str(job.id)
        out.mkdir(parents=True)
        finish(store, job, collapse_summary(), out)
    operations = {op.path_in_repo: op for op in hub.sync_plan(store, "idbench/requests", "idbench/results")}
    for k, task in ((1, "reference"), (2, "text-to-image")):
        folder = f"identity-collapse/m-{task}/{str(k) * 12}"
        assert json.loads(operations[f"{folder}.json"].data)["task"] == task
        assert json.loads(operations[f"{folder}/aggregates.json"].data)["task"] == task


def test_sync_makes_one_commit_per_repo_with_the_planned_files(store, capsys):
    api = FakeApi()
    operations = hub.sync(store, "idbench/requests", "idbench/results", api=api)
    commits = [kwargs for name, kwargs in api.calls if name == "create_commit"]
    assert [c["repo_id"] for c in commits] == ["idbench/requests", "idbench/results"]
    for commit in commits:
        assert commit["repo_type"] == "dataset"
        assert all(isinstance(op, CommitOperationAdd) for op in commit["operations"])
        paths = [op.path_in_repo for op in commit["operations"]]
        assert paths == [path for repo, path in EXPECTED if repo == commit["repo_id"]]
    assert [(op.repo_id, op.path_in_repo) for op in operations] == EXPECTED
    repos = [kwargs for name, kwargs in api.calls if name == "create_repo"]
    assert all(r["exist_ok"] and r["repo_type"] == "dataset" for r in repos)
    # The token is used by the client, never echoed.
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err
    assert SECRET not in repr(api.calls)


def test_sync_without_token_says_how_to_log_in(store, monkeypatch, capsys):
    class NoTokenApi(FakeApi):
        token = None

    monkeypatch.setattr(hub, "get_token", lambda: None)
    api = NoTokenApi()
    with pytest.raises(hub.HubExportError, match="hf auth login"):
        hub.sync(store, "idbench/requests", "idbench/results", api=api)
    assert api.calls == []


def test_invalid_repo_ids_are_refused(store):
    with pytest.raises(hub.HubExportError, match="repo id"):
        hub.sync_plan(store, "not a repo", "idbench/results")


# --- lower-is-better metrics and sample builds ------------------------------------------------------


def test_lower_is_better_metrics_are_published_as_one_minus_with_the_interval_flipped():
    # Hand numbers: SCR 0.30 with 95% CI [0.22, 0.41] must read 0.70 with CI [0.59, 0.78].
    summary = collapse_summary()
    summary["aggregates"]["overall"]["scr@0.5_floored"] = {
        "mean": 0.30,
        "ci_low": 0.22,
        "ci_high": 0.41,
        "n": 45,
        "n_nan": 0,
    }
    by_id = {e["dataset"]["task_id"]: e for e in hub.eval_results_entries(summary, COLLAPSE, DATASET, None, None)}
    assert "scr_at_0.5_floored" not in by_id  # the raw rate never goes up under a task the Hub would rank higher-first
    flipped = by_id["one_minus_scr_at_0.5_floored"]
    assert flipped["value"] == pytest.approx(0.70)
    assert "95% CI [0.5900, 0.7800]" in flipped["notes"]
    assert by_id["dino_sim_floored"]["value"] == 0.5  # higher-is-better metrics are left as they are
    # eval.yaml declares the flipped task, and its description says what the task holds.
    data = hub.eval_yaml(COLLAPSE)
    assert {"id": "one_minus_scr_at_0.5_floored", "config": "prompts", "split": "test"} in data["tasks"]
    assert not any(task["id"].startswith("scr") for task in data["tasks"])
    assert (
        "one_minus_scr_at_0.5_floored: 1 - Subject Collapse Rate (scr@0.5_floored), higher is better"
        in data["description"]
    )
    assert set(by_id) <= {task["id"] for task in data["tasks"]}
    # Benchmarks without a lower-is-better headline metric keep their summary as it is.
    assert hub.eval_yaml(CHARIS)["description"] == CHARIS.summary


def test_a_rate_outside_zero_one_cannot_be_flipped():
    summary = collapse_summary()
    summary["aggregates"]["overall"]["scr@0.5_floored"] = _stats(1.5)
    with pytest.raises(hub.HubExportError, match=r"scr@0\.5_floored.*outside \[0, 1\]"):
        hub.eval_results_entries(summary, COLLAPSE, DATASET, None, None)


def test_summaries_of_sample_builds_are_refused(tmp_path):
    summary = collapse_summary()
    summary["sample_build"] = True
    with pytest.raises(hub.HubExportError, match="sample build"):
        hub.write_eval_results(summary, COLLAPSE, tmp_path, DATASET)
    assert not (tmp_path / ".eval_results").exists()
    del summary["sample_build"]  # an older summary that does not say: refused too (fail closed)
    with pytest.raises(hub.HubExportError, match="sample build"):
        hub.eval_results_entries(summary, COLLAPSE, DATASET, None, None)


def test_importing_the_module_does_not_need_eval_result_entry(monkeypatch):
    # huggingface_hub < 1.4 has no EvalResultEntry: the module (and so every other command) must still import.
    import importlib
    import sys

    import huggingface_hub

    missing = {"EvalResultEntry", "eval_result_entries_to_yaml", "parse_eval_result_entries"}
    for name in missing & set(vars(huggingface_hub)):
        monkeypatch.delitem(vars(huggingface_hub), name)
    lazy = huggingface_hub.__getattr__  # huggingface_hub resolves its names lazily, through __getattr__

    def older_huggingface_hub(name):
        if name in missing:
            raise AttributeError(name)
        return lazy(name)

    monkeypatch.setattr(huggingface_hub, "__getattr__", older_huggingface_hub)
    with pytest.raises(ImportError):
        from huggingface_hub import EvalResultEntry  # noqa: F401  (the stand-in works)
    monkeypatch.delitem(sys.modules, "idbench.leaderboard.hub")
    monkeypatch.setattr(sys.modules["idbench.leaderboard"], "hub", hub)  # restored afterwards: other tests keep theirs
    fresh = importlib.import_module("idbench.leaderboard.hub")
    assert fresh.eval_yaml(COLLAPSE)["evaluation_framework"] == "idbench"

"""The bounded reader and the schema checks of Hub records: each hostile record is built here, by hand,
and must end in one MalformedRecord naming its path (never a RecursionError, a traceback or a record
that passes)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pandas as pd
import pytest

from idbench.errors import IdbenchError
from idbench.leaderboard import hub_records
from idbench.leaderboard.hub_records import (
    MalformedRecord,
    checked_request,
    checked_result,
    lease_end,
    lease_expired,
    load_record,
)

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

NOW = datetime(2026, 6, 1, tzinfo=UTC).timestamp()
DIGEST = "0123456789abcdef" * 4
BENCHMARK = "identity-collapse"
REQUEST_PATH = f"{BENCHMARK}/model-a/{DIGEST[:12]}.json"
RESULT_PATH = f"{BENCHMARK}/model-a/{DIGEST[:12]}/aggregates.json"


def request(**changes) -> dict:
    record = {
        "schema": 1,
        "model": "model-a",
        "benchmark": BENCHMARK,
        "benchmark_version": "v1",
        "content_hash": DIGEST,
        "task": "reference",
        "metadata": {"family": "F", "link": "https://example.org/m", "model": "model-a"},
        "state": "RUNNING",
        "submitted_at": "2026-05-01T00:00:00+00:00",
        "updated_at": "2026-05-31T23:55:00+00:00",
        "attempts": 1,
        "worker": "w1",
        "lease_until": "2026-06-01T00:05:00+00:00",
        "reason": None,
        "files": f"{BENCHMARK}/model-a/{DIGEST[:12]}.zip",
    }
    return {k: v for k, v in (record | changes).items() if v is not ...}


def result(**changes) -> dict:
    stats = {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 10, "n_nan": 0, "n_prompts": 5}
    record = {
        "model": "model-a",
        "benchmark": BENCHMARK,
        "benchmark_version": "v1",
        "suite_version": "s1",
        "idbench_version": "0.1.0",
        "profile": "paper",
        "models": {},
        "not_run": {},
        "judge": None,
        "copies": None,
        "aggregates": {
            "overall": {"dino_sim": dict(stats)},
            "breakdowns": {"style": {"photo": {"dino_sim": dict(stats)}}},
        },
        "scored_at": "2026-05-02T00:00:00+00:00",
        "content_hash": DIGEST,
        "samples": f"{BENCHMARK}/model-a/{DIGEST[:12]}/results.parquet",
        "task": "reference",
        "metadata": {},
    }
    return record | changes


def raw(record: dict) -> bytes:
    return json.dumps(record).encode()


def refused(call, *args, **kwargs) -> MalformedRecord:
    with pytest.raises(MalformedRecord) as caught:
        call(*args, **kwargs)
    assert isinstance(caught.value, IdbenchError) and str(caught.value).startswith(args[0] + ": ")
    return caught.value


# --- the reader ------------------------------------------------------------------------------------


def test_valid_records_pass_unchanged():
    assert checked_request(REQUEST_PATH, raw(request()), now=NOW) == request()
    assert checked_result(RESULT_PATH, raw(result()), now=NOW) == result()
    old_sync = {
        k: request()[k] for k in ("model", "benchmark", "benchmark_version", "content_hash", "state", "submitted_at")
    }
    assert checked_request(REQUEST_PATH, raw(old_sync), now=NOW) == old_sync


def test_a_record_nested_100000_levels_deep_is_refused_before_parsing():
    # 200 KB of brackets inside a valid object: json.loads alone raises RecursionError on it.
    data = b'{"model": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert len(data) > 200_000
    with pytest.raises(RecursionError):
        json.loads(data)
    error = refused(load_record, REQUEST_PATH, data, max_bytes=len(data))
    assert "nested 100001 levels deep" in str(error) and str(hub_records.MAX_RECORD_DEPTH) in str(error)
    # brackets inside strings are text, not nesting
    assert load_record(REQUEST_PATH, raw({"reason": "[" * 5000}))["reason"] == "[" * 5000


def test_the_size_limit_comes_before_decoding():
    data = b'{"a": "' + b"\xff" * (hub_records.MAX_REQUEST_BYTES) + b'"}'  # not UTF-8 either: the size is said first
    assert "over the 65536-byte limit" in str(refused(load_record, REQUEST_PATH, data))
    assert "not UTF-8" in str(refused(load_record, REQUEST_PATH, b'{"a": "\xff"}'))


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"a": NaN}', "NaN"),
        ('{"a": -Infinity}', "-Infinity"),
        ('{"a": 1e309}', "1e309"),  # finite syntax, overflows to inf
        ('{"a": ' + "9" * 5000 + "}", "5000 digits"),  # Python's own int() refuses 4,300+ digits with a ValueError
        ('{"a": 99999999999999999999}', "beyond 64 bits"),
        ("[1, 2]", "not a JSON object"),
        ('"text"', "not a JSON object"),
        ('{"a": ', "not readable JSON"),
    ],
)
def test_non_finite_numbers_and_non_objects_are_refused(text, why):
    assert why in str(refused(load_record, REQUEST_PATH, text.encode()))


def test_read_record_reads_no_more_than_the_limit(tmp_path):
    with open(tmp_path / "big.json", "wb") as file:  # a sparse 1 GB file: only max_bytes + 1 of it are read
        file.write(b'{"a": "')
        file.truncate(10**9)
    for path, why in (
        ("big.json", "big.json: over the 1000-byte limit"),
        ("absent.json", "absent.json: cannot be read"),
    ):
        with pytest.raises(MalformedRecord, match=why):
            hub_records.read_record(tmp_path, path, max_bytes=1000)


# --- request records -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, why",
    [
        ({"submitted_at": "0000"}, "'submitted_at' is not an ISO 8601 time with a time zone"),
        ({"submitted_at": "2026-01-01T00:00:00"}, "'submitted_at' is not an ISO 8601 time with a time zone"),  # no zone
        ({"submitted_at": "1970-01-01T00:00:00+00:00"}, "before 2020"),  # would sort first in the queue
        ({"submitted_at": "2026-06-03T00:00:00+00:00"}, "more than 24 hours in the future"),
        ({"updated_at": "9999-12-31T23:59:59+00:00"}, "more than 24 hours in the future"),
        ({"lease_until": "tomorrow"}, "'lease_until' is not an ISO 8601 time"),
        ({"attempts": -1}, "attempts -1 is not a count"),
        ({"attempts": True}, "attempts True is not a count"),
        ({"attempts": 10**6}, "attempts 1000000 is not a count from 0 to 100"),
        ({"attempts": 2.5}, "attempts 2.5 is not a count"),
        ({"state": "DONE"}, "state 'DONE' is none of"),
        ({"model": 7}, "missing or non-text field 'model'"),
        ({"benchmark_version": ...}, "missing or non-text field 'benchmark_version'"),
        ({"reason": "x" * 2001}, "'reason' is 2001 characters long, over the limit of 2000"),
        ({"worker": "w" * 301}, "'worker' is 301 characters long"),
        ({"owner": 5}, "field 'owner' is not text"),
        ({"metadata": []}, "'metadata' is not an object"),
        ({"metadata": {"family": "f" * 101}}, "'family' is 101 characters long"),
        ({"metadata": {"link": "javascript:alert(1)"}}, "metadata: "),
        ({"content_hash": "A" * 64}, "not a sha256 hex digest"),
        ({"schema": 2}, "'schema' is 2, not 1"),
        ({"priority": 1}, "unknown field 'priority'"),
        ({"files": "elsewhere.zip"}, "is not the record's own zip"),
        (
            {"model": "FLUX.1-dev"},
            f"belong at {BENCHMARK}/FLUX.1-dev/{DIGEST[:12]}.json",
        ),  # a name its path does not carry
    ],
)
def test_malformed_request_records_are_refused_with_the_reason(changes, why):
    error = refused(checked_request, REQUEST_PATH, raw(request(**changes)), now=NOW)
    assert why in str(error) and "malformed request record" in str(error)


def test_a_lease_far_in_the_future_is_capped_not_kept_forever():
    forever = request(lease_until="9999-12-31T23:59:59+00:00")
    assert checked_request(REQUEST_PATH, raw(forever), now=NOW) == forever  # well-formed: workers still see it
    written = datetime.fromisoformat(forever["updated_at"]).timestamp()
    assert lease_end(forever) == written + hub_records.MAX_LEASE_SECONDS
    assert not lease_expired(forever, written + hub_records.MAX_LEASE_SECONDS - 1)
    assert lease_expired(
        forever, written + hub_records.MAX_LEASE_SECONDS + 1
    )  # then claimed again like a dead worker's
    ordinary = request()
    assert lease_end(ordinary) == datetime.fromisoformat(ordinary["lease_until"]).timestamp()
    assert lease_expired(request(lease_until=None), NOW)  # no lease: nothing holds it


# --- result records --------------------------------------------------------------------------------


def _with_stat(key, value, where="overall"):
    record = result()
    stats = (
        record["aggregates"]["overall"]["dino_sim"]
        if where == "overall"
        else record["aggregates"]["breakdowns"]["style"]["photo"]["dino_sim"]
    )
    stats[key] = value
    return record


@pytest.mark.slow
@pytest.mark.parametrize(
    "record, why",
    [
        (_with_stat("ci_low", "x"), "aggregates.overall.dino_sim.ci_low is 'x', not a finite number"),
        (_with_stat("mean", 1e308), "aggregates.overall.dino_sim.mean is 1e+308, not a finite number within"),
        (_with_stat("ci_high", [1]), "ci_high is [1]"),
        (_with_stat("n", -3), "aggregates.overall.dino_sim.n is -3, not a count"),
        (_with_stat("mean", "0.5", where="cell"), "aggregates.breakdowns.style.photo.dino_sim.mean is '0.5'"),
        (result(aggregates={"overall": []}), "'aggregates' is missing or has no 'overall' object"),
        (result(suite_version=None), "missing or non-text field 'suite_version'"),
        (result(content_hash="deadbeef"), "not a sha256 hex digest"),
        (result(profile="tiny"), "plumbing"),
        (result(scored_at="0000"), "'scored_at' is not an ISO 8601 time"),
        (result(models=[]), "'models' is not an object"),
        (result(copies={"images": "many"}), "copies.images"),
        (result(model="FLUX.1-dev"), f"belong at {BENCHMARK}/FLUX.1-dev/{DIGEST[:12]}/aggregates.json"),
        (result(samples="elsewhere/results.parquet"), "field 'samples' names"),
    ],
)
def test_malformed_result_records_are_refused_with_the_reason(record, why):
    assert why in str(refused(checked_result, RESULT_PATH, raw(record), now=NOW))


def test_null_statistics_are_allowed():
    assert (
        checked_result(RESULT_PATH, raw(_with_stat("ci_low", None)), now=NOW)["aggregates"]["overall"]["dino_sim"][
            "ci_low"
        ]
        is None
    )


def test_result_size_limit_is_larger_than_a_requests():
    padded = result(not_run={"x": "y" * (hub_records.MAX_REQUEST_BYTES * 2)})
    assert checked_result(RESULT_PATH, raw(padded), now=NOW)["not_run"]["x"].startswith("y")
    assert "over the" in str(
        refused(checked_request, REQUEST_PATH, raw(request(reason="y" * hub_records.MAX_REQUEST_BYTES)), now=NOW)
    )


# --- parquet footers -------------------------------------------------------------------------------


def test_a_corrupt_or_oversized_parquet_is_found_from_its_footer(tmp_path):
    good = tmp_path / "results.parquet"
    pd.DataFrame({"prompt_id": ["p0", "p1"], "seed": 0, "metric": "dino_sim", "value": [0.1, 0.2]}).to_parquet(
        good, index=False
    )
    assert hub_records.samples_problem(good) is None
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(good.read_bytes()[:-20] + b"\x00" * 20)  # the footer's length and magic overwritten
    assert "not a readable parquet file" in hub_records.samples_problem(corrupt)
    text = tmp_path / "text.parquet"
    text.write_bytes(b"PAR1 this is not parquet PAR1")
    assert "not a readable parquet file" in hub_records.samples_problem(text)
    assert "over the limit of 10" in hub_records.samples_problem(good, max_bytes=10)
    assert "2 rows, over the limit of 1" in hub_records.samples_problem(good, max_rows=1)


def test_read_request_checks_a_snapshot_file_as_checked_request_does(tmp_path):
    (tmp_path / REQUEST_PATH).parent.mkdir(parents=True)
    (tmp_path / REQUEST_PATH).write_bytes(raw(request()))
    assert hub_records.read_request(tmp_path, REQUEST_PATH, now=NOW) == request()
    (tmp_path / REQUEST_PATH).write_bytes(raw(request(submitted_at="0000")))
    with pytest.raises(MalformedRecord, match="malformed request record: field 'submitted_at'"):
        hub_records.read_request(tmp_path, REQUEST_PATH, now=NOW)


def test_contested_hashes_names_every_path_of_a_hash_claimed_twice():
    forged = f"{BENCHMARK}/FLUX.1-dev/{DIGEST[:12]}.json"
    other = "f" * 64
    records = [
        (REQUEST_PATH, request()),
        (forged, request(model="FLUX.1-dev")),
        (f"{BENCHMARK}/b/{other[:12]}.json", request(content_hash=other)),
    ]
    assert hub_records.contested_hashes(records) == {DIGEST: sorted([REQUEST_PATH, forged])}
    assert hub_records.contested_hashes(records[2:]) == {}

"""``idbench models download`` / ``models list`` and ``evaluate_pkg.models.download``, offline.

Nothing reaches the network and no model is loaded. Two local stand-ins replace the downloads:

- ``stand_in_hf_hub_download`` has ``huggingface_hub.hf_hub_download``'s signature and writes each
  file into a real Hugging Face cache layout (``models--org--name/blobs/<sha256>``,
  ``snapshots/<revision>/<file>`` relative symlinks, ``refs/main``) under a temporary cache, so the
  registry's own ``check_available`` (``try_to_load_from_cache``) is what finds them afterwards; it
  raises huggingface_hub's ``GatedRepoError`` for the gated DINOv3 repo, as the Hub answers.
- ``StandInUrlFetcher`` serves a small zip holding ``det_10g.onnx`` and ``w600k_r50.onnx`` (arbitrary
  bytes), or a hostile one, in place of GitHub's buffalo_l.zip.

The HF cache and idbench's model folder point to temporary folders through the variables the
registry reads (``HF_HUB_CACHE``, ``IDBENCH_MODELS``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import stat
import zipfile
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import errors as hub_errors

from idbench.cli import main
from idbench.evaluate_pkg.models import download as dl
from idbench.evaluate_pkg.models import registry

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

needs_insightface = pytest.mark.skipif(
    importlib.util.find_spec("insightface") is None, reason="check_available for ArcFace needs insightface installed"
)

GATED_REPO = "facebook/dinov3-vitb16-pretrain-lvd1689m"
V07_URL = "https://github.com/deepinsight/insightface/releases/download/v0.7/buffalo_l.zip"
# The paper profile's Hub models other than the gated one, written out here (not read from the code).
OPEN_HUB_MODELS = {
    "clip-vit-l-14": ("openai/clip-vit-large-patch14", "32bd64288804d66eefd0ccbe215aa642df71cc41"),
    "dinov2-base": ("facebook/dinov2-base", "f9e44c814b77203eaa57a6bdbbd535f21ede1415"),
    "laion-aesthetic-v2": ("trl-lib/ddpo-aesthetic-predictor", "e62d0b3d501a41272ad2c7d6454c99aefe8be459"),
    "grounding-dino-tiny": ("IDEA-Research/grounding-dino-tiny", "a2bb814dd30d776dcf7e30523b00659f4f141c71"),
    "sam2.1-hiera-tiny": ("facebook/sam2.1-hiera-tiny", "de431c4043854a71d8101e17995dfe596bf101a5"),
}


def _http_error(kind: type, status: int, message: str) -> Exception:
    response = httpx2.Response(status, request=httpx2.Request("GET", "https://huggingface.co/stand-in"))
    return kind(message, response=response)


class StandInHub:
    """A local stand-in for ``huggingface_hub.hf_hub_download``: same signature, writes a real cache layout."""

    def __init__(self, failures: dict[str, Exception] | None = None):
        self.calls: list[tuple[str, str, str | None, str]] = []
        self.failures = {GATED_REPO: _http_error(hub_errors.GatedRepoError, 403, "403 gated repo"), **(failures or {})}

    def __call__(self, repo_id, filename, *, revision=None, cache_dir=None, **_ignored):  # hf_hub_download's shape
        self.calls.append((repo_id, filename, revision, str(cache_dir)))
        if repo_id in self.failures:
            raise self.failures[repo_id]
        data = f"{repo_id}/{filename}@{revision}".encode()
        repo = Path(cache_dir) / ("models--" + repo_id.replace("/", "--"))
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = repo / "snapshots" / revision / filename
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(revision)
        return str(link)


def zip_bytes(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for name, data in members.items():
            bundle.writestr(name, data)
        for name, points_to in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            bundle.writestr(info, points_to)
    return buffer.getvalue()


GOOD_PACK = zip_bytes({"det_10g.onnx": b"detector bytes", "w600k_r50.onnx": b"recogniser bytes"})


class StandInUrlFetcher:
    """A local stand-in for the URL fetcher (``fetch_url(url, destination)``): serves fixed zip bytes."""

    def __init__(self, payload: bytes = GOOD_PACK, error: Exception | None = None):
        self.payload, self.error, self.urls = payload, error, []

    def __call__(self, url, destination):
        self.urls.append(url)
        if self.error is not None:
            raise self.error
        Path(destination).write_bytes(self.payload)


@pytest.fixture
def places(tmp_path, monkeypatch):
    """HF cache and idbench's model folder in tmp, through the variables the registry reads."""
    hub, models = tmp_path / "hf-cache", tmp_path / "models"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("IDBENCH_MODELS", str(models))
    assert registry.hub_cache_dir() == hub and registry.models_dir() == models
    return hub, models


@pytest.fixture
def stand_ins(monkeypatch):
    """The CLI's downloaders replaced by the stand-ins (the CLI passes none: the defaults are looked up)."""
    hub, fetcher = StandInHub(), StandInUrlFetcher()
    monkeypatch.setattr("huggingface_hub.hf_hub_download", hub)
    monkeypatch.setattr(dl, "_NETWORK", [None])  # the probe's answer: the Hub is reachable (nothing connects)
    monkeypatch.setattr(dl, "fetch_with_resume", fetcher)
    return hub, fetcher


def _role_line(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if f" {name} " in line)


def test_plan_names_what_each_role_takes(places):
    _, models = places
    steps = {step.name: step for step in dl.plan("paper")}
    assert steps["dinov2-base"].kind == "hub"
    assert steps["dinov2-base"].files == ("config.json", "model.safetensors", "preprocessor_config.json")
    assert steps["dinov2-base"].card.revision == "f9e44c814b77203eaa57a6bdbbd535f21ede1415"
    assert "accept the DINOv3 license" in steps["dinov3-vitb16"].licence
    face = steps["arcface-buffalo-l"]
    assert face.kind == "url" and face.urls[0] == V07_URL
    assert face.target == models / "insightface" / "models" / "buffalo_l"
    assert "non-commercial" in face.licence and "--accept-insightface-license" in face.licence
    tiny = {step.name: step for step in dl.plan("tiny")}
    assert (
        tiny["dlib-face"].kind == "pip" and tiny["dlib-face"].command == "pip install dlib-bin face_recognition_models"
    )
    assert all(step.kind == "local" for name, step in tiny.items() if name != "dlib-face")


@needs_insightface
def test_download_then_list_then_a_second_run_fetches_nothing(places, stand_ins, capsys):
    hub_cache, models = places
    hub, fetcher = stand_ins

    assert main(["models", "download", "--accept-insightface-license"]) == 1  # DINOv3 stays gated
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "paper: 6 fetched, 1 needs its licence accepted: dinov3-vitb16"
    gated = next(line for line in out.splitlines() if line.startswith("dinov3-vitb16:"))
    assert "accept the DINOv3 license" in gated and "hf auth login" in gated
    # every file the loaders read, at the pinned commit, into the tmp cache
    for name, (repo_id, revision) in OPEN_HUB_MODELS.items():
        asked = [(f, r, c) for (repo, f, r, c) in hub.calls if repo == repo_id]
        assert {f for f, _, _ in asked} == set(registry.HUB_FILES[name])
        assert {(r, c) for _, r, c in asked} == {(revision, str(hub_cache))}
    assert fetcher.urls == [V07_URL]
    pack = models / "insightface" / "models" / "buffalo_l"
    assert (pack / "det_10g.onnx").read_bytes() == b"detector bytes"
    assert (pack / "w600k_r50.onnx").read_bytes() == b"recogniser bytes"
    record = json.loads((pack / dl.RECORD_FILE).read_text())
    assert record["sha256"] == hashlib.sha256(GOOD_PACK).hexdigest() and record["url"] == V07_URL
    assert sorted(p.name for p in pack.parent.iterdir()) == ["buffalo_l"]  # no .part, no staging left

    assert main(["models", "list", "--profile", "paper"]) == 0
    listing = capsys.readouterr().out
    for name in (*OPEN_HUB_MODELS, "arcface-buffalo-l"):
        assert _role_line(listing, name).endswith(" present"), _role_line(listing, name)
    assert "missing (gated" in _role_line(listing, "dinov3-vitb16")
    assert f"{GATED_REPO}@{registry.get_card('dinov3-vitb16').revision}" in listing

    calls_before = len(hub.calls)
    assert main(["models", "download", "--accept-insightface-license"]) == 1
    again = capsys.readouterr().out
    assert again.splitlines()[-1] == "paper: 6 present, 1 needs its licence accepted: dinov3-vitb16"
    assert [call[0] for call in hub.calls[calls_before:]] == [GATED_REPO]  # only the gated one is asked again
    assert fetcher.urls == [V07_URL]


def test_the_insightface_pack_is_not_fetched_without_the_flag(places, stand_ins, capsys):
    _, models = places
    _, fetcher = stand_ins
    assert main(["models", "download"]) == 1
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("arcface-buffalo-l:"))
    assert "non-commercial" in line and "--accept-insightface-license" in line
    assert fetcher.urls == []
    assert not (models / "insightface").exists()
    assert out.splitlines()[-1] == (
        "paper: 5 fetched, 1 skipped: arcface-buffalo-l, 1 needs its licence accepted: dinov3-vitb16"
    )


@pytest.mark.parametrize(
    "payload, why",
    [
        (zip_bytes({"det_10g.onnx": b"d", "w600k_r50.onnx": b"r", "../escaped.onnx": b"x"}), "outside the pack folder"),
        (
            zip_bytes({"det_10g.onnx": b"d", "w600k_r50.onnx": b"r", "/tmp/absolute.onnx": b"x"}),
            "outside the pack folder",
        ),
        (
            zip_bytes({"det_10g.onnx": b"d", "w600k_r50.onnx": b"r"}, links={"link.onnx": "/etc/passwd"}),
            "symbolic link",
        ),
        (zip_bytes({"det_10g.onnx": b"d"}), "w600k_r50.onnx not in the zip"),
        (b"not a zip at all", "not a zip file"),
    ],
    ids=["dot-dot", "absolute", "symlink", "incomplete", "garbage"],
)
def test_a_hostile_or_broken_zip_is_refused_and_nothing_is_left(places, payload, why):
    _, models = places
    fetcher = StandInUrlFetcher(payload)
    report = dl.download(
        "paper", hub_download=StandInHub(), fetch_url=fetcher, accept_licenses={"insightface"}, progress=None
    )
    face = next(o for o in report.outcomes if o.step.name == "arcface-buffalo-l")
    assert face.status == dl.FAILED and "refused" in face.line and why in face.line.lower()
    packs = models / "insightface" / "models"
    assert list(packs.iterdir()) == []  # no pack, no staging folder, no .part file
    assert not (models / "insightface" / "escaped.onnx").exists() and not Path("/tmp/absolute.onnx").exists()
    assert not report.ok


def test_unpacking_counts_the_bytes_it_writes(tmp_path):
    archive = tmp_path / "pack.zip"
    archive.write_bytes(zip_bytes({"det_10g.onnx": b"d" * 3000, "w600k_r50.onnx": b"r" * 3000}))
    with pytest.raises(dl.UnsafeArchiveError, match="more than the 5000 bytes"):
        dl.unpack_pack(archive, tmp_path / "pack", max_unpacked=5000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pack.zip"]
    # one top folder shared by every member (buffalo_l/) is dropped
    archive.write_bytes(zip_bytes({"buffalo_l/det_10g.onnx": b"d", "buffalo_l/w600k_r50.onnx": b"r"}))
    dl.unpack_pack(archive, tmp_path / "pack")
    assert (tmp_path / "pack" / "det_10g.onnx").read_bytes() == b"d"


def test_each_failure_is_one_line_naming_the_step_and_the_others_go_on(places, monkeypatch):
    failures = {
        "facebook/dinov2-base": _http_error(hub_errors.RevisionNotFoundError, 404, "404 revision"),
        "openai/clip-vit-large-patch14": hub_errors.LocalEntryNotFoundError("outgoing traffic has been disabled"),
        "trl-lib/ddpo-aesthetic-predictor": ConnectionError("connection reset by peer"),
    }
    hub = StandInHub(failures)
    fetcher = StandInUrlFetcher(error=ConnectionError("no route to host"))
    lines: list[str] = []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    report = dl.download(
        "paper", hub_download=hub, fetch_url=fetcher, accept_licenses={"insightface"}, progress=lines.append
    )
    by_name = {line.split(":")[0]: line for line in lines}
    assert len(lines) == 7
    assert (
        "revision f9e44c814b77203eaa57a6bdbbd535f21ede1415 not found in facebook/dinov2-base" in by_name["dinov2-base"]
    )
    assert (
        "offline (HF_HUB_OFFLINE is set)" in by_name["clip-vit-l-14"]
        and "unset HF_HUB_OFFLINE" in by_name["clip-vit-l-14"]
    )
    assert (
        "connection reset by peer" in by_name["laion-aesthetic-v2"]
        and "check the network" in by_name["laion-aesthetic-v2"]
    )
    assert "accept the DINOv3 license" in by_name["dinov3-vitb16"]
    assert "no route to host" in by_name["arcface-buffalo-l"] and "check the network" in by_name["arcface-buffalo-l"]
    assert fetcher.urls == list(dl.BUFFALO_L_URLS)  # the second URL is tried when the first fails
    assert {o.step.name for o in report.by_status(dl.FETCHED)} == {"grounding-dino-tiny", "sam2.1-hiera-tiny"}
    assert report.summary() == (
        "paper: 2 fetched, 1 needs its licence accepted: dinov3-vitb16, "
        "4 failed: clip-vit-l-14, dinov2-base, laion-aesthetic-v2, arcface-buffalo-l"
    )


def test_a_full_disk_stops_the_command(places):
    hub = StandInHub({"openai/clip-vit-large-patch14": OSError(28, "No space left on device")})
    with pytest.raises(OSError, match="No space left"):
        dl.download("paper", hub_download=hub, fetch_url=StandInUrlFetcher(), progress=None)


@pytest.mark.slow
def test_the_tiny_profile_is_plumbing_and_made_locally(places, capsys):
    report = dl.download("tiny", hub_download=StandInHub(), fetch_url=StandInUrlFetcher(), progress=None)
    local = {o.step.name for o in report.by_status(dl.LOCAL)}
    assert local == set(registry.PROFILES["tiny"].values()) - {"dlib-face"}
    assert main(["models", "list", "--profile", "tiny"]) == 0
    listing = capsys.readouterr().out
    assert "plumbing" in listing.splitlines()[0]
    assert "plumbing, made on first use" in _role_line(listing, "clip-vit-l-14-tiny")
    dlib = _role_line(listing, "dlib-face")
    assert dlib.endswith(" present") or "pip install dlib-bin face_recognition_models" in dlib


# --- the default URL fetcher: resume, against a loopback HTTP server (no network) ----------------------


@pytest.fixture
def loopback_server(monkeypatch):
    """A local HTTP server on 127.0.0.1 serving PAYLOAD, honouring ``Range: bytes=N-`` when asked to."""
    import http.server
    import threading

    payload = bytes(range(256)) * 40
    seen_ranges: list[str | None] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked = self.headers.get("Range")
            seen_ranges.append(asked)
            start = int(asked[len("bytes=") : -1]) if asked and self.server.honour_range else 0
            body = payload[start:]
            self.send_response(206 if start else 200)
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(payload) - 1}/{len(payload)}")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.honour_range = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for variable in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(variable, raising=False)
    url = f"http://127.0.0.1:{server.server_address[1]}/buffalo_l.zip"
    yield server, url, payload, seen_ranges
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("honour_range", [True, False], ids=["resumed", "server-ignores-range"])
def test_a_partial_download_resumes(tmp_path, loopback_server, honour_range):
    server, url, payload, seen_ranges = loopback_server
    server.honour_range = honour_range
    part = tmp_path / "pack.zip.part"
    part.write_bytes(payload[:1000])  # what a killed download left
    dl.fetch_with_resume(url, part)
    assert part.read_bytes() == payload
    assert seen_ranges == ["bytes=1000-"]


def test_the_default_fetcher_fetches_nothing_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError, match="HF_HUB_OFFLINE is set"):
        dl.fetch_with_resume(V07_URL, tmp_path / "x.part")
    assert not (tmp_path / "x.part").exists()


def test_dry_run_names_sources_and_licences_and_fetches_nothing(places, stand_ins, capsys):
    hub, fetcher = stand_ins
    assert main(["models", "download", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert V07_URL in _role_line(out, "arcface-buffalo-l") and "non-commercial" in _role_line(out, "arcface-buffalo-l")
    assert "facebook/dinov2-base@f9e44c814b77203eaa57a6bdbbd535f21ede1415: config.json" in out
    assert hub.calls == [] and fetcher.urls == []


@pytest.mark.slow
def test_scoring_without_the_paper_models_names_models_download_once(places):
    """The preload error over several missing models points at `idbench models download` once, not per model."""
    from idbench.evaluate_pkg.context import Models, ScoreOptions
    from idbench.evaluate_pkg.models.base import ModelNotAvailableError

    models = Models(ScoreOptions(profile="paper"))
    with pytest.raises(ModelNotAvailableError) as caught:
        models.preload(["clip", "dinov2"])
    message = str(caught.value)
    assert message.startswith("2 models are missing")
    assert message.count("idbench models download --profile paper") == 1 and message.endswith(registry.ALL_AT_ONCE)


# --- content addresses and no network (issue 29, item 8) -----------------------------------------------


class CorruptingHub(StandInHub):
    """Writes other bytes than the blob's name (the sha256 the commit names) says: a damaged download."""

    def __call__(self, repo_id, filename, *, revision=None, cache_dir=None, **_ignored):
        link = Path(super().__call__(repo_id, filename, revision=revision, cache_dir=cache_dir))
        link.resolve().write_bytes(b"damaged in transit")
        return str(link)


def test_a_fetched_file_that_does_not_hold_its_pinned_bytes_is_refused_and_removed(places):
    report = dl.download("paper", hub_download=CorruptingHub(), fetch_url=StandInUrlFetcher(), progress=None)
    hub_lines = {o.step.name: o for o in report.outcomes if o.step.kind == "hub" and o.step.name in OPEN_HUB_MODELS}
    assert hub_lines and all(
        o.status == dl.FAILED and "failed its check" in o.line and "sha256" in o.line for o in hub_lines.values()
    )
    assert not list(places[0].rglob("blobs/*"))  # nothing damaged is kept for a later run to trust
    again = dl.download("paper", hub_download=StandInHub(), fetch_url=StandInUrlFetcher(), progress=None)
    assert all(o.status == dl.FETCHED for o in again.outcomes if o.step.name in OPEN_HUB_MODELS)


def test_a_small_file_is_checked_by_its_git_blob_address(tmp_path):
    import subprocess

    data = b'{"model_type": "dinov2"}\n'
    address = (
        subprocess.run(["git", "hash-object", "--stdin"], input=data, capture_output=True, check=True)
        .stdout.decode()
        .strip()
    )
    (tmp_path / address).write_bytes(data)
    assert dl.blob_mismatch(tmp_path / address) is None
    (tmp_path / address).write_bytes(data + b" ")
    assert "SHA-1" in dl.blob_mismatch(tmp_path / address) and not (tmp_path / address).exists()


def test_without_network_every_missing_hub_model_fails_at_once_in_one_line(places, monkeypatch):
    tries = []

    def no_route(address, timeout=None):
        tries.append((address, timeout))
        raise OSError(101, "Network is unreachable")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(dl, "_NETWORK", [])
    monkeypatch.setattr("socket.create_connection", no_route)
    monkeypatch.setattr(
        "huggingface_hub.hf_hub_download", lambda *a, **k: pytest.fail("no download is tried without network")
    )
    lines = []
    report = dl.download("paper", fetch_url=StandInUrlFetcher(), progress=lines.append)
    hub = [o for o in report.outcomes if o.step.kind == "hub"]
    assert hub and all(o.status == dl.FAILED and "no network" in o.line and "\n" not in o.line for o in hub)
    assert len(tries) == 1 and tries[0][1] == dl.NETWORK_PROBE_S  # one probe, bounded, for the whole run

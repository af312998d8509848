"""The Hugging Face Space: the build context scripts/build_space.py assembles, and a Submit page that
says why it cannot take submissions (issue 18 item 8).

The build context is checked as a maintainer makes it (the script as a subprocess, from an empty
folder) with a stand-in wheel (a zip with a wheel's name): building the real wheel and installing it
offline is the wheel smoke's step (scripts/wheel_smoke.sh). The pages run through Streamlit's AppTest,
Hub-backed ones over the local stand-in (``IDBENCH_HUB_STAND_IN``).
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from idbench.builders.registry import BENCHMARKS
from idbench.leaderboard.hubrepo import STAND_IN_ENV, LocalRepoStandIn

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "build_space.py"
WHEEL = "idbench-0.1.0-py3-none-any.whl"
APP_TIMEOUT = 60


def fake_wheel(folder: Path, name: str = WHEEL) -> Path:
    """A zip with a wheel's file name: enough for the script, which only copies it."""
    path = folder / name
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("idbench/__init__.py", "")
    return path


def build_space(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def requirement_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@pytest.fixture
def maintainer(tmp_path) -> Path:
    """An empty folder outside the repository, holding only a (stand-in) wheel."""
    folder = tmp_path / "work"
    folder.mkdir()
    fake_wheel(folder)
    return folder


# --- the build context ----------------------------------------------------------------------------------


@pytest.mark.e2e
def test_the_context_holds_the_space_files_the_wheel_and_requirements_naming_it(maintainer):
    done = build_space(maintainer, "space", "--wheel", WHEEL)
    assert done.returncode == 0, done.stderr
    out = maintainer / "space"
    assert done.stdout.strip() == str(out)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["Dockerfile", "app.py", "README.md", "requirements.txt", WHEEL]
    )
    for name in ("Dockerfile", "app.py", "README.md"):
        assert (out / name).read_bytes() == (ROOT / "space" / name).read_bytes()
    assert (out / WHEEL).read_bytes() == (maintainer / WHEEL).read_bytes()

    _, front, _ = (out / "README.md").read_text(encoding="utf-8").split("---\n", 2)
    config = yaml.safe_load(front)
    assert (config["sdk"], config["app_port"]) == ("docker", 8501)

    # Exactly the shipped wheel, by a path relative to the context, with the app's extra; the other pins kept.
    template = requirement_lines((ROOT / "space" / "requirements.txt").read_text())
    lines = requirement_lines((out / "requirements.txt").read_text())
    assert [line for line in lines if "idbench" in line] == [f"./{WHEEL}[leaderboard]"]
    others = [line for line in template if not line.startswith("-r") and not line.startswith("idbench")]
    assert others and [line for line in lines if "idbench" not in line] == others
    assert not [line for line in lines if line.startswith("-")]  # no guard, no other file or index option
    assert not [p for p in maintainer.iterdir() if p.name.startswith(".")]  # no staging left beside it


def test_the_dockerfile_copies_the_context_before_installing_it():
    text = (ROOT / "space" / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = "\n".join(lines).replace("\\\n", " ")  # continuation lines are one instruction
    instructions = [line.split(None, 1) for line in joined.splitlines() if line.strip()]
    copies = [i for i, (keyword, rest) in enumerate(instructions) if keyword == "COPY" and rest.split()[-2:-1] == ["."]]
    installs = [
        i
        for i, (keyword, rest) in enumerate(instructions)
        if keyword == "RUN" and "pip install --no-cache-dir -r requirements.txt" in rest
    ]
    assert copies and installs and copies[0] < installs[0]
    workdir = [rest.strip() for keyword, rest in instructions[: installs[0]] if keyword == "WORKDIR"][-1]
    copy_target = instructions[copies[0]][1].split()[-1]
    assert copy_target == workdir  # pip runs where the wheel was copied: the relative path resolves


@pytest.mark.e2e
def test_an_existing_out_is_refused_with_one_line_and_left_untouched(maintainer):
    out = maintainer / "space"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    done = build_space(maintainer, "space", "--wheel", WHEEL)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "exists and is not empty" in done.stderr and "Traceback" not in done.stderr
    assert [p.name for p in out.iterdir()] == ["mine.txt"] and (out / "mine.txt").read_text() == "keep me"
    assert sorted(p.name for p in maintainer.iterdir()) == sorted([WHEEL, "space"])

    (maintainer / "a-file").write_text("x")
    done = build_space(maintainer, "a-file", "--wheel", WHEEL)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and (maintainer / "a-file").read_text() == "x"


@pytest.mark.e2e
def test_an_empty_out_is_filled(maintainer):
    (maintainer / "space").mkdir()
    done = build_space(maintainer, "space", "--wheel", WHEEL)
    assert done.returncode == 0, done.stderr
    assert (maintainer / "space" / WHEEL).is_file() and (maintainer / "space" / "requirements.txt").is_file()


@pytest.mark.e2e
@pytest.mark.parametrize(
    "name, content", [("idbench-0.1.0.tar.gz", b"zip"), ("torch-2.0-py3-none-any.whl", b"zip"), (WHEEL, b"not a zip")]
)
def test_something_other_than_an_idbench_wheel_is_refused_and_nothing_written(tmp_path, name, content):
    bad = tmp_path / "bad"
    bad.mkdir()
    if content == b"zip":
        fake_wheel(bad, name)
    else:
        (bad / name).write_bytes(content)
    done = build_space(tmp_path, "space", "--wheel", str(bad / name))
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad"]


@pytest.mark.e2e
def test_the_raw_space_folder_fails_at_pip_with_a_clear_message(tmp_path):
    # Uploading space/ itself (not the built folder) must stop the Docker build at once, saying why.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-index",
            "--dry-run",
            "-r",
            str(ROOT / "space" / "requirements.txt"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "NOT-A-SPACE-FOLDER--make-one-with--python-scripts/build_space.py-OUT" in done.stderr


# --- the Submit page: why it cannot take submissions ------------------------------------------------------


def _submit_page():
    from streamlit.testing.v1 import AppTest

    from idbench.leaderboard.app import APP_PATH

    return AppTest.from_file(str(APP_PATH), default_timeout=APP_TIMEOUT).run().switch_page("views/submit.py").run()


@pytest.fixture
def clean_env(tmp_path, monkeypatch):
    """No deployment variables from the test runner's environment; a fresh home."""
    for name in (
        "SPACE_ID",
        "IDBENCH_HUB_REQUESTS",
        "IDBENCH_HUB_RESULTS",
        "IDBENCH_BENCHMARK_REPOS",
        "IDBENCH_DATA_DIR",
        STAND_IN_ENV,
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("IDBENCH_HOME", str(tmp_path / "home"))
    return monkeypatch


@pytest.fixture
def hub_backed(tmp_path, clean_env):
    """A Space over the local stand-in (no token needed) with an empty data folder."""
    clean_env.setenv("SPACE_ID", "org/leaderboard")
    clean_env.setenv(STAND_IN_ENV, str(tmp_path / "hub"))
    clean_env.setenv("IDBENCH_HUB_REQUESTS", "org/requests")
    clean_env.setenv("IDBENCH_HUB_RESULTS", "org/results")
    clean_env.setenv("IDBENCH_HUB_REFRESH_S", "0")
    clean_env.setenv("IDBENCH_DATA_DIR", str(tmp_path / "benchmarks"))
    (tmp_path / "benchmarks").mkdir()
    LocalRepoStandIn(tmp_path / "hub" / "org" / "requests", "org/requests")
    LocalRepoStandIn(tmp_path / "hub" / "org" / "results", "org/results")
    return tmp_path / "benchmarks"


@pytest.mark.browser
def test_a_space_without_hub_repos_offers_no_upload_and_says_which_variables_to_set(clean_env):
    clean_env.setenv("SPACE_ID", "org/leaderboard")
    at = _submit_page()
    assert not at.exception
    [error] = at.error
    assert error.value.startswith("Submissions are off")
    assert "IDBENCH_HUB_REQUESTS" in error.value and "IDBENCH_HUB_RESULTS" in error.value and "restart" in error.value
    assert not at.get("file_uploader") and not at.button and not at.text_input
    assert [t.value for t in at.title] == ["Submit"]


@pytest.mark.browser
def test_the_same_app_off_a_space_takes_uploads_in_its_embedded_store(clean_env):
    at = _submit_page()
    assert not at.exception and not at.error and not at.warning
    assert at.file_uploader(key="submit-file") is not None


@pytest.mark.browser
def test_a_hub_backed_space_names_the_benchmark_it_has_no_data_for(hub_backed, clean_env):
    for name in BENCHMARKS:
        if name != "charis":
            (hub_backed / name).mkdir()
    at = _submit_page()
    assert not at.exception and not at.error
    [warning] = at.warning
    assert "No benchmark data for charis" in warning.value and "IDBENCH_BENCHMARK_REPOS" in warning.value
    assert str(hub_backed) not in warning.value  # no server path on a public page
    assert at.file_uploader(key="submit-file") is not None  # the other benchmarks still take uploads

    clean_env.setenv("IDBENCH_BENCHMARK_REPOS", "charis=org/charis@0123abc")  # published: no warning
    at = _submit_page()
    assert not at.exception and not at.error and not at.warning


@pytest.mark.browser
def test_a_hub_backed_space_with_every_benchmark_in_place_says_nothing(hub_backed):
    for name in BENCHMARKS:
        (hub_backed / name).mkdir()
    at = _submit_page()
    assert not at.exception and not at.error and not at.warning
    assert at.file_uploader(key="submit-file") is not None


@pytest.mark.browser
def test_a_broken_benchmark_repos_setting_turns_submissions_off(hub_backed, clean_env):
    clean_env.setenv("IDBENCH_BENCHMARK_REPOS", "charis")
    at = _submit_page()
    assert not at.exception
    [error] = at.error
    assert error.value.startswith("Submissions are off") and "IDBENCH_BENCHMARK_REPOS" in error.value
    assert not at.get("file_uploader")


@pytest.mark.browser
def test_a_hub_backed_space_without_a_token_offers_no_upload(hub_backed, clean_env):
    from idbench.leaderboard.app import backend
    from idbench.leaderboard.store import Store

    clean_env.delenv(STAND_IN_ENV)  # the real Hub, which the page never reaches here
    clean_env.delenv("HF_TOKEN", raising=False)
    clean_env.setenv("HF_TOKEN_PATH", "/nonexistent/token")
    clean_env.setattr("huggingface_hub.get_token", lambda: None)
    clean_env.setattr(backend, "store", lambda: Store())  # no Hub to mirror in a test
    at = _submit_page()
    assert not at.exception
    [error] = at.error
    assert "HF_TOKEN" in error.value and "org/requests" in error.value
    assert not at.get("file_uploader") and not at.warning

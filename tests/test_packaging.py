"""What an installed idbench holds: one top-level name, every file read at run time, the same modules
editable and from a wheel; and the public metric-module lookup (idbench.metrics).

The wheel is built here (scripts/build_wheel.py: a clean copy of the declared sources, pip wheel
--no-deps --no-build-isolation, a few seconds); the file lists expected come from the repository's own
folders and the sample manifests, never from the wheel.
"""

from __future__ import annotations

import csv
import importlib
import pkgutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import idbench

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PACKAGE_DIR: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]  # idbench.<x> -> folder
BARE_NAMES = sorted(name for name in PACKAGE_DIR.values() if name != "idbench")  # builders, cards, ...


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory) -> set[str]:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_wheel.py"), str(out)], capture_output=True, text=True, cwd=ROOT
    )
    assert built.returncode == 0, built.stderr
    with zipfile.ZipFile(built.stdout.strip()) as wheel:
        return set(wheel.namelist())


def installed_name(repo_path: Path) -> str:
    """Where a repository file lands in the wheel: its folder's package-dir mapping, as a path."""
    relative = repo_path.relative_to(ROOT)
    for package, folder in PACKAGE_DIR.items():
        if relative.parts[0] == folder:
            return "/".join((*package.split("."), *relative.parts[1:]))
    raise AssertionError(f"{relative} is in no mapped folder")


@pytest.mark.e2e
def test_the_wheel_installs_idbench_only(wheel_files):
    top = {name.split("/")[0] for name in wheel_files}
    assert top == {"idbench", f"idbench-{idbench.__version__}.dist-info"}


@pytest.mark.e2e
def test_no_root_folder_shadows_an_installed_name(wheel_files):
    """From the repository root (the current folder, first on sys.path for ``python -m`` and for the
    Streamlit server) a folder named like an installed top-level package would be imported instead of
    it: a partial ``idbench`` folder there broke every page of a non-editable install."""
    installed = {name.split("/")[0] for name in wheel_files if not name.split("/")[0].endswith(".dist-info")}
    assert installed == {"idbench"}
    assert not any((ROOT / name).exists() for name in installed), "a root folder shadows the installed package"
    assert PACKAGE_DIR["idbench"] != "idbench"


def test_every_package_is_declared():
    # The packages list is explicit (package-dir mapping): a new subpackage must be added to it.
    on_disk = {
        ".".join((package, *init.parent.relative_to(ROOT / folder).parts))
        for package, folder in PACKAGE_DIR.items()
        for init in (ROOT / folder).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert set(PYPROJECT["tool"]["setuptools"]["packages"]) == on_disk


def sample_images() -> set[Path]:
    """Every image the shipped manifests name (the file column), resolved against the samples folder."""
    images = set()
    for manifest in (ROOT / "samples").glob("*.csv"):
        with manifest.open(newline="", encoding="utf-8") as handle:
            images |= {ROOT / "samples" / row["file"] for row in csv.DictReader(handle)}
    return images


@pytest.mark.e2e
def test_the_wheel_holds_every_file_read_at_run_time(wheel_files):
    images = sample_images()
    assert len(images) >= 60  # the 62 licensed samples, named by MANIFEST.csv and the three sources
    expected = {
        "sample manifests, licences, thresholds": [
            *(ROOT / "samples").glob("*.csv"),
            *(ROOT / "samples").glob("*.md"),
            *(ROOT / "samples").glob("*.json"),
        ],
        "sample images": sorted(images),
        "EKB data": list((ROOT / "ekb" / "data").glob("*.yaml")),
        "card templates": list((ROOT / "cards").glob("*.j2")),
        "metric modules": list((ROOT / "evaluate_pkg" / "metrics").glob("*/*.py")),
        "model configurations": list((ROOT / "evaluate_pkg" / "models" / "configs").glob("*.json")),
        "Streamlit pages": list((ROOT / "leaderboard" / "app" / "views").glob("*.py")),
        "modules": [
            p for folder in PACKAGE_DIR.values() for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts
        ],
    }
    for what, paths in expected.items():
        assert paths, what
        missing = sorted(installed_name(p) for p in paths if installed_name(p) not in wheel_files)
        assert not missing, f"{what} missing from the wheel: {missing}"
    assert len(expected["metric modules"]) == len(importlib.import_module("idbench.metrics").NAMES)


def modules_importable_here() -> set[str]:
    """The modules this environment (an editable install) finds under every declared package."""
    names = set()
    for package in PYPROJECT["tool"]["setuptools"]["packages"]:
        names.add(package)
        # Each package's own __path__: the editable finder maps idbench.<x> to its folder, but
        # idbench.__path__ holds idbench/ only, so one walk from the top would miss the mapped folders.
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__, package + "."):
            names.add(info.name)
    return names


@pytest.mark.e2e
def test_editable_and_wheel_hold_the_same_modules(wheel_files):
    packages = {name.rsplit("/", 1)[0] for name in wheel_files if name.endswith("/__init__.py")}
    in_wheel = {
        name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        for name in wheel_files
        if name.endswith(".py") and name.rsplit("/", 1)[0] in packages  # not the page and metric scripts
    }
    assert modules_importable_here() == in_wheel
    assert importlib.import_module("idbench.builders").__file__ == str(ROOT / "builders" / "__init__.py")


def test_no_bare_folder_name_is_imported():
    # pytest puts the repository root on sys.path, where `import builders` would load a second copy of
    # every module under another name. Importing the main modules must never do that.
    for module in (
        "idbench.cli",
        "idbench.demo",
        "idbench.metrics",
        "idbench.builders.build",
        "idbench.curation.pipeline",
        "idbench.evaluate_pkg.runner",
        "idbench.leaderboard.worker",
        "idbench.leaderboard.app.screens.benchmark",
        "idbench.leaderboard.app.screens.model",
    ):
        importlib.import_module(module)
    bare = sorted(name for name in sys.modules if name.split(".")[0] in BARE_NAMES)
    assert not bare, f"imported under a bare folder name: {bare}"


# --- idbench.metrics: the evaluate modules by name ---------------------------------------------------


def test_metrics_path_is_the_module_folder():
    import idbench.metrics

    for name in idbench.metrics.NAMES:
        folder = idbench.metrics.path(name)
        assert folder.name == name and (folder / f"{name}.py").is_file()
    assert idbench.metrics.path("clip_t") == ROOT / "evaluate_pkg" / "metrics" / "clip_t"


def test_metrics_path_of_an_unknown_name_lists_the_names():
    import idbench.metrics

    with pytest.raises(idbench.metrics.UnknownMetricError) as error:
        idbench.metrics.path("clip_score")
    message = str(error.value)
    assert message.startswith("no metric module 'clip_score'; available: ")  # one line, not a quoted repr
    assert "\n" not in message and all(name in message for name in ("clip_t", "dino_sim", "subject_collapse_rate"))
    assert isinstance(error.value, KeyError)


def test_evaluate_loads_a_module_from_its_path_outside_the_repo(tmp_path, monkeypatch):
    evaluate = pytest.importorskip("evaluate")
    import idbench.metrics

    monkeypatch.chdir(tmp_path)  # no repository folder to point into
    clip_t = evaluate.load(str(idbench.metrics.path("clip_t")), keep_in_memory=True)
    result = clip_t.compute(image_embeddings=[[1.0, 0.0], [0.0, 2.0]], text_embeddings=[[1.0, 1.0], [0.0, -1.0]])
    assert result["clip_t_per_sample"] == pytest.approx([2**-0.5, -1.0])  # cosines worked by hand
    assert result["clip_t"] == pytest.approx((2**-0.5 - 1.0) / 2)


# --- the Hugging Face Space's files (space/: uploaded to a Space repo, not shipped in the wheel) -------


@pytest.mark.e2e
def test_the_space_files_are_not_in_the_wheel(wheel_files):
    assert not [name for name in wheel_files if name.startswith("space/") or "/space/" in name]


def test_the_space_front_matter_and_requirements_agree_with_the_project():
    import yaml

    readme = (ROOT / "space" / "README.md").read_text(encoding="utf-8")
    _, front, _ = readme.split("---\n", 2)
    config = yaml.safe_load(front)
    # Keys of the Hub's Spaces configuration reference (hub-docs docs/hub/spaces-config-reference.md).
    assert set(config) <= {
        "title",
        "emoji",
        "colorFrom",
        "colorTo",
        "sdk",
        "app_port",
        "pinned",
        "license",
        "short_description",
    }
    assert config["sdk"] == "docker" and config["license"] == PYPROJECT["project"]["license"].lower()
    assert len(config["short_description"]) <= 60
    requirements = [
        line.strip()
        for line in (ROOT / "space" / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert f"idbench[leaderboard]=={idbench.__version__}" in requirements
    assert not [r for r in requirements if r.split("[")[0].split("=")[0] in ("torch", "transformers")]  # no model stack

    # app.py starts the packaged app on the port the front matter declares.
    import runpy

    app = runpy.run_path(str(ROOT / "space" / "app.py"), run_name="space_app")
    argv = app["command"]()
    assert argv[argv.index("run") + 1] == str(ROOT / "leaderboard" / "app" / "main.py")
    assert argv[argv.index("--server.port") + 1] == str(config["app_port"])

"""Shared fixtures. Nothing here, or in any test, reaches the network."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re

# Before anything imports huggingface_hub or datasets: tests never reach for a hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
# One share of the cores per xdist worker, set before numpy, torch or OpenCV is imported (each reads it
# once). Left alone, every worker's torch and OpenCV start a thread per core: two workers on two cores
# then fight over them, and a pair of CogCanvas scorings took 72 s instead of 47 s (run side by side).
# Subprocesses (the CLI, Streamlit, accelerate) inherit the setting.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _threads = str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENCV_FOR_THREADS_NUM"):
        os.environ.setdefault(_variable, _threads)
# idbench's own caches (tiny models, features, datasets) go to one temporary folder per test session,
# never into the user's home, and the folder goes when the process ends: a suite leaves about 50 MB of
# tiny models and features there, and repeated runs once filled a CI machine's disk. (xdist's workers
# inherit the first process's variables below, so their own folders stay empty.)
import atexit
import shutil
import tempfile

_SESSION_CACHE = tempfile.mkdtemp(prefix="idbench-tests-")
atexit.register(shutil.rmtree, _SESSION_CACHE, ignore_errors=True)
for _variable, _sub in (
    ("IDBENCH_MODELS", "models"),
    ("IDBENCH_CACHE", "cache"),
    ("IDBENCH_DATASETS_CACHE", "datasets"),
    ("IDBENCH_HOME", "home"),
):
    os.environ.setdefault(_variable, os.path.join(_SESSION_CACHE, _sub))
# The first process's cache, which its xdist workers inherit: the scorings that default to it and the
# fixtures below share one feature cache across the whole session.
_SHARED_CACHE = os.environ["IDBENCH_CACHE"]

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def noise_jpeg(seed: int, size: tuple[int, int] = (64, 48)) -> bytes:
    """A small JPEG of smooth random blobs: every seed gives a different picture (and pHash)."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, size=(6, 8, 3), dtype=np.uint8)
    image = Image.fromarray(coarse).resize(size, Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def write_manifest(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


COLLAPSE_HEADER = ["file", "name", "kind", "source", "license", "attribution"]


def make_collapse_source(folder: Path, n: int, first_seed: int = 0) -> Path:
    """An identity-collapse source folder with ``n`` distinct generated subjects."""
    rows = []
    for k in range(n):
        name = f"img/subject_{k:03d}.jpg"
        (folder / "img").mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(noise_jpeg(first_seed + k))
        rows.append([name, f"the subject number {k}", "human" if k % 2 else "animal", "generated", "CC0-1.0", ""])
    return write_manifest(folder / "manifest.csv", COLLAPSE_HEADER, rows)


@pytest.fixture
def fresh_cache(tmp_path_factory) -> str:
    """A datasets cache of its own: load_dataset can serve stale data for a rewritten local folder."""
    return str(tmp_path_factory.mktemp("hf-cache"))


@pytest.fixture(scope="session")
def shared_features(tmp_path_factory) -> Path:
    """One feature cache for the session: the scorings without a ``cache_dir`` (``$IDBENCH_CACHE/features``
    of the first process, which the xdist workers inherit) and the fixtures that score the same pictures
    with the same tiny models (the leaderboard stores, the sanity battery, the queue tests through
    ``warm_home``): what one computed, the next reads, as a worker's jobs share ``home/features``. A cache
    entry is named by the content of its input and of the weights (the tiny models are seeded: every
    worker makes the same files) and written to a temporary name then renamed (``features.FeatureStore``),
    so the workers share the folder without a lock. Tests that count what is computed, or that inject a
    fault into the computing, keep caches of their own."""
    folder = Path(_SHARED_CACHE) / "features"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def warm_home(tmp_path, shared_features) -> Path:
    """A fresh ``$IDBENCH_HOME`` (store, results, logs of its own) whose feature cache is the session's
    shared one: a worker there reads what any earlier test computed for the same pictures (a tiny
    identity-collapse collage: 26 s cold, 1 s warm). For the tests about queues, stores and faults, not
    about what the scoring computes."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "features").symlink_to(shared_features, target_is_directory=True)
    return home


@pytest.fixture
def seeded_cache(tmp_path, shared_features):
    """``seeded_cache(name)``: a cache folder of the test's own (``tmp_path/name``; its judge answers,
    what it computes anew) that starts with every feature the session's shared cache holds, as hard
    links: for the tests that count the judge's requests, which a shared cache folder would also share
    (``cache_dir/judge``). An entry is replaced by a rename, never rewritten in place, so a link never
    changes the shared file; one renamed away mid-copy (another worker's temporary) is skipped."""

    def seed(name: str = "cache") -> Path:
        folder = tmp_path / name
        for source in shared_features.rglob("*.npz"):
            if source.name.startswith(".tmp-"):
                continue
            target = folder / source.relative_to(shared_features)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, target)
            except FileNotFoundError:
                pass
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    return seed


# --- a dataset repo in the Hugging Face cache, as a download leaves it ---------------------------

HUB_REVISION = "0123456789abcdef0123456789abcdef01234567"


def place_dataset_in_hub_cache(cache: Path, repo_id: str, source: Path) -> Path:
    """``source`` (recursively) as huggingface_hub stores a download of dataset ``repo_id`` at HUB_REVISION."""
    repo = cache / ("datasets--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / HUB_REVISION
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    for file in sorted(p for p in source.rglob("*") if p.is_file()):
        data = file.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / file.relative_to(source)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(HUB_REVISION)
    return snapshot


# --- the suite contract: every metric of a spec is computed or reported not run ------------------


def check_suite_contract(spec, summary: dict, produced: set[str], suite) -> None:
    """One scoring run of ``spec`` against its suite's contract (see idbench.evaluate_pkg.suites).

    Every metric of ``spec.metric_suite`` is either among the ``produced`` metric names of the
    results or in ``summary["not_run"]`` with a non-empty reason, never both; nothing is produced
    besides suite metrics, ``<judged metric>.failure_rate`` and the suite's declared DIAGNOSTICS.
    """
    declared = {m.name for m in spec.metric_suite}
    not_run = summary["not_run"]
    for metric in declared:
        if metric in not_run:
            assert metric not in produced, f"{spec.name}: {metric} is both computed and reported not run"
            assert isinstance(not_run[metric], str) and not_run[metric].strip(), (
                f"{spec.name}: {metric} not run without a reason"
            )
        else:
            assert metric in produced, f"{spec.name}: {metric} was neither computed nor reported not run"
    assert set(not_run) <= declared, f"{spec.name}: not_run names metrics outside the suite: {set(not_run) - declared}"
    from idbench.evaluate_pkg.copies import DIAGNOSTICS as COPY_DIAGNOSTICS  # the runner's, for every benchmark

    allowed = (
        declared
        | {f"{m.name}.failure_rate" for m in spec.metric_suite if m.judged}
        | set(getattr(suite, "DIAGNOSTICS", {}))
        | set(COPY_DIAGNOSTICS)
    )
    assert produced <= allowed, f"{spec.name}: produced metrics outside its suite: {sorted(produced - allowed)}"


# --- test tiers: markers applied here, by rule, so that no test file is forgotten ---------------------
#
# slow: loads scoring models or diffusers pipelines (tiny ones included), runs a worker or the demo; also
#       a few model-free tests that compute for seconds each (listed below, measured).
# browser: a Streamlit server, Chromium or streamlit's AppTest.
# e2e: starts a Python interpreter as a subprocess (the CLI, `accelerate launch`, the wheel).
# `pytest -m "not slow and not browser and not e2e"` is the fast tier; there the model loaders raise
# (see _guard_model_loading), so a test that loads a model and is not marked slow fails loudly.

# Fixtures (by name, wherever they are defined) that load models, score, run a worker or the demo:
# every test that uses one, directly or through another fixture, is slow.
SLOW_FIXTURES: frozenset[str] = frozenset()

# Whole files, by name (they keep their names when they move between folders).
FILE_MARKS: dict[str, tuple[str, ...]] = {
    "test_distributed_store.py": ("e2e", "slow"),  # `accelerate launch` and `idbench score` in subprocesses
    "test_layers.py": ("e2e",),  # runs lint-imports (import-linter's CLI) in a subprocess
    # Makes every baseline of every sample benchmark as PNGs at full size: about a minute in all.
    "test_baselines.py": ("slow",),
}

# Single tests where neither a fixture nor the file says it: "file name::test name" (no parameters).
TEST_MARKS: dict[str, tuple[str, ...]] = {
    # Asks the diffusers pipeline loader for a model that is not in the cache (the refusal under test).
    "test_generate.py::test_refusals_are_one_error": ("slow",),
    "test_user_errors.py::test_build_whose_curation_stage_lacks_its_model_is_one_line": ("slow",),  # same, curation's
    # No model, but seconds of computing each (measured on one core): kept out of the fast tier's 2 minutes.
    # Monte Carlo checks of the tiering rule's error rate.
    "test_board_claims.py::test_equal_models_are_split_into_tiers_at_most_at_the_nominal_rate": ("slow",),
    # The copy search over rotated, scaled and pasted copies, and over pictures that copy nothing.
    "test_copies.py::test_a_copy_in_any_pose_is_flagged": ("slow",),
    "test_copies.py::test_pictures_that_copy_nothing_are_not_flagged": ("slow",),
    "test_copies.py::test_a_mannequin_is_not_a_copy": ("slow",),
    # Decoding and reducing 6000-pixel images.
    "test_bounded_memory.py::test_a_6000_pixel_png_is_reduced_to_the_working_size_and_matches_pillows_own_resize": (
        "slow",
    ),
    "test_bounded_memory.py::test_every_encoder_receives_at_most_the_working_size": ("slow",),
    "test_bounded_memory.py::test_exif_orientation_is_applied_after_the_reduction": ("slow",),
    # Bootstrap intervals, computed twice to show they are seeded.
    "test_alignment.py::test_intervals_hold_the_estimate_and_are_seeded": ("slow",),
    "test_alignment.py::test_cis_are_seeded": ("slow",),
    # A rate-limit window filled with real submissions; judged scoring over three built benchmarks.
    "test_admin_and_limits.py::test_rate_limit_counts_new_submissions_per_submitter": ("slow",),
    "test_judged_scoring.py::test_without_a_judge_the_judged_metrics_are_not_run": ("slow",),
    # Generates a whole submission of every sample benchmark.
    "test_generate.py::test_every_benchmark_generates_a_valid_submission": ("slow",),
}


# What a function's own source shows, by marker: a test is marked when its function, a fixture of its
# module that it uses, or a helper function of its module that either calls (transitively) shows it.
SOURCE_SIGNS = {
    "browser": lambda text: "AppTest" in text or "streamlit_server" in text or "playwright" in text,
    # tests/next_steps.py runs a printed `idbench serve` as a subprocess
    "e2e": lambda text: ("subprocess." in text and "sys.executable" in text) or "next_steps" in text,
    "slow": lambda text: _SLOW_SIGN.search(text) is not None,
}
# Loading a model (the tiny profile included: its models are made, then loaded), scoring a submission,
# filling a store with scored results, running a worker, generating with a diffusers pipeline, the demo.
_SLOW_SIGN = re.compile(
    r"""profile\s*=\s*["']tiny|["']--profile["'],\s*["']tiny|\bload_model\(|make_tiny|ensure_tiny|\bModels\("""
    r"""|from_pretrained|\bscore_submission\(|\bidbench\.score\(|\bscore\(|main\(\[\s*["'](score|demo|run|work)["']"""
    r"""|\bfill_store\(|\bwork_once\(|\brun_worker\(|\bworker\.|\brun_demo\(|\bdemo\("""
    r"""|\bdiffusers\.[A-Z]\w*\(|save_pretrained|random_stable_diffusion|load_generator\(\s*["']diffusers"""
    r"""|\bload_(clip|dinov2|dinov3|dlib_face|arcface|grounding_dino|sam2|aesthetic)\("""
    r"""|\btransformers\.[A-Z]\w*Model\w*\(|open_clip\.create_model|torch\.load\("""
)


def _module_functions(path: Path) -> dict[str, tuple[str, set[str]]]:
    """Every function of a test module: name -> (its source, the names it mentions)."""
    import ast

    cached = _FUNCTIONS.get(path)
    if cached is None:
        text = path.read_text(encoding="utf-8")
        cached = {}
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                # its decorators too: @pytest.mark.parametrize("maker", [make_tiny_sam2, ...])
                segments = [ast.get_source_segment(text, part) or "" for part in (*node.decorator_list, node)]
                cached[node.name] = ("\n".join(segments), names)
        for node in tree.body:  # module constants: TINY = ScoreOptions(profile="tiny") shows through its name
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)} if node.value else set()
                for target in targets:
                    if isinstance(target, ast.Name) and target.id not in cached:
                        cached[target.id] = (ast.get_source_segment(text, node.value) or "", names)
        _FUNCTIONS[path] = cached
    return cached


_FUNCTIONS: dict[Path, dict[str, tuple[str, set[str]]]] = {}


def _signed(path: Path, start: set[str], sign) -> bool:
    """Does a function among ``start``, or one they mention (transitively, in the module), show ``sign``?"""
    functions = _module_functions(path)
    seen, todo = set(), [name for name in start if name in functions]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        text, mentioned = functions[name]
        if sign(text):
            return True
        todo.extend(m for m in mentioned if m in functions and m not in seen)
    return False


def tier_marks(item) -> set[str]:
    """The tier markers the rules give ``item`` (besides any it carries itself)."""
    path = Path(str(item.path))
    marks = set(FILE_MARKS.get(path.name, ()))
    marks.update(TEST_MARKS.get(f"{path.name}::{getattr(item, 'originalname', item.name)}", ()))
    if SLOW_FIXTURES.intersection(item.fixturenames):
        marks.add("slow")
    if path.suffix == ".py":
        start = {getattr(item, "originalname", item.name), *item.fixturenames}
        marks.update(marker for marker, sign in SOURCE_SIGNS.items() if _signed(path, start, sign))
    return marks


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: it reads these markers
def pytest_collection_modifyitems(config, items):
    for item in items:
        for name in sorted(tier_marks(item)):
            item.add_marker(name)


# --- the fast tier loads no model: the loaders raise there ------------------------------------------


class ModelLoadInFastTier(BaseException):
    """A BaseException, so that code catching Exception (a worker recording a failure) cannot hide it."""


_GUARD_MESSAGE = (
    "{what} was called in the fast tier (tests deselected with -m 'not slow'); this test loads a model: "
    "mark it slow (tests/conftest.py: SLOW_FIXTURES, FILE_MARKS or TEST_MARKS)"
)
# module -> functions that make or load a model; they are replaced in the module and wherever an
# imported module holds them (``from registry import load_model``).
_GUARDED_FUNCTIONS = {
    "idbench.evaluate_pkg.models.registry": ("load_model", "ensure_tiny", "make_tiny"),
    "idbench.evaluate_pkg.models.clip": ("load_clip", "make_tiny_clip"),
    "idbench.evaluate_pkg.models.dino": ("load_dinov2", "load_dinov3", "make_tiny_dinov2", "make_tiny_dinov3"),
    "idbench.evaluate_pkg.models.detection": (
        "load_grounding_dino",
        "load_sam2",
        "make_tiny_grounding_dino",
        "make_tiny_sam2",
    ),
    "idbench.evaluate_pkg.models.faces": ("load_dlib_face", "load_arcface", "make_tiny_arcface"),
    "idbench.evaluate_pkg.models.aesthetic": ("load_aesthetic", "make_tiny_aesthetic"),
    "idbench.generation.adapters": ("load_pipeline",),
}
# module -> classes whose from_pretrained loads weights (a test may build a model without idbench).
_GUARDED_CLASSES = {
    "transformers.modeling_utils": ("PreTrainedModel",),
    "diffusers.pipelines.pipeline_utils": ("DiffusionPipeline",),
    "diffusers.models.modeling_utils": ("ModelMixin",),
}
_guard_hits: list[str] = []


def _raiser(what: str):
    def refuse(*args, **kwargs):
        _guard_hits.append(what)
        raise ModelLoadInFastTier(_GUARD_MESSAGE.format(what=what))

    return refuse


def _guard_module(module) -> dict:
    """Replace the model loaders of ``module``; returns {original function: its replacement}."""
    import sys

    replaced = {}
    for name in _GUARDED_FUNCTIONS.get(module.__name__, ()):
        original = getattr(module, name, None)
        if callable(original):
            replaced[original] = _raiser(f"{module.__name__}.{name}")
            setattr(module, name, replaced[original])
    for name in _GUARDED_CLASSES.get(module.__name__, ()):
        cls = getattr(module, name, None)
        if cls is not None:
            cls.from_pretrained = classmethod(_raiser(f"{module.__name__}.{name}.from_pretrained"))
            # a random tiny model built in memory is a model too: every subclass's __init__ reaches this one
            cls.__init__ = _raiser(f"{module.__name__}.{name}() (a model built in memory)")
    if replaced:  # names bound by `from module import name` in modules imported before the guard
        for other in list(sys.modules.values()):
            namespace = getattr(other, "__dict__", None)
            if not isinstance(namespace, dict) or other is module:
                continue
            for key, value in list(namespace.items()):
                if callable(value) and not isinstance(value, type):
                    try:
                        replacement = replaced.get(value)
                    except TypeError:  # unhashable
                        continue
                    if replacement is not None:
                        namespace[key] = replacement
    return replaced


class _GuardOnImport:
    """A meta-path finder: a guarded module imported after the guard is installed is guarded as it loads."""

    def find_spec(self, name, path=None, target=None):
        if name not in _GUARDED_FUNCTIONS and name not in _GUARDED_CLASSES:
            return None
        import importlib.util
        import sys

        sys.meta_path.remove(self)  # find the real spec, then wrap its loader
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_guard(module):
            exec_module(module)
            _guard_module(module)

        spec.loader.exec_module = exec_and_guard
        return spec


def _guard_model_loading() -> None:
    import sys

    for name in (*_GUARDED_FUNCTIONS, *_GUARDED_CLASSES):
        if name in sys.modules:
            _guard_module(sys.modules[name])
    sys.meta_path.insert(0, _GuardOnImport())


def pytest_collection_finish(session):
    """With `-m` excluding slow (the fast tier), no model may load from here on."""
    markexpr = session.config.getoption("markexpr", "") or ""
    if "slow" in markexpr and not any(item.get_closest_marker("slow") for item in session.items):
        _guard_model_loading()
        session.config._idbench_fast_tier = True


@pytest.fixture(autouse=True)
def _no_model_was_loaded(request):
    """A guard hit that the code under test caught and hid still fails the test."""
    _guard_hits.clear()
    yield
    if _guard_hits:
        pytest.fail(_GUARD_MESSAGE.format(what=_guard_hits[0]), pytrace=False)

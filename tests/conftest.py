"""Shared fixtures, and the check of every test's tier markers (plain helpers are in tests/helpers.py).
Nothing here, or in any test, reaches the network."""

from __future__ import annotations

import os

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

import pytest  # noqa: E402
from helpers import tier_errors, untiered_module_error  # noqa: E402


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


# --- test tiers: each test file states its own; the rule here only checks it -------------------------
#
# slow: loads scoring models or diffusers pipelines (tiny ones included), runs a worker or the demo; also
#       a few model-free tests that compute for seconds each (marked by hand, with the measurement).
# browser: a Streamlit server, Chromium or streamlit's AppTest.
# e2e: starts a Python interpreter as a subprocess (the CLI, `accelerate launch`, the wheel).
# `pytest -m "not slow and not browser and not e2e"` is the fast tier; there the model loaders raise
# (see _guard_model_loading), so a test that loads a model and is not marked slow fails loudly.
#
# Every test module states its tier where its tests are, after its imports: `pytestmark =
# [pytest.mark.slow]` (the markers all its tests need), or `pytestmark: list = []` and a comment for the
# fast tier; a test that needs more than its file's markers carries its own (`@pytest.mark.e2e`). The
# rule (tests/helpers.py: SOURCE_SIGNS, SLOW_FIXTURES) adds no marker: it checks. A test module without
# `pytestmark`, or a test without a marker the rule says it needs (its source loads a model, drives a
# browser, starts Python), fails to collect, with one line per test saying what to add.


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """A test module (or class) that breaks the tier rule is a collection error: one line per test."""
    report = yield
    if report.passed and isinstance(collector, (pytest.Module, pytest.Class)):
        problems = []
        if isinstance(collector, pytest.Module):
            untiered = untiered_module_error(collector.nodeid, vars(collector.obj))
            problems += [untiered] if untiered else []
        for item in report.result:
            if isinstance(item, pytest.Function):
                problems += [line for line in tier_errors(item) if line not in problems]
        if problems:
            report.outcome = "failed"
            report.longrepr = "\n".join(problems)
            report.result = []
    return report


# --- the fast tier loads no model: the loaders raise there ------------------------------------------


class ModelLoadInFastTier(BaseException):
    """A BaseException, so that code catching Exception (a worker recording a failure) cannot hide it."""


_GUARD_MESSAGE = (
    "{what} was called in the fast tier (tests deselected with -m 'not slow'); this test loads a model: "
    "mark it slow (@pytest.mark.slow on the test, or in its file's pytestmark)"
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

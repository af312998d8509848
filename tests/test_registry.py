"""The benchmark registry: lookups, register(), the idbench.benchmarks entry point, and the layering
that lets builders describe every benchmark without importing the layers above them."""

from __future__ import annotations

import subprocess
import sys
import warnings
from importlib.metadata import EntryPoint

import pytest
from test_toy_benchmark import SPEC as TOY

import idbench.builders.registry as registry
from idbench.builders.registry import ENTRY_POINT_GROUP, Registry, UnknownBenchmarkError, get_benchmark
from idbench.builders.spec import SpecError, resolve

pytestmark: list = []  # the fast tier, but for the tests marked one by one below


def test_unknown_name_is_one_line_listing_what_exists():
    with pytest.raises(UnknownBenchmarkError) as caught:
        get_benchmark("nope")
    assert str(caught.value) == "unknown benchmark 'nope'; known: identity-collapse, charis, cogcanvas"
    assert isinstance(caught.value, KeyError)  # callers that caught KeyError still do


def test_register_adds_a_benchmark_and_refuses_a_clash():
    try:
        assert registry.register(TOY) is TOY and get_benchmark(TOY.name) is TOY
        registry.register(TOY)  # the same object again is harmless
        other = type(TOY)(**{**TOY.__dict__, "title": "Another Toy"})
        with pytest.raises(ValueError, match="already registered"):
            registry.register(other)
    finally:
        registry.unregister(TOY.name)
    assert TOY.name not in registry.BENCHMARKS


def _points(*values: tuple[str, str]):
    """A stand-in for importlib.metadata.entry_points over the given (name, value) pairs."""

    def select(group: str, name: str | None = None) -> list[EntryPoint]:
        if group != ENTRY_POINT_GROUP:
            return []
        return [EntryPoint(n, v, group) for n, v in values if name in (None, n)]

    return select


def test_entry_points_load_lazily_and_a_broken_one_is_skipped(monkeypatch):
    calls = []
    points = _points(("toy", "test_toy_benchmark:SPEC"), ("broken", "no_such_module_xyz:SPEC"))
    monkeypatch.setattr(
        registry, "entry_points", lambda group, **kw: calls.append(kw.get("name")) or points(group, **kw)
    )
    fresh = Registry({"charis": get_benchmark("charis")})
    assert fresh["charis"].name == "charis" and calls == []  # a known name never reads the entry points
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fresh["toy-bench"] is TOY
    # No entry point carries the name "toy-bench" (this one is called "toy"), so all of them are read.
    assert calls == ["toy-bench", None]
    assert any("broken = no_such_module_xyz:SPEC" in str(w.message) for w in caught)
    assert list(fresh) == ["charis", "toy-bench"]  # page order: charis 1, toy 50
    fresh["toy-bench"]
    assert calls == ["toy-bench", None]  # read once


def test_a_lookup_loads_only_the_entry_point_of_that_name(monkeypatch):
    """Naming one benchmark imports its spec alone: a broken or heavy plugin beside it is never touched."""
    monkeypatch.setattr(
        registry,
        "entry_points",
        _points(("toy-bench", "test_toy_benchmark:SPEC"), ("broken", "no_such_module_xyz:SPEC")),
    )
    fresh = Registry()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fresh["toy-bench"] is TOY


def test_the_built_in_benchmarks_are_entry_points_of_idbench():
    """The three built-ins reach the registry the way a plugin does (pyproject.toml's entry points)."""
    from importlib.metadata import entry_points

    points = {p.name: p.value for p in entry_points(group=ENTRY_POINT_GROUP)}
    assert points["charis"] == "idbench.benchmarks.charis.spec:SPEC"
    assert points["cogcanvas"] == "idbench.benchmarks.cogcanvas.spec:SPEC"
    assert points["identity-collapse"] == "idbench.benchmarks.identity_collapse.spec:SPEC"
    assert list(Registry()) == ["identity-collapse", "charis", "cogcanvas"]


def test_an_entry_point_may_name_a_function_returning_a_spec(monkeypatch):
    monkeypatch.setattr(registry, "entry_points", _points(("toy", "test_registry:make_toy")))
    assert Registry({})["toy-bench"] is TOY


def make_toy():
    return TOY


def test_resolve_names_the_field_when_the_code_is_missing():
    assert resolve("idbench.builders.spec:SpecError") is SpecError
    with pytest.raises(SpecError, match=r"benchmark x, suite: cannot load 'idbench.builders.spec:Nope'"):
        resolve("idbench.builders.spec:Nope", "benchmark x, suite")


def test_specs_check_themselves():
    with pytest.raises(SpecError, match="reference_config 'refs' is not one of its configs"):
        type(TOY)(**{**TOY.__dict__, "reference_config": "refs"})
    with pytest.raises(SpecError, match="group_size_axis and group_sizes go together"):
        type(TOY)(**{**TOY.__dict__, "group_size_axis": "scene"})


def test_subject_breakdowns_and_the_default_group_size_are_checked():
    from dataclasses import replace

    from idbench.builders.registry import get_benchmark
    from idbench.builders.spec import SubjectBreakdown

    cog = get_benchmark("cogcanvas")
    with pytest.raises(SpecError, match="default_group_size 7 is not one of its group_sizes"):
        replace(cog, default_group_size=7)
    with pytest.raises(SpecError, match="the reference column 'shoe_size' is missing"):
        replace(cog, subject_breakdowns=(SubjectBreakdown("shoe", ("slot",), "shoe_size", via="ref_id"),))
    with pytest.raises(SpecError, match="'mood' is not a field of its records"):
        replace(cog, subject_breakdowns=(SubjectBreakdown("mood", ("item",), "mood"),))
    with pytest.raises(SpecError, match="has no slot_records"):
        replace(cog, slot_records=None)
    with pytest.raises(SpecError, match="differ from its breakdowns"):
        replace(cog, subject_breakdowns=(SubjectBreakdown("n_persons", ("image",), "n_persons"),))
    with pytest.raises(ValueError, match="levels"):
        SubjectBreakdown("x", ("person",), "gender")


@pytest.mark.e2e
def test_builders_import_no_higher_layer():
    """Building (every recipe, the card, the registry) loads neither curation, the scorer nor the leaderboard."""
    code = (
        "import sys\n"
        "from idbench.builders.registry import BENCHMARKS\n"
        "import idbench.builders.build, idbench.builders.publish\n"
        "for spec in BENCHMARKS.values(): spec.load('recipe')\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[:2] in (['idbench', 'curation'], ['idbench', 'evaluate_pkg'], ['idbench', 'leaderboard'], ['idbench', 'cli']))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("name", ["charis", "cogcanvas", "identity-collapse"])
def test_each_built_in_folder_ships_its_developer_card(name):
    """benchmarks/<name>/README.md ships with the package and names the metrics that rank models."""
    from importlib.resources import files

    spec = get_benchmark(name)
    package = spec.suite.split(":")[0].rsplit(".", 1)[0]  # idbench.benchmarks.<folder>
    text = files(package).joinpath("README.md").read_text()
    assert f"(`{name}`)" in text.splitlines()[0]
    missing = [m for m in spec.ranking if f"`{m}`" not in text and not m.startswith("retrieval_")]
    assert missing == []


@pytest.mark.e2e
def test_loading_every_spec_imports_no_model_stack():
    """A spec is a description: listing the benchmarks (every entry point loaded) imports no torch or
    transformers, so commands that only read specs (help, template, validate) stay light."""
    code = (
        "import sys\n"
        "from idbench.builders.registry import BENCHMARKS\n"
        "assert len(list(BENCHMARKS)) >= 3\n"
        "print(sorted(m for m in ('torch', 'transformers', 'diffusers', 'open_clip') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"

"""The tier check of tests/conftest.py on hand-made tests: each test file states its tier markers, and a
test whose source shows what a tier is for (a model loaded, a browser, a Python subprocess) but lacks its
marker is one line of a collection error. The rule is tests/helpers.py's ``tier_errors``."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import tier_errors, untiered_module_error

pytestmark: list = []  # the fast tier: the rule reads source text, nothing is loaded or started

# Spelled in two parts so that the rule, which reads this file too, does not take its tests for ones that
# load a model.
LOADS = "load_" + "model("


def made_test(tmp_path: Path, source: str, marks: tuple[str, ...] = ()) -> SimpleNamespace:
    """A collected test as the check sees it: test_it of a module of ``source``, carrying ``marks``."""
    path = tmp_path / "test_made.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return SimpleNamespace(
        path=path,
        name="test_it[a]",
        originalname="test_it",
        fixturenames=["tmp_path"],
        nodeid="tests/test_made.py::test_it[a]",
        iter_markers=lambda: [getattr(pytest.mark, name).mark for name in marks],
    )


SOURCE = f"""
    def _scores():
        return {LOADS}"clip")

    def test_it(tmp_path):
        assert _scores()
"""


def test_a_test_that_loads_a_model_without_the_slow_mark_is_one_line(tmp_path):
    assert tier_errors(made_test(tmp_path, SOURCE)) == [
        f"tests/test_made.py::test_it: loads a model, scores or runs a worker (matched '{LOADS}' in _scores) "
        "but is not marked slow; add @pytest.mark.slow or the file's pytestmark"
    ]


def test_the_same_test_marked_slow_is_not_reported(tmp_path):
    assert tier_errors(made_test(tmp_path, SOURCE, marks=("slow",))) == []


def test_a_test_that_needs_no_tier_needs_no_mark(tmp_path):
    assert tier_errors(made_test(tmp_path, "def test_it(tmp_path):\n    assert 1 + 1 == 2\n")) == []


def test_a_module_without_pytestmark_is_named():
    assert untiered_module_error("tests/test_made.py", {"pytestmark": []}) is None
    error = untiered_module_error("tests/test_made.py", {"test_it": None})
    assert error.startswith("tests/test_made.py: states no tier; add `pytestmark = [pytest.mark.slow]`")


def test_no_test_module_imports_conftest():
    """Helpers are imported from tests/helpers.py; conftest is pytest's, for fixtures and hooks."""
    tests = Path(__file__).resolve().parent
    importing = [
        str(path.relative_to(tests))
        for path in sorted(tests.rglob("*.py"))
        if re.search(r"^\s*(from conftest import|import conftest\b)", path.read_text(encoding="utf-8"), re.M)
    ]
    assert importing == []

"""Every import in a code block of README.md and docs/*.md works.

The examples in the docs are not run, so a module that moves leaves them importing a name that is gone
and nothing says so. Here each ``import X`` / ``from X import a, b`` line of a fenced code block
(```python or ```py blocks, and plain ``` blocks, whose import lines are taken too; shell, JSON and
other blocks are skipped) is one test case, named by its file and line: the module must import and
each name must be an attribute of it or a submodule.

A repository folder is not a package of its own: ``evaluate_pkg.judge`` imports when the repository
root is the current folder, but installed it is ``idbench.evaluate_pkg.judge`` (pyproject.toml's
package-dir), so such a name fails here with the name to use, and the root is kept off ``sys.path``
while a line is imported.

Fast tier (no marker): about 6 s on one core, most of it torch, which docs/attr-vqa.md's
``idbench.benchmarks.cogcanvas.vqa`` imports; no model is loaded.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYTHON_BLOCKS = {"python", "py", "python3", "pycon"}
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([^\s`]*)")
IMPORT_LINE = re.compile(r"^(import\s+\w|from\s+\S+\s+import\b)")


@dataclass(frozen=True)
class DocImport:
    file: str  # relative to the repository root
    line: int
    source: str  # the statement as written (several lines for a parenthesised name list)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def imports_in_markdown(text: str, file: str = "<text>") -> list[DocImport]:
    """The import statements of the Python and plain fenced code blocks of a Markdown text."""
    found: list[DocImport] = []
    fence: str | None = None  # the open block's fence, None outside a block
    take = False
    lines = text.splitlines()
    k = 0
    while k < len(lines):
        line = lines[k]
        opened = FENCE.match(line)
        if fence is None:
            if opened:
                fence = opened.group(1)
                take = opened.group(2).lower() in PYTHON_BLOCKS | {""}
            k += 1
            continue
        if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) and not opened.group(2):
            fence = None
            k += 1
            continue
        code = line.strip()
        code = code[4:] if code.startswith((">>> ", "... ")) else code
        if take and IMPORT_LINE.match(code):
            start, statement = k, code
            while statement.count("(") > statement.count(")") and k + 1 < len(lines):  # a name list over lines
                k += 1
                statement += "\n" + lines[k].strip()
            found.append(DocImport(file, start + 1, statement))
        k += 1
    return found


def all_doc_imports() -> list[DocImport]:
    return [
        found
        for path in DOCS
        for found in imports_in_markdown(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]


def repository_folders() -> dict[str, str]:
    """Folder at the repository root -> the package it is installed as (pyproject.toml's package-dir)."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {folder: package for package, folder in mapping.items()}


def import_off_the_root(name: str):
    """``importlib.import_module(name)`` with the repository root off ``sys.path`` (pytest run from the root
    puts it there), so only installed names import."""
    hidden = [entry for entry in sys.path if Path(entry or ".").resolve() == ROOT]
    for entry in hidden:
        sys.path.remove(entry)
    try:
        return importlib.import_module(name)
    finally:
        sys.path[:0] = hidden


def problems_of(found: DocImport) -> list[str]:
    """What is wrong with one import statement: [] when the module imports and has every name."""
    try:
        tree = ast.parse(found.source)
    except SyntaxError as error:
        return [f"not a Python import statement ({error.msg}): {found.source!r}"]
    folders = repository_folders()
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            wanted = [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            wanted = [(node.module, [alias.name for alias in node.names if alias.name != "*"])]
        else:
            continue
        for module, names in wanted:
            top, _, rest = module.partition(".")
            if top in folders:
                installed = folders[top] + ("." + rest if rest else "")
                try:
                    import_off_the_root(installed)
                    hint = f"installed as {installed}"
                except ImportError:
                    hint = f"and {installed} does not import either"
                problems.append(f"{module}: a repository folder, not an installed package; {hint}")
                continue
            try:
                imported = import_off_the_root(module)
            except ImportError as error:
                problems.append(f"{module} does not import: {error}")
                continue
            for name in names:
                if hasattr(imported, name):
                    continue
                try:
                    import_off_the_root(f"{module}.{name}")
                except ImportError:
                    problems.append(f"{module} has no {name}")
    return problems


DOC_IMPORTS = all_doc_imports()


@pytest.mark.parametrize("found", DOC_IMPORTS, ids=str)
def test_a_docs_import_works(found):
    problems = problems_of(found)
    assert not problems, f"{found} `{found.source}`: " + "; ".join(problems)


def test_the_docs_have_imports_to_check():
    # The scan itself works: README's examples import idbench, and docs/ has import lines.
    assert any(found.file == "README.md" and found.source == "import idbench" for found in DOC_IMPORTS)
    assert sum(found.file.startswith("docs/") for found in DOC_IMPORTS) >= 5


SAMPLE = """\
Text, then a shell block whose lines are not Python:

```bash
from here import nothing
python -c "import idbench"
```

```python
import os.path as p
from collections import (
    OrderedDict,
    Counter,
)
x = 1  # from nowhere import nothing
```

````
from json import loads
```
from json import fake_name_in_a_nested_fence
```
````

>>> from math import tau (outside a block)

~~~py
>>> from math import pi
~~~
"""


def test_the_scan_takes_python_and_plain_blocks_only():
    found = imports_in_markdown(SAMPLE)
    assert [(f.line, f.source) for f in found] == [
        (9, "import os.path as p"),
        (10, "from collections import (\nOrderedDict,\nCounter,\n)"),
        (18, "from json import loads"),
        (20, "from json import fake_name_in_a_nested_fence"),
        (27, "from math import pi"),
    ]


def test_problems_name_a_missing_module_a_missing_name_and_a_repository_folder():
    def check(source: str) -> list[str]:
        return problems_of(DocImport("x.md", 1, source))

    assert check("from collections import OrderedDict, Counter") == []
    assert check("from os import path") == []  # a submodule is a name too
    assert check("import idbench.evaluate_pkg.functional") == []
    assert check("from collections import NoSuchThing") == ["collections has no NoSuchThing"]
    assert check("import idbench_no_such_module")[0].startswith("idbench_no_such_module does not import")
    assert check("from evaluate_pkg.judge import OpenAIJudge") == [
        "evaluate_pkg.judge: a repository folder, not an installed package; installed as idbench.evaluate_pkg.judge"
    ]
    assert check("from curation.no_such_module import x") == [
        "curation.no_such_module: a repository folder, not an installed package; "
        "and idbench.curation.no_such_module does not import either"
    ]

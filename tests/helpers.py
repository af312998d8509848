"""Helpers the tests import (``from helpers import noise_jpeg``): sample pictures and manifests, a dataset
in the Hugging Face cache, the suite contract, and the tier rule that tests/conftest.py checks at
collection. Fixtures stay in tests/conftest.py; no test file imports conftest."""

from __future__ import annotations

import ast
import csv
import hashlib
import io
import os
import re
from pathlib import Path

import numpy as np
from PIL import Image

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


# --- test tiers: the rule that tests/conftest.py checks every test's markers against ------------------
#
# Each test file states its tier (see tests/conftest.py); the rule below names the markers a test
# needs by what its source shows, and a test that lacks one fails to collect. It cannot see everything
# that makes a test slow (seconds of model-free computing): those tests are marked by hand, with the
# measurement in a comment.

# Fixtures (by name, wherever they are defined) that load models, score, run a worker or the demo:
# every test that uses one, directly or through another fixture, is slow.
SLOW_FIXTURES: frozenset[str] = frozenset()

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
_BROWSER_SIGN = re.compile(r"AppTest|streamlit_server|playwright")


def _e2e_sign(text: str) -> str | None:
    if "next_steps" in text:  # tests/next_steps.py runs a printed `idbench serve` as a subprocess
        return "next_steps"
    if "subprocess." in text and "sys.executable" in text:
        return "subprocess. ... sys.executable"
    return None


def _matched(pattern: re.Pattern):
    def sign(text: str) -> str | None:
        found = pattern.search(text)
        return found.group() if found else None

    return sign


# What a function's own source shows, by marker: (what the test does, the sign: the text it matched or
# None). A test needs the marker when its function, a fixture of its module that it uses, or a helper
# function of its module that either calls (transitively) shows the sign.
SOURCE_SIGNS = {
    "browser": ("drives Streamlit or Chromium", _matched(_BROWSER_SIGN)),
    "e2e": ("starts a Python subprocess", _e2e_sign),
    "slow": ("loads a model, scores or runs a worker", _matched(_SLOW_SIGN)),
}


def _module_functions(path: Path) -> dict[str, tuple[str, set[str]]]:
    """Every function of a test module: name -> (its source, the names it mentions)."""
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


def _signed(path: Path, start: set[str], sign) -> tuple[str, str] | None:
    """The first function among ``start``, or one they mention (transitively, in the module), that shows
    ``sign``, and the text it matched; None when none does."""
    functions = _module_functions(path)
    seen, todo = set(), [name for name in sorted(start, reverse=True) if name in functions]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        text, mentioned = functions[name]
        matched = sign(text)
        if matched:
            return name, matched
        todo.extend(sorted((m for m in mentioned if m in functions and m not in seen), reverse=True))
    return None


def needed_tiers(path: Path, name: str, fixturenames) -> dict[str, str]:
    """The tier markers the rule says test ``name`` of ``path`` needs: marker -> what it does, and where
    the rule saw it."""
    needed = {}
    slow_fixtures = sorted(SLOW_FIXTURES.intersection(fixturenames))
    if slow_fixtures:
        needed["slow"] = f"uses the fixture {slow_fixtures[0]!r}, which loads a model"
    if path.suffix == ".py":
        for marker, (what, sign) in SOURCE_SIGNS.items():
            found = None if marker in needed else _signed(path, {name, *fixturenames}, sign)
            if found:
                function, matched = found
                where = "" if function == name else f" in {function}"
                needed[marker] = f"{what} (matched {matched!r}{where})"
    return needed


def tier_errors(item) -> list[str]:
    """One line for each tier marker the rule says test ``item`` needs and it does not carry (from its
    decorators, its class or its file's ``pytestmark``)."""
    marked = {mark.name for mark in item.iter_markers()}
    name = getattr(item, "originalname", item.name)
    test = item.nodeid.split("[", 1)[0]  # one line for every parameter of a test
    return [
        f"{test}: {why} but is not marked {marker}; add @pytest.mark.{marker} or the file's pytestmark"
        for marker, why in needed_tiers(Path(str(item.path)), name, item.fixturenames).items()
        if marker not in marked
    ]


def untiered_module_error(nodeid: str, namespace: dict) -> str | None:
    """The line for a test module whose ``namespace`` defines no ``pytestmark``; None when it does."""
    if "pytestmark" in namespace:
        return None
    return (
        f"{nodeid}: states no tier; add `pytestmark = [pytest.mark.slow]` (the markers all its tests need) "
        "after its imports, or `pytestmark: list = []` with a comment for the fast tier"
    )

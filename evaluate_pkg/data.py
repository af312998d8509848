"""A built benchmark as the scorer sees it: its description plus its tables, read with ``datasets``.

``--data`` is a folder written by ``idbench build`` (or downloaded from the Hub with
``hf download --repo-type dataset``): parquet shards, ``README.md`` and ``build_info.json``, which names
the benchmark. Tables are read with ``datasets.load_dataset`` exactly as a user reads them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import datasets

from idbench import settings
from idbench.builders.registry import UnknownBenchmarkError, get_benchmark
from idbench.builders.spec import BenchmarkSpec
from idbench.errors import IdbenchError


class BenchmarkDataError(IdbenchError, ValueError):
    pass


@dataclass
class BenchmarkData:
    spec: BenchmarkSpec
    folder: Path
    build_info: dict
    tables: dict[str, datasets.Dataset]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def prompts(self) -> datasets.Dataset:
        return self.tables["prompts"]

    @cached_property
    def prompt_rows(self) -> dict[str, dict]:
        """prompt_id -> the prompt row (without images)."""
        return {row["prompt_id"]: row for row in self.prompts}

    def seeds_of(self, prompt: dict) -> list[int]:
        """The seeds a submission must hold for ``prompt`` (its own ``seeds`` column, else the spec's)."""
        return list(prompt["seeds"]) if "seeds" in prompt else list(self.spec.seeds)

    @cached_property
    def required_pairs(self) -> list[tuple[str, int]]:
        """Every (prompt_id, seed) a complete submission holds, in prompt order."""
        return [(p["prompt_id"], seed) for p in self.prompt_rows.values() for seed in self.seeds_of(p)]

    @property
    def reference_table(self) -> datasets.Dataset:
        """The table of reference images (``spec.reference_config``)."""
        if not self.spec.reference_config:
            raise BenchmarkDataError(f"benchmark {self.name}: its spec names no reference_config")
        return self.tables[self.spec.reference_config]

    @cached_property
    def references(self) -> dict[str, dict]:
        """reference id -> its row, with ``image`` as a decoded PIL image."""
        table = self.reference_table  # the spec says which table prompts refer to
        return {row[self.spec.reference_id]: row for row in table}

    @cached_property
    def reference_bytes(self) -> dict[str, bytes]:
        """reference id -> the encoded image bytes as stored (what the feature cache hashes)."""
        table = self.reference_table.cast_column("image", datasets.Image(decode=False))
        return {row[self.spec.reference_id]: row["image"]["bytes"] for row in table}


def content_cache_dir(folder: Path) -> Path:
    """A datasets cache keyed by the bytes of the folder's card, build info and shards.

    ``datasets`` keys its cache of a local folder by names and paths, so a folder rebuilt in place (or
    another folder of the same name) can be served stale tables. Keying by content makes that
    impossible while keeping the Arrow conversion cached across runs.
    """
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return settings.datasets_cache_dir() / digest.hexdigest()[:32]


def load_benchmark_data(
    folder: str | Path, cache_dir: str | None = None, benchmark: str | None = None
) -> BenchmarkData:
    """Read a built benchmark folder; the error names what is missing.

    ``cache_dir`` defaults to a cache keyed by the folder's content (see :func:`content_cache_dir`).
    ``benchmark``: the benchmark the caller was told the folder holds; another one is refused.
    """
    folder = Path(folder)
    info_path = folder / "build_info.json"
    if not info_path.is_file():
        raise BenchmarkDataError(
            f"{folder}: not a built benchmark (no build_info.json); build one with `idbench build`"
        )
    try:
        info = json.loads(info_path.read_text())
        name = info["benchmark"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise BenchmarkDataError(f"{info_path}: unreadable build info ({err})") from None
    try:
        spec = get_benchmark(name)
    except UnknownBenchmarkError as err:  # e.g. built with a plugin benchmark that is not installed here
        raise BenchmarkDataError(f"{info_path}: {err}") from None
    cache_dir = cache_dir or str(content_cache_dir(folder))
    tables = {}
    for config in info.get("configs", {}):
        tables[config] = datasets.load_dataset(str(folder), config, split="test", cache_dir=cache_dir)
    if "prompts" not in tables:
        raise BenchmarkDataError(f"{folder}: the build has no prompts config")
    data = BenchmarkData(spec=spec, folder=folder, build_info=info, tables=tables)
    if benchmark is not None and data.name != benchmark:
        raise BenchmarkDataError(f"{folder} holds the {data.name} benchmark, not {benchmark}")
    return data

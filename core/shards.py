"""Shards: independent pieces of one run, one per job of a scheduler (a Slurm job array, a Kubernetes
indexed Job, separate machines), with no rendezvous between them.

Each unit of work (a ``(prompt_id, seed)`` row) belongs to exactly one of N shards, chosen by
rendezvous hashing: the shard whose ``sha256(shard index, unit)`` is highest. The choice depends on
the unit and N only (never on the order of the rows, the process, or Python's salted ``hash``), so
every shard computes the same split on its own; and going from N to N + 1 shards moves a unit only to
the new shard (its score for the old shards is unchanged), so finished work never moves between the
shards that already ran it. A plain ``hash mod N`` would move most units when N changes.

Where the shard comes from, first found wins:

1. ``--shard K/N`` on the command line (K from 0);
2. a Slurm job array: ``SLURM_ARRAY_TASK_ID`` less ``SLURM_ARRAY_TASK_MIN``, of ``SLURM_ARRAY_TASK_COUNT``
   (``sbatch --array=0-7``; an array with a step, ``0-14:2``, is refused: its ids do not number the
   tasks);
3. a Kubernetes indexed Job: ``JOB_COMPLETION_INDEX`` of ``IDBENCH_SHARD_COUNT`` (set it to the Job's
   ``completions``; Kubernetes does not tell a pod how many indexes there are).

torch's ``RANK`` / ``WORLD_SIZE`` are not read as a shard: ``accelerate launch`` and torchrun set them
for the processes of one process group, which split a shard's work among themselves already (a job
array of multi-GPU nodes is the two combined).

Low in the layering: it imports only :mod:`idbench.settings` (the one reader of the environment) and
:mod:`idbench.errors`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from idbench import settings
from idbench.errors import IdbenchError

MAX_SHARDS = 4096  # each unit is hashed once per shard: bounds the split's cost (4,096 x 10,000 units: ~10 s)


class ShardError(IdbenchError, ValueError):
    """A shard specification (``--shard``, a scheduler's variables) that names no shard."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (``index`` from 0), and where it was read (for messages and records)."""

    index: int
    count: int
    source: str = "--shard"

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_SHARDS:
            raise ShardError(f"{self.source}: {self.count} shards; expected 1 to {MAX_SHARDS}")
        if not 0 <= self.index < self.count:
            raise ShardError(f"{self.source}: shard {self.index} of {self.count}; expected 0 to {self.count - 1}")

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, unit: str) -> bool:
        """Whether ``unit`` (:func:`unit_key`) is this shard's work."""
        return shard_of(unit, self.count) == self.index


def unit_key(prompt_id: str, seed: int) -> str:
    """The name a ``(prompt_id, seed)`` row is split by (the seed as a decimal number)."""
    return f"{prompt_id}\x00{int(seed)}"


def rows_sha256(pairs) -> str:
    """One hash of a set of ``(prompt_id, seed)`` rows, in any order: what a shard's record says it scored,
    and what the merge recomputes from the submission and the split to check it (evaluate_pkg/merge.py)."""
    digest = hashlib.sha256()
    for unit in sorted(unit_key(prompt_id, seed) for prompt_id, seed in pairs):
        digest.update(unit.encode("utf-8", "surrogateescape") + b"\n")
    return digest.hexdigest()


def _weight(index: int, unit: str) -> bytes:
    return hashlib.sha256(f"{index}\x00{unit}".encode("utf-8", "surrogateescape")).digest()


def shard_of(unit: str, count: int) -> int:
    """The shard (0 to ``count`` - 1) that ``unit`` belongs to: the highest of the ``count`` weights."""
    if not 1 <= count <= MAX_SHARDS:
        raise ShardError(f"{count} shards; expected 1 to {MAX_SHARDS}")
    return max(range(count), key=lambda index: _weight(index, unit))


_SPEC = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


def parse_shard(text: str, source: str = "--shard") -> Shard:
    """``"K/N"`` as a :class:`Shard`; anything else is one :class:`ShardError` line."""
    match = _SPEC.fullmatch(text)
    if match is None:
        raise ShardError(f"{source} {text!r}: expected K/N, shard K (from 0) of N, such as 0/4")
    return Shard(int(match.group(1)), int(match.group(2)), source)


def shard_from_environment(env: Mapping[str, str] | None = None) -> Shard | None:
    """The shard a scheduler's variables name (the module docstring), None outside a job array. ``env``:
    another mapping than the process environment (tests); read through :mod:`idbench.settings`."""
    if settings.is_set("SLURM_ARRAY_TASK_ID", env) and settings.is_set("SLURM_ARRAY_TASK_COUNT", env):
        step = settings.get("SLURM_ARRAY_TASK_STEP", env)
        if step != 1:
            raise ShardError(
                f"SLURM_ARRAY_TASK_STEP={step}: an array with a step does not number its tasks 0 to N-1; "
                "use --array=0-N-1, or pass --shard K/N"
            )
        index = settings.get("SLURM_ARRAY_TASK_ID", env) - settings.get("SLURM_ARRAY_TASK_MIN", env)
        return Shard(index, settings.get("SLURM_ARRAY_TASK_COUNT", env), "SLURM_ARRAY_TASK_ID")
    if settings.is_set("JOB_COMPLETION_INDEX", env):
        if not settings.is_set("IDBENCH_SHARD_COUNT", env):
            raise ShardError(
                "JOB_COMPLETION_INDEX is set (a Kubernetes indexed Job) but IDBENCH_SHARD_COUNT is not: set it to "
                "the Job's completions, or pass --shard K/N"
            )
        index = settings.get("JOB_COMPLETION_INDEX", env)
        return Shard(index, settings.get("IDBENCH_SHARD_COUNT", env), "JOB_COMPLETION_INDEX")
    return None


def resolve_shard(text: str | None, env: Mapping[str, str] | None = None) -> Shard | None:
    """``--shard`` when given, else the scheduler's (:func:`shard_from_environment`), else None (one piece)."""
    return parse_shard(text) if text is not None else shard_from_environment(env)

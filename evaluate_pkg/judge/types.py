"""The contract between the judge client and the judged metrics (CHARIS evaluator, Attr-VQA).

A judged metric builds :class:`JudgeRequest` objects (prompt text, images, the JSON schema the answer
must match) and hands a batch to anything that satisfies :class:`Judge`: the OpenAI-compatible client
of :mod:`idbench.evaluate_pkg.judge.client`, or a scripted stand-in in the tests. It gets one
:class:`JudgeAnswer` per request back, in order. An answer either holds a parsed, schema-valid value
or says why there is none; a failed answer is counted as a judge failure by the metric, never turned
into a score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class JudgeRequest:
    """One question to the judge.

    ``task`` names the question family (``"charis.attributes"``, ``"cogcanvas.vqa"``...): it names the
    JSON schema sent to the server and groups the statistics. ``images`` are encoded image bytes in the
    order the prompt refers to them (the client downsizes them before sending).
    """

    task: str
    prompt: str
    schema: Mapping[str, Any]
    images: tuple[bytes, ...] = ()
    system: str | None = None
    # 0 for every ordinary question. A positive number asks the same question again as a new sample
    # (the judge card's determinism check): it enters the answer cache's key, so a repeat is neither
    # served the first answer from the cache nor merged with it in a batch; it never reaches the prompt.
    repeat: int = 0


@dataclass(frozen=True)
class JudgeAnswer:
    """The judge's answer to one request: ``value`` (parsed JSON matching the schema) or ``error``."""

    value: Any = None
    raw: str | None = None
    error: str | None = None  # None when the answer is usable
    cached: bool = False
    attempts: int = 0
    usage: Mapping[str, int] = field(default_factory=dict)  # prompt_tokens, completion_tokens of the call

    @property
    def ok(self) -> bool:
        return self.error is None


class Judge(Protocol):
    """What a judged metric needs: a model name to record, and answers to a batch of requests."""

    model: str

    def ask(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        """One answer per request, in order; failures are answers with ``error`` set, not exceptions."""
        ...

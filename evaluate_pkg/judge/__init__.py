"""The VLM judge layer: an OpenAI-compatible client with an answer cache, and the judged metrics."""

from evaluate_pkg.judge.types import Judge, JudgeAnswer, JudgeRequest

__all__ = ["Judge", "JudgeAnswer", "JudgeRequest"]

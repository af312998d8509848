"""The VLM judge layer: an OpenAI-compatible client with an answer cache, and the judged metrics."""

from idbench.evaluate_pkg.judge.cache import AnswerCache, default_cache_path
from idbench.evaluate_pkg.judge.client import JudgeConfig, JudgeStats, OpenAIJudge, TaskStats, parse_json_answer
from idbench.evaluate_pkg.judge.types import Judge, JudgeAnswer, JudgeRequest

__all__ = [
    "AnswerCache",
    "Judge",
    "JudgeAnswer",
    "JudgeConfig",
    "JudgeRequest",
    "JudgeStats",
    "OpenAIJudge",
    "TaskStats",
    "default_cache_path",
    "parse_json_answer",
]

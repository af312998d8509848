"""The README's "Models" section: each profile's models, where they come from, their licences, what needs them.

:func:`models_markdown` renders it from the model cards (``registry``: names, pinned Hub ids and
revisions, licences with their sources, gating), the profiles, the download plan (``download.plan``: how
each model is fetched, which licence step comes first) and the benchmarks' metric declarations
(``MetricSpec.roles``: which metrics need a model of a role). tests/test_models_section.py checks that the
README holds exactly this rendering; ``python scripts/models_table.py --write`` rewrites the README's copy.

Nothing here loads a model or imports torch: the cards and plan are pure data, and the benchmark specs
are read through the benchmark registry (``idbench.builders.registry``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from idbench.evaluate_pkg.models.base import ModelCard
from idbench.evaluate_pkg.models.download import INSIGHTFACE_FLAG, Step, plan
from idbench.evaluate_pkg.models.registry import (
    DEFAULT_PROFILE,
    NOT_MADE,
    PROFILES,
    RANDOM_SIZES,
    is_plumbing,
    profile_is_plumbing,
)

HUB = "https://huggingface.co/"

__all__ = ["MODELS_INTRO", "metrics_needing", "models_markdown"]


def _own_benchmarks() -> list[Any]:
    """idbench's own benchmark specs (entry points into ``idbench.benchmarks``), in page order.

    Read through the benchmark registry by name, as every generic layer reaches a benchmark; a third-party
    benchmark installed beside them is left out: the README documents idbench's own.
    """
    from importlib.metadata import entry_points

    from idbench.builders.registry import ENTRY_POINT_GROUP, get_benchmark

    names = sorted({p.name for p in entry_points(group=ENTRY_POINT_GROUP) if p.value.startswith("idbench.benchmarks.")})
    if not names:
        raise RuntimeError(f"no {ENTRY_POINT_GROUP} entry points of idbench: install it (pip install -e .)")
    return sorted((get_benchmark(name) for name in names), key=lambda spec: (spec.page_order, spec.name))


def metrics_needing(roles: Iterable[str]) -> list[tuple[str, list[str]]]:
    """(benchmark, metrics) for each of idbench's benchmarks with metrics that need a model of ``roles``.

    From the metrics' own declarations (``MetricSpec.roles``), which also decide what scoring loads
    (``runner.model_roles``); metrics in their suite's order.
    """
    wanted = set(roles)
    out = []
    for spec in _own_benchmarks():
        metrics = [metric.name for metric in spec.metric_suite if wanted & set(metric.roles)]
        if metrics:
            out.append((spec.name, metrics))
    return out


MODELS_INTRO = (
    "One row per model of each profile. A missing model is never replaced by another: scoring (`idbench "
    "score`, `idbench.score()`, the scoring step of `idbench run`) first loads the models that its metrics "
    "need, and a missing one stops it before any metric is computed, with one error that names every "
    "missing model and the command that gets it. The last column lists the metrics that need the model; "
    "`--metrics` without them scores the rest. "
    "A leaderboard worker checks the same without loading anything, and claims no job while a model that "
    "the queued jobs' metrics need is missing. `idbench build --curate` stops at the first missing model "
    "it needs (CLIP and the aesthetic head for its quality filter, DINOv2 for near-duplicates), except for "
    "its face check of CogCanvas references, which is then reported as not run. `idbench models list` "
    "shows which models are on this machine."
)


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _licence_cell(card: ModelCard) -> str:
    sources = card.license_sources
    if len(sources) == 1:
        return f"{card.license} ([source]({sources[0]}))"
    links = ", ".join(f"[source {n}]({url})" for n, url in enumerate(sources, 1))
    return f"{card.license} ({links})" if links else card.license


def _weights_cell(step: Step) -> str:
    card = step.card
    if step.kind == "hub":
        return f"[{card.hub_id}]({HUB}{card.hub_id}/tree/{card.revision}) @ `{card.revision[:7]}`"
    if step.kind == "url":
        return f"[{step.urls[0].rsplit('/', 1)[-1]}]({step.urls[0]}): {card.source}"
    if step.kind == "pip":
        return f"`{step.command}`: {card.source}"
    if step.kind == "none":
        return str(step.command)
    return f"{card.source}: `{step.command.split(',')[0]}`, or on first use"


def _gated_cell(step: Step) -> str:
    if step.card.gated:
        return "**yes**: accept its licence on the Hub page, then `hf auth login`"
    if step.kind == "url" and step.licence:
        return f"no; downloaded only with `{INSIGHTFACE_FLAG}`"
    return "no"


def _needed_cell(card: ModelCard, roles: Sequence[str]) -> str:
    needing = metrics_needing(roles)
    if card.name in NOT_MADE:
        return "never made: not run, " + "; ".join(
            f"{benchmark}: " + ", ".join(f"`{m}`" for m in metrics) for benchmark, metrics in needing
        )
    if is_plumbing(card):
        return "never missing: made on first use"
    if not needing:
        return "no metric of idbench's benchmarks"
    return "; ".join(f"{benchmark}: " + ", ".join(f"`{m}`" for m in metrics) for benchmark, metrics in needing)


def _profile_line(profile: str, steps: Sequence[Step]) -> str:
    head = f"**`{profile}`**" + (" (the default)" if profile == DEFAULT_PROFILE else "")
    if profile_is_plumbing(profile) and any(RANDOM_SIZES.get(s.card.name) == "paper" for s in steps):
        not_made = [f"`{s.card.name}`" for s in steps if s.kind == "none"]
        return (
            f"{head}: a plumbing check (every output says so), for timing, with nothing to download: random "
            "weights in the paper models' architectures at their real sizes, made on this machine on first use "
            "(about 3 GB) from the configurations shipped with idbench (`evaluate_pkg/models/configs/`, each "
            "saying where its numbers come from)"
            + (
                f"; {', '.join(not_made)} cannot be made offline, and the metrics that need it are not run"
                if not_made
                else ""
            )
            + "."
        )
    if profile_is_plumbing(profile):
        real = [f"the real `{s.card.name}`, which comes with `{s.command}`" for s in steps if s.kind == "pip"]
        return (
            f"{head}: a plumbing check (every output says so) with nothing to download: random weights in the "
            "paper models' architectures, made on this machine" + "".join(f", plus {r}" for r in real) + "."
        )
    flag = f" {INSIGHTFACE_FLAG}" if any(s.kind == "url" and s.licence for s in steps) else ""
    return (
        f"{head}: the papers' models, real weights. `idbench models download --profile {profile}{flag}` "
        "fetches what is missing (Hub files at their pinned commits into the Hugging Face cache)."
    )


def models_markdown() -> str:
    """The README's "Models" section (tests/test_models_section.py checks the README holds exactly this).

    Per profile, one row per model: the roles it serves, its pinned Hub id and revision (or where it
    comes from), its licence with the pages that state it, whether the Hub gates it, and which metrics
    cannot run without it. Loads no model and imports no torch. ``python scripts/models_table.py --write``
    rewrites the README's copy.
    """
    lines = [MODELS_INTRO, ""]
    for profile in PROFILES:
        steps = plan(profile)
        lines += [_profile_line(profile, steps), ""]
        lines += [
            "| Role | Model | Weights | Licence | Gated | Cannot run without it |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        by_card: dict[str, list[Step]] = {}
        for step in steps:
            by_card.setdefault(step.card.name, []).append(step)
        for name, card_steps in by_card.items():
            step, roles = card_steps[0], [s.role for s in card_steps]
            cells = (
                ", ".join(roles),
                f"`{name}`",
                _weights_cell(step),
                _licence_cell(step.card),
                _gated_cell(step),
                _needed_cell(step.card, roles),
            )
            lines.append("| " + " | ".join(_md(cell) for cell in cells) + " |")
        lines.append("")
    return "\n".join(lines)

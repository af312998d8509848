"""The typed, read-only shape of the External Knowledge Base (EKB).

The EKB is the CHARIS hierarchy (paper 000) as data: subject types and styles, the attributes that
identify a subject of each (type, style) cell, the features each attribute dictates, the seven
transformation axes, the identity categories and the rules that turn counted feature changes into a
category. :func:`idbench.ekb.load_ekb` builds these objects from ``ekb/data/*.yaml`` and validates them; nothing
here reads files.

Mappings are read-only (``MappingProxyType``) because the packaged EKB is cached and shared by every
caller: one caller must not be able to change what another one sees.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from idbench.errors import IdbenchError


class EKBError(IdbenchError, ValueError):
    """The EKB data is invalid. The message names the file and the key path that is wrong."""


@dataclass(frozen=True)
class SubjectType:
    """A subject type (human, animal, ...), with a description a VLM can classify by."""

    name: str
    description: str


@dataclass(frozen=True)
class Style:
    """A rendering style (photorealistic, cartoon, vector)."""

    name: str
    description: str
    # Words that name this style in prompt text; they match at the start of a word.
    keywords: tuple[str, ...]

    def is_named_in(self, text: str) -> bool:
        """Whether ``text`` names this style, e.g. ``cartoon.is_named_in("a comic-book panel")``."""
        pattern = r"\b(?:" + "|".join(re.escape(k) for k in self.keywords) + ")"
        return re.search(pattern, text, flags=re.IGNORECASE) is not None


@dataclass(frozen=True)
class Feature:
    """A concrete, visually checkable property ("eye shape", "coat pattern")."""

    name: str
    description: str
    importance: float  # in [0, 1]: how much the feature defines identity


@dataclass(frozen=True)
class Attribute:
    """A group of features that identifies part of a subject ("eyes", "markings and coloration")."""

    name: str
    description: str
    features: tuple[Feature, ...]


@dataclass(frozen=True)
class Transformation:
    """One of the seven transformation axes, and the phrases that ask for it in a prompt."""

    name: str
    meaning: str
    # Whether a prompted change of this kind counts against identity (none of the seven does).
    harms_identity: bool
    # The limit under which the transformation stays acceptable; "" when there is none.
    condition: str
    # "any", a type name or a style name -> phrases; see phrases_for.
    phrases: Mapping[str, tuple[str, ...]]
    # Cues that make a phrase of this axis ask for the subject to be out of view (a back view, a
    # distant figure); matched as whole words, case aside. Empty: no phrase of this axis hides it.
    hides_subject: tuple[str, ...] = ()

    def hides_subject_in(self, phrase: str) -> bool:
        """Whether ``phrase`` (a phrase asking for this axis) asks for the subject to be hidden."""
        if not self.hides_subject:
            return False
        pattern = r"\b(?:" + "|".join(re.escape(c) for c in self.hides_subject) + r")\b"
        return re.search(pattern, " ".join(phrase.split()), flags=re.IGNORECASE) is not None

    def phrases_for(self, type: str, style: str) -> tuple[str, ...]:
        """The candidate phrases for a subject of ``(type, style)``.

        The lists under the subject's type and under its style, together, when either exists;
        otherwise the ``any`` list. The loader guarantees that every cell has at least one candidate.
        """
        specific = self.phrases.get(type, ()) + self.phrases.get(style, ())
        candidates = specific or self.phrases.get("any", ())
        return tuple(dict.fromkeys(candidates))  # drop a phrase listed under both keys


@dataclass(frozen=True)
class Category:
    """An identity-preservation category and its normalised score (exact = 1 ... mismatch = 0)."""

    name: str
    definition: str
    score: float


@dataclass(frozen=True)
class ImportanceLevel:
    """A band of feature importance (decisive / core / secondary / cosmetic)."""

    name: str
    min_importance: float
    description: str


@dataclass(frozen=True)
class CategoryRule:
    """The category a pair gets when, at every level, the share of changed features is within limits."""

    category: str
    description: str
    # level name -> the largest allowed share (0 to 1) of that level's features with a harmful change
    max_changed_share: Mapping[str, float]

    def allows(self, changed_share: Mapping[str, float]) -> bool:
        return all(changed_share.get(level, 0.0) <= limit for level, limit in self.max_changed_share.items())


@dataclass(frozen=True)
class Rules:
    """How per-feature findings aggregate into a category, as data a judge prompt can render."""

    importance_levels: Mapping[str, ImportanceLevel]  # highest first
    harmful_changes: Mapping[str, str]  # kind of intrinsic change -> what it means
    principles: tuple[str, ...]
    categorisation: tuple[CategoryRule, ...]  # checked in order; the last allows everything

    def level_of(self, importance: float) -> str:
        """The name of the importance level a feature of this importance belongs to."""
        for level in self.importance_levels.values():
            if importance >= level.min_importance:
                return level.name
        raise ValueError(f"importance {importance} is below every level")

    def categorise(self, changed_share: Mapping[str, float]) -> str:
        """The category for the share of changed features per level (a level left out counts as 0).

        >>> rules.categorise({"core": 0.0, "secondary": 0.2})  # doctest: +SKIP
        'near_exact'
        """
        unknown = set(changed_share) - set(self.importance_levels)
        if unknown:
            raise ValueError(
                f"unknown importance level(s) {', '.join(sorted(unknown))}; "
                f"levels are: {', '.join(self.importance_levels)}"
            )
        for rule in self.categorisation:
            if rule.allows(changed_share):
                return rule.category
        # The loader makes the last rule allow every share, so this is reached only for shares above 1.
        raise ValueError(f"no rule matches changed shares {dict(changed_share)}")


@dataclass(frozen=True)
class EKB:
    """The whole knowledge base. Every mapping keeps the order of its YAML file."""

    types: Mapping[str, SubjectType]
    styles: Mapping[str, Style]
    features: Mapping[str, Feature]
    attributes: Mapping[str, Attribute]
    # (type, style) -> names of the attributes that identify a subject of that cell
    cells: Mapping[tuple[str, str], tuple[str, ...]]
    transformations: Mapping[str, Transformation]
    categories: Mapping[str, Category]
    rules: Rules
    root: Path = field(compare=False)  # the folder it was loaded from; not part of the content

    def _cell(self, type: str, style: str) -> tuple[str, ...]:
        if type not in self.types:
            raise KeyError(f"unknown subject type {type!r}; types are: {', '.join(self.types)}")
        if style not in self.styles:
            raise KeyError(f"unknown style {style!r}; styles are: {', '.join(self.styles)}")
        return self.cells[(type, style)]

    def attributes_for(self, type: str, style: str) -> tuple[Attribute, ...]:
        """The attributes that identify a subject of ``(type, style)``, most identity-defining first."""
        return tuple(self.attributes[name] for name in self._cell(type, style))

    def features_for(self, type: str, style: str, attributes: Iterable[str] | None = None) -> tuple[Feature, ...]:
        """The features of a cell's attributes (or of the named subset, e.g. the visible ones).

        A feature dictated by two attributes is listed once, where it first appears.
        """
        names = self._cell(type, style)
        if attributes is not None:
            wanted = tuple(attributes)
            foreign = [a for a in wanted if a not in names]
            if foreign:
                raise KeyError(
                    f"attribute(s) {', '.join(map(repr, foreign))} are not attributes of ({type}, {style}); "
                    f"it has: {', '.join(names)}"
                )
            names = wanted
        features: dict[str, Feature] = {}
        for name in names:
            for feature in self.attributes[name].features:
                features.setdefault(feature.name, feature)
        return tuple(features.values())

    def level_of(self, feature: str) -> str:
        """The importance level (rules.yaml) of the named feature."""
        return self.rules.level_of(self.features[feature].importance)

"""The External Knowledge Base (EKB) of CHARIS: YAML data under ``ekb/data`` and its typed loader.

>>> from ekb import load_ekb
>>> ekb = load_ekb()
>>> list(ekb.types)
['human', 'animal', 'anthropomorphic', 'animated_object']
>>> [a.name for a in ekb.attributes_for("animal", "cartoon")][:2]
['species-specific elements', 'cartoon eyes']

The data is split by kind, one file per kind, each with its kind as top-level key(s):

- ``types.yaml``: ``types``, name -> description
- ``styles.yaml``: ``styles``, name -> description, keywords
- ``features.yaml``: ``features``, name -> description, importance in [0, 1]
- ``attributes.yaml``: ``attributes``, name -> description, feature names; and ``cells``,
  type -> style -> attribute names
- ``transformations.yaml``: ``transformations``, the seven axes -> meaning, harms_identity, condition,
  phrases, hides_subject (optional)
- ``categories.yaml``: ``categories``, name -> definition, score
- ``rules.yaml``: ``importance_levels``, ``harmful_changes``, ``principles``, ``categorisation``

Everything is checked when loaded; a problem raises :class:`EKBError` naming the file and the key path
(``attributes.yaml: cells.human.pastel: unknown style ...``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from fractions import Fraction
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

import yaml

from idbench.ekb.model import (
    EKB,
    Attribute,
    Category,
    CategoryRule,
    EKBError,
    Feature,
    ImportanceLevel,
    Rules,
    Style,
    SubjectType,
    Transformation,
)

__all__ = [
    "DATA_DIR",
    "TRANSFORMATIONS",
    "EKB",
    "EKBError",
    "Attribute",
    "Category",
    "CategoryRule",
    "Feature",
    "ImportanceLevel",
    "Rules",
    "Style",
    "SubjectType",
    "Transformation",
    "load_ekb",
]

# Package data, found through importlib.resources so a wheel install reads the same files.
DATA_DIR = Path(str(resources.files("idbench.ekb") / "data"))

# The paper's transformation set X. Unlike types or styles, code depends on these names (prompts open
# with the pose phrase; the style phrase must leave the subject's own style), so all seven must exist.
TRANSFORMATIONS = ("pose", "expression", "viewpoint", "occlusion", "lighting", "background", "style")

Where = Sequence[str | int]  # a key path: mapping keys and list indices


def load_ekb(path: str | Path | None = None) -> EKB:
    """Load and validate the EKB in folder ``path`` (default: the packaged ``ekb/data``, cached)."""
    if path is None:
        return _load_packaged()
    return _load(Path(path))


@functools.lru_cache(maxsize=1)
def _load_packaged() -> EKB:
    return _load(DATA_DIR)


def _load(root: Path) -> EKB:
    if not root.is_dir():
        raise EKBError(f"{root}: not a folder holding the EKB's YAML files")
    types = _read_types(_File(root / "types.yaml", ("types",)))
    styles = _read_styles(_File(root / "styles.yaml", ("styles",)))
    features = _read_features(_File(root / "features.yaml", ("features",)))
    attributes, cells = _read_attributes(
        _File(root / "attributes.yaml", ("attributes", "cells")), types, styles, features
    )
    transformations = _read_transformations(_File(root / "transformations.yaml", ("transformations",)), types, styles)
    categories = _read_categories(_File(root / "categories.yaml", ("categories",)))
    rules = _read_rules(
        _File(root / "rules.yaml", ("importance_levels", "harmful_changes", "principles", "categorisation")), categories
    )
    return EKB(
        types=MappingProxyType(types),
        styles=MappingProxyType(styles),
        features=MappingProxyType(features),
        attributes=MappingProxyType(attributes),
        cells=MappingProxyType(cells),
        transformations=MappingProxyType(transformations),
        categories=MappingProxyType(categories),
        rules=rules,
        root=root,
    )


# --- reading one file ------------------------------------------------------------------------------


def _key_path(where: Where) -> str:
    """('cells', 'human', 'pastel') -> 'cells.human.pastel'; list indices as [i]."""
    text = ""
    for part in where:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


class _File:
    """One YAML file of the EKB, with checks that name the file and key path when they fail."""

    def __init__(self, path: Path, sections: tuple[str, ...]):
        self.path = path
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise EKBError(f"{path}: missing (the EKB needs {', '.join(sections)} here)") from None
        try:
            # Compose first to find duplicate keys, which safe_load would silently merge (last one wins).
            self._reject_duplicate_keys(yaml.compose(text, Loader=yaml.SafeLoader), ())
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise EKBError(f"{path}: not valid YAML: {error}") from None
        self.data = self.record(data, (), required=sections)

    def fail(self, where: Where, problem: str) -> NoReturn:
        location = _key_path(where)
        raise EKBError(f"{self.path}: {location}: {problem}" if location else f"{self.path}: {problem}")

    def _reject_duplicate_keys(self, node: yaml.Node | None, where: tuple[str | int, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, value_node in node.value:
                key = str(key_node.value)
                if key in seen:
                    self.fail((*where, key), f"duplicate key (again on line {key_node.start_mark.line + 1})")
                seen.add(key)
                self._reject_duplicate_keys(value_node, (*where, key))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self._reject_duplicate_keys(item, (*where, index))

    def mapping(self, value: Any, where: Where) -> dict[str, Any]:
        """A non-empty mapping whose keys are non-empty text."""
        if not isinstance(value, dict):
            self.fail(where, f"expected a mapping of names to entries, found {_describe(value)}")
        if not value:
            self.fail(where, "is empty")
        for key in value:
            if not isinstance(key, str) or not key.strip():
                self.fail((*where, str(key)), "names must be non-empty text")
        return value

    def record(self, value: Any, where: Where, required: Sequence[str], optional: Sequence[str] = ()) -> dict[str, Any]:
        """A mapping with exactly the ``required`` keys and possibly some ``optional`` ones."""
        if not isinstance(value, dict):
            self.fail(where, f"expected a mapping with keys {', '.join(required)}, found {_describe(value)}")
        for key in required:
            if key not in value:
                self.fail((*where, key), "missing")
        for key in value:
            if key not in required and key not in optional:
                allowed = ", ".join((*required, *optional))
                self.fail((*where, str(key)), f"unknown key (allowed: {allowed})")
        return value

    def text(self, value: Any, where: Where) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail(where, f"expected non-empty text, found {_describe(value)}")
        return value.strip()

    def names(self, value: Any, where: Where) -> tuple[str, ...]:
        """A non-empty list of distinct, non-empty strings."""
        if not isinstance(value, list):
            self.fail(where, f"expected a list, found {_describe(value)}")
        if not value:
            self.fail(where, "is an empty list")
        seen: list[str] = []
        for index, item in enumerate(value):
            item = self.text(item, (*where, index))
            if item in seen:
                self.fail((*where, index), f"{item!r} is listed twice")
            seen.append(item)
        return tuple(seen)

    def number(self, value: Any, where: Where, low: float = 0.0, high: float = 1.0) -> float:
        """A number in [low, high]; text like "2/3" is read as an exact fraction."""
        if isinstance(value, str):
            try:
                value = Fraction(value.strip())
            except (ValueError, ZeroDivisionError):
                self.fail(where, f"expected a number, found {value!r}")
        # bool is an int in Python, but "importance: true" is a mistake, not 1.
        if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
            self.fail(where, f"expected a number, found {_describe(value)}")
        if not low <= value <= high:
            self.fail(where, f"{float(value):g} is outside [{low:g}, {high:g}]")
        return float(value)


def _describe(value: Any) -> str:
    if value is None:
        return "nothing"
    names = {dict: "a mapping", list: "a list", str: "text", bool: "true/false", int: "a number", float: "a number"}
    return f"{names.get(type(value), type(value).__name__)} ({value!r})"[:120]


# --- the sections ----------------------------------------------------------------------------------


def _read_types(file: _File) -> dict[str, SubjectType]:
    types = {}
    for name, entry in file.mapping(file.data["types"], ("types",)).items():
        where = ("types", name)
        entry = file.record(entry, where, required=("description",))
        types[name] = SubjectType(name, file.text(entry["description"], (*where, "description")))
    return types


def _read_styles(file: _File) -> dict[str, Style]:
    styles = {}
    for name, entry in file.mapping(file.data["styles"], ("styles",)).items():
        where = ("styles", name)
        entry = file.record(entry, where, required=("description", "keywords"))
        styles[name] = Style(
            name,
            file.text(entry["description"], (*where, "description")),
            file.names(entry["keywords"], (*where, "keywords")),
        )
    return styles


def _read_features(file: _File) -> dict[str, Feature]:
    features = {}
    for name, entry in file.mapping(file.data["features"], ("features",)).items():
        where = ("features", name)
        entry = file.record(entry, where, required=("description", "importance"))
        features[name] = Feature(
            name,
            file.text(entry["description"], (*where, "description")),
            file.number(entry["importance"], (*where, "importance")),
        )
    return features


def _read_attributes(
    file: _File, types: Mapping[str, SubjectType], styles: Mapping[str, Style], features: Mapping[str, Feature]
) -> tuple[dict[str, Attribute], dict[tuple[str, str], tuple[str, ...]]]:
    attributes = {}
    for name, entry in file.mapping(file.data["attributes"], ("attributes",)).items():
        where = ("attributes", name)
        entry = file.record(entry, where, required=("description", "features"))
        feature_names = file.names(entry["features"], (*where, "features"))
        for index, feature in enumerate(feature_names):
            if feature not in features:
                file.fail(
                    (*where, "features", index), f"unknown feature {feature!r}: it is not defined in features.yaml"
                )
        attributes[name] = Attribute(
            name, file.text(entry["description"], (*where, "description")), tuple(features[f] for f in feature_names)
        )

    cells: dict[tuple[str, str], tuple[str, ...]] = {}
    by_type = file.mapping(file.data["cells"], ("cells",))
    for type_name in by_type:
        if type_name not in types:
            file.fail(("cells", type_name), f"unknown type {type_name!r}; types are: {', '.join(types)}")
    for type_name in types:  # in the types' order, so that cells keep the EKB's order
        if type_name not in by_type:
            file.fail(("cells", type_name), "missing: every type needs attributes for each style")
        by_style = file.mapping(by_type[type_name], ("cells", type_name))
        for style_name in by_style:
            if style_name not in styles:
                file.fail(
                    ("cells", type_name, style_name), f"unknown style {style_name!r}; styles are: {', '.join(styles)}"
                )
        for style_name in styles:
            where = ("cells", type_name, style_name)
            if style_name not in by_style:
                file.fail(where, "missing cell: every (type, style) needs attributes")
            if by_style[style_name] in (None, []):
                file.fail(where, "empty cell: every (type, style) needs at least one attribute")
            names = file.names(by_style[style_name], where)
            for index, attribute in enumerate(names):
                if attribute not in attributes:
                    file.fail((*where, index), f"unknown attribute {attribute!r}: it is not defined under attributes")
            cells[(type_name, style_name)] = names

    # Everything defined is used somewhere: an unused entry is usually a misspelt reference.
    used_attributes = {a for names in cells.values() for a in names}
    for name in attributes:
        if name not in used_attributes:
            file.fail(("attributes", name), "defined but used by no cell")
    used_features = {f.name for a in attributes.values() for f in a.features}
    for name in features:
        if name not in used_features:
            file.fail(("attributes",), f"feature {name!r} of features.yaml is used by no attribute")
    return attributes, cells


def _read_transformations(
    file: _File, types: Mapping[str, SubjectType], styles: Mapping[str, Style]
) -> dict[str, Transformation]:
    entries = file.mapping(file.data["transformations"], ("transformations",))
    for name in entries:
        if name not in TRANSFORMATIONS:
            file.fail(("transformations", name), f"unknown transformation; the EKB has: {', '.join(TRANSFORMATIONS)}")
    for name in TRANSFORMATIONS:
        if name not in entries:
            file.fail(("transformations", name), f"missing; the EKB needs all of: {', '.join(TRANSFORMATIONS)}")

    phrase_keys = ("any", *types, *styles)
    transformations = {}
    for name, entry in entries.items():
        where = ("transformations", name)
        entry = file.record(
            entry, where, required=("meaning", "harms_identity", "phrases"), optional=("condition", "hides_subject")
        )
        if not isinstance(entry["harms_identity"], bool):
            file.fail((*where, "harms_identity"), f"expected true or false, found {_describe(entry['harms_identity'])}")
        condition = entry.get("condition")
        phrases = {}
        for key, value in file.mapping(entry["phrases"], (*where, "phrases")).items():
            if key not in phrase_keys:
                file.fail((*where, "phrases", key), f"unknown key; phrases are keyed by: {', '.join(phrase_keys)}")
            phrases[key] = file.names(value, (*where, "phrases", key))
            for index, phrase in enumerate(phrases[key]):
                # Phrases are joined with ", " and the prompt ends with "."; their own punctuation would clash.
                if phrase[-1] in ".,;":
                    file.fail((*where, "phrases", key, index), f"{phrase!r} must not end with punctuation")
        transformation = Transformation(
            name=name,
            meaning=file.text(entry["meaning"], (*where, "meaning")),
            harms_identity=entry["harms_identity"],
            condition="" if condition is None else file.text(condition, (*where, "condition")),
            phrases=MappingProxyType(phrases),
            hides_subject=file.names(entry["hides_subject"], (*where, "hides_subject"))
            if "hides_subject" in entry
            else (),
        )
        for type_name in types:
            for style_name in styles:
                if not transformation.phrases_for(type_name, style_name):
                    file.fail(
                        (*where, "phrases"),
                        f"no phrase for a subject of type {type_name!r} and style {style_name!r}: "
                        "add an 'any' list or one for the type or the style",
                    )
        transformations[name] = transformation

    # A style phrase asks for a style other than the subject's own: "rendered as a cartoon" is no change
    # for a cartoon subject.
    style_axis = transformations["style"]
    for style_name, style in styles.items():
        for type_name in types:
            for phrase in style_axis.phrases_for(type_name, style_name):
                if style.is_named_in(phrase):
                    key = next(k for k in (type_name, style_name, "any") if phrase in style_axis.phrases.get(k, ()))
                    index = style_axis.phrases[key].index(phrase)
                    file.fail(
                        ("transformations", "style", "phrases", key, index),
                        f"{phrase!r} names the subject's own style {style_name!r} "
                        f"(keywords: {', '.join(style.keywords)})",
                    )
    return transformations


def _read_categories(file: _File) -> dict[str, Category]:
    categories: dict[str, Category] = {}
    for name, entry in file.mapping(file.data["categories"], ("categories",)).items():
        where = ("categories", name)
        entry = file.record(entry, where, required=("definition", "score"))
        score = file.number(entry["score"], (*where, "score"))
        # Categories are listed best first; a score that does not fall would make averages meaningless.
        if categories and score >= list(categories.values())[-1].score:
            file.fail((*where, "score"), "scores must fall from one category to the next (best first)")
        categories[name] = Category(name, file.text(entry["definition"], (*where, "definition")), score)
    return categories


def _read_rules(file: _File, categories: Mapping[str, Category]) -> Rules:
    levels: dict[str, ImportanceLevel] = {}
    for name, entry in file.mapping(file.data["importance_levels"], ("importance_levels",)).items():
        where = ("importance_levels", name)
        entry = file.record(entry, where, required=("min_importance", "description"))
        minimum = file.number(entry["min_importance"], (*where, "min_importance"))
        if levels and minimum >= list(levels.values())[-1].min_importance:
            file.fail((*where, "min_importance"), "levels are listed highest first; thresholds must fall")
        levels[name] = ImportanceLevel(name, minimum, file.text(entry["description"], (*where, "description")))
    last = list(levels.values())[-1]
    if last.min_importance != 0:
        file.fail(("importance_levels", last.name, "min_importance"), "the last level must start at 0")

    harmful = {
        name: file.text(text, ("harmful_changes", name))
        for name, text in file.mapping(file.data["harmful_changes"], ("harmful_changes",)).items()
    }
    principles = file.names(file.data["principles"], ("principles",))

    rules_list = file.data["categorisation"]
    if not isinstance(rules_list, list) or not rules_list:
        file.fail(("categorisation",), f"expected a non-empty list of rules, found {_describe(rules_list)}")
    rules: list[CategoryRule] = []
    for index, entry in enumerate(rules_list):
        where = ("categorisation", index)
        entry = file.record(entry, where, required=("category", "description", "max_changed_share"))
        category = file.text(entry["category"], (*where, "category"))
        if category not in categories:
            file.fail((*where, "category"), f"unknown category {category!r}; categories are: {', '.join(categories)}")
        shares = file.record(entry["max_changed_share"], (*where, "max_changed_share"), required=tuple(levels))
        limits = {level: file.number(shares[level], (*where, "max_changed_share", level)) for level in levels}
        description = file.text(entry["description"], (*where, "description"))
        rules.append(CategoryRule(category, description, MappingProxyType(limits)))
    # First match wins, so rules go from the best category to the worst, one each.
    if [rule.category for rule in rules] != list(categories):
        file.fail(("categorisation",), f"needs one rule per category, in the order {', '.join(categories)}")
    if any(limit < 1 for limit in rules[-1].max_changed_share.values()):
        file.fail(
            ("categorisation", len(rules) - 1, "max_changed_share"), "the last rule must allow every share (all 1)"
        )
    return Rules(MappingProxyType(levels), MappingProxyType(harmful), principles, tuple(rules))

"""The packaged EKB loads and holds what the CHARIS paper describes; broken copies fail with clear errors."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from idbench.ekb import DATA_DIR, EKBError, load_ekb

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

TYPES = ["human", "animal", "anthropomorphic", "animated_object"]
STYLES = ["photorealistic", "cartoon", "vector"]
AXES = ["pose", "expression", "viewpoint", "occlusion", "lighting", "background", "style"]

# Written here, independently of styles.yaml: words that would name each style in a prompt.
STYLE_WORDS = {
    "photorealistic": ("photo", "realistic"),
    "cartoon": ("cartoon", "comic", "anime"),
    "vector": ("vector", "flat", "icon", "emoji", "clip art"),
}


@pytest.fixture(scope="module")
def ekb():
    return load_ekb()


# --- the packaged data -------------------------------------------------------------------------------


def test_names_and_order(ekb):
    assert list(ekb.types) == TYPES
    assert list(ekb.styles) == STYLES
    assert list(ekb.transformations) == AXES
    assert list(ekb.categories) == ["exact", "near_exact", "partial", "mismatch"]
    for mapping in (ekb.types, ekb.styles, ekb.transformations, ekb.categories):
        assert all(obj.name == name for name, obj in mapping.items())
    assert all(t.description for t in ekb.types.values())
    assert all(s.description for s in ekb.styles.values())


def test_default_is_cached_and_read_only(ekb):
    assert load_ekb() is ekb
    assert load_ekb(DATA_DIR) is not ekb
    assert load_ekb(str(DATA_DIR)) == ekb
    with pytest.raises(TypeError):
        ekb.types["robot"] = ekb.types["human"]  # the shared default must not be changed by a caller


def test_every_cell_has_attributes_with_features(ekb):
    assert len(ekb.cells) == 12
    for t in TYPES:
        for s in STYLES:
            attributes = ekb.attributes_for(t, s)
            assert 4 <= len(attributes) <= 7, (t, s)
            assert len({a.name for a in attributes}) == len(attributes)
            for attribute in attributes:
                assert attribute.description
                assert 3 <= len(attribute.features) <= 6, attribute.name
                assert all(f.description for f in attribute.features)


def test_weights_in_unit_interval_and_meaningful(ekb):
    for feature in ekb.features.values():
        assert 0.0 <= feature.importance <= 1.0, feature.name
    importance = {name: f.importance for name, f in ekb.features.items()}
    # facial structure outweighs clothing, species outweighs everything (the paper's example rule)
    assert importance["facial proportions"] > importance["garment types"]
    assert importance["eye shape"] > importance["clothing colours"]
    assert importance["species"] == max(importance.values())


def test_attributes_shared_by_name(ekb):
    human_photo = {a.name: a for a in ekb.attributes_for("human", "photorealistic")}
    human_cartoon = {a.name: a for a in ekb.attributes_for("human", "cartoon")}
    assert human_photo["hair"] is human_cartoon["hair"]
    assert [f.name for f in human_photo["eyes"].features] == ["eye shape", "eye colour", "eyebrow shape"]


def test_features_for(ekb):
    every = ekb.features_for("anthropomorphic", "cartoon")
    names = [f.name for f in every]
    assert len(names) == len(set(names))  # "build" is in two attributes but listed once
    expected = []
    for attribute in ekb.attributes_for("anthropomorphic", "cartoon"):
        expected += [f.name for f in attribute.features if f.name not in expected]
    assert names == expected
    visible = ekb.features_for("anthropomorphic", "cartoon", attributes=["cartoon eyes"])
    assert [f.name for f in visible] == ["eye shape", "eye size", "pupil rendering", "eye colour", "eyebrow shape"]
    with pytest.raises(KeyError, match="object body"):
        ekb.features_for("human", "vector", attributes=["object body"])
    with pytest.raises(KeyError, match="robot"):
        ekb.attributes_for("robot", "vector")
    with pytest.raises(KeyError, match="pastel"):
        ekb.attributes_for("human", "pastel")


def test_category_scores(ekb):
    scores = [c.score for c in ekb.categories.values()]
    assert scores == pytest.approx([1.0, 2 / 3, 1 / 3, 0.0])
    assert all(c.definition for c in ekb.categories.values())


def test_transformations(ekb):
    for t in ekb.transformations.values():
        assert t.meaning
        assert t.harms_identity is False  # prompted transformations are never penalised
    assert ekb.transformations["style"].condition  # ... a style change only while identity survives
    # Intrinsic changes are what harm identity.
    assert {"shape", "colour", "proportion", "pattern"} <= set(ekb.rules.harmful_changes)


@pytest.mark.parametrize("axis", AXES)
def test_enough_phrases_for_every_cell(ekb, axis):
    for t in TYPES:
        for s in STYLES:
            phrases = ekb.transformations[axis].phrases_for(t, s)
            assert len(phrases) >= 8, (axis, t, s)
            assert len(set(phrases)) == len(phrases)
            for phrase in phrases:
                assert phrase == phrase.strip() and phrase[-1] not in ".,;", phrase


def test_phrase_grammar(ekb):
    first_words = {
        "viewpoint": ("seen",),
        "lighting": ("lit",),
        "background": ("in", "on", "among", "inside"),
        "style": ("rendered",),
    }
    for axis, starts in first_words.items():
        for phrase in {p for t in TYPES for s in STYLES for p in ekb.transformations[axis].phrases_for(t, s)}:
            assert phrase.split()[0] in starts, (axis, phrase)


def test_style_phrases_leave_the_subjects_own_style(ekb):
    for t in TYPES:
        for s in STYLES:
            for phrase in ekb.transformations["style"].phrases_for(t, s):
                assert not any(word in phrase.lower() for word in STYLE_WORDS[s]), (s, phrase)
                assert ekb.styles[s].is_named_in(phrase) is False


def test_objects_and_people_get_phrases_that_fit_them(ekb):
    """A sun with a face has no legs or paws; a person has no tail; animals do not grin."""
    body_parts = re.compile(r"\b(paws?|legs?|tail|ears?|fur|arms?|hands?|feet)\b")
    for axis in ("pose", "expression"):
        for s in STYLES:
            for phrase in ekb.transformations[axis].phrases_for("animated_object", s):
                assert not body_parts.search(phrase), phrase
            for phrase in ekb.transformations[axis].phrases_for("human", s):
                assert not re.search(r"\b(paws?|tail|fur|its)\b", phrase), phrase
    for s in STYLES:
        for phrase in ekb.transformations["expression"].phrases_for("animal", s):
            assert not re.search(r"\b(grin\w*|wink\w*|smirk\w*|pout\w*)\b", phrase), phrase


def test_rules(ekb):
    rules = ekb.rules
    assert list(rules.importance_levels)[-1] == "cosmetic"
    assert ekb.level_of("species") == "decisive"
    assert ekb.level_of("face shape") == "core"
    assert ekb.level_of("hairstyle") == "secondary"
    assert ekb.level_of("carried items") == "cosmetic"
    assert rules.principles
    assert [r.category for r in rules.categorisation] == list(ekb.categories)
    assert rules.categorise({}) == "exact"
    assert rules.categorise({"cosmetic": 0.5}) == "near_exact"
    assert rules.categorise({"secondary": 0.2, "cosmetic": 1.0}) == "near_exact"
    assert rules.categorise({"core": 0.3}) == "partial"
    assert rules.categorise({"core": 0.8}) == "mismatch"
    assert rules.categorise({"decisive": 1.0}) == "mismatch"
    with pytest.raises(ValueError, match="hair"):
        rules.categorise({"hair": 0.5})


# --- broken copies -----------------------------------------------------------------------------------


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "ekb"
    shutil.copytree(DATA_DIR, folder)
    return folder


def _mutate(folder: Path, file: str, change: Callable[[dict], None]) -> None:
    path = folder / file
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _rename_key(mapping: dict, old: str, new: str) -> None:
    items = [(new if k == old else k, v) for k, v in mapping.items()]
    mapping.clear()
    mapping.update(items)


BAD_DATA = {
    "unknown style in a cell": (
        "attributes.yaml",
        lambda d: _rename_key(d["cells"]["animal"], "vector", "pastel"),
        ["cells.animal.pastel", "unknown style"],
    ),
    "unknown type in cells": (
        "attributes.yaml",
        lambda d: _rename_key(d["cells"], "animal", "robot"),
        ["cells.robot", "unknown type"],
    ),
    "empty cell": (
        "attributes.yaml",
        lambda d: d["cells"]["animated_object"].update(cartoon=[]),
        ["cells.animated_object.cartoon", "empty"],
    ),
    "missing cell": (
        "attributes.yaml",
        lambda d: d["cells"]["human"].pop("vector"),
        ["cells.human.vector", "missing"],
    ),
    "attribute refers to a missing feature": (
        "attributes.yaml",
        lambda d: d["attributes"]["eyes"]["features"].append("third eye"),
        ["attributes.eyes.features[3]", "third eye"],
    ),
    "cell refers to a missing attribute": (
        "attributes.yaml",
        lambda d: d["cells"]["human"]["cartoon"].append("wings"),
        ["cells.human.cartoon[7]", "wings"],
    ),
    "features given as text, not a list": (
        "attributes.yaml",
        lambda d: d["attributes"]["eyes"].update(features="eye shape"),
        ["attributes.eyes.features", "list"],
    ),
    "feature listed twice": (
        "attributes.yaml",
        lambda d: d["attributes"]["eyes"]["features"].append("eye shape"),
        ["attributes.eyes.features[3]", "twice"],
    ),
    "weight 1.5": (
        "features.yaml",
        lambda d: d["features"]["eye shape"].update(importance=1.5),
        ["features.eye shape.importance", "1.5"],
    ),
    "weight given as text": (
        "features.yaml",
        lambda d: d["features"]["nose shape"].update(importance="high"),
        ["features.nose shape.importance", "number"],
    ),
    "weight given as true": (
        "features.yaml",
        lambda d: d["features"]["nose shape"].update(importance=True),
        ["features.nose shape.importance", "number"],
    ),
    "misspelt key": (
        "features.yaml",
        lambda d: d["features"]["nose shape"].update(descripton="typo"),
        ["features.nose shape.descripton", "unknown key"],
    ),
    "missing transformation": (
        "transformations.yaml",
        lambda d: d["transformations"].pop("occlusion"),
        ["transformations.occlusion", "missing"],
    ),
    "unknown phrase key": (
        "transformations.yaml",
        lambda d: d["transformations"]["pose"]["phrases"].update(robot=["beeps"]),
        ["transformations.pose.phrases.robot", "unknown key"],
    ),
    "a cell without pose phrases": (
        "transformations.yaml",
        lambda d: d["transformations"]["pose"]["phrases"].pop("animal"),
        ["transformations.pose.phrases", "animal"],
    ),
    "style phrase naming the subject's own style": (
        "transformations.yaml",
        lambda d: d["transformations"]["style"]["phrases"]["cartoon"].append("rendered as a Saturday-morning cartoon"),
        ["transformations.style.phrases.cartoon[10]", "own style"],
    ),
    "harms_identity not a boolean": (
        "transformations.yaml",
        lambda d: d["transformations"]["lighting"].update(harms_identity="no"),
        ["transformations.lighting.harms_identity", "true or false"],
    ),
    "score outside [0, 1]": (
        "categories.yaml",
        lambda d: d["categories"]["near_exact"].update(score=1.2),
        ["categories.near_exact.score", "outside"],
    ),
    "scores out of order": (
        "categories.yaml",
        lambda d: d["categories"]["partial"].update(score="3/4"),
        ["categories.partial.score", "fall"],
    ),
    "rule for an unknown category": (
        "rules.yaml",
        lambda d: d["categorisation"][1].update(category="almost"),
        ["categorisation[1].category", "almost"],
    ),
    "rule limit outside [0, 1]": (
        "rules.yaml",
        lambda d: d["categorisation"][2]["max_changed_share"].update(core=2),
        ["categorisation[2].max_changed_share.core", "outside"],
    ),
    "rule missing a level": (
        "rules.yaml",
        lambda d: d["categorisation"][0]["max_changed_share"].pop("secondary"),
        ["categorisation[0].max_changed_share.secondary", "missing"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_DATA))
def test_bad_ekb_names_file_and_key(tmp_path, case):
    file, change, expected = BAD_DATA[case]
    folder = _copy(tmp_path)
    _mutate(folder, file, change)
    with pytest.raises(EKBError) as error:
        load_ekb(folder)
    message = str(error.value)
    assert file in message
    for text in expected:
        assert text in message, message


def test_untouched_copy_loads(tmp_path):
    """The copy-and-rewrite of the bad cases is not itself what breaks them."""
    folder = _copy(tmp_path)
    for file in ("features.yaml", "attributes.yaml", "transformations.yaml", "categories.yaml", "rules.yaml"):
        _mutate(folder, file, lambda d: None)
    assert load_ekb(folder) == load_ekb()


def test_malformed_yaml(tmp_path):
    folder = _copy(tmp_path)
    with (folder / "styles.yaml").open("a", encoding="utf-8") as handle:
        handle.write("  pastel: [unclosed\n")
    with pytest.raises(EKBError, match=r"styles\.yaml: not valid YAML"):
        load_ekb(folder)


def test_duplicate_key(tmp_path):
    folder = _copy(tmp_path)
    with (folder / "types.yaml").open("a", encoding="utf-8") as handle:
        handle.write("  human:\n    description: a second definition\n")
    with pytest.raises(EKBError) as error:
        load_ekb(folder)
    assert "types.yaml" in str(error.value) and "types.human" in str(error.value) and "duplicate" in str(error.value)


def test_missing_file(tmp_path):
    folder = _copy(tmp_path)
    (folder / "rules.yaml").unlink()
    with pytest.raises(EKBError, match=r"rules\.yaml: missing"):
        load_ekb(folder)


def test_not_a_folder(tmp_path):
    with pytest.raises(EKBError, match="not a folder"):
        load_ekb(tmp_path / "nowhere")

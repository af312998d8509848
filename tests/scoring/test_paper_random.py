"""The ``paper-random`` profile: the paper models' architectures at their real sizes, random weights.

Nothing here makes real-size weights (gigabytes, tens of seconds): the shipped configurations are checked
by building each network on torch's ``meta`` device (shapes only, nothing allocated) and counting its
parameters against the sizes its authors publish. The profile must be a plumbing check everywhere the
``tiny`` one is: the registry, ``idbench models``, the report, the leaderboard's publishing checks.
"""

from __future__ import annotations

import json
from importlib import resources
from types import SimpleNamespace

import pytest

from idbench.builders.registry import get_benchmark
from idbench.cli import main
from idbench.evaluate_pkg.models import download as dl
from idbench.evaluate_pkg.models import registry
from idbench.evaluate_pkg.models.base import ModelNotAvailableError
from idbench.evaluate_pkg.runner import select_metrics, unmade_roles

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

# Published sizes, in parameters, and where each is published. A shipped configuration whose network is
# more than TOLERANCE away from its model's published size is not that model.
PUBLISHED = {
    # open_clip docs/model_profile.csv, row ViT-L-14: 427.62 M (303.97 M image, 123.65 M text)
    "clip-vit-l-14-paper-random": 427.62e6,
    # facebookresearch/dinov2 README, pretrained models table: ViT-B/14 distilled, 86 M
    "dinov2-base-paper-random": 86e6,
    # facebookresearch/dinov3 README, LVD-1689M ViT table: ViT-B/16 distilled, 86M
    "dinov3-vitb16-paper-random": 86e6,
    # the Hub page of IDEA-Research/grounding-dino-tiny (its model.safetensors): 172M params
    "grounding-dino-tiny-paper-random": 172e6,
    # facebookresearch/sam2 README, SAM 2.1 checkpoints table: sam2.1_hiera_tiny.pt, 38.9 M
    "sam2.1-hiera-tiny-paper-random": 38.9e6,
    # christophschuhmann/improved-aesthetic-predictor's MLP: Linear 768->1024->128->64->16->1, weights and biases
    "laion-aesthetic-v2-paper-random": 768 * 1024 + 1024 + 1024 * 128 + 128 + 128 * 64 + 64 + 64 * 16 + 16 + 16 + 1,
}
TOLERANCE = 0.03


# These build each model (on the meta device: no memory, no weights), which the fast tier's guard
# counts as loading a model.
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_each_shipped_configuration_has_its_models_published_size(name):
    count = registry.parameter_count(name)
    assert abs(count - PUBLISHED[name]) <= TOLERANCE * PUBLISHED[name], f"{name}: {count / 1e6:.2f} M parameters"


@pytest.mark.slow
def test_clip_towers_match_open_clip_and_its_shipped_config():
    model = registry.random_model("clip-vit-l-14-paper-random")  # on the meta device
    towers = {"vision": 0, "text": 0}
    for name, parameter in model.named_parameters():
        if name.startswith(("vision_model.", "visual_projection.")):
            towers["vision"] += parameter.numel()
        elif name.startswith(("text_model.", "text_projection.")):
            towers["text"] += parameter.numel()
    # open_clip docs/model_profile.csv, ViT-L-14: image_mparams 303.97, text_mparams 123.65
    assert round(towers["vision"] / 1e6, 2) == 303.97 and round(towers["text"] / 1e6, 2) == 123.65

    # the numbers come from open_clip's own ViT-L-14.json (shipped inside the open_clip package)
    open_clip_config = json.loads(
        resources.files("open_clip").joinpath("model_configs", "ViT-L-14.json").read_text(encoding="utf-8")
    )
    shipped = registry.paper_config("clip-vit-l-14")["config"]
    vision, text = open_clip_config["vision_cfg"], open_clip_config["text_cfg"]
    assert shipped["projection_dim"] == open_clip_config["embed_dim"] == 768
    assert (
        shipped["vision"]["hidden_size"] == vision["width"]
        and shipped["vision"]["num_hidden_layers"] == vision["layers"]
    )
    assert shipped["vision"]["patch_size"] == vision["patch_size"] and vision["image_size"] == 224
    assert shipped["vision"]["num_attention_heads"] == vision["width"] // 64  # open_clip's head_width 64
    assert shipped["text"]["hidden_size"] == text["width"] and shipped["text"]["num_hidden_layers"] == text["layers"]
    assert shipped["text"]["num_attention_heads"] == text["heads"]
    for tower in ("vision", "text"):  # open_clip's mlp_ratio 4
        assert shipped[tower]["intermediate_size"] == 4 * shipped[tower]["hidden_size"]


def test_every_shipped_configuration_says_where_its_numbers_come_from():
    for card in registry.resolve_profile("paper").values():
        if card.family in registry.RANDOM_BUILDERS:
            shipped = registry.paper_config(card.name)
            assert len(shipped["_idbench_source"]) > 100 and "config" in shipped, card.name
    with pytest.raises(registry.UnknownModelError, match="clip-vit-l-14"):
        registry.paper_config("clip-vit-h-14")


def test_the_profile_is_plumbing_as_tiny_is():
    paper, cards = registry.resolve_profile("paper"), registry.resolve_profile("paper-random")
    assert tuple(cards) == registry.ROLES
    for role, card in cards.items():
        assert card.name == paper[role].name + "-paper-random" and card.family == paper[role].family
        assert registry.is_plumbing(card) and registry.RANDOM_SIZES[card.name] == "paper"
        assert card.hub_id is None and card.license == registry.TINY_LICENSE
        assert registry.tiny_path(card, "/m").parts[-2:] == ("paper-random", card.name)
    assert registry.profile_is_plumbing("paper-random")
    plumbing = {profile for profile in registry.PROFILES if registry.profile_is_plumbing(profile)}
    assert plumbing == set(registry.PLUMBING_PROFILES) == {"tiny", "paper-random"}


def test_the_leaderboard_never_publishes_it():
    from idbench.leaderboard import hub, hub_records
    from idbench.leaderboard.queue import hub as hub_queue

    # even a summary whose flag was lost or forged says so by its profile
    forged = {"plumbing": False, "profile": "paper-random"}
    with pytest.raises(hub.HubExportError, match="plumbing check"):
        hub._refuse_plumbing(forged)
    assert hub_queue.is_plumbing(forged) and not hub_queue.is_plumbing({"plumbing": False, "profile": "paper"})
    problems = hub_records.result_problems("b/m/0123456789ab/aggregates.json", forged, now=0.0)
    assert "a plumbing (random-weight profile) result: such numbers are never published" in problems


def test_idbench_models_lists_it_as_plumbing(tmp_path, capsys):
    assert main(["models", "list", "--profile", "paper-random", "--models-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "paper-random:  (plumbing check: full-size random weights, for timing)"
    shown = {line.split()[1]: line for line in lines[1:]}
    assert set(shown) == {card.name for card in registry.resolve_profile("paper-random").values()}
    for name, line in shown.items():
        if name == "arcface-buffalo-l-paper-random":
            assert line.endswith("plumbing, cannot be made offline: the metrics that need it are not run")
        else:
            assert line.endswith("plumbing, made on first use (idbench models make-tiny --profile paper-random)")
    assert not (tmp_path / "paper-random").exists()  # listing makes nothing


def test_the_face_model_is_not_made_and_says_why(tmp_path):
    card = registry.get_card("arcface-buffalo-l-paper-random")
    with pytest.raises(ModelNotAvailableError, match="cannot be made at its real size offline") as error:
        registry.check_available(card, tmp_path)
    assert "Nothing stands in for it" in str(error.value)
    report = dl.download("paper-random", models_dir=tmp_path, progress=None)
    assert not report.ok and [o.step.name for o in report.by_status(dl.NOT_MADE)] == [card.name]
    assert report.summary() == (
        "paper-random: 6 made locally, 1 cannot be made offline: arcface-buffalo-l-paper-random"
    )


def test_its_face_metrics_are_not_run_unless_asked_for_by_name():
    data = SimpleNamespace(name="cogcanvas", spec=get_benchmark("cogcanvas"))
    unmade = unmade_roles("paper-random")
    assert set(unmade) == {"face"} and "arcface-buffalo-l-paper-random cannot be made" in unmade["face"]
    assert unmade_roles("tiny") == {} and unmade_roles("paper") == {}
    metrics, not_run = select_metrics(data, None, unmade=unmade)
    face_metrics = {m.name for m in data.spec.metric_suite if "face" in m.roles}
    assert face_metrics and face_metrics <= set(not_run) and not face_metrics & set(metrics)
    assert not_run["id_sim"] == unmade["face"] and "clip_t" in metrics and "bg_sim" in metrics
    # asked for by name, a face metric stays: loading its model then stops the run with the same reason
    metrics, not_run = select_metrics(data, ("id_sim", "clip_t"), unmade=unmade)
    assert metrics == ["id_sim", "clip_t"] and not not_run


@pytest.mark.slow
def test_make_tiny_refuses_a_profile_without_random_models(capsys):
    assert main(["models", "make-tiny", "--profile", "paper"]) != 0
    assert "has no random models to make" in capsys.readouterr().err

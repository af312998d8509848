"""``idbench build ... --curate``: the model stages wired into the builders, end to end.

Encoders are the tiny random ones (a plumbing check of the image stages: their scores are reported
and remove nothing; permissive pixel thresholds keep every sample in the library-level tests); the MLLM is an in-process scripted judge that
answers each curation task the way a cooperative model would. What is asserted is the wiring: the
stages run in order, fill what the manifest left empty (and only that), replace prompt text, write
their audit files into the build and record themselves in build_info; without a judge they are
skipped, and the report says so.
"""

from __future__ import annotations

import csv
import itertools
import json
import re
import shutil
from pathlib import Path

import pytest
from helpers import SAMPLES

from idbench.builders.build import build, format_report
from idbench.builders.sources import SourceError
from idbench.curation.pipeline import NO_JUDGE, CurateOptions, Curation
from idbench.curation.quality import QualityThresholds
from idbench.evaluate_pkg.judge import JudgeAnswer

# Every test here loads a model, scores or runs a worker.
pytestmark = [pytest.mark.slow]

# Keep every sample image (the samples are below the default 512 px floor).
PERMISSIVE = QualityThresholds(
    min_side=16, min_blur=0.0, min_pixel_std=0.0, max_aspect_ratio=10, min_aesthetic=None, min_relevance=None
)
PHRASES = {
    "pose": "leaping in the air",
    "expression": "with a wide grin",
    "viewpoint": "seen from above",
    "occlusion": "half hidden behind a fence",
    "lighting": "under neon light",
    "background": "on a windy beach",
}


class CurationJudge:
    """Answers the curation tasks: fixed metadata, writer texts naming every slot and item, verifiers that pass."""

    model = "scripted-mllm"

    def __init__(self):
        self.tasks: list[str] = []

    def ask(self, requests):
        self.tasks += [r.task for r in requests]
        return [JudgeAnswer(value=self.answer(r), attempts=1) for r in requests]

    def answer(self, request):
        task, schema = request.task, request.schema["properties"]
        if task == "curation.metadata.identity":
            return {
                "age_group": schema["age_group"]["enum"][0],
                "gender": schema["gender"]["enum"][0],
                "ethnicity": schema["ethnicity"]["enum"][0],
                "apparel": ["a coat"],
            }
        if task == "curation.metadata.item":
            return {"size_category": schema["size_category"]["enum"][0], "interactions": ["hold"]}
        if task == "curation.metadata.background":
            return {"scene_type": next(v for v in schema["scene_type"]["enum"] if v != "landmark"), "landmark": None}
        if task == "curation.cogcanvas.write":
            rules = request.prompt.split("Rules:")[1]
            slots = re.findall(r'"(person [A-E])"', rules.split("; name the items")[0])
            items = re.findall(r'"([^"]+)"', rules.split("name the items exactly as")[1].split("; state")[0])
            return {"prompt": f"Written: {', '.join(f'{s} with {i}' for s, i in zip(slots, items))}."}
        if task == "curation.cogcanvas.verify":
            return {
                "interaction_plausible": True,
                "layout_feasible": True,
                "scene_compatible": True,
                "faithful": True,
                "reasons": [],
            }
        if task == "curation.charis.propose":
            combos = [list(c) for c in itertools.combinations(PHRASES, 5)] + [list(PHRASES)]  # 6 + 1 distinct
            return {
                "proposals": [
                    {
                        "prompt": "The subject " + ", ".join(PHRASES[a] for a in axes) + ".",
                        "transformations": [{"axis": a, "phrase": PHRASES[a]} for a in axes],
                    }
                    for axes in combos
                ]
            }
        raise AssertionError(f"unexpected task {task}")


@pytest.fixture
def cogcanvas_source(tmp_path) -> Path:
    """The CogCanvas samples with one person's age group and one object's size left empty."""
    folder = shutil.copytree(SAMPLES, tmp_path / "src")
    with (folder / "cogcanvas.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    person = next(r for r in rows if r["kind"] == "person")
    item = next(r for r in rows if r["kind"] == "object")
    person["age_group"], item["size_category"] = "", ""
    with (folder / "cogcanvas.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return folder


def _curator(judge=None, **kwargs) -> Curation:
    """The curation of one build, as the CLI composes it (builders take it through build(curator=...))."""
    return Curation(CurateOptions(profile="tiny", judge=judge, quality=PERMISSIVE, dedup_threshold=0.99999, **kwargs))


def test_cogcanvas_curated_build(cogcanvas_source, tmp_path, fresh_cache):
    judge = CurationJudge()
    info = build("cogcanvas", out=tmp_path / "out", source=cogcanvas_source / "cogcanvas.csv", curator=_curator(judge))
    stages = info["curation"]
    assert list(stages) == [
        "quality",
        "embedding_dedup",
        "faces",
        "metadata",
        "demographic_balance",
        "prompt_synthesis",
    ]
    assert stages["embedding_dedup"]["plumbing"] is True  # tiny weights: labelled as a plumbing check
    assert stages["metadata"]["filled"] >= 2 and stages["metadata"]["failed"] == []
    assert stages["prompt_synthesis"]["accepted"] == info["configs"]["prompts"]["rows"]
    # One metadata request per reference, then one writer and one verifier request per prompt.
    refs, prompts = info["configs"]["references"]["rows"], info["configs"]["prompts"]["rows"]
    assert judge.tasks.count("curation.cogcanvas.write") == prompts == judge.tasks.count("curation.cogcanvas.verify")
    assert sum(t.startswith("curation.metadata.") for t in judge.tasks) == refs
    import datasets

    rows = datasets.load_dataset(str(tmp_path / "out"), "references", split="test", cache_dir=fresh_cache)
    filled = [r for r in rows if r["kind"] == "person" and r["age_group"]]
    assert len(filled) == sum(r["kind"] == "person" for r in rows)  # the blank was filled; nothing was left empty
    written = datasets.load_dataset(str(tmp_path / "out"), "prompts", split="test", cache_dir=fresh_cache)
    assert all(p["prompt"].startswith("Written: person") for p in written)
    audit = tmp_path / "out" / "curation"
    for name in (
        "quality.json",
        "quality.csv",
        "embedding_dedup.json",
        "embedding_dedup.csv",
        "metadata.json",
        "demographic_balance.csv",
        "prompt_synthesis.json",
    ):
        assert (audit / name).is_file(), name
    assert "curation (audit files in curation/)" in format_report(info)


def test_without_a_judge_the_mllm_stages_are_skipped_and_said_so(cogcanvas_source, tmp_path):
    # The blanks cannot be filled without a judge: the manifest check names the row.
    with pytest.raises(SourceError, match=r"cogcanvas.csv, row \d+: a person row needs 'age_group'"):
        build("cogcanvas", out=tmp_path / "out", source=cogcanvas_source / "cogcanvas.csv", curator=_curator())
    assert not (tmp_path / "out").exists()
    info = build("cogcanvas", out=tmp_path / "out", curator=_curator())  # the complete sample manifest
    assert info["curation"]["metadata"] == NO_JUDGE and info["curation"]["prompt_synthesis"] == NO_JUDGE
    report = format_report(info)
    assert "metadata: skipped: no judge configured" in report and "prompt_synthesis: skipped" in report


def test_a_failed_metadata_answer_stops_the_build_naming_the_row(cogcanvas_source, tmp_path):
    class Broken(CurationJudge):
        def ask(self, requests):
            return [
                JudgeAnswer(error="HTTP 500")
                if r.task == "curation.metadata.identity"
                else JudgeAnswer(value=self.answer(r))
                for r in requests
            ]

    with pytest.raises(SourceError, match=r"row \d+: .* still lacks age_group after metadata extraction"):
        build("cogcanvas", out=tmp_path / "out", source=cogcanvas_source / "cogcanvas.csv", curator=_curator(Broken()))
    assert not (tmp_path / "out").exists()


def test_charis_proposals_then_a_reviewed_export(tmp_path):
    judge = CurationJudge()
    info = build("charis", out=tmp_path / "out", curator=_curator(judge))
    stages = info["curation"]
    assert (
        stages["charis_prompts"]["source"] == "VLM proposals" and stages["charis_prompts"]["incomplete_subjects"] == []
    )
    subjects = info["configs"]["subjects"]["rows"]
    assert info["configs"]["prompts"]["rows"] == 7 * subjects
    review = tmp_path / "out" / "curation" / "review"
    assert (review / "review.csv").is_file() and any((review / "thumbnails").iterdir())

    # A person edits one prompt of the export; the build takes the reviewed prompts as they are.
    with (review / "review.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    rows[0]["prompt"] = rows[0]["prompt"].replace("The subject", "The very same subject")
    edited = tmp_path / "edited.csv"
    with edited.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    shutil.copy(review / "baseline.jsonl", tmp_path / "baseline.jsonl")
    again = build(
        "charis", out=tmp_path / "again", curator=Curation(CurateOptions(reviewed_prompts=edited, image_stages=False))
    )
    assert again["curation"]["charis_prompts"]["source"] == "reviewed export"
    assert again["configs"]["prompts"]["rows"] == info["configs"]["prompts"]["rows"]
    build_info = json.loads((tmp_path / "again" / "build_info.json").read_text())
    assert build_info["curation"]["images"] == "skipped (no --curate)"


def test_cli_curated_build_through_the_real_client(tmp_path, monkeypatch):
    """`idbench build cogcanvas --curate --judge-url ...` against the local chat-completions server."""
    import sys
    from types import SimpleNamespace

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judge"))
    from openai_server import ScriptedServer, answer, user_text

    from idbench.cli import main

    scripted = CurationJudge()
    tasks = {
        name.replace(".", "_"): name
        for name in (
            "curation.metadata.identity",
            "curation.metadata.item",
            "curation.metadata.background",
            "curation.cogcanvas.write",
            "curation.cogcanvas.verify",
        )
    }

    def reply(body):
        response = body["response_format"]["json_schema"]
        request = SimpleNamespace(task=tasks[response["name"]], prompt=user_text(body), schema=response["schema"])
        return answer(scripted.answer(request))

    # Out of the box: the shipped samples, their own thresholds, the default dedup threshold.
    with ScriptedServer(reply) as server:
        code = main(
            [
                "build",
                "cogcanvas",
                "--out",
                str(tmp_path / "out"),
                "--curate",
                "--profile",
                "tiny",
                "--judge-url",
                server.base_url,
                "--judge-model",
                "scripted-mllm",
            ]
        )
        sent = len(server.requests)
    assert code == 0
    info = json.loads((tmp_path / "out" / "build_info.json").read_text())
    prompts, refs = info["configs"]["prompts"]["rows"], info["configs"]["references"]["rows"]
    assert refs == len(manifest_rows("cogcanvas.csv")) - len(info["dropped_duplicates"])  # the tiny scores removed none
    assert sent == refs + 2 * prompts  # one metadata request per reference; a writer and a verifier per prompt
    assert info["curation"]["metadata"]["images"] == refs and info["curation"]["metadata"]["failed"] == []
    assert info["curation"]["prompt_synthesis"]["accepted"] == prompts
    assert (tmp_path / "out" / "curation" / "prompt_synthesis.json").is_file()
    # A malformed thresholds file is one error naming it, and nothing is built.
    thresholds = tmp_path / "thresholds.json"
    thresholds.write_text('{"min_sid": 3}')
    assert (
        main(
            [
                "build",
                "cogcanvas",
                "--out",
                str(tmp_path / "bad"),
                "--curate",
                "--profile",
                "tiny",
                "--quality-thresholds",
                str(thresholds),
            ]
        )
        == 2
    )
    assert not (tmp_path / "bad").exists()


def test_an_implausible_tuple_is_drawn_again_with_its_retrieval_rows(tmp_path, fresh_cache):
    """The verifier rejects the first tuple it sees as implausible: the builder draws that prompt again."""
    import datasets

    class Picky(CurationJudge):
        rejected = False

        def answer(self, request):
            if request.task == "curation.cogcanvas.verify" and not self.rejected:
                self.rejected = True
                return {
                    "interaction_plausible": False,
                    "layout_feasible": True,
                    "scene_compatible": True,
                    "faithful": True,
                    "reasons": ["person A cannot do that with this item"],
                }
            return super().answer(request)

    def load(folder: str, config: str):
        return datasets.load_dataset(str(tmp_path / folder), config, split="test", cache_dir=fresh_cache)

    build("cogcanvas", out=tmp_path / "plain", curator=_curator(CurationJudge()))
    info = build("cogcanvas", out=tmp_path / "out", curator=_curator(Picky()))
    [redrawn] = info["curation"]["prompt_synthesis"]["redrawn"]
    assert info["curation"]["prompt_synthesis"]["accepted"] == info["configs"]["prompts"]["rows"]
    old = {p["prompt_id"]: p for p in load("plain", "prompts")}[redrawn]
    new = {p["prompt_id"]: p for p in load("out", "prompts")}[redrawn]
    assert new["n_persons"] == old["n_persons"] and new["layout"] == old["layout"]

    def drawn(p):
        return (
            [q["entity_id"] for q in p["persons"]],
            [q["item_entity_id"] for q in p["persons"]],
            p["background_ref_id"],
        )

    assert drawn(new) != drawn(old)
    # Its retrieval rows follow the new draw; every other prompt's rows are as before.
    rows = load("out", "retrieval")
    mine = {r["slot"]: r["ground_truth_ref_id"] for r in rows if r["prompt_id"] == redrawn}
    expected = {p["slot"]: p["ref_id"] for p in new["persons"]} | {
        f"{p['slot']}.item": p["item_ref_id"] for p in new["persons"]
    }
    assert mine == expected | {"background": new["background_ref_id"]}
    others = lambda table: [dict(r) for r in table if r["prompt_id"] != redrawn]  # noqa: E731
    assert others(rows) == others(load("plain", "retrieval"))


# --- out of the box: the shipped samples, --profile tiny, no judge ------------------------------------


def manifest_rows(name: str, root: Path = SAMPLES) -> list[dict]:
    with (root / name).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("benchmark", ["cogcanvas", "charis", "identity-collapse"])
def test_curated_sample_build_works_out_of_the_box(benchmark, tmp_path, capsys):
    """`idbench build <b> --curate --profile tiny`: sample thresholds, tiny scores reported, nothing removed by them."""
    from idbench.cli import main

    out = tmp_path / "out"
    assert main(["build", benchmark, "--out", str(out), "--curate", "--profile", "tiny"]) == 0
    report = capsys.readouterr().out
    info = json.loads((out / "build_info.json").read_text())
    stages = info["curation"]
    # The shipped samples' thresholds applied, and the build says why.
    shipped = json.loads((SAMPLES / "quality-thresholds.json").read_text())
    assert stages["quality"]["thresholds"] == shipped
    assert (
        "shipped samples" in stages["quality"]["thresholds_from"]
        and "no --quality-thresholds" in stages["quality"]["thresholds_from"]
    )
    assert "thresholds_from" in report
    # Tiny weights: the model scores are computed and in the audit, labelled plumbing, and remove nothing.
    audit = json.loads((out / "curation" / "quality.json").read_text())
    assert audit["plumbing"] is True and audit["model_checks_applied"] is False
    assert audit["counts"]["removed_stage_2"] == 0
    assert all(image["aesthetic"] is not None and image["relevance"] is not None for image in audit["images"])
    assert stages["quality"]["model_checks"].startswith("not applied: plumbing")
    dedup = json.loads((out / "curation" / "embedding_dedup.json").read_text())
    assert dedup["applied"] is False and stages["embedding_dedup"]["removed"] == 0
    # Nothing but the pHash dedup removed a sample: every manifest row (less those) is in the build.
    manifest = {"cogcanvas": "cogcanvas.csv", "charis": "charis.csv", "identity-collapse": "identity-collapse.csv"}[
        benchmark
    ]
    table = "references" if benchmark == "cogcanvas" else "subjects"
    assert info["configs"][table]["rows"] == len(manifest_rows(manifest)) - len(info["dropped_duplicates"])
    # No judge: the MLLM stages are skipped and say so.
    skipped = {"cogcanvas": ["metadata", "prompt_synthesis"], "charis": ["charis_prompts"], "identity-collapse": []}[
        benchmark
    ]
    for stage in skipped:
        assert stages[stage].startswith(NO_JUDGE), stage
        assert f"{stage}: skipped: no judge configured" in report


def test_explicit_quality_thresholds_win_over_the_sample_ones(tmp_path):
    from idbench.cli import main

    mine = {"min_side": 100, "min_blur": 1.0, "min_aesthetic": None}
    thresholds = tmp_path / "mine.json"
    thresholds.write_text(json.dumps(mine))
    assert (
        main(
            [
                "build",
                "identity-collapse",
                "--out",
                str(tmp_path / "out"),
                "--curate",
                "--profile",
                "tiny",
                "--quality-thresholds",
                str(thresholds),
            ]
        )
        == 0
    )
    quality = json.loads((tmp_path / "out" / "build_info.json").read_text())["curation"]["quality"]
    assert quality["thresholds_from"] == f"--quality-thresholds {thresholds}"
    expected = {**json.loads(json.dumps(QualityThresholds().__dict__)), **mine}  # the defaults, overridden
    assert quality["thresholds"] == expected


def shrink(path: Path, side: int) -> None:
    """Replace the image at ``path`` with a ``side`` x ``side`` copy in the same format."""
    from PIL import Image

    with Image.open(path) as image:
        small, kind = image.convert("RGB").resize((side, side)), image.format
    small.save(path, format=kind)


def test_a_stage_that_removes_every_person_is_named_with_counts_and_thresholds(tmp_path, capsys):
    """32 px persons and min_side=64: the pixel check (which applies even with tiny weights) removes them all."""
    from idbench.cli import main

    source = shutil.copytree(SAMPLES, tmp_path / "src")
    rows = manifest_rows("cogcanvas.csv", source)
    persons = [r for r in rows if r["kind"] == "person"]
    for row in persons:
        shrink(source / row["file"], 32)
    (tmp_path / "t.json").write_text(json.dumps({"min_side": 64}))
    out = tmp_path / "built" / "cogcanvas"
    code = main(
        [
            "build",
            "cogcanvas",
            "--source",
            str(source / "cogcanvas.csv"),
            "--out",
            str(out),
            "--curate",
            "--profile",
            "tiny",
            "--quality-thresholds",
            str(tmp_path / "t.json"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    [line] = err.strip().splitlines()
    n = len(persons)
    assert line.startswith(f"idbench build: error: quality filter removed {n} of {n} person references (")
    assert f"min_side=64: {n}" in line and "left: 0 person," in line
    assert "then the build failed: " in line and "cannot sample CogCanvas prompts" in line
    audit = tmp_path / "built" / "cogcanvas.curation-audit"
    assert line.endswith(f"(curation audit kept in {audit})")
    assert not out.exists()  # the build's own folder is not half-written
    quality = json.loads((audit / "quality.json").read_text())
    removed = {i["id"] for i in quality["images"] if not i["kept"]}
    assert removed == {r["ref_id"] for r in persons}
    assert all("min_side" in [r["check"] for r in i["reasons"]] for i in quality["images"] if i["id"] in removed)
    assert (audit / "quality.csv").is_file() and (audit / "embedding_dedup.json").is_file()
    assert json.loads((audit / "stages.json").read_text())["quality"]["counts"]["removed_stage_1"] == n

    # Fixed source, build again: the stale audit of the failed attempt does not stay beside the new output.
    shutil.rmtree(source)
    shutil.copytree(SAMPLES, source)
    assert (
        main(
            [
                "build",
                "cogcanvas",
                "--source",
                str(source / "cogcanvas.csv"),
                "--out",
                str(out),
                "--curate",
                "--profile",
                "tiny",
                "--quality-thresholds",
                str(SAMPLES / "quality-thresholds.json"),
            ]
        )
        == 0
    )
    assert (out / "build_info.json").is_file() and not audit.exists()
    assert f"removed {audit}" in capsys.readouterr().out


def test_too_few_subjects_left_for_the_sampler_names_the_stage(tmp_path):
    """Identity Collapse needs 10 subjects: 12 go in, 3 are too small, the error says so and keeps the audit."""
    from helpers import make_collapse_source, noise_jpeg

    manifest = make_collapse_source(tmp_path / "src", 12)  # 64x48 images: animal for even k (first), human for odd
    for k in (0, 2, 4):
        (tmp_path / "src" / "img" / f"subject_{k:03d}.jpg").write_bytes(noise_jpeg(100 + k, (32, 32)))
    options = CurateOptions(profile="tiny", quality=QualityThresholds(min_side=40, min_blur=0, min_pixel_std=0))
    from idbench.curation.pipeline import Curation, CurationError

    run = Curation(options)
    with pytest.raises(SourceError) as caught:
        build("identity-collapse", out=tmp_path / "out", source=manifest, curator=run)
    error = run.failure(caught.value, tmp_path / "audit")
    assert isinstance(error, CurationError) and isinstance(error, SourceError)  # a user error: one CLI line
    assert str(error).startswith(
        "quality filter removed 3 of 6 animal references (min_side=40: 3); left: 3 animal, 6 human references"
    )
    assert "identity-collapse needs at least 10 distinct subjects, the source has 9" in str(error)
    assert (tmp_path / "audit" / "quality.json").is_file() and not (tmp_path / "out").exists()


def test_person_references_without_a_face_are_named_at_build_time(tmp_path, capsys):
    """One person reference replaced by an object photo (no face in it): the build names it, keeps it."""
    from idbench.cli import main

    source = shutil.copytree(SAMPLES, tmp_path / "src")
    rows = manifest_rows("cogcanvas.csv", source)
    persons = [r for r in rows if r["kind"] == "person"]
    faceless, donor = persons[0], next(r for r in rows if r["kind"] == "object")
    shutil.copyfile(source / donor["file"], source / faceless["file"])
    out = tmp_path / "out"
    assert (
        main(
            [
                "build",
                "cogcanvas",
                "--source",
                str(source / "cogcanvas.csv"),
                "--out",
                str(out),
                "--curate",
                "--profile",
                "tiny",
                "--quality-thresholds",
                str(SAMPLES / "quality-thresholds.json"),
            ]
        )
        == 0
    )
    faces = json.loads((out / "build_info.json").read_text())["curation"]["faces"]
    assert faces["backend"] == "dlib-face" and faces["checked"] == len(persons)
    # every other sample person is a photo with a visible face, which dlib (real weights) finds
    assert faces["no_face"] == [faceless["ref_id"]]
    assert "faces:" in capsys.readouterr().out  # the build report shows the stage


def test_a_face_backend_that_does_not_load_is_recorded_as_not_run():
    from idbench.curation.pipeline import face_audit

    class NoFaceModels:
        def __getitem__(self, role):
            raise RuntimeError("dlib is not installed\nsecond line")

    run = Curation(CurateOptions(profile="tiny"))
    run._models = NoFaceModels()
    assert face_audit({"p": b"x"}, run) == {"not_run": "the face backend did not load: dlib is not installed"}

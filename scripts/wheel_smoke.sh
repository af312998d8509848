#!/usr/bin/env bash
# The wheel smoke (CI runs it after the tests): what a user gets from `pip install <wheel>`.
# Builds the wheel from a clean copy of the sources, installs it into a throw-away venv (its dependencies
# are .venv's, checked against the wheel's requirements), and from an empty folder outside the repository runs
# the README's commands on embedded defaults: --version, build x3, template / baseline / validate /
# score --profile tiny, run with a user's adapter, the local and the Hub-backed queues (one benchmark),
# the evaluate modules, and serve (health endpoint + every app page);
# then python -m idbench and an app page from the repository root, where no folder may shadow the install;
# then the Space's folder from scripts/build_space.py, which must install offline from the wheel it ships.
# Checks that site-packages gains `idbench` (and its dist-info) only. Everything lives in one temporary
# folder, removed at the end. Usage: bash scripts/wheel_smoke.sh   (needs .venv from scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
started=$SECONDS
WORK=$(mktemp -d "${TMPDIR:-/tmp}/idbench-wheel-smoke.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
step() { echo "wheel smoke [$((SECONDS - started)) s]: $*"; }
# This machine's pip config names local wheel folders that may be absent; its warnings about them are noise.
pip_install() { "$WORK/venv/bin/python" -m pip install --quiet "$@" 2> >(grep -v "^WARNING: Location 'file://" >&2); }

step "building the wheel"
WHEEL=$(.venv/bin/python scripts/build_wheel.py "$WORK/dist" 2> >(grep -v "^WARNING: Location 'file://" >&2))
step "installing $(basename "$WHEEL") into a fresh venv (its dependencies: those scripts/setup.sh installed)"
python3 -m venv "$WORK/venv"
# The dependencies are .venv's (the pinned torch and what setup.sh resolved), seen through a .pth line
# placed after the venv's own site-packages; idbench itself is only the wheel's. Installing the same 3 GB
# of packages again took 98 s of every CI run and showed nothing that the dry run below does not: that
# the wheel's declared requirements, with the extras the smoke uses, are all met by that set.
site=$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/zz-dependencies-from-setup.pth"
# venv's own setuptools (65 on Python 3.11) would shadow .venv's, older than torch requires.
"$WORK/venv/bin/python" -m pip uninstall --quiet --yes setuptools
pip_install --no-deps "$WHEEL"
# The extras the smoke's commands need: scoring (metrics, faces: the dlib model) and the app.
pip_install --no-index --dry-run --report "$WORK/requirements.json" "$WHEEL[metrics,faces,leaderboard]"
"$WORK/venv/bin/python" - "$WORK/requirements.json" <<'EOF'
import json, sys
wanted = [item["metadata"]["name"] for item in json.load(open(sys.argv[1]))["install"]]
assert set(wanted) <= {"idbench"}, f"the wheel's requirements are not met by the installed set: pip would install {wanted}"
EOF
BIN=$WORK/venv/bin

# Only the venv's idbench from here on: an empty folder outside the repo, own caches and store.
mkdir "$WORK/run"
cd "$WORK/run"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME=$WORK/hf IDBENCH_HOME=$WORK/home \
    IDBENCH_CACHE=$WORK/cache IDBENCH_MODELS=$WORK/models IDBENCH_DATASETS_CACHE=$WORK/datasets-cache
unset PYTHONPATH

step "the installed layout"
"$BIN/python" - "$REPO" <<'EOF'
import importlib.metadata, importlib.util, pathlib, sys, sysconfig
repo = pathlib.Path(sys.argv[1]).resolve()
purelib = pathlib.Path(sysconfig.get_paths()["purelib"])
dist = importlib.metadata.distribution("idbench")
top = {p.parts[0] for p in dist.files if not p.parts[0] == ".."}  # ".." is the bin/idbench script
assert top == {"idbench", f"idbench-{dist.version}.dist-info"}, f"the wheel installs {sorted(top)}"
import idbench, idbench.cli
assert pathlib.Path(idbench.__file__).resolve().is_relative_to(purelib), idbench.__file__
assert not pathlib.Path(idbench.__file__).resolve().is_relative_to(repo), "imported from the repository"
for bare in ("builders", "cards", "curation", "ekb", "evaluate_pkg", "leaderboard", "samples"):
    assert importlib.util.find_spec(bare) is None, f"a top-level {bare!r} is importable"
assert idbench.__version__ == dist.version
print(f"  site-packages: {', '.join(sorted(top))}; version {dist.version}")
EOF
version=$("$BIN/python" -c 'import importlib.metadata as m; print(m.version("idbench"))')
[ "$("$BIN/idbench" --version)" = "idbench $version" ]
[ "$("$BIN/python" -m idbench --version)" = "idbench $version" ]

# The demo itself runs in the test suite (tests/test_cli.py, on the editable install); here only what a
# non-editable install can break is checked: package data (samples, card templates, metric scripts, app
# pages), entry points and the console script, with one benchmark scored end to end (CHARIS: without a
# judge its suite is embeddings only, so scoring takes seconds).
step "idbench build, for each benchmark (the samples, card templates and entry points of the wheel)"
for benchmark in charis cogcanvas identity-collapse; do
    timeout 300 "$BIN/idbench" build "$benchmark" --out "built/$benchmark" > /dev/null
    [ -f "built/$benchmark/README.md" ] && [ -f "built/$benchmark/build_info.json" ]
done

step "template, baseline, validate, score --profile tiny (charis)"
"$BIN/idbench" template charis --data built/charis --out my-sub
[ -f my-sub/manifest.csv ] && [ -f my-sub/submission.json ]
"$BIN/idbench" baseline collage charis --data built/charis --out collage
"$BIN/idbench" validate collage --data built/charis
# The first tiny-profile command makes the tiny models into $IDBENCH_MODELS; the later ones reuse them.
timeout 600 "$BIN/idbench" score collage --data built/charis --out scores --profile tiny > score.log 2>&1 \
    || { tail -n 40 score.log; exit 1; }
for file in results.parquet aggregates.json report.md; do [ -f "scores/$file" ]; done

step "idbench run with a user's adapter (module:attr from the current folder): generate, validate, score"
cat > my_adapter.py <<'EOF2'
from PIL import Image

def flat(request):  # a user's model: one colour per seed, references ignored
    return Image.new("RGB", (request.resolution, request.resolution), (request.seed * 40 % 256, 90, 160))
EOF2
timeout 600 "$BIN/idbench" run charis --data built/charis --model my_adapter:flat --resolution 64 \
    --out my-run --profile tiny --metrics clip_t > run.log 2>&1 || { tail -n 40 run.log; exit 1; }
grep -q "\[4/4\] score" run.log && [ -f my-run/results/aggregates.json ] && grep -q '"adapter": "my_adapter:flat"' my-run/submission/submission.json

step "the local leaderboard: submit, worker --once, jobs (the store the app pages read below)"
mkdir -p "$IDBENCH_HOME/benchmarks" && cp -r built/charis "$IDBENCH_HOME/benchmarks/"
{ "$BIN/idbench" submit collage --benchmark charis \
  && timeout 600 "$BIN/idbench" worker --profile tiny --once \
  && "$BIN/idbench" jobs; } > queue.log 2>&1 || { tail -n 40 queue.log; exit 1; }
grep -q "FINISHED" queue.log || { tail -n 40 queue.log; echo "the local worker did not finish the job" >&2; exit 1; }

step "the Hub-backed queue on the local stand-in: submit --hub, worker --hub --once, jobs --hub"
# The Space's and a GPU worker's commands, with IDBENCH_HUB_STAND_IN in place of the Hub (no network);
# the worker serves $IDBENCH_HOME/benchmarks/<benchmark>.
hub() { IDBENCH_HUB_STAND_IN="$PWD/hub" timeout 600 "$BIN/idbench" "$@"; }
{ hub submit collage --benchmark charis --data "$IDBENCH_HOME/benchmarks/charis" --hub org/requests \
  && hub worker --hub org/requests --results org/results --profile tiny --once \
  && hub jobs --hub org/requests; } > hub.log 2>&1 || { tail -n 40 hub.log; exit 1; }
grep "^FINISHED " hub.log || { tail -n 40 hub.log; echo "the Hub worker did not finish the request" >&2; exit 1; }

step "the evaluate modules, by name"
"$BIN/python" - <<'EOF'
import math
import evaluate
import idbench.metrics
for name in idbench.metrics.NAMES:
    assert (idbench.metrics.path(name) / f"{name}.py").is_file(), name
clip_t = evaluate.load(str(idbench.metrics.path("clip_t")))
value = clip_t.compute(image_embeddings=[[1.0, 0.0]], text_embeddings=[[1.0, 1.0]])["clip_t"]
assert math.isclose(value, math.sqrt(0.5), rel_tol=1e-6), value
try:
    idbench.metrics.path("clip_score")
except idbench.metrics.UnknownMetricError as error:
    assert "clip_t" in str(error), error
else:
    raise AssertionError("an unknown metric name was accepted")
print("  evaluate.load(str(idbench.metrics.path('clip_t'))) computes", round(value, 4))
EOF

step "idbench serve (health endpoint) and every app page"
# (AppTest's "missing ScriptRunContext" notes on stderr are noise.)
"$BIN/python" - "$BIN/idbench" 2> >(grep -v "missing ScriptRunContext" >&2) <<'EOF'
import os, signal, socket, subprocess, sys, time, urllib.request
with socket.socket() as probe:  # a free port
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
# Its own session: `idbench serve` runs streamlit as a child, and both must stop at the end.
log = open("serve.log", "wb")
server = subprocess.Popen([sys.argv[1], "serve", "--port", str(port)], start_new_session=True, stdout=log, stderr=log)
try:
    deadline, healthy = time.monotonic() + 90, False
    while not healthy and time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as reply:
                healthy = reply.status == 200 and reply.read().strip() == b"ok"
        except OSError:
            time.sleep(0.5)  # not listening yet
    assert healthy, f"no health reply on port {port} (server exit status {server.poll()}):\n{open('serve.log').read()}"
    print(f"  /_stcore/health on port {port}: ok")
finally:
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()

# The pages are scripts under the installed views/ folder: run each over the store filled above.
from streamlit.testing.v1 import AppTest
from idbench.leaderboard.app import APP_PATH
app = AppTest.from_file(str(APP_PATH), default_timeout=120).run()
assert not app.exception, app.exception
pages = sorted(p for p in (APP_PATH.parent / "views").glob("*.py"))
for page in pages:
    view = AppTest.from_file(str(APP_PATH), default_timeout=120).run().switch_page(str(page.relative_to(APP_PATH.parent))).run()
    assert not view.exception, (page.name, view.exception)
print(f"  {len(pages)} pages render: {', '.join(p.stem for p in pages)}")
EOF

step "the same install used from the repository root (the current folder is first on sys.path there)"
# No root folder may shadow the installed package: python -m, the CLI and an app page from the clone's root.
(
    cd "$REPO"
    [ "$("$BIN/python" -m idbench --version)" = "idbench $version" ]
    "$BIN/python" - "$WORK/venv" 2> >(grep -v "missing ScriptRunContext" >&2) <<'EOF'
import sys
from pathlib import Path
import idbench, idbench.leaderboard.app
from idbench.leaderboard.app import APP_PATH
from streamlit.testing.v1 import AppTest
venv = Path(sys.argv[1]).resolve()
for module in (idbench, idbench.leaderboard.app):
    assert venv in Path(module.__file__).resolve().parents, f"{module.__name__} imported from {module.__file__}, not the install"
app = AppTest.from_file(str(APP_PATH), default_timeout=120).run()
assert not app.exception, app.exception
print(f"  from {Path.cwd()}: idbench {idbench.__version__} from the venv, the app's overview renders")
EOF
)

step "the Space's build context: scripts/build_space.py, installed offline from what it ships"
# The Dockerfile copies the folder, then runs `pip install -r requirements.txt` in it: with no index, the
# idbench line must resolve to the wheel beside it (by its relative path) and everything else to what
# this venv already holds; app.py must start the installed app.
"$REPO/.venv/bin/python" "$REPO/scripts/build_space.py" "$WORK/space" --wheel "$WHEEL" > /dev/null
(
    cd "$WORK/space"
    line=$(grep -x '\./idbench-.*\.whl\[leaderboard\]' requirements.txt)
    if grep -q "NOT-A-SPACE-FOLDER" requirements.txt; then echo "the template's guard line is still there" >&2; exit 1; fi
    pip_install --no-index --dry-run -r requirements.txt > /dev/null
    pip_install --no-index --dry-run --force-reinstall --no-deps --report "$WORK/space-report.json" "$line" > /dev/null
    "$BIN/python" - "$WORK/space" "$WORK/space-report.json" "$WORK/venv" <<'EOF'
import json, runpy, sys
from pathlib import Path
space, report, venv = (Path(arg).resolve() for arg in sys.argv[1:])
[item] = json.loads(report.read_text())["install"]
wheel = Path(item["download_info"]["url"].removeprefix("file://")).resolve()
assert wheel.parent == space and item["metadata"]["name"] == "idbench", item["download_info"]
argv = runpy.run_path(str(space / "app.py"), run_name="space_app")["command"]()
app = Path(argv[argv.index("run") + 1]).resolve()
assert venv in app.parents and app.name == "main.py", f"app.py starts {app}, not the installed app"
print(f"  {space.name}/: {', '.join(sorted(p.name for p in space.iterdir()))}; pip --no-index takes {wheel.name}; app.py runs {app.relative_to(venv)}")
EOF
)

step "passed"

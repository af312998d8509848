"""The Submit page's admission under load (issue 40, item 3), through the page's own code paths.

Builds identity-collapse from the shipped samples and a zip whose first N images are RGBA PNGs of
6324 x 6324 (40 MP; ``hostile_validation.case_rgba``). Then, as the page does it
(``admission.Admission`` and ``backend.queue_request`` in a child process under the deadline):

1. upload A (that zip) takes the turn; upload B, from another client, arrives 0.5 s later and waits;
   printed: how long B waited for its turn, and how A ended (queued, or stopped at the deadline);
2. the peak RSS of A's child process (from the child's own ``getrusage``, logged by ``run_with_deadline``);
3. the up-front budget on a zip of 225 images at 40 MP (header-only PNGs, so the zip is small): the time
   ``admission.budget_problem`` takes to refuse it, nothing decoded.

    .venv/bin/python bench/submit_load.py [--images 24] [--deadline 60]
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile_validation import case_rgba, png_header_only  # noqa: E402

from idbench.builders.build import build  # noqa: E402
from idbench.leaderboard import admission  # noqa: E402
from idbench.leaderboard.app import backend  # noqa: E402
from idbench.leaderboard.queue import RateLimit  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=24)
    parser.add_argument("--deadline", type=float, default=60.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with tempfile.TemporaryDirectory(prefix="idbench-submit-load-") as folder:
        work = Path(folder)
        data = work / "data"
        build("identity-collapse", out=data)
        upload = case_rgba(work, data, count=args.images)
        print(f"upload A: {upload.stat().st_size / 1e6:.1f} MB zip, {args.images} RGBA images of 40 MP")
        admission.run_with_deadline(pow, 2, 2, deadline=60)  # the fork server, started once per app process
        line = admission.Admission()
        request = backend.QueueRequest(
            store_home=work / "home",
            requests_repo=None,
            path=upload,
            data_dir=data,
            model_name="load test",
            submitter=None,
            family=None,
            link=None,
            rate_limit=RateLimit(100, 3600),
            client="client-a",
        )
        outcome: dict[str, str] = {}

        def upload_a() -> None:
            started = time.monotonic()
            with line.turn("client-a"):
                (work / "scratch").mkdir()
                try:
                    queued = admission.run_with_deadline(
                        backend.queue_request, request, deadline=args.deadline, scratch=work / "scratch"
                    )
                    outcome["a"] = f"queued ({queued.message})"
                except Exception as error:
                    outcome["a"] = f"{type(error).__name__}: {error}"
            outcome["a"] += f" after {time.monotonic() - started:.1f} s"

        first = threading.Thread(target=upload_a)
        first.start()
        time.sleep(0.5)
        arrived = time.monotonic()
        with line.turn("client-b", report=lambda ahead: print(f"B waits: {ahead} ahead")):
            waited = time.monotonic() - arrived
        first.join()
        print(f"A: {outcome['a']}")
        print(f"B waited {waited:.1f} s for its turn (deadline {args.deadline:g} s)")

        big = work / "big.zip"
        with zipfile.ZipFile(big, "w", zipfile.ZIP_DEFLATED) as archive:
            header = png_header_only(6324, 6324)
            for index in range(225):
                archive.writestr(f"images/{index:03d}.png", header)
        started = time.monotonic()
        problem = admission.budget_problem(big)
        print(
            f"225 images of 40 MP ({big.stat().st_size / 1e6:.1f} MB zip): {time.monotonic() - started:.2f} s: {problem}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

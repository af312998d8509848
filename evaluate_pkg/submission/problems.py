"""What validation reports: a :class:`Problem` per thing wrong, gathered into one :class:`SubmissionError`.

Validation does not stop at the first problem. It collects them all (a :class:`_Problems` collector
where many may come, such as the rows of a long listing) and raises once, so a submitter fixes
everything in one round. A hostile listing can hold millions of bad rows: only the first
``MAX_PROBLEMS`` are kept and the rest are counted (``... and N more problem(s)``). Long file names and
ids are cut to ``SHOWN_NAME_CHARS`` in messages, and a name too long for a file system to write
(``MAX_MEMBER_NAME_BYTES``, ``MAX_NAME_COMPONENT_BYTES`` per part) is a problem of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from idbench.errors import IdbenchError

# A SubmissionError lists at most this many problems and counts the rest ("... and N more"), so a
# hostile listing of millions of bad rows costs neither memory nor a page full of text (500 lines are
# some 50 KB). It is enough to list every problem of a whole listing for the wrong benchmark (a
# cogcanvas manifest checked against identity-collapse: 82 unknown rows and 225 missing pairs).
MAX_PROBLEMS = 500
# Zip member names and manifest file names: bytes (UTF-8) of the whole name and of each part between
# slashes (what file systems allow: 255 per name; longer ones fail with ENAMETOOLONG).
MAX_MEMBER_NAME_BYTES = 1024
MAX_NAME_COMPONENT_BYTES = 255
# A file or member name is cut to this many characters in messages (a 1000-character name helps nobody).
SHOWN_NAME_CHARS = 120


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a submission: the pair it concerns (if any), the file, what is wrong."""

    prompt_id: str | None
    seed: int | None
    file: str | None
    message: str

    def __str__(self) -> str:
        parts = []
        if self.prompt_id is not None:
            parts.append(
                f"prompt_id {_shown(self.prompt_id)!r}" + (f" seed {self.seed}" if self.seed is not None else "")
            )
        if self.file is not None:
            parts.append(f"file {_shown(self.file)}")
        return f"{', '.join(parts) or 'submission'}: {self.message}"


class SubmissionError(IdbenchError, ValueError):
    """A submission is unusable. ``problems`` lists the first ``MAX_PROBLEMS`` found and ``more`` counts
    the others; ``str()`` is one line each, then ``... and N more problem(s)`` when some are left out.
    ``total`` is how many there were in all."""

    def __init__(self, problems: Iterable[Problem], more: int = 0):
        kept: list[Problem] = []
        for problem in problems:
            if len(kept) < MAX_PROBLEMS:
                kept.append(problem)
            else:
                more += 1
        self.problems = tuple(kept)
        self.more = more + getattr(problems, "more", 0)  # a _Problems collector counted some itself
        lines = [str(p) for p in self.problems]
        if self.more:
            lines.append(f"... and {self.more} more problem(s), not listed (at most {MAX_PROBLEMS} are)")
        super().__init__("\n".join(lines))

    @property
    def total(self) -> int:
        return len(self.problems) + self.more

    def __reduce__(self):  # pickled as its problems (the app validates in a child process that sends it back)
        return (type(self), (self.problems, self.more))


class _Problems:
    """Problems as validation finds them: the first ``MAX_PROBLEMS`` kept, the others only counted.

    Used where a list would be (``append``, ``extend``, ``+=``, truth); ``SubmissionError(collector)``
    takes both the kept problems and the count.
    """

    def __init__(self) -> None:
        self.kept: list[Problem] = []
        self.more = 0

    def append(self, problem: Problem) -> None:
        if len(self.kept) < MAX_PROBLEMS:
            self.kept.append(problem)
        else:
            self.more += 1

    def extend(self, problems: Iterable[Problem]) -> None:
        for problem in problems:
            self.append(problem)

    def __iadd__(self, problems: Iterable[Problem]) -> _Problems:
        self.extend(problems)
        return self

    def __bool__(self) -> bool:
        return bool(self.kept)

    def __len__(self) -> int:
        return len(self.kept) + self.more

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.kept)


def _shown(name: str) -> str:
    """``name`` cut to ``SHOWN_NAME_CHARS`` for a message (the cut said), whole when short."""
    return name if len(name) <= SHOWN_NAME_CHARS else f"{name[:SHOWN_NAME_CHARS]}... ({len(name)} characters)"


def _name_length_problem(name: str) -> str | None:
    """Why a file name is too long to be written or looked up (``MAX_MEMBER_NAME_BYTES``, per part
    ``MAX_NAME_COMPONENT_BYTES``), or None."""
    size = len(name.encode("utf-8", "surrogateescape"))
    if size > MAX_MEMBER_NAME_BYTES:
        return f"a name of {size} bytes, over the {MAX_MEMBER_NAME_BYTES}-byte limit"
    longest = max((len(part.encode("utf-8", "surrogateescape")) for part in name.split("/")), default=0)
    if longest > MAX_NAME_COMPONENT_BYTES:
        return f"a folder or file name of {longest} bytes, over the {MAX_NAME_COMPONENT_BYTES}-byte limit per name"
    return None

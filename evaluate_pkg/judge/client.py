"""The VLM judge client: any OpenAI-compatible chat-completions server (vLLM, SGLang, a hosted API).

:class:`OpenAIJudge` satisfies the :class:`~idbench.evaluate_pkg.judge.types.Judge` contract. What it takes
care of, so that the judged metrics only build questions and read answers:

- **Throughput.** Requests go out concurrently, at most ``concurrency`` at a time per server (a judge
  server batches concurrent sequences; more than it can batch only queues). Identical deterministic requests
  in one batch are sent once, and answers already in the :class:`~idbench.evaluate_pkg.judge.cache.AnswerCache`
  are not sent at all.
- **Several servers.** ``replica_urls`` adds servers of the same model (one vLLM server per node): each
  attempt goes to the server with the fewest requests in flight, a retry to another one when there is
  one, and a server that fails ``ENDPOINT_DOWN_AFTER`` attempts in a row on transport (refused, timed
  out, 5xx, a reply refused) gets nothing more for the rest of that :meth:`OpenAIJudge.ask` (the next
  one tries it again). The judge is unreachable only when every server is. ``stats.by_endpoint``
  counts what each did.
- **Images.** Decoded with the scorer's own loader (:func:`idbench.evaluate_pkg.images.working_image`:
  upright, transparency composited on white, the same size limits), straight to a longer side of at
  most ``max_image_side``, and sent as JPEG (quality 90) data URLs. Transparency is flattened on
  white rather than sent as PNG alpha, so the judge sees the pixels the encoders see, and a server's own
  RGB conversion cannot turn transparent areas black.
- **Structured answers.** Each request carries its JSON schema; the server is asked to follow it
  (``response_format`` of type ``json_schema``, in OpenAI's strict mode when the schema meets its
  rules) when it can. With ``structured="auto"``, a server that
  rejects that with HTTP 400 before it has ever accepted it is asked again in plain text, with the
  schema spelled out in the prompt, and the judge remembers the choice. Every reply is parsed by a
  strict parser (one JSON object, optionally in a ```json fence, nothing else) and validated against
  the schema.
- **Failures are answers.** Transport errors, timeouts, HTTP 429 and 5xx, unparsable and
  schema-invalid replies are retried with capped, jittered exponential backoff (the SDK's own retries
  are off so that every attempt is counted); what still fails becomes a :class:`JudgeAnswer` with
  ``error`` set, counted in :attr:`OpenAIJudge.stats`, never an exception and never a score.
- **Replies it will not take.** Each attempt has a deadline of ``timeout_s`` for everything (connecting,
  the headers, the body), beyond httpx's per-phase timeouts, which a server sending a byte a second
  never trips. A reply is read to at most ``MAX_REPLY_BYTES`` (refused unread when its Content-Length says
  more), uncompressed only, and a redirect to another origin (scheme, host, port) is refused, naming
  only that origin; a redirect within the origin is followed. Each of these is a transport failure:
  retried, and counted towards resting a server and towards ``UNREACHABLE_AFTER``, so a stalling server
  is treated as a failing one.
- **Budgets and cost.** Optional caps on requests sent and tokens used; past them the remaining
  requests fail with ``"budget exhausted"``. With prices set, a running cost estimate.
- **The API key** is read from the environment variable that ``JudgeConfig.api_key_env`` names. It is
  not a field of the config, and never appears in a repr, a log line, an error, an answer or the cache.
  A judge URL may hold only scheme, host, port and path (a user part, a query or a fragment is refused),
  and is shown everywhere through :func:`idbench.settings.redact_url`, which masks a key-shaped path
  segment.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import io
import json
import logging
import random
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from PIL import Image

from idbench import settings
from idbench.evaluate_pkg.images import ImageError, working_image
from idbench.evaluate_pkg.judge.cache import AnswerCache, CachedAnswer, answer_key, image_hash
from idbench.evaluate_pkg.judge.types import JudgeAnswer, JudgeRequest
from idbench.settings import redact_url

if TYPE_CHECKING:  # the SDK is the optional ``vlm`` extra: imported only when a judge actually calls it
    import openai

logger = logging.getLogger(__name__)

STRUCTURED_MODES = ("auto", "json_schema", "json_object", "none")
BUDGET_EXHAUSTED = "budget exhausted"
JPEG_QUALITY = 90
# Part of every cache key: changing how images are prepared changes the question the model is asked.
# Part of every cached answer's key. v2: decoded straight to max_image_side (images.working_image), which
# changes the pixels sent for images larger than that side, so their earlier answers are not replayed.
IMAGE_ENCODING = "working_image/lanczos/jpeg-q90/v2"
# Told to the model whenever the server does not enforce the schema itself.
SCHEMA_INSTRUCTION = "\n\nReply with one JSON object, and nothing else, that matches this JSON Schema:\n"
# Statuses worth retrying: the server is overloaded, restarting or timed out, not rejecting the request.
_RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
# A judge whose requests this many in a row ran out of retries on a transport fault (connection
# refused, a timeout, a 5xx) is taken for unreachable: the rest of the run fails unsent at once
# instead of retrying every request for hours, and the run says so (``JudgeStats.unreachable``).
UNREACHABLE_AFTER = 8
UNREACHABLE = "judge unreachable"
# A server (of several) whose attempts failed on transport this many times in a row gets no more of the
# current ask()'s requests, which go to the others.
ENDPOINT_DOWN_AFTER = 3
# Settings that say how to reach the judge, not what it answers: shards of one run may differ in them
# (each node its own local server) and still be one run (evaluate_pkg/merge.py).
TRANSPORT_SETTINGS = (
    "base_url",
    "replica_urls",
    "concurrency",
    "timeout_s",
    "max_retries",
    "backoff_s",
    "backoff_cap_s",
)
# The most bytes one reply may hold. A judge's answer is a small JSON object (max_tokens=1024 is about 4 KB
# of text) in a small envelope; 4 MiB leaves an honest server a thousand times that, while a broken or
# hostile one cannot make the scorer read, and hold once per request in flight, hundreds of MB.
MAX_REPLY_BYTES = 4 * 1024 * 1024
_PREPARED_IMAGES_KEPT = 512  # references recur across many prompts: keep their prepared form a while
_NO_KEY_PLACEHOLDER = "EMPTY"  # what a keyless local server (vLLM without --api-key) is sent


@dataclass(frozen=True)
class JudgeConfig:
    """Where the judge is and how to ask it. Holds no secret: the API key stays in the environment.

    ``replica_urls`` are further servers of the same model (one per node, say): requests are spread
    over ``base_url`` and these (see the module's docstring). ``concurrency`` is the number of requests
    in flight per server; set it near a server's maximum number of concurrent sequences (vLLM
    ``--max-num-seqs``), since more only queue there. ``backoff_s`` is the
    first retry's delay; each further retry doubles it, up to ``backoff_cap_s``, with jitter so that
    many failed requests do not come back at once. ``structured`` is how the schema is enforced:
    ``"json_schema"`` (the server constrains decoding), ``"json_object"`` (any JSON object; the
    schema is in the prompt), ``"none"`` (plain text; schema in the prompt) or ``"auto"`` (try
    ``json_schema``, fall back to ``"none"`` if the server rejects it).
    """

    base_url: str
    model: str
    # Not part of the judge's identity or of any cache key: the same weights answer alike on any host.
    replica_urls: tuple[str, ...] = ()
    api_key_env: str = settings.JUDGE_API_KEY
    max_image_side: int = 768
    temperature: float = 0.0
    max_tokens: int = 1024
    concurrency: int = 8
    max_retries: int = 4
    timeout_s: float = 120.0
    backoff_s: float = 1.0
    backoff_cap_s: float = 30.0
    request_budget: int | None = None
    token_budget: int | None = None
    price_per_million_input: float | None = None
    price_per_million_output: float | None = None
    structured: str = "auto"
    # The weights the server serves under ``model`` (a Hub revision, a checkpoint tag), when known: part
    # of the judge's identity (``judge.card.judge_key``) and of the cache key. Not sent to the server.
    revision: str | None = None

    def __post_init__(self) -> None:
        problems = []
        if isinstance(self.replica_urls, str):
            problems.append("replica_urls must be a list of URLs, not one string")
        else:  # a list read back from JSON (a shard's record) becomes the tuple the dataclass promises
            object.__setattr__(self, "replica_urls", tuple(self.replica_urls))
        if not self.base_url:
            problems.append("base_url is empty")
        else:
            for url in self.urls:
                problems += url_credential_problems(url, self.api_key_env)
            if len(set(self.urls)) < len(self.urls):
                problems.append("a server URL is given twice")
        if not self.model:
            problems.append("model is empty")
        if self.structured not in STRUCTURED_MODES:
            problems.append(f"structured={self.structured!r} is not one of {', '.join(STRUCTURED_MODES)}")
        for name in ("max_image_side", "max_tokens", "concurrency"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1")
        for name in ("max_retries", "timeout_s", "backoff_s", "backoff_cap_s", "temperature"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must not be negative")
        for name in ("request_budget", "token_budget", "price_per_million_input", "price_per_million_output"):
            value = getattr(self, name)
            if value is not None and value < 0:
                problems.append(f"{name} must not be negative")
        if problems:
            raise ValueError("invalid judge configuration: " + "; ".join(problems))

    @classmethod
    def from_env(cls, url: str | None = None, model: str | None = None, **overrides: Any) -> JudgeConfig:
        """``url`` / ``model`` if given (the CLI's ``--judge-url`` / ``--judge-model``), else
        ``$IDBENCH_JUDGE_URL`` / ``$IDBENCH_JUDGE_MODEL``; any other field from ``overrides``.

        ``url`` may list several servers of the model, separated by commas or spaces: the first is
        ``base_url``, the others ``replica_urls``.

        The key is not read here: the judge reads it from ``$<api_key_env>`` when it is built.
        """
        base_url = url or settings.judge_url()
        name = model or settings.judge_model()
        missing = [
            what
            for what, value in (
                ("--judge-url or $IDBENCH_JUDGE_URL", base_url),
                ("--judge-model or $IDBENCH_JUDGE_MODEL", name),
            )
            if not value
        ]
        if missing:
            raise ValueError(f"no judge configured: set {' and '.join(missing)} (e.g. http://localhost:8000/v1)")
        unknown = set(overrides) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"unknown judge settings: {', '.join(sorted(unknown))}")
        if "revision" not in overrides and settings.judge_revision():
            overrides["revision"] = settings.judge_revision()
        first, *others = [part for part in re.split(r"[,\s]+", base_url) if part] or [""]
        if others and "replica_urls" not in overrides:
            overrides["replica_urls"] = tuple(others)
        return cls(base_url=first, model=name, **overrides)

    @property
    def urls(self) -> tuple[str, ...]:
        """Every server of the judge: ``base_url``, then ``replica_urls``."""
        return (self.base_url, *self.replica_urls)

    def __repr__(self) -> str:
        """The fields, the URLs as :func:`~idbench.settings.redact_url` shows them (a path may hold a key)."""
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        shown["base_url"] = redact_url(self.base_url)
        shown["replica_urls"] = tuple(redact_url(url) for url in self.replica_urls)
        return f"JudgeConfig({', '.join(f'{name}={value!r}' for name, value in shown.items())})"

    @property
    def deterministic(self) -> bool:
        """Temperature 0: the only setting whose answers are cached and deduplicated."""
        return self.temperature == 0


def url_credential_problems(url: str, api_key_env: str) -> list[str]:
    """Why a judge URL is refused: not http(s) with a host, or more than scheme, host, port and path.

    A user part, a query and a fragment are where gateways and people put keys (``user:pw@``,
    ``?api-key=``, ``?session=``, ``?code=``, ``#key=``), and a judge URL is recorded with the results
    and shown in logs: the key belongs in the environment. Whatever the query holds, it is refused, since
    no list of parameter names can know every gateway's. The URL itself is never repeated: it may hold
    the secret. (A key-shaped path segment is not refused but masked wherever the URL is shown:
    ``settings.redact_url``.)
    """
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port  # .port raises on a port that is not a number
    except ValueError:
        return ["a judge URL is not a URL"]
    if parts.scheme not in ("http", "https") or not host:
        return ["a judge URL must be an http(s) URL with a host (e.g. http://localhost:8000/v1)"]
    extras = [
        what
        for what, present in (
            ("a user part (user:password@host)", "@" in parts.netloc),
            ("a query (?...)", bool(parts.query)),
            ("a fragment (#...)", bool(parts.fragment)),
        )
        if present
    ]
    if not extras:
        return []
    return [
        f"a judge URL may hold only scheme, host, port and path, and one has {' and '.join(extras)}: "
        f"keep credentials out of it (it is recorded with the results) and give the key through ${api_key_env}"
    ]


class ReplyRefused(Exception):
    """A reply the judge will not read or follow: larger than ``MAX_REPLY_BYTES``, compressed, or a
    redirect to another origin. Counted as a transport failure (retried, and it rests a server that
    keeps doing it); ``str()`` is its one-line reason."""


def _origin(url: Any) -> tuple[str, str, int | None]:
    """(scheme, host, port) of an httpx URL, the port filled in where the scheme implies it."""
    return url.scheme, url.host, url.port or {"http": 80, "https": 443}.get(url.scheme)


def _origin_text(url: Any) -> str:
    """``scheme://host:port`` of an httpx URL: what a message may say of a redirect's target (its path
    and query, which may carry a token, are left out)."""
    scheme, host, port = _origin(url)
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"


async def _read_at_most(stream: Any, limit: int) -> bytes:
    """The whole of an httpx byte stream, refused (``ReplyRefused``) as soon as it passes ``limit`` bytes:
    what is held never exceeds ``limit`` plus one network read."""
    chunks, size = [], 0
    async for chunk in stream:
        size += len(chunk)
        if size > limit:
            raise ReplyRefused(f"a reply over the {limit}-byte limit; refused after {size} bytes")
        chunks.append(chunk)
    await stream.aclose()  # read to the end: the connection goes back to the pool
    return b"".join(chunks)


async def _guard_reply(byte_stream: type, response: Any) -> None:
    """The judge's rules for every HTTP response, as an httpx response hook (run once the headers are in,
    before the body is read, for each response of a redirect chain).

    A redirect to another origin (scheme, host, port) is refused: its answer would come from a server
    nobody configured, and would carry the key's request there. A redirect within the origin is followed
    (httpx's own handling; the key stays with the server it was meant for). A compressed body is refused,
    since the judge asks for none (a few MB of gzip can unpack to GBs past any byte count). A body larger
    than ``MAX_REPLY_BYTES`` is refused, by its ``Content-Length`` before a byte of it is read, else while
    it is read. The body is read here, at most that much, and handed on as ``byte_stream`` (the httpx in
    use's in-memory stream), so the SDK reads the same bytes from memory.
    """
    request_url = response.request.url
    if response.has_redirect_location:
        try:
            target = request_url.join(response.headers["location"])
            same_origin = _origin(target) == _origin(request_url)
        except Exception:  # httpx's own InvalidURL, of whichever httpx: a location nobody could follow
            raise ReplyRefused("a redirect to a location that is not a URL; not followed") from None
        if not same_origin:
            raise ReplyRefused(f"a redirect to another origin ({_origin_text(target)}); not followed")
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise ReplyRefused(
            f"a compressed reply (content-encoding {encoding[:40]!r}) though none was asked for; refused"
        )
    declared = response.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > MAX_REPLY_BYTES:
        raise ReplyRefused(f"a reply of {int(declared)} bytes, over the {MAX_REPLY_BYTES}-byte limit; refused unread")
    response.stream = byte_stream(await _read_at_most(response.stream, MAX_REPLY_BYTES))


def _httpx_beneath(client_class: type) -> Any:
    """The httpx package an SDK client class is built on: ``httpx`` under openai 1.x, ``httpx2`` later."""
    import importlib

    for base in client_class.__mro__:
        package = base.__module__.partition(".")[0]
        if base.__name__ == "AsyncClient" and package.startswith("httpx"):
            return importlib.import_module(package)
    raise ImportError(f"the openai SDK's HTTP client {client_class.__name__} is not an httpx AsyncClient")


def _guarded_http_client(timeout_s: float) -> Any:
    """The SDK's own async HTTP client (its connection limits and defaults) with :func:`_guard_reply` on
    every response and plain (uncompressed) bodies asked for."""
    import functools

    import openai

    client_class = openai.DefaultAsyncHttpxClient
    return client_class(
        timeout=timeout_s,
        headers={"Accept-Encoding": "identity"},
        event_hooks={"response": [functools.partial(_guard_reply, _httpx_beneath(client_class).ByteStream)]},
    )


def _refusal_in(err: BaseException) -> ReplyRefused | None:
    """The ``ReplyRefused`` behind an SDK error: some SDK versions wrap an event hook's exception in
    ``APIConnectionError``, others let it through as it is."""
    for cause in (err, err.__cause__, err.__context__):
        if isinstance(cause, ReplyRefused):
            return cause
    return None


class _Secret:
    """A string that never shows itself: its repr and str are a placeholder."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None):
        self._value = value or None

    def reveal(self) -> str | None:
        return self._value

    def scrub(self, text: str) -> str:
        """``text`` with every occurrence of the secret replaced (for error messages from elsewhere)."""
        return text.replace(self._value, "***") if self._value else text

    def __repr__(self) -> str:
        return "<secret>" if self._value else "<none>"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a secret is not pickled")


@dataclass
class TaskStats:
    """The counters of one task (question family)."""

    answers: int = 0
    cache_hits: int = 0
    requests_sent: int = 0
    failures: int = 0


@dataclass
class EndpointStats:
    """The counters of one server: attempts sent to it, replies it gave, attempts that failed on transport."""

    requests_sent: int = 0
    replies: int = 0
    transport_failures: int = 0


@dataclass
class JudgeStats:
    """What the judge did, over every :meth:`OpenAIJudge.ask` so far: for the metrics' reports.

    ``requests_sent`` counts HTTP requests (every attempt, so retries too); ``answers`` counts answers
    returned, of which ``cache_hits`` came from the cache, ``deduplicated`` were copies of an identical
    request in the same batch, and ``failures`` carry an error; ``unanswered`` of those failures got no
    reply of the model at all (transport faults, HTTP errors, the judge unreachable, the budget spent), so
    another run may well get an answer where this one did not. ``cache_refused`` counts cache entries that
    were there but not served (edited, planted, unsigned, signed with another key, reached through a link,
    damaged, or not matching the request's schema: judge/cache.py): each was asked again.
    ``estimated_cost`` is None unless a price is configured.
    """

    answers: int = 0
    requests_sent: int = 0
    cache_hits: int = 0
    cache_refused: int = 0
    unanswered: int = 0
    deduplicated: int = 0
    failures: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated_cost: float | None = None
    by_task: dict[str, TaskStats] = field(default_factory=dict)
    by_endpoint: dict[str, EndpointStats] = field(default_factory=dict)
    # Set (to the last transport error) once UNREACHABLE_AFTER requests in a row failed on transport.
    unreachable: str | None = None

    @property
    def failure_rate(self) -> float:
        """Failed answers over all answers (0 when nothing was asked)."""
        return self.failures / self.answers if self.answers else 0.0

    def task(self, name: str) -> TaskStats:
        return self.by_task.setdefault(name, TaskStats())

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready counters (``failure_rate`` included)."""
        out = asdict(self)
        out["failure_rate"] = self.failure_rate
        return out


def parse_json_answer(text: str) -> dict[str, Any]:
    """The one JSON object in ``text``, which may be wrapped in a ```json fence and nothing else.

    Strict on purpose: prose around the object, several objects, or a non-object value mean the
    model did not answer the question as asked, and a lenient extraction would turn such replies
    into scores. ``NaN`` and ``Infinity`` are refused (not JSON). Raises ``ValueError``.
    """
    body = text.strip()
    fenced = re.fullmatch(r"```(?:json)?[ \t]*\n(.*?)\n?[ \t]*```", body, flags=re.DOTALL | re.IGNORECASE)
    if fenced:
        body = fenced.group(1).strip()

    def refuse_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        value = json.loads(body, parse_constant=refuse_constant)
    except json.JSONDecodeError as err:
        raise ValueError(f"not a JSON object ({err.msg} at char {err.pos})") from None
    if not isinstance(value, dict):
        raise ValueError(f"a JSON {type(value).__name__}, not an object")
    return value


def prepare_image(data: bytes, max_side: int) -> str:
    """``data`` as a JPEG data URL, the longer side at most ``max_side`` (raises ``ImageError``).

    Decoded straight to that size (images.working_image: a JPEG at a reduced scale, any other format
    reduced before it is converted), so a 40 MP generation never exists as a full-size RGB array here.
    """
    image = working_image(data, where="judge image", max_side=max_side)
    width, height = image.size
    scale = max_side / max(width, height)
    if scale < 1:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        image = image.resize(size, Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _schema_name(task: str) -> str:
    """A ``response_format`` name from the task: letters, digits, ``_`` and ``-``, at most 64."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", task)[:64] or "answer"


def strict_compatible(schema: Any) -> bool:
    """Whether ``schema`` meets OpenAI strict mode's object rules: every object closed and fully required.

    Strict mode makes OpenAI guarantee the schema; asking for it with a schema that breaks its rules
    is an HTTP 400, so it is asked for only when the rules hold (vLLM and SGLang enforce the schema
    either way).
    """
    if isinstance(schema, Mapping):
        properties = schema.get("properties")
        if schema.get("type") == "object" or properties is not None:
            properties = properties or {}
            if schema.get("additionalProperties") is not False or set(schema.get("required", ())) != set(properties):
                return False
        children = list((properties or {}).values()) if isinstance(properties, Mapping) else []
        for name in ("items", "anyOf", "oneOf", "allOf", "$defs", "definitions"):
            value = schema.get(name)
            if isinstance(value, Mapping) and name in ("$defs", "definitions"):
                children += list(value.values())
            elif isinstance(value, list):
                children += value
            elif value is not None:
                children.append(value)
        return all(strict_compatible(child) for child in children)
    return True


class _Validators:
    """One compiled JSON-schema validator per distinct schema (schemas repeat across many requests)."""

    def __init__(self) -> None:
        self._compiled: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, schema: Mapping[str, Any]) -> Any:
        """The validator of ``schema``; a malformed schema raises ``ValueError`` (a bug in the metric)."""
        import jsonschema

        text = json.dumps(schema, sort_keys=True)
        with self._lock:
            validator = self._compiled.get(text)
            if validator is None:
                cls = jsonschema.validators.validator_for(schema)
                try:
                    cls.check_schema(schema)
                except jsonschema.SchemaError as err:
                    raise ValueError(f"invalid JSON schema in a judge request: {err.message}") from None
                validator = self._compiled[text] = cls(schema)
        return validator


def schema_problem(validator: Any, value: Any) -> str | None:
    """The most relevant reason ``value`` fails the schema, or None if it is valid."""
    import jsonschema

    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return f"{where}: {error.message}"


class OpenAIJudge:
    """A :class:`~idbench.evaluate_pkg.judge.types.Judge` backed by an OpenAI-compatible server.

    Example::

        judge = OpenAIJudge(JudgeConfig.from_env(), cache=AnswerCache(default_cache_path()))
        answers = judge.ask(requests)          # one JudgeAnswer per request, in order
        print(judge.stats.failure_rate)

    ``api_key`` overrides the environment variable (for programmatic use); without either, a keyless
    local server is assumed. One judge may serve several :meth:`ask` calls in a row; its statistics,
    budgets and structured-output choice carry over between them.
    """

    def __init__(self, config: JudgeConfig, cache: AnswerCache | None = None, *, api_key: str | None = None):
        self.config = config
        self.cache = cache
        self._key = _Secret(api_key if api_key is not None else settings.api_key(config.api_key_env))
        self.stats = JudgeStats()
        self._lock = threading.Lock()  # stats, mode: ask() may run its loop in a worker thread
        self._mode = "json_schema" if config.structured == "auto" else config.structured
        self._mode_settled = config.structured != "auto"  # auto: settled once json_schema has worked
        self._validators = _Validators()
        self._prepared: OrderedDict[str, str] = OrderedDict()
        self._budget_logged = False
        self._transport_failures_in_a_row = 0

    @property
    def model(self) -> str:
        return self.config.model

    def __repr__(self) -> str:
        return (
            f"OpenAIJudge(model={self.config.model!r}, base_url={redact_url(self.config.base_url)!r}, "
            f"structured={self._mode!r}, cache={self.cache!r})"
        )

    # --- the contract -----------------------------------------------------------------------------

    def ask(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        """One answer per request, in order (see :meth:`ask_async`). Usable inside a running loop too."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.ask_async(requests))
        # Called from async code (a notebook, say): asyncio.run would refuse, so use a loop of our own.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, self.ask_async(requests)).result()

    async def ask_async(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        """Answer every request: from the cache, else from the server, at most ``concurrency`` at a time.

        A request that cannot be answered gets a :class:`JudgeAnswer` with ``error`` set. Only a
        malformed schema raises (``ValueError``), before anything is sent: that is a bug in the metric.
        """
        requests = list(requests)
        for request in requests:
            self._validators.get(request.schema)
        hashes = [tuple(image_hash(data) for data in request.images) for request in requests]
        answers: list[JudgeAnswer | None] = [None] * len(requests)

        # Identical deterministic requests are asked once; the others each on their own.
        groups: dict[str, list[int]] = {}
        if self.config.deterministic:
            modes = self._cache_modes()
            keys = [[self._key_of(r, h, mode) for mode in modes] for r, h in zip(requests, hashes)]
            found = self._lookup([k for ks in keys for k in ks])
            for i, candidates in enumerate(keys):
                hit = next((found[k] for k in candidates if k in found), None)
                if hit is not None and not self._replayable(hit, requests[i]):
                    hit = None  # a stored value that is not a valid answer is asked again, never replayed
                if hit is not None:
                    answers[i] = JudgeAnswer(value=hit.value, raw=hit.raw, cached=True)
                else:
                    groups.setdefault(candidates[0], []).append(i)
        else:
            groups = {str(i): [i] for i in range(len(requests))}

        if groups:
            async with contextlib.AsyncExitStack() as stack:
                servers = _Servers(
                    [await stack.enter_async_context(self._client(url)) for url in self.config.urls],
                    self.config.urls,
                    self.config.concurrency,
                )
                # Requests being worked on (images prepared, sent, waiting to retry): bounds the memory
                # of prepared images; the servers bound what is in flight at each of them.
                slots = asyncio.Semaphore(self.config.concurrency * len(self.config.urls))

                async def answer_group(indices: list[int]) -> None:
                    first = indices[0]
                    async with slots:
                        answer = await self._ask_one(servers, requests[first], hashes[first])
                    for i in indices:
                        answers[i] = answer

                await asyncio.gather(*(answer_group(indices) for indices in groups.values()))

        done = [answer for answer in answers if answer is not None]
        if len(done) != len(requests):  # every path above fills its slot; this guards the bookkeeping
            raise RuntimeError("judge: an answer went missing")
        self._count_answers(requests, done, deduplicated=sum(len(g) - 1 for g in groups.values()))
        if requests:
            failed = sum(not answer.ok for answer in done)
            logger.info(
                "judge %s: %d answers, %d from cache, %d failed; %d requests sent so far",
                self.config.model,
                len(done),
                sum(a.cached for a in done),
                failed,
                self.stats.requests_sent,
            )
        return done

    # --- one request --------------------------------------------------------------------------------

    async def _ask_one(self, servers: _Servers, request: JudgeRequest, hashes: tuple[str, ...]) -> JudgeAnswer:
        """Send one request until it yields a schema-valid answer, retries run out, or the budget does.

        Each attempt goes to the server with the fewest requests in flight, a retry to another server
        than the one that just failed when there is one."""
        import openai

        try:
            image_urls = await asyncio.to_thread(self._prepare_images, request.images, hashes)
        except ImageError as err:
            return self._failure(request, f"unusable image: {err.reason}", attempts=0)

        mode = self._mode
        attempts, retries, fell_back = 0, 0, False
        failed_at: _Server | None = None
        while True:
            if self._budget_exhausted():
                return self._failure(request, BUDGET_EXHAUSTED, attempts, unanswered=True)
            if self.stats.unreachable is not None:
                return self._failure(
                    request, f"{UNREACHABLE} ({self.stats.unreachable}); not sent", attempts, unanswered=True
                )
            attempts += 1
            server = await servers.acquire(avoid=failed_at)
            self._count_sent(request.task, server.name)
            retry_after: float | None = None
            raw: str | None = None
            transport = False  # whether this attempt failed before any reply of the model's
            no_reply = True  # whether this attempt got no reply of the model (a transport fault or an HTTP error)
            try:
                # httpx's timeouts bound each phase (connect, each read) but not their sum: a server sending a
                # byte a second would hold the request, and its slot, for ever. This bounds the attempt.
                async with asyncio.timeout(self.config.timeout_s):
                    response = await server.client.chat.completions.create(
                        **self._create_args(request, mode, image_urls)
                    )
            except openai.BadRequestError as err:
                self._release(servers, server, None)
                if mode == "json_schema" and not self._mode_settled and not fell_back:
                    fell_back = True
                    mode = self._fall_back(err)
                    continue
                return self._failure(request, f"HTTP 400: {self._describe(err)}", attempts)
            except openai.APIStatusError as err:
                error = f"HTTP {err.status_code}: {self._describe(err)}"
                transport = err.status_code >= 500
                self._release(servers, server, error if transport else None)
                if err.status_code not in _RETRY_STATUSES:
                    return self._failure(request, error, attempts, unanswered=True)
                retry_after = _retry_after(err.response.headers)
            except (openai.APITimeoutError, TimeoutError):  # a phase's timeout, or the attempt's deadline
                error = f"timed out after {self.config.timeout_s:g} s"
                transport = True
                self._release(servers, server, error)
            except (openai.APIConnectionError, ReplyRefused) as err:
                refusal = _refusal_in(err)
                error = str(refusal) if refusal is not None else f"connection error: {self._describe(err)}"
                transport = True
                self._release(servers, server, error)
            except BaseException:  # cancelled, or a bug: the slot must not stay taken
                servers.release(server, transport_error=None)
                raise
            else:
                no_reply = False
                self._release(servers, server, None)
                usage = self._count_usage(response)
                raw, value, error = self._read_reply(response, request.schema)
                if error is None:
                    if mode == "json_schema" and not self._mode_settled:
                        with self._lock:
                            self._mode_settled = True
                    if self.cache is not None and self.config.deterministic:
                        await self._store(request, hashes, mode, raw or "", value)
                    self._count_transport(None)
                    return JudgeAnswer(value=value, raw=raw, attempts=attempts, usage=usage)

            if retries >= self.config.max_retries:
                self._count_transport(error if transport else None)
                return self._failure(
                    request, f"{error} (after {attempts} attempts)", attempts, raw=raw, unanswered=no_reply
                )
            failed_at = server
            retries += 1
            self._count_retry()
            delay = self._backoff(retries, retry_after)
            logger.debug(
                "judge %s: %s; retry %d of %d in %.2f s", request.task, error, retries, self.config.max_retries, delay
            )
            await asyncio.sleep(delay)

    def _replayable(self, hit: CachedAnswer, request: JudgeRequest) -> bool:
        """Whether a cached value is an answer this request accepts: one JSON object matching its schema.

        Only valid answers are ever stored, so this guards against a file edited by hand, written by
        another tool or damaged: such an entry is logged and asked again, never served as an answer.
        """
        ok = isinstance(hit.value, dict) and schema_problem(self._validators.get(request.schema), hit.value) is None
        if not ok:
            with self._lock:
                self.stats.cache_refused += 1
            logger.warning(
                "judge %s: a cached answer to a %s request does not match its schema; asking again",
                self.config.model,
                request.task,
            )
        return ok

    def _lookup(self, keys: list[str]) -> dict[str, CachedAnswer]:
        """The cached answers among ``keys``; an unreadable cache means asking again, not failing. Entries
        the cache refused (judge/cache.py) are counted in ``stats.cache_refused`` and asked again."""
        if self.cache is None:
            return {}
        try:
            if not hasattr(self.cache, "read_many"):  # a stand-in cache of a test or a notebook
                return self.cache.get_many(keys)
            found, refused = self.cache.read_many(keys)
            with self._lock:
                self.stats.cache_refused += refused
            return found
        except OSError as err:
            logger.warning("judge %s: could not read the answer cache (%s); asking the server", self.config.model, err)
            return {}

    async def _store(self, request: JudgeRequest, hashes: tuple[str, ...], mode: str, raw: str, value: Any) -> None:
        """Cache a usable answer; a cache that cannot be written costs a rerun, not this answer."""
        key = self._key_of(request, hashes, mode)
        try:
            await asyncio.to_thread(
                self.cache.put, key, model=self.config.model, task=request.task, raw=raw, value=value
            )
        except (OSError, ValueError) as err:
            logger.warning("judge %s: could not cache an answer (%s)", self.config.model, err)

    def _create_args(self, request: JudgeRequest, mode: str, image_urls: list[str]) -> dict[str, Any]:
        """The chat-completions arguments: system text, then the prompt followed by its images."""
        text = request.prompt
        if mode != "json_schema":
            text += SCHEMA_INSTRUCTION + json.dumps(request.schema, sort_keys=True)
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        content += [{"type": "image_url", "image_url": {"url": url}} for url in image_urls]
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.append({"role": "user", "content": content})
        args: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "max_completion_tokens": self.config.max_tokens,
        }
        if mode == "json_schema":
            args["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": _schema_name(request.task),
                    "schema": dict(request.schema),
                    "strict": strict_compatible(request.schema),
                },
            }
        elif mode == "json_object":
            args["response_format"] = {"type": "json_object"}
        return args

    def _read_reply(self, response: Any, schema: Mapping[str, Any]) -> tuple[str | None, Any, str | None]:
        """(raw text, parsed value, error): the error is None only for a schema-valid JSON object."""
        try:
            choice = response.choices[0]
            raw = choice.message.content
        except (AttributeError, IndexError, TypeError):  # the SDK does not validate replies; a broken one lands here
            return None, None, "malformed reply (no choices[0].message.content)"
        if raw is None:
            return None, None, "empty reply (no content)"
        try:
            value = parse_json_answer(raw)
        except ValueError as err:
            cut = f" (the reply hit max_tokens={self.config.max_tokens})" if choice.finish_reason == "length" else ""
            return raw, None, f"invalid JSON: {err}{cut}"
        problem = schema_problem(self._validators.get(schema), value)
        if problem is not None:
            return raw, None, f"answer does not match the schema: {problem}"
        return raw, value, None

    def _fall_back(self, err: Exception) -> str:
        """The server refused ``json_schema``: use plain text from now on (logged once)."""
        with self._lock:
            switching = self._mode == "json_schema"
            self._mode = "none"
        if switching:
            logger.warning(
                "judge %s: the server rejected response_format json_schema (%s); asking for "
                "plain JSON text with the schema in the prompt from now on",
                self.config.model,
                self._describe(err),
            )
        return "none"

    def _count_transport(self, error: str | None) -> None:
        """One request settled: ``error`` is its transport fault (None: it got a reply). Opens the
        circuit (``stats.unreachable``) after ``UNREACHABLE_AFTER`` transport faults in a row."""
        with self._lock:
            if error is None:
                self._transport_failures_in_a_row = 0
                return
            self._transport_failures_in_a_row += 1
            if self._transport_failures_in_a_row >= UNREACHABLE_AFTER and self.stats.unreachable is None:
                self.stats.unreachable = error
                logger.warning(
                    "judge %s: %d requests in a row failed on transport (last: %s); the rest of the run is not sent",
                    self.config.model,
                    self._transport_failures_in_a_row,
                    error,
                )

    def _failure(
        self, request: JudgeRequest, error: str, attempts: int, raw: str | None = None, *, unanswered: bool = False
    ) -> JudgeAnswer:
        if unanswered:
            with self._lock:
                self.stats.unanswered += 1
        if error.startswith(UNREACHABLE):  # said once, when the circuit opened
            logger.debug("judge %s: %s: %s", self.config.model, request.task, error)
        elif error != BUDGET_EXHAUSTED:
            logger.warning("judge %s: %s: %s", self.config.model, request.task, error)
        else:
            with self._lock:
                first, self._budget_logged = not self._budget_logged, True
            if first:
                logger.warning("judge %s: budget exhausted; the remaining requests fail unsent", self.config.model)
        return JudgeAnswer(raw=raw, error=error, attempts=attempts)

    def _describe(self, err: Exception) -> str:
        """An SDK error as one short line, with the key scrubbed in case a server echoed it."""
        message = getattr(err, "message", None) or str(err) or type(err).__name__
        message = " ".join(message.split())
        return self._key.scrub(message[:300])

    def _backoff(self, retry: int, retry_after: float | None) -> float:
        """Exponential in the retry number, capped, with jitter; at least a server's Retry-After (capped)."""
        cap = self.config.backoff_cap_s
        delay = min(cap, self.config.backoff_s * 2 ** (retry - 1)) * random.uniform(0.5, 1.0)
        if retry_after is not None:
            delay = max(delay, min(retry_after, cap))
        return delay

    # --- images, keys, client ---------------------------------------------------------------------

    def _prepare_images(self, images: Sequence[bytes], hashes: Sequence[str]) -> list[str]:
        """Data URLs of the images, reusing recent ones (a reference recurs across many requests)."""
        urls = []
        for data, digest in zip(images, hashes):
            with self._lock:
                url = self._prepared.get(digest)
                if url is not None:
                    self._prepared.move_to_end(digest)
            if url is None:
                url = prepare_image(data, self.config.max_image_side)
                with self._lock:
                    self._prepared[digest] = url
                    while len(self._prepared) > _PREPARED_IMAGES_KEPT:
                        self._prepared.popitem(last=False)
            urls.append(url)
        return urls

    def _cache_modes(self) -> list[str]:
        """The structured modes an answer may be cached under, the current one first.

        Under ``auto`` a rerun has not yet learnt whether the server takes ``json_schema``, so both of
        its possible modes are looked up.
        """
        if self.config.structured != "auto":
            return [self._mode]
        return [self._mode] + [mode for mode in ("json_schema", "none") if mode != self._mode]

    def _key_of(self, request: JudgeRequest, hashes: Sequence[str], mode: str) -> str:
        return answer_key(
            # A pinned revision is part of the model: other weights under the same name are another judge.
            model=f"{self.config.model}@{self.config.revision}" if self.config.revision else self.config.model,
            system=request.system,
            prompt=request.prompt,
            schema=request.schema,
            image_hashes=hashes,
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            structured=mode,
            # How images are prepared matters only when there are images.
            image_settings=f"{IMAGE_ENCODING}/max-side-{self.config.max_image_side}" if hashes else "",
            repeat=request.repeat,
        )

    def _client(self, url: str) -> openai.AsyncOpenAI:
        """A fresh SDK client for the server at ``url`` (bound to the running loop), the SDK's own retries off."""
        try:
            import openai
        except ImportError:
            raise ImportError("the VLM judge needs the openai package: pip install 'idbench[vlm]'") from None

        return openai.AsyncOpenAI(
            base_url=url,
            api_key=self._key.reveal() or _NO_KEY_PLACEHOLDER,
            max_retries=0,
            timeout=self.config.timeout_s,
            http_client=_guarded_http_client(self.config.timeout_s),  # closed with the SDK client
        )

    # --- accounting -------------------------------------------------------------------------------

    def _budget_exhausted(self) -> bool:
        config, stats = self.config, self.stats
        with self._lock:
            if config.request_budget is not None and stats.requests_sent >= config.request_budget:
                return True
            used = stats.prompt_tokens + stats.completion_tokens
            return config.token_budget is not None and used >= config.token_budget

    def _count_sent(self, task: str, endpoint: str) -> None:
        with self._lock:
            self.stats.requests_sent += 1
            self.stats.task(task).requests_sent += 1
            self.stats.by_endpoint.setdefault(endpoint, EndpointStats()).requests_sent += 1

    def _release(self, servers: _Servers, server: _Server, transport_error: str | None) -> None:
        """An attempt at ``server`` is over: count its reply or transport fault, free its slot."""
        with self._lock:
            counts = self.stats.by_endpoint.setdefault(server.name, EndpointStats())
            if transport_error is None:
                counts.replies += 1
            else:
                counts.transport_failures += 1
        if servers.release(server, transport_error) and len(servers) > 1:
            logger.warning(
                "judge %s: %s failed %d times in a row (last: %s); its share goes to the other servers for this batch",
                self.config.model,
                server.name,
                ENDPOINT_DOWN_AFTER,
                transport_error,
            )

    def _count_retry(self) -> None:
        with self._lock:
            self.stats.retries += 1

    def _count_usage(self, response: Any) -> dict[str, int]:
        usage = getattr(response, "usage", None)
        if usage is None:
            return {}
        counts = {
            "prompt_tokens": int(usage.prompt_tokens or 0),
            "completion_tokens": int(usage.completion_tokens or 0),
        }
        config = self.config
        with self._lock:
            stats = self.stats
            stats.prompt_tokens += counts["prompt_tokens"]
            stats.completion_tokens += counts["completion_tokens"]
            if config.price_per_million_input is not None or config.price_per_million_output is not None:
                stats.estimated_cost = (
                    stats.prompt_tokens * (config.price_per_million_input or 0.0)
                    + stats.completion_tokens * (config.price_per_million_output or 0.0)
                ) / 1e6
        return counts

    def _count_answers(
        self, requests: Sequence[JudgeRequest], answers: Sequence[JudgeAnswer], deduplicated: int
    ) -> None:
        with self._lock:
            stats = self.stats
            stats.deduplicated += deduplicated
            for request, answer in zip(requests, answers):
                task = stats.task(request.task)
                stats.answers += 1
                task.answers += 1
                if answer.cached:
                    stats.cache_hits += 1
                    task.cache_hits += 1
                if not answer.ok:
                    stats.failures += 1
                    task.failures += 1


@dataclass(eq=False)
class _Server:
    url: str
    client: Any  # openai.AsyncOpenAI
    name: str  # how statistics and logs name it: endpoint_names()
    in_flight: int = 0
    sent: int = 0
    faults_in_a_row: int = 0
    down: bool = False


class _Servers:
    """The judge's servers during one ``ask``: which one takes the next attempt.

    Used from the ask's event loop only (no lock). An attempt takes a slot on the server with the fewest
    attempts in flight (then the fewest sent), among those with a free slot (``concurrency`` each) that
    are not down, avoiding the server a retry just failed at when another can take it; with none free it
    waits. A server is down after ``ENDPOINT_DOWN_AFTER`` transport faults in a row; when every server is
    down they are all used again (the request's own retries and the judge's circuit then decide).
    """

    def __init__(self, clients: Sequence[Any], urls: Sequence[str], concurrency: int):
        names = endpoint_names(urls)
        self._servers = [_Server(url, client, names[url]) for url, client in zip(urls, clients)]
        self._concurrency = concurrency
        self._freed = asyncio.Event()  # set when a slot frees; one loop, so no race between a check and a wait

    def __len__(self) -> int:
        return len(self._servers)

    def _choose(self, avoid: _Server | None) -> _Server | None:
        usable = [s for s in self._servers if not s.down] or self._servers
        free = [s for s in usable if s.in_flight < self._concurrency]
        if avoid is not None and any(s is not avoid for s in free):
            free = [s for s in free if s is not avoid]
        return min(free, key=lambda s: (s.in_flight, s.sent), default=None)

    async def acquire(self, avoid: _Server | None = None) -> _Server:
        while (server := self._choose(avoid)) is None:
            self._freed.clear()
            await self._freed.wait()
        server.in_flight += 1
        server.sent += 1
        return server

    def release(self, server: _Server, transport_error: str | None) -> bool:
        """Free the slot; True when this fault took the server down."""
        server.in_flight -= 1
        went_down = False
        if transport_error is None:
            server.faults_in_a_row = 0
        else:
            server.faults_in_a_row += 1
            went_down = not server.down and server.faults_in_a_row >= ENDPOINT_DOWN_AFTER
            server.down = server.down or went_down
        self._freed.set()
        return went_down


def endpoint_names(urls: Sequence[str]) -> dict[str, str]:
    """How each server is named in ``JudgeStats.by_endpoint`` (written into aggregates.json) and in logs:
    its URL as :func:`~idbench.settings.redact_url` shows it, numbered when two servers redact alike."""
    names: dict[str, str] = {}
    for url in urls:
        name = redact_url(url)
        names[url] = name if name not in names.values() else f"{name} (#{len(names) + 1})"
    return names


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """The delay a 429/503 asks for, in seconds (``retry-after-ms`` or numeric ``retry-after``)."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) / scale)
            except ValueError:
                return None  # an HTTP date: the capped exponential backoff is enough
    return None

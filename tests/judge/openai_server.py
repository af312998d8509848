"""A local, scripted OpenAI chat-completions server for the judge tests and the throughput bench.

It speaks just enough of the protocol for the SDK: ``POST /v1/chat/completions`` answers with the usual
JSON (``choices[0].message.content``, ``finish_reason``, ``usage``), or with an OpenAI-style error.
What it answers comes from a script: a list of behaviours used one per request in arrival order (then
``default``), or a callable that picks the behaviour from the request body. It records every request
(body and headers), and counts requests in flight and the most seen at once.

Test files in ``tests/judge/`` import it as a sibling module (pytest puts a test file's folder on
``sys.path``; the other test folders do the same, e.g. ``tests/leaderboard/filled_store.py``)::

    from openai_server import ScriptedServer, answer, malformed, status, reject_response_format, delay

    with ScriptedServer([status(429), answer({"ok": True})]) as server:
        judge = OpenAIJudge(JudgeConfig(base_url=server.base_url, model="m", backoff_s=0.01))
        ...
        assert len(server.requests) == 2

From a test file in another folder, put this folder on ``sys.path`` first
(``sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "judge"))``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Behaviour:
    """What the server does with one request.

    ``status`` 200 replies with ``content`` as the assistant message; another status replies with an
    OpenAI-style error body carrying ``message``. ``delay_s`` is slept first (longer than the client's
    timeout, it makes the client time out). ``only_with_response_format``: the behaviour applies only
    to requests that carry ``response_format``; others get ``otherwise`` (a server without structured
    output). ``headers`` are extra response headers (``retry-after``...). ``raw`` replaces the whole
    reply: given the connection's writer and the server's closing event, it writes what it likes (a
    misbehaving server: :func:`drip`, :func:`oversized`, :func:`redirect`).
    """

    status: int = 200
    content: str | None = None
    message: str = ""
    delay_s: float = 0.0
    finish_reason: str = "stop"
    headers: tuple[tuple[str, str], ...] = ()
    only_with_response_format: bool = False
    otherwise: Behaviour | None = None
    raw: Callable[[Any, threading.Event], None] | None = None


def answer(value: Any) -> Behaviour:
    """Reply with ``value`` as JSON text."""
    return Behaviour(content=json.dumps(value))


def text(content: str, finish_reason: str = "stop") -> Behaviour:
    """Reply with exactly ``content`` (fenced JSON, prose, anything)."""
    return Behaviour(content=content, finish_reason=finish_reason)


def malformed() -> Behaviour:
    """Reply with text that is not JSON."""
    return Behaviour(content='{"answer": yes, definitely')


def status(code: int, message: str = "", retry_after: float | None = None) -> Behaviour:
    """Reply with HTTP ``code`` and an OpenAI-style error body (429 and 500 are the usual ones)."""
    headers = (("retry-after", f"{retry_after:g}"),) if retry_after is not None else ()
    return Behaviour(status=code, message=message or f"scripted HTTP {code}", headers=headers)


def reject_response_format(otherwise: Behaviour) -> Behaviour:
    """HTTP 400 if the request asks for ``response_format``, else ``otherwise`` (a server without it)."""
    return Behaviour(
        status=400,
        message="response_format is not supported by this server",
        only_with_response_format=True,
        otherwise=otherwise,
    )


def delay(seconds: float, then: Behaviour) -> Behaviour:
    """``then``, after sleeping ``seconds`` (beyond the client's timeout: a timeout)."""
    return Behaviour(
        status=then.status,
        content=then.content,
        message=then.message,
        delay_s=seconds,
        finish_reason=then.finish_reason,
        headers=then.headers,
    )


# --- misbehaving servers: each writes its reply byte for byte ----------------------------------------


def drip(where: str, every_s: float = 0.25, for_s: float = 30.0) -> Behaviour:
    """A server that never finishes: one byte every ``every_s`` seconds, in the ``"headers"`` or in the
    ``"body"`` (after complete headers announcing a body far longer than it sends), for ``for_s`` seconds
    or until the client hangs up. Each byte resets a per-read timeout, so only a deadline on the whole
    request cuts it."""
    if where not in ("headers", "body"):
        raise ValueError(f"drip where={where!r}: 'headers' or 'body'")

    def write(out: Any, closing: threading.Event) -> None:
        if where == "headers":
            out.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
        else:
            out.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\n\r\n{")
        out.flush()
        deadline = time.monotonic() + for_s
        while time.monotonic() < deadline and not closing.wait(every_s):
            out.write(b"a" if where == "headers" else b" ")
            out.flush()

    return Behaviour(raw=write)


def oversized(size: int, *, declared: bool = True) -> Behaviour:
    """A usable completion of ``size`` bytes (its answer's ``why`` is padding), sent in 1 MiB writes:
    with a ``content-length`` (``declared``) or chunked, so that only counting tells its size. The
    padding is one reused buffer: the server holds 1 MiB, whatever ``size`` is."""
    head = b'{"id": "chatcmpl-big", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0, '
    head += b'"message": {"role": "assistant", "content": "{\\"ok\\": true, \\"why\\": \\"'
    tail = (
        b'\\"}"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}'
    )
    block = b"x" * (1 << 20)

    def pieces() -> Iterable[bytes]:
        yield head
        left = size - len(head) - len(tail)
        while left > 0:
            yield block[: min(left, len(block))]
            left -= len(block)
        yield tail

    def write(out: Any, closing: threading.Event) -> None:
        framing = f"content-length: {size}" if declared else "transfer-encoding: chunked"
        out.write(f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{framing}\r\n\r\n".encode())
        for piece in pieces():
            if closing.is_set():
                return
            out.write(piece if declared else b"%x\r\n%s\r\n" % (len(piece), piece))
        if not declared:
            out.write(b"0\r\n\r\n")
        out.flush()

    return Behaviour(raw=write)


def redirect(location: str, code: int = 307) -> Behaviour:
    """An HTTP ``code`` redirect to ``location`` (307 keeps the method and body: the request again, there)."""

    def write(out: Any, closing: threading.Event) -> None:
        # "connection: close" says what the server does after a raw reply (it closes): without it the client
        # may send the redirected request on this keep-alive connection as it closes, a race that failed
        # the redirect test now and then with a connection error.
        out.write(
            f"HTTP/1.1 {code} Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".encode()
        )
        out.flush()

    return Behaviour(raw=write)


Script = Iterable[Behaviour] | Callable[[dict[str, Any]], Behaviour]


@dataclass
class Received:
    """One request as the server got it."""

    body: dict[str, Any]
    headers: dict[str, str]
    at: float = field(default_factory=time.monotonic)


class ScriptedServer:
    """The server, in a background thread; a context manager (``with ScriptedServer(...) as server``).

    ``latency_s`` is added to every request (a model's decoding time, for concurrency tests and the
    bench). ``usage`` is the token count reported per reply.
    """

    def __init__(
        self,
        script: Script = (),
        *,
        default: Behaviour | None = None,
        latency_s: float = 0.0,
        usage: tuple[int, int] = (100, 10),
    ):
        self._picker = script if callable(script) else None
        self._queue = [] if callable(script) else list(script)
        self.default = default if default is not None else answer({"ok": True})
        self.latency_s = latency_s
        self.usage = usage
        self.requests: list[Received] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        self._httpd = _HTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-openai-server", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()  # wakes handlers sleeping through a scripted delay
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        """The URL to give the client (``.../v1``, as for vLLM)."""
        assert self._httpd is not None, "start the server first"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # --- script -----------------------------------------------------------------------------------

    def push(self, *behaviours: Behaviour) -> None:
        """Queue more behaviours (used in order, before ``default``)."""
        with self._lock:
            self._queue.extend(behaviours)

    def reset(self) -> None:
        """Forget the recorded requests and the in-flight maximum."""
        with self._lock:
            self.requests.clear()
            self.max_in_flight = 0

    def _next(self, body: dict[str, Any]) -> Behaviour:
        with self._lock:
            if self._picker is not None:
                behaviour = self._picker(body)
            elif self._queue:
                behaviour = self._queue.pop(0)
            else:
                behaviour = self.default
        if behaviour.only_with_response_format and "response_format" not in body:
            return behaviour.otherwise or self.default
        return behaviour

    def _enter(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(Received(body=body, headers=headers))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._closing.wait(seconds)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # many clients connect at once in the concurrency tests and the bench


def _handler_for(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a real server: the client reuses connections
        # Headers and body go out in separate writes; with Nagle on, the client's delayed ACK would
        # add ~40 ms to every reply.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the tests read the recorded requests instead

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            raw = self.rfile.read(length)
            if not self.path.split("?")[0].rstrip("/").endswith("/chat/completions"):
                self._send(404, _error_body("not found", "not_found"))
                return
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                self._send(400, _error_body("body is not JSON", "invalid_request_error"))
                return
            server._enter(body, {k.lower(): v for k, v in self.headers.items()})
            try:
                behaviour = server._next(body)
                server._sleep(server.latency_s + behaviour.delay_s)
                if behaviour.raw is not None:
                    self.close_connection = True  # its framing is its own: the connection is not reused
                    try:
                        behaviour.raw(self.wfile, server._closing)
                    except OSError:
                        pass  # the client hung up (cut the request, or refused the reply): that was the point
                    return
                if behaviour.status == 200:
                    reply = _completion(body, behaviour, server.usage)
                else:
                    reply = _error_body(
                        behaviour.message,
                        "rate_limit_error"
                        if behaviour.status == 429
                        else "invalid_request_error"
                        if behaviour.status < 500
                        else "server_error",
                    )
                self._send(behaviour.status, reply, behaviour.headers)
            finally:
                server._leave()

        def _send(self, code: int, payload: dict[str, Any], headers: Iterable[tuple[str, str]] = ()) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timed out) before the reply

    return Handler


def _completion(body: dict[str, Any], behaviour: Behaviour, usage: tuple[int, int]) -> dict[str, Any]:
    prompt_tokens, completion_tokens = usage
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "scripted"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": behaviour.content},
                "finish_reason": behaviour.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _error_body(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def user_text(body: dict[str, Any]) -> str:
    """The text parts of the user message of a recorded request body."""
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message["content"]
            if isinstance(content, str):
                return content
            return "".join(part.get("text", "") for part in content if part.get("type") == "text")
    return ""


def image_urls(body: dict[str, Any]) -> list[str]:
    """The image URLs of the user message of a recorded request body, in order."""
    urls = []
    for message in body.get("messages", []):
        if message.get("role") == "user" and isinstance(message["content"], list):
            urls += [part["image_url"]["url"] for part in message["content"] if part.get("type") == "image_url"]
    return urls

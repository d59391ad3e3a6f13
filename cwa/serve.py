"""`cwa serve`: JSON lines on stdin/stdout for a host process that keeps one child open.

Each line `{"id", "method", "params"}` gets one line back, `{"id", "result"}` or
`{"id", "error": {"code", "message", "details"}}`, in order. A malformed line gets an error
reply (with `"id": null` when no id could be read) and the server keeps serving; end of input
ends it with exit code 0. `serve_archive` also runs the archive's background work meanwhile.
"""

from __future__ import annotations

import io
import select
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import orjson

from cwa import contract, limits
from cwa.api import Archive, method_named
from cwa.errors import CwaError, Internal, InvalidRequest, LimitExceeded
from cwa.index.queue_worker import IndexProcess
from cwa.index.semantic import BackgroundEmbedder
from cwa.json_input import parse_json_body
from cwa.models import run_single_threaded
from cwa.store.maintenance import PeriodicMaintenance
from cwa.store.retention import plan_of

IDLE_SLICE_SECONDS = 0.02  # background work between requests before input is checked again (one batch)


def _input_waiting(stream: BinaryIO) -> bool:
    """Whether a request may be waiting on `stream` (a stream that is no file: always)."""
    try:
        return bool(select.select([stream], [], [], 0)[0])
    except (OSError, ValueError, io.UnsupportedOperation):
        return True


def read_lines(
    stream: BinaryIO, max_bytes: int = limits.MAX_REQUEST_BYTES, idle: Callable[[float], bool] | None = None
) -> Iterator[bytes | None]:
    """Lines of `stream`, without the newline; None stands for a line longer than `max_bytes`.
    While no input waits, `idle(seconds)` runs in slices (it says whether more work is left)."""
    pending = idle is not None
    while True:
        while pending and not _input_waiting(stream):
            pending = idle(IDLE_SLICE_SECONDS)
        line = stream.readline(max_bytes + 1)
        if not line:
            return
        if len(line) > max_bytes and not line.endswith(b"\n"):
            while True:  # drop the rest of the oversized line
                rest = stream.readline(1 << 20)
                if not rest or rest.endswith(b"\n"):
                    break
            yield None
            continue
        yield line.rstrip(b"\r\n")
        pending = idle is not None


def oversized_line() -> LimitExceeded:
    """The error for a line `read_lines` gave as None."""
    return LimitExceeded(
        f"a request line is limited to {limits.MAX_REQUEST_BYTES} bytes",
        reason="too-large",
        limit=limits.MAX_REQUEST_BYTES,
    )


def handle_line(call: Callable[[str, Any], dict[str, Any]], line: bytes | None) -> dict[str, Any]:
    request_id: Any = None
    try:
        if line is None:
            raise oversized_line()
        envelope = parse_json_body(line, "request line", bounded=False)
        if not isinstance(envelope, dict):
            raise InvalidRequest(
                'a request line must be a JSON object {"id", "method", "params"}',
                reason="not-an-object",
            )
        if envelope.get("id") is not None:  # first, so that every later error names the request
            request_id = contract.RequestId().check(envelope["id"], "id")
        checked = contract.validate(contract.ENVELOPE, envelope)
        method, params = checked["method"], checked.get("params", {})
        return {"id": request_id, "result": call(method, params)}
    except CwaError as error:
        return {"id": request_id, "error": error.to_json()}
    except Exception as exc:  # a bug must not end the session of the host
        traceback.print_exc(file=sys.stderr)
        return {"id": request_id, "error": Internal(f"{type(exc).__name__}: {exc}").to_json()}


def encode_reply(reply: dict[str, Any]) -> bytes:
    """One reply line. A result that cannot be written as JSON is a bug, not the end of the
    session: its request gets an `internal` error instead, and the loop goes on."""
    try:
        return orjson.dumps(reply) + b"\n"
    except Exception as exc:  # orjson.JSONEncodeError, or anything a result should not hold
        traceback.print_exc(file=sys.stderr)
        error = Internal(f"the answer could not be written as JSON: {type(exc).__name__}: {exc}")
        return orjson.dumps({"id": reply.get("id"), "error": error.to_json()}) + b"\n"


def serve(
    call: Callable[[str, Any], dict[str, Any]],
    stdin: BinaryIO,
    stdout: BinaryIO,
    idle: Callable[[float], bool] | None = None,
) -> int:
    for line in read_lines(stdin, idle=idle):
        if line is not None and not line.strip():
            continue
        stdout.write(encode_reply(handle_line(call, line)))
        stdout.flush()
    return 0


def project_bound(call: Callable[[str, Any], dict[str, Any]]) -> Callable[[str, Any], dict[str, Any]]:
    """`call`, refusing an agent-facing read that does not name the caller's project."""

    def bounded(method: str, params: Any) -> dict[str, Any]:
        contract.check_project_bound(method, method_named(method).schema, params)
        return call(method, params)

    return bounded


def serve_archive(
    open_archive: Callable[[], Archive],
    stdin: BinaryIO,
    stdout: BinaryIO,
    *,
    background: bool,
    maintenance_interval: float,
) -> int:
    """Serve an archive's methods until end of input. Meanwhile, daemon threads with connections
    of their own embed queued windows in small batches (when `background` and semantic retrieval
    is on) and run one bounded maintenance pass every `maintenance_interval` seconds (0: none).
    A child process indexes what the session engine archives (cwa/index/queue_worker.py).
    An archive that cannot be opened still serves: every request gets the error saying why."""
    run_single_threaded()  # one model, shared by the embedding worker and requests (cwa/models.py)
    try:
        archive = open_archive()
    except CwaError as error:
        opening_error = error

        def unavailable(method: str, params: Any) -> dict[str, Any]:
            raise opening_error

        return serve(unavailable, stdin, stdout)
    # the session engine's documents are indexed by this child process, not in the request
    archive.index_worker = IndexProcess(str(archive.path)).start()
    workers = []
    if background and archive.settings["semanticRetrieval"]:
        workers.append(BackgroundEmbedder(str(archive.path), archive.clock).start())
    if maintenance_interval > 0:
        workers.append(
            PeriodicMaintenance(
                str(archive.path), archive.clock, plan_of(archive.settings), maintenance_interval, archive.handlers
            ).start()
        )
    bounded = project_bound(archive.call)

    def answer(method: str, params: Any) -> dict[str, Any]:
        try:
            return bounded(method, params)
        finally:
            if archive.index_worker is not None:
                archive.index_worker.answered()  # the worker's writes wait for a pause

    try:
        return serve(answer, stdin, stdout, idle=archive.idle_work)
    finally:
        for worker in workers:
            worker.close()
        archive.index_worker.close()  # it indexes what is left, briefly; the next process the rest
        archive.index_worker = None  # what is archived from here on is indexed as it is admitted
        archive.close()

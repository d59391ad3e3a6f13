"""The archive's methods, one table for every host: Python callers, `cwa call`, `cwa serve`, CLI.

    with Archive.open("/tmp/a.db") as archive:
        result = archive.call("admit", {...})

`call` validates the params against the method's schema before any work and maps every storage
failure to a typed error, so each host rejects the same payloads the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import apsw

from cwa import contract, limits
from cwa.config import Settings, load_settings
from cwa.contract import Method
from cwa.errors import CwaError, InvalidRequest, ModelMissing
from cwa.index.handlers import default_handlers
from cwa.index.rebuild import backfill_if_needed
from cwa.retrieve import render
from cwa.session.checkpoint import CATALOG_TOKENS, archive_checkpoint, archive_previous_summary, session_catalog
from cwa.store.admission import admit
from cwa.store.connection import default_archive_path, durable_writes, open_connection, storage_error
from cwa.store.derived import IndexHandler
from cwa.store.reads import find_document, get_document
from cwa.store.status import archive_status
from cwa.timestamps import utc_now


class Archive:
    def __init__(
        self,
        conn: apsw.Connection,
        path: Path,
        *,
        settings: Settings | None = None,
        handlers: Sequence[IndexHandler] | None = None,
        clock: Callable[[], str] = utc_now,
    ) -> None:
        self.conn = conn
        self.path = path
        self.settings = settings if settings is not None else load_settings(None)
        self.handlers = tuple(handlers) if handlers is not None else default_handlers()
        self.clock = clock
        self.progress: Callable[[int, int], None] | None = None  # long work reports here
        self._engines: Any = None  # session engines of this process (cwa/session/engine.py)
        # `cwa serve`'s index worker: with one, the session engine's documents are indexed by it
        # (cwa/store/index_queue.py); without, in their admission transaction
        self.index_worker: Any = None

    @property
    def engines(self) -> Any:
        if self._engines is None:
            from cwa.session.engine import Engines

            self._engines = Engines(self)
        return self._engines

    @classmethod
    def open(
        cls,
        path: Path | str | None = None,
        *,
        settings: Settings | None = None,
        handlers: Sequence[IndexHandler] | None = None,
        clock: Callable[[], str] = utc_now,
    ) -> Archive:
        resolved = Path(path).expanduser() if path is not None else default_archive_path()
        conn = open_connection(resolved)
        archive = cls(conn, resolved, settings=settings, handlers=handlers, clock=clock)
        try:
            backfill_if_needed(conn, archive.handlers, clock)  # once, after an upgrade from schema 1
        except BaseException as exc:
            conn.close()
            if isinstance(exc, (apsw.Error, OSError)):
                raise storage_error(exc, resolved) from exc
            raise
        return archive

    def close(self) -> None:
        if self._engines is not None:
            try:
                self._engines.catch_up()  # a session's history waiting to be archived
            except (CwaError, apsw.Error):
                pass  # still in the host's transcript: the next first sight queues it again
        self.conn.close()

    def idle_work(self, seconds: float) -> bool:
        """Work a host may run between requests for about `seconds` (the sessions' history still
        to be archived); whether more is left."""
        return self._engines.catch_up(seconds) if self._engines is not None else False

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def call(self, method: str, params: Any) -> dict[str, Any]:
        """Validate `params` for `method`, run it, and return its JSON-ready result."""
        spec = method_named(method)
        request = contract.validate(spec.schema, params)
        try:
            return spec.handler(self, request)
        except CwaError:
            raise
        except (apsw.Error, OSError) as exc:
            raise storage_error(exc, self.path) from exc

    def admit(self, params: Any) -> dict[str, Any]:
        return self.call("admit", params)

    def admit_many(self, requests: Iterable[Any], *, index: bool = True) -> list[dict[str, Any]]:
        """Admit many documents as `cwa import` archives a history: each request checked as
        `admit` checks it and archived durable-first (its exact bytes; the derived rows wait in
        the index queue), in transactions of about BULK_SECONDS (cwa/store/connection.py). With
        `index`, a helper process prepares what each committed batch queued while the next batch
        is archived, this process writes its rows between batches, and what is left is indexed at
        the end (cwa/index/queue_worker.py `QueueIndexer`). Each result is `admit`'s for a queued
        document (`generation` null, `indexPending`); with `index` all are indexed when this
        returns. The first failing request stops the run: its error, with its position in
        `details["request"]`, is raised once every earlier one is committed (and indexed). A
        process killed part-way leaves what it committed queued, never lost: `get` and `recall`
        read it, and the next import, serve or project search indexes it."""
        from cwa.index.queue_worker import QueueIndexer
        from cwa.store.connection import BULK_SECONDS, BulkWrites
        from cwa.store.disk_guard import BULK_CHECK_SECONDS, check_free_space
        from cwa.store.retention import plan_of

        plan, results, failure, disk_checked = plan_of(self.settings), [], None, -BULK_CHECK_SECONDS
        indexer = QueueIndexer(self.conn, str(self.path), self.handlers, self.clock) if index else None
        try:
            try:
                committed = (lambda: indexer.step(BULK_SECONDS)) if indexer is not None else None
                with BulkWrites(self.conn, BULK_SECONDS, committed) as batch:
                    for position, params in enumerate(requests):
                        try:
                            request = contract.validate(contract.ADMIT, params)
                            if time.monotonic() - disk_checked >= BULK_CHECK_SECONDS:
                                check_free_space(self.path, self.settings["diskCriticalMebibytes"])
                                disk_checked = time.monotonic()
                            now = self.clock()
                            results.append(
                                admit(
                                    self.conn,
                                    request,
                                    handlers=self.handlers,
                                    now=now,
                                    retention_plan=plan,
                                    deferred=True,
                                    deflate=True,  # no request waits: each chunk written once
                                )
                            )
                        except CwaError as error:
                            error.details["request"] = position
                            failure = error
                            break
                        batch.due()
                if indexer is not None and results:
                    indexer.finish(self.progress)
            finally:
                if indexer is not None:
                    indexer.preparer.close()
        except (apsw.Error, OSError) as exc:
            raise storage_error(exc, self.path) from exc
        if failure is not None:
            raise failure
        return results

    def get(self, params: Any) -> dict[str, Any]:
        return self.call("get", params)

    def status(self, params: Any | None = None) -> dict[str, Any]:
        return self.call("status", params if params is not None else {})

    def search(self, params: Any) -> dict[str, Any]:
        return self.call("search", params)

    def recall(self, params: Any) -> dict[str, Any]:
        return self.call("recall", params)


def method_named(name: Any) -> Method:
    """The method table's entry for `name`, or `invalid-request` (`unknown-method`)."""
    spec = METHODS.get(name) if isinstance(name, str) else None
    if spec is None:
        shown = repr(name[:64] + "…" if isinstance(name, str) and len(name) > 64 else name)[:80]  # never echo megabytes
        raise InvalidRequest(f"unknown method {shown}", reason="unknown-method", allowed=sorted(METHODS))
    return spec


def _admit(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.store.disk_guard import check_free_space
    from cwa.store.retention import plan_of

    check_free_space(archive.path, archive.settings["diskCriticalMebibytes"])
    return admit(
        archive.conn, request, handlers=archive.handlers, now=archive.clock(), retention_plan=plan_of(archive.settings)
    )


def _get(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    return get_document(
        archive.conn, request["documentId"], request.get("version"), request.get("range"), request.get("project")
    )


def _status(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.store import index_queue

    found = archive_status(archive.conn, archive.path, request.get("project"))
    found["indexQueue"] = index_queue.lag(archive.conn, archive.clock(), request.get("project"))
    if request.get("archive"):
        from cwa.store.status import lifecycle_status

        found["archive"] = lifecycle_status(archive.conn, archive.clock())
    return found


def _pin(archive: Archive, request: dict[str, Any], pinned: bool) -> dict[str, Any]:
    from cwa.store.protection import set_pin
    from cwa.store.retention import plan_of

    return set_pin(
        archive.conn,
        request["documentId"],
        request.get("version"),
        pinned,
        plan_of(archive.settings),
        request.get("project"),
    )


def _protect(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.store.protection import DEFAULT_PROTECTION_SECONDS, protect

    return protect(
        archive.conn,
        request["clientId"],
        request["documents"],
        request.get("ttlSeconds", DEFAULT_PROTECTION_SECONDS),
        archive.clock(),
        request.get("project"),
    )


def _release(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.store.protection import release

    return release(archive.conn, request["clientId"], archive.clock())


def _checkpoint(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    project, session = request["project"], request["sessionId"]
    with durable_writes(archive.conn):
        result = archive_checkpoint(
            archive.admit, project, session, request["text"], request.get("createdAt"), archive.progress
        )
    if request.get("previousSummary") is not None:
        result["previousSummary"] = archive_previous_summary(
            archive.conn, archive.admit, project, session, request["previousSummary"]
        )
    return result


def _catalog(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    return session_catalog(archive.conn, request["project"], request["sessionId"])


def _redact(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.store.redaction import redact

    return redact(archive.conn, request["project"], request.get("sessionId"), request.get("confirm"), archive.clock())


def _without_visible(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    """An agent's search or gather in a session this process serves also leaves out what its
    provider copy still shows."""
    if request.get("sessionId") and archive._engines is not None:
        return archive.engines.with_visible(request)
    return request


def _indexed_first(archive: Archive, request: dict[str, Any]) -> int:
    """Before a search or gather reads: index what waits in the index queue for its project (all
    of it for scope `all`), for up to SEARCH_INDEX_SECONDS; how many documents still wait. The
    index worker would get there soon; a search must not miss what a session just archived."""
    from cwa.store import index_queue
    from cwa.store.connection import BOOKKEEPING_SKIPPED

    project = None if request.get("scope") == "all" else request.get("project")
    try:
        if not index_queue.pending(archive.conn, project):
            return 0
        index_queue.index_queued(
            archive.conn, archive.handlers, archive.clock(), project=project, seconds=limits.SEARCH_INDEX_SECONDS
        )
    except BOOKKEEPING_SKIPPED:  # a read-only file or a long writer: search what is indexed
        pass
    return index_queue.lag(archive.conn, archive.clock(), project)["documents"]


def _with_pending(found: dict[str, Any], pending: int) -> dict[str, Any]:
    return {**found, "indexPending": pending} if pending else found


def _search(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.retrieve.search import search

    pending = _indexed_first(archive, request)
    now = archive.clock()
    wanted = request.pop("render", False)
    found = _with_pending(search(archive.conn, _without_visible(archive, request), archive.settings, now), pending)
    return _rendered(found, render.search_results, now) if wanted else found


def _gather(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.retrieve.gather import gather

    pending = _indexed_first(archive, request)
    found = gather(archive.conn, _without_visible(archive, request), archive.settings, archive.clock())
    return _with_pending(found, pending)


def _traverse(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.retrieve.traverse import traverse

    return traverse(archive.conn, request, archive.clock())


def _recall(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.retrieve.recall import recall

    now = archive.clock()
    wanted = request.pop("render", False)
    found = recall(archive.conn, request, now)
    return _rendered(found, render.recall_result, now) if wanted else found


def _rendered(found: dict[str, Any], renderer: Callable[[dict[str, Any], str], str], now: str) -> dict[str, Any]:
    """`found` with `rendered`: the text a model reads (cwa/retrieve/render.py), as gather has it."""
    return {**found, "rendered": renderer(found, now)}


def _supersede(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.store.supersession import supersede

    if "note" in request:
        return _supersede_by_note(archive, request)
    return supersede(archive.conn, request, archive.clock())


def _supersede_by_note(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    """Archive the note as a `decision` of the naming session, superseding the document."""
    current = find_document(archive.conn, request["documentId"], request.get("version"), request["project"])
    old = {"documentId": current["documentId"], "version": current["version"]}
    scope = {key: request[key] for key in ("project", "sessionId", "parentSessionId") if key in request}
    admitted = archive.admit(
        {
            **scope,
            "kind": "decision",
            "messages": [{"role": "user", "text": request["note"]}],
            "supersedes": old,
            "metadata": {"cwa": {"note": "supersedes", "documentId": old["documentId"]}},
        }
    )
    replacement = {"documentId": admitted["documentId"], "version": admitted["version"]}
    return {**old, "state": "superseded", "replacement": replacement}


def _tool(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa import agent_tools

    scope = agent_tools.Scope(request["project"], request["sessionId"], request.get("parentSessionId"))
    return agent_tools.run(archive.call, scope, request["name"], request["arguments"], request["host"])


def _index_embed(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.index.semantic import drain
    from cwa.model_variants import active
    from cwa.models import ModelUnavailable, embedder

    try:
        model = embedder(active(archive.path))
    except ModelUnavailable as exc:
        raise ModelMissing(str(exc), reason="model-unavailable") from exc
    from cwa.store.vector_blocks import pack

    drained = drain(archive.conn, model, archive.clock(), request.get("limit"), archive.progress)
    return {**drained, "packed": pack(archive.conn, budget=limits.UNBOUNDED)}


def _models_status(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.index.semantic import pending, refreshing, stored_fingerprint
    from cwa.model_variants import variant_status
    from cwa.models import reranker_status, status

    found = status()
    found["reranker"] = reranker_status(archive.settings["rerankerPath"])
    found["archive"] = {
        "fingerprint": stored_fingerprint(archive.conn),
        "pendingWindows": pending(archive.conn),
        "refreshWindows": refreshing(archive.conn),
        **variant_status(archive.path),
    }
    return found


def _models_optimize(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa import model_variants
    from cwa.index.semantic import sample_texts

    def sample() -> list[str]:
        return sample_texts(archive.conn, model_variants.SAMPLE, model_variants.SAMPLE_MIN_WORDS)

    return model_variants.optimize(sample, archive.path, archive.clock(), archive.progress)


def _preflight(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.retrieve.preflight import preflight

    return preflight(archive.conn, request, archive.settings, archive.clock())


def _why(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.retrieve.preflight import explain

    return explain(archive.conn, request)


def _maintain(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.store.maintenance import maintain
    from cwa.store.retention import plan_of

    result = maintain(
        archive.conn,
        archive.clock(),
        request.get("limit", limits.DEFAULT_MAINTENANCE_STEPS),
        plan_of(archive.settings),
        request.get("vacuum", False),
        archive.handlers,
    )
    if request.get("embed"):  # the embedding queue too, when asked (the model must be installed)
        embedded = _index_embed(archive, {"limit": request["embed"]})
        result.update(embedded=embedded["embedded"], embeddingPending=embedded["pending"])
        result["more"] = result["more"] or embedded["pending"] > 0 or embedded["refreshing"] > 0
    return result


def _doctor(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.store import checkpoint_parts, doctor

    def diagnose() -> list[dict[str, Any]]:
        return doctor.diagnose(
            archive.conn, archive.path, archive.settings["diskCriticalMebibytes"], request.get("sample", doctor.SAMPLE)
        )

    try:
        checks, repaired = diagnose(), []
    except apsw.CorruptError as exc:  # a check read a damaged page: the file is the problem
        return doctor.damaged_file(archive.path, archive.settings["diskCriticalMebibytes"], exc)
    failing = {c["name"] for c in checks if c["repairable"]}
    if doctor.canonical_damage(checks):  # rebuilt from damaged bytes, derived rows would hide the damage
        failing -= {"derived-index", "window-counts", "window-ranges", "checkpoint-parts"}
    if request.get("repair") and failing:
        if "permissions" in failing:
            doctor.fix_permissions(archive.path)
            repaired.append("permissions")
        if "checkpoint-parts" in failing:
            from cwa.store.connection import write_transaction

            with write_transaction(archive.conn):
                expired = checkpoint_parts.expire_orphans(archive.conn, archive.clock(), limits.UNBOUNDED)
            indexed = checkpoint_parts.index_linked(
                archive.conn, archive.handlers, archive.clock(), limit=limits.UNBOUNDED
            )
            repaired.append(
                f"checkpoint-parts: {expired} orphan(s) past the grace period expired, {indexed} part(s) indexed"
            )
        if failing & {"derived-index", "window-counts", "window-ranges"}:
            result = _index_rebuild(archive, {})
            repaired.append(f"derived-index: rebuilt {result['documents']} document(s) in batches")
        if "hooks" in failing:
            from cwa import hook_failures

            hook_failures.clear(archive.path)
            repaired.append("hooks: the failure log is cleared")
        checks = diagnose()
    return {"healthy": all(c["ok"] for c in checks), "checks": checks, "repaired": repaired, "path": str(archive.path)}


def damaged_archive_report(path: Path, settings: Settings, error: CwaError) -> dict[str, Any]:
    """`doctor`'s answer for an archive too damaged to open (`archive-corrupt`): what the
    file-level checks say, with the advice to restore it."""
    from cwa.store import doctor

    return doctor.damaged_file(path, settings["diskCriticalMebibytes"], error)


def _index_rebuild(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.index.rebuild import rebuild_indexes

    return rebuild_indexes(archive.conn, archive.handlers, archive.clock(), archive.progress, str(archive.path))


def _session_context(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    return archive.engines.context(request)


def _session_settled(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    return archive.engines.settled(request)


def _session_compact(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.session.compaction import compact

    return compact(archive, request)


def _session_status(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    return archive.engines.status(request)


def _session_open(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    from cwa.store.sessions import ensure_project, record_lineage

    now = archive.clock()
    with archive.conn:
        project_id = ensure_project(archive.conn, request["project"], now)
    lineage = record_lineage(archive.conn, project_id, request["sessionId"], request.get("lineage", []), now)
    return {"sessionId": request["sessionId"], "lineage": lineage, "archive": str(archive.path)}


def _session_rotate(archive: Archive, request: dict[str, Any]) -> dict[str, Any]:
    return archive.engines.rotate(request)


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("admit", contract.ADMIT, _admit, "archive one document (idempotent)"),
        Method("get", contract.GET, _get, "read a document, its manifest, or a byte range"),
        Method("status", contract.STATUS, _status, "counts and bytes of the archive"),
        Method("search", contract.SEARCH, _search, "exact, structural, BM25F and semantic search"),
        Method("recall", contract.RECALL, _recall, "exact bytes for a locator or document id"),
        Method("gather", contract.GATHER, _gather, "dated records in order around the best matches, within a budget"),
        Method("traverse", contract.TRAVERSE, _traverse, "page through a session's chronology from an anchor"),
        Method("supersede", contract.SUPERSEDE, _supersede, "retire a document in favour of another or of a note"),
        Method("tool", contract.TOOL, _tool, "run one agent tool: the text its model reads and the details"),
        Method("index-rebuild", contract.INDEX_REBUILD, _index_rebuild, "recompute every derived index"),
        Method("doctor", contract.DOCTOR, _doctor, "integrity, derived indexes, orphans, permissions, disk; repair"),
        Method("index-embed", contract.INDEX_EMBED, _index_embed, "embed queued windows for semantic search"),
        Method(
            "models-status", contract.MODELS_STATUS, _models_status, "installed local models and their fingerprints"
        ),
        Method(
            "models-optimize",
            contract.MODELS_OPTIMIZE,
            _models_optimize,
            "build and benchmark the faster embedding variant; used only if it wins",
        ),
        Method("preflight", contract.PREFLIGHT, _preflight, "the frozen automatic hint for a user message"),
        Method("why", contract.WHY, _why, "the last preflight decision for a message, explained"),
        Method(
            "maintain",
            contract.MAINTAIN,
            _maintain,
            "one bounded pass: retention, purge, clean-ups, space (vacuum on request)",
        ),
        Method("pin", contract.PIN, lambda a, r: _pin(a, r, True), "keep a document version from expiring"),
        Method("unpin", contract.PIN, lambda a, r: _pin(a, r, False), "let a pinned version expire again"),
        Method("protect", contract.PROTECT, _protect, "declare the versions a client's live context needs"),
        Method("release", contract.RELEASE, _release, "drop one client's context protection"),
        Method(
            "checkpoint",
            contract.CHECKPOINT,
            _checkpoint,
            "archive an oversized input exactly; preview + catalog entry",
        ),
        Method(
            "catalog",
            contract.CATALOG,
            _catalog,
            f"the session's checkpoint catalog, signed, within {CATALOG_TOKENS:,} tokens",
        ),
        Method("redact", contract.REDACT, _redact, "tombstone a session's or project's documents (confirm token)"),
        Method(
            "session-open",
            contract.SESSION_OPEN,
            _session_open,
            "record a session and its ancestors (nearest first); the host's readiness check",
        ),
        Method(
            "session-context",
            contract.SESSION_CONTEXT,
            _session_context,
            "a host's transcript in, the provider copy of the current epoch out",
        ),
        Method(
            "session-settled",
            contract.SESSION_SETTLED,
            _session_settled,
            "archive the completed interaction groups after the agent settles",
        ),
        Method(
            "session-compact",
            contract.SESSION_COMPACT,
            _session_compact,
            "archive what a compaction summarizes; a signed catalog summary and versioned details",
        ),
        Method("session-status", contract.SESSION_STATUS, _session_status, "epoch, turns and tokens against limits"),
        Method("session-rotate", contract.SESSION_ROTATE, _session_rotate, "rotate at the next user message"),
    )
}

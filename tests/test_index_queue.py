"""Durable first, indexed soon after: what the session engine archives in `cwa serve` is exact at
once and findable once its index worker (a child process) or a search of its project gets to it;
indexed once, whoever gets there first; nothing queued is lost when a process dies."""

from __future__ import annotations

import signal
import time

from conftest import turn
from session_helpers import Serve, Transcript

from cwa.api import Archive
from cwa.store import index_queue, payloads
from cwa.store.admission import admit
from cwa.store.derived import HandlerResult, add_full_text
from cwa.store.sqlfiles import queries

PROJECT = "/work/queue"
MARKER = "zq-7781-flux-capacitor"


def _log(lines: int = 4_000) -> str:
    """A tool output far over the tool budget of a 20K window: the engine externalizes it."""
    body = [f"line {n:05d} build step ok {n * 7919 % 100_003:06d}" for n in range(lines)]
    body[lines // 2] = f"line {lines // 2:05d} FAILED {MARKER} overheated"
    return "\n".join(body)


def _derived(archive: Archive, document_id: str) -> tuple[int, int, int]:
    """(windows, index outcomes, index queue rows) of a document's first version."""
    return archive.conn.execute(
        "SELECT (SELECT count(*) FROM windows WHERE document_row = d.id),"
        " (SELECT count(*) FROM index_status AS s WHERE s.document_id = d.document_id AND s.version = 1),"
        " (SELECT count(*) FROM index_queue WHERE document_row = d.id)"
        " FROM documents AS d WHERE d.document_id = ? AND d.version = 1",
        (document_id,),
    ).fetchone()


def _queued(archive: Archive, request: dict) -> dict:
    """Admit a request as `cwa serve` does: its bytes now, its derived rows through the queue."""
    return admit(archive.conn, request, handlers=archive.handlers, now=archive.clock(), deferred=True)


def _wait_for_queue(serve: Serve, seconds: float = 30.0) -> dict:
    """`status` until the index queue is empty (the worker's bound on a quiet machine is well
    under a second per document; this allows for a loaded CI machine)."""
    deadline = time.monotonic() + seconds
    while True:
        lag = serve.call("status", {"project": PROJECT})["indexQueue"]
        if lag["documents"] == 0 or time.monotonic() > deadline:
            return lag
        time.sleep(0.05)


def test_a_deferred_document_is_exact_at_once_and_indexed_once_by_the_first_to_get_there(tmp_path):
    text = _log()
    request = turn(text, project=PROJECT)
    with Archive.open(tmp_path / "inline.db") as inline:  # the same document indexed as it is admitted
        inline.admit(request)
        expected = _derived(inline, inline.search({"project": PROJECT, "query": MARKER})["results"][0]["documentId"])
    with Archive.open(tmp_path / "archive.db") as archive:
        admitted = admit(archive.conn, request, handlers=archive.handlers, now=archive.clock(), deferred=True)
        assert admitted["indexPending"] is True and admitted["indexOutcomes"] == {}
        assert admitted["generation"] is None  # no index generation until the queue indexes it
        document = admitted["documentId"]
        assert _derived(archive, document) == (0, 0, 1)
        assert archive.conn.execute("SELECT count(*) FROM index_generations").fetchone()[0] == 0
        assert text in archive.get({"documentId": document, "project": PROJECT})["text"]  # exact at once
        assert archive.status({"project": PROJECT})["indexQueue"]["documents"] == 1
        doctor = archive.call("doctor", {})
        derived = next(c for c in doctor["checks"] if c["name"] == "derived-index")
        assert derived["ok"] and derived["queued"] == 1 and derived["unindexed"] == 0  # waiting is not missing

        found = archive.search({"project": PROJECT, "query": MARKER})  # a search indexes its project first
        assert [r["documentId"] for r in found["results"]][:1] == [document] and "indexPending" not in found
        assert _derived(archive, document) == (*expected[:2], 0)
        assert index_queue.index_queued(archive.conn, archive.handlers, archive.clock()) == 0  # nothing twice
        generation = archive.get({"documentId": document, "project": PROJECT})["generation"]
        assert archive.conn.execute("SELECT id FROM index_generations").fetchall() == [(generation,)]
        assert archive.status({})["indexQueue"] == {"documents": 0, "oldestSeconds": 0.0}
        again = admit(archive.conn, request, handlers=archive.handlers, now=archive.clock(), deferred=True)
        assert again["created"] is False and _derived(archive, document) == (*expected[:2], 0)


def test_a_queued_document_s_chunks_are_stored_whole_then_deflated_with_its_derived_rows(tmp_path):
    """The request that archives a queued document does not wait on deflating: its chunks are
    stored as their bytes, and the queue deflates them (before its lock) as it indexes the
    document, as admission deflates another's. The text reads the same throughout."""
    request = turn(_log(12_000), project=PROJECT)  # chunks past 16 KiB: the level for large ones too
    payloads_of = "SELECT c.data FROM document_chunks AS dc JOIN chunks AS c ON c.id = dc.chunk_id ORDER BY dc.ordinal"
    with Archive.open(tmp_path / "inline.db") as inline:
        inline.admit(request)
        deflated = [data for (data,) in inline.conn.execute(payloads_of)]
    with Archive.open(tmp_path / "archive.db") as archive:
        admitted = _queued(archive, request)
        whole = [data for (data,) in archive.conn.execute(payloads_of)]
        text = archive.get({"documentId": admitted["documentId"]})["text"]
        assert len(whole) > 1 and [payloads.packed(data) for data in whole] == deflated != whole
        assert index_queue.index_queued(archive.conn, archive.handlers, archive.clock()) == 1
        assert [data for (data,) in archive.conn.execute(payloads_of)] == deflated
        assert archive.get({"documentId": admitted["documentId"]})["text"] == text


def test_small_queued_documents_share_a_transaction_and_a_large_one_goes_alone(tmp_path):
    # Ten turns and then a 30 KB log, queued. `limit` counts documents: three turns, one commit.
    # Then the seven other turns share a commit and the log, which would take their batch past
    # BATCH_BYTES, has one of its own. Each is indexed as if alone.
    texts = [f"turn {n} about the {MARKER} rotor" for n in range(10)]
    with Archive.open(tmp_path / "archive.db") as archive:
        ids = [_queued(archive, turn(t, project=PROJECT))["documentId"] for t in texts]
        log = _queued(archive, turn(_log(600), project=PROJECT))
        assert len(_log(600)) > index_queue.BATCH_BYTES
        commits = []

        def committed() -> bool:
            commits.append(1)
            return False  # let it commit

        archive.conn.set_commit_hook(committed)
        assert index_queue.index_queued(archive.conn, archive.handlers, archive.clock(), limit=3) == 3
        assert len(commits) == 1
        assert index_queue.index_queued(archive.conn, archive.handlers, archive.clock()) == 8
        assert len(commits) == 3  # the seven other turns, then the log alone
        archive.conn.set_commit_hook(None)
        for document in [*ids, log["documentId"]]:
            windows, outcomes, queued = _derived(archive, document)
            assert windows >= 1 and outcomes >= 1 and queued == 0
        rows = "SELECT count(*) FROM window_fts WHERE window_fts MATCH 'rotor'"
        assert archive.conn.execute(rows).fetchone()[0] == len(texts)  # each turn's window, once
        # one index generation a batch (as a rebuild has one), begun and finished with it
        generations = [archive.get({"documentId": d})["generation"] for d in [*ids, log["documentId"]]]
        assert generations == [generations[0]] * 3 + [generations[3]] * 7 + [generations[10]]
        assert len(set(generations)) == 3
        finished = "SELECT count(*) FROM index_generations WHERE finished_at IS NOT NULL AND handlers != 0"
        assert archive.conn.execute(finished).fetchone()[0] == 3


def _segments(conn, table: str) -> int:
    """How many segments an FTS5 table's index holds (each has rows in its `_idx` table)."""
    return conn.execute(f"SELECT count(DISTINCT segid) FROM {table}_idx").fetchone()[0]


def test_a_batch_of_queued_documents_writes_each_fts5_index_one_segment(tmp_path):
    # FTS5 writes what it holds as a new segment at every savepoint; a document's handlers run
    # a savepoint each. The batch holds its FTS5 rows to its end: one segment a table, which
    # holds every document's terms.
    with Archive.open(tmp_path / "archive.db") as archive:
        ids = [
            _queued(archive, turn(f"turn {n} reads src/rotor_{n}.py for {MARKER}", project=PROJECT)) for n in range(24)
        ]
        conn, handlers = archive.conn, archive.handlers
        batch = [index_queue.prepare_queued(conn, handlers, q) for q in index_queue.queued_documents(conn, 100)]
        assert index_queue.index_prepared(conn, handlers, archive.clock(), batch) == len(ids)
        assert _segments(conn, "window_fts") == 1 and _segments(conn, "anchor_postings") == 1
        assert conn.execute("SELECT count(*) FROM window_fts WHERE window_fts MATCH 'rotor'").fetchone()[0] == 24
        found = archive.search({"project": PROJECT, "query": "src/rotor_17.py", "limit": 1})["results"]
        assert [hit["documentId"] for hit in found] == [ids[17]["documentId"]]


class _HoldsThenFails:
    """A handler that holds an FTS5 row in its batch, then fails or gives up."""

    name = "holds"

    def __init__(self, outcome: str) -> None:
        self.outcome = outcome

    def index(self, conn, target):
        row = (10**9 + target.document_row, "zqheld", "", "", "", "")
        add_full_text(conn, target, queries("index")["insert_window_fts"], row)
        if self.outcome == "error":
            raise RuntimeError("gave out after holding a row")
        return HandlerResult(self.outcome)


def test_a_handler_that_fails_or_gives_up_leaves_none_of_the_fts5_rows_its_batch_held(tmp_path):
    with Archive.open(tmp_path / "archive.db") as archive:
        for n, outcome in enumerate(["error", "skipped"]):
            _queued(archive, turn(f"turn {n} about the {MARKER} rotor", project=PROJECT))
            conn, handlers = archive.conn, [*archive.handlers, _HoldsThenFails(outcome)]
            batch = [index_queue.prepare_queued(conn, handlers, q) for q in index_queue.queued_documents(conn, 10)]
            assert index_queue.index_prepared(conn, handlers, archive.clock(), batch) == 1
            held = "SELECT count(*) FROM window_fts WHERE window_fts MATCH 'zqheld'"
            assert conn.execute(held).fetchone()[0] == 0  # its savepoint and its held rows undone
            assert conn.execute("SELECT count(*) FROM window_fts WHERE window_fts MATCH 'rotor'").fetchone()[0] == n + 1
            outcomes = "SELECT outcome FROM index_status WHERE handler = 'holds'"
            assert conn.execute(outcomes).fetchall() == [("skipped",)] * (n + 1)


def test_a_search_indexes_its_own_project_first_within_its_bound(tmp_path, monkeypatch):
    from cwa import limits

    with Archive.open(tmp_path / "archive.db") as archive:
        for project in (PROJECT, "/work/other"):
            admit(
                archive.conn,
                turn(_log(300), project=project),
                handlers=archive.handlers,
                now=archive.clock(),
                deferred=True,
            )
        monkeypatch.setattr(limits, "SEARCH_INDEX_SECONDS", 0.0)  # a queue longer than the bound
        late = archive.search({"project": PROJECT, "query": MARKER})
        assert late["indexPending"] == 1 and late["results"] == []  # said, not silently missed
        monkeypatch.setattr(limits, "SEARCH_INDEX_SECONDS", 2.0)
        found = archive.call("gather", {"project": PROJECT, "query": MARKER})
        assert "indexPending" not in found and any(MARKER in item["text"] for item in found["items"])
        assert archive.status({"project": "/work/other"})["indexQueue"]["documents"] == 1  # not its project
        assert archive.status({})["indexQueue"]["documents"] == 1
        assert archive.search({"project": "/work/other", "query": MARKER})["results"]


def test_a_document_that_leaves_every_mode_before_its_turn_leaves_the_queue_without_rows(tmp_path):
    with Archive.open(tmp_path / "archive.db") as archive:
        admitted = _queued(archive, turn(_log(200), project=PROJECT))
        asked = archive.call("redact", {"project": PROJECT, "sessionId": "s1"})
        archive.call("redact", {"project": PROJECT, "sessionId": "s1", "confirm": asked["confirm"]})
        assert index_queue.index_queued(archive.conn, archive.handlers, archive.clock()) == 1
        assert _derived(archive, admitted["documentId"]) == (0, 0, 0)
        assert archive.conn.execute("SELECT count(*) FROM index_generations").fetchone()[0] == 0  # none begun
        assert not archive.search({"project": PROJECT, "query": MARKER})["results"]


def test_serve_externalizes_without_indexing_then_its_worker_indexes_and_search_finds_it(tmp_path):
    transcript = Transcript()
    transcript.user("run the build and tell me what failed")
    transcript.tool(_log())
    serve = Serve(tmp_path)
    params = {"project": PROJECT, "sessionId": "s", "model": {"contextWindow": 20_000, "maxTokens": 2_000}}
    answer = serve.call("session-context", {**params, "messages": transcript.messages})
    externalized = [e for e in answer["events"] if e["type"] == "externalized"]
    assert len(externalized) == 1
    document = externalized[0]["documentId"]
    got = serve.call("get", {"documentId": document, "project": PROJECT})  # exact before any indexing
    assert got["text"].count(MARKER) == 1
    assert _wait_for_queue(serve)["documents"] == 0  # the worker got there without a search
    status = serve.call("session-status", {"project": PROJECT, "sessionId": "s"})
    assert status["indexQueue"]["documents"] == 0
    found = serve.call("search", {"project": PROJECT, "query": MARKER, "semanticPolicy": "never"})
    assert found["results"][0]["documentId"] == document
    serve.child.stdin.close()
    assert serve.child.wait(60) == 0
    with Archive.open(tmp_path / "archive.db") as archive:
        windows, outcomes, queued = _derived(archive, document)
        assert windows > 0 and outcomes == len(archive.handlers) and queued == 0
        generations = archive.conn.execute(
            "SELECT count(DISTINCT generation_id) FROM index_status WHERE document_id = ?",
            (document,),
        ).fetchone()[0]
        assert generations == 1  # indexed once


def test_what_a_killed_process_queued_is_indexed_by_the_next_one(tmp_path):
    with Archive.open(tmp_path / "archive.db") as archive:  # admitted, acknowledged, then the process died
        queued = [
            admit(
                archive.conn,
                turn(f"{_log(300)}\nnote {n}", project=PROJECT, session=f"s{n}"),
                handlers=archive.handlers,
                now=archive.clock(),
                deferred=True,
            )["documentId"]
            for n in range(3)
        ]
    first = Serve(tmp_path)
    first.call("status", {})
    first.child.send_signal(signal.SIGKILL)  # the next one may die too, at any point of its work
    first.child.wait(30)
    second = Serve(tmp_path)
    assert _wait_for_queue(second)["documents"] == 0  # no search asked: its worker drained the queue
    second.child.stdin.close()
    assert second.child.wait(60) == 0
    with Archive.open(tmp_path / "archive.db") as archive:
        for document in queued:
            windows, outcomes, waiting = _derived(archive, document)
            assert windows > 0 and outcomes == len(archive.handlers) and waiting == 0
        doctor = archive.call("doctor", {})
        assert doctor["healthy"], doctor


def test_the_worker_takes_the_lock_only_in_a_pause_between_requests(tmp_path):
    from cwa.index import queue_worker

    with Archive.open(tmp_path / "archive.db") as archive:
        admitted = admit(
            archive.conn, turn(_log(), project=PROJECT), handlers=archive.handlers, now=archive.clock(), deferred=True
        )
        worker = queue_worker.IndexProcess(str(archive.path)).start()
        try:
            # serve answering a request every 10 ms: no pause, so the document waits (up to its
            # QUIET_WAIT_SECONDS, longer than this burst)
            burst_ends = time.monotonic() + 0.6 * queue_worker.QUIET_WAIT_SECONDS
            worker.wake()
            while time.monotonic() < burst_ends:
                worker.answered()
                time.sleep(0.01)
            assert _derived(archive, admitted["documentId"])[2] == 1  # still queued
            deadline = time.monotonic() + 30  # the pause: it is indexed (generous for a loaded machine)
            while _derived(archive, admitted["documentId"])[2] and time.monotonic() < deadline:
                time.sleep(0.02)
            windows, outcomes, queued = _derived(archive, admitted["documentId"])
            assert queued == 0 and windows > 0 and outcomes == len(archive.handlers)
        finally:
            worker.close()


def test_the_worker_copies_the_wal_into_the_file_in_a_pause(tmp_path):
    """Checkpoints happen in serve's pauses, by the worker: the file grows by what it indexed
    long before the WAL reaches the frames at which a committing request would copy it."""
    from cwa.index import queue_worker
    from cwa.store.connection import WAL_CHECKPOINT_PAGES

    with Archive.open(tmp_path / "archive.db") as archive:
        archive.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()  # start from an empty WAL
        admitted = admit(
            archive.conn, turn(_log(), project=PROJECT), handlers=archive.handlers, now=archive.clock(), deferred=True
        )
        before = archive.path.stat().st_size
        wal = archive.path.with_name(archive.path.name + "-wal")
        assert wal.stat().st_size < WAL_CHECKPOINT_PAGES * 4096 // 4  # far from a commit's own checkpoint
        worker = queue_worker.IndexProcess(str(archive.path)).start()
        try:
            worker.wake()
            deadline = time.monotonic() + 30  # generous for a loaded machine
            while (_derived(archive, admitted["documentId"])[2] or archive.path.stat().st_size == before) and (
                time.monotonic() < deadline
            ):
                time.sleep(0.02)
            assert _derived(archive, admitted["documentId"])[2] == 0  # indexed
            assert archive.path.stat().st_size > before  # and copied into the file
        finally:
            worker.close()


def test_a_damaged_fts5_index_costs_a_batch_only_its_lexical_rows(tmp_path):
    # The batch's held FTS5 rows are refused by a damaged index: the batch is written again, each
    # document's rows in its handlers' savepoints, so every document leaves the queue with its
    # other handlers' rows, its lexical handler recorded `skipped` with the error (as one
    # document alone would be; `cwa doctor` reports the damage, `cwa index rebuild` repairs it).
    with Archive.open(tmp_path / "archive.db") as archive:
        archive.admit(turn("first turn about the rotor", project=PROJECT))
        archive.conn.execute("UPDATE window_fts_data SET block = x'ffffffffffff' WHERE id = 10")  # its structure
        ids = [_queued(archive, turn(f"turn {n} hit E_ROTOR_{n}", project=PROJECT))["documentId"] for n in range(3)]
        assert index_queue.index_queued(archive.conn, archive.handlers, archive.clock()) == 3
        for document in ids:
            outcomes = archive.get({"documentId": document})["indexOutcomes"]
            assert outcomes["lexical"] == "skipped" and outcomes["exact"] == "complete"
            assert _derived(archive, document)[2] == 0  # out of the queue
        postings = "SELECT count(*) FROM anchor_postings WHERE anchor_postings MATCH ?"
        for n in range(3):  # each document's anchor found in the FTS5 index that is intact
            (text_id,) = archive.conn.execute(
                "SELECT id FROM anchor_texts WHERE text = ?", (f"E_ROTOR_{n}",)
            ).fetchone()
            assert archive.conn.execute(postings, (f"a{text_id}",)).fetchone()[0] == 1
        details = "SELECT DISTINCT detail FROM index_status WHERE handler = 'lexical' AND outcome = 'skipped'"
        assert ["CorruptError" in detail for (detail,) in archive.conn.execute(details)] == [True]

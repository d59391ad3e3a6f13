"""Canonical admission and derived indexing have separate success boundaries: a handler that
gives up, runs out of budget or fails never costs the document, and its outcome is recorded."""

from __future__ import annotations

from dataclasses import dataclass

from conftest import derived_rows, turn

from cwa.api import Archive
from cwa.store.derived import SEEDED_HANDLER_IDS, HandlerResult, IndexTarget


@dataclass
class WordIndex:
    """A real handler for the test: writes one row per word, within a budget of rows."""

    name: str
    budget: int = 1000
    fail: bool = False
    give_up: bool = False

    def index(self, conn, target: IndexTarget) -> HandlerResult:
        words = target.document.text.decode("utf-8").split()
        for n, word in enumerate(words):
            if n == self.budget:
                return HandlerResult("partial", f"budget of {self.budget} words reached")
            conn.execute(f"INSERT INTO words_{self.name} VALUES (?, ?)", (target.document_row, word))
            if self.fail and n == 1:
                raise RuntimeError("disk of the imagination is full")
        if self.give_up:
            return HandlerResult("skipped", "nothing to resolve")
        return HandlerResult("complete")


def test_outcomes_are_recorded_and_the_document_commits_in_every_case(db_path):
    handlers = [
        WordIndex("full"),
        WordIndex("budgeted", budget=2),
        WordIndex("broken", fail=True),
        WordIndex("quitter", give_up=True),
    ]
    with Archive.open(db_path, handlers=handlers) as archive:
        for handler in handlers:  # a real handler's table comes from a migration
            archive.conn.execute(f"CREATE TABLE words_{handler.name} (document_row, word)")
        result = archive.admit(turn("one two three four five"))
        assert result["indexOutcomes"] == {
            "full": "complete",
            "budgeted": "partial",
            "broken": "skipped",
            "quitter": "skipped",
        }
        conn = archive.conn

        def count(name):
            return conn.execute(f"SELECT count(*) FROM words_{name}").fetchone()[0]

        text = archive.get({"documentId": result["documentId"]})["text"]
        assert count("full") == len(text.split()) == 14  # every word of the serialized text
        assert count("budgeted") == 2  # a partial handler keeps what it wrote
        assert count("broken") == 0  # a failing handler's rows are rolled back
        assert count("quitter") == 0  # a skipped handler publishes nothing
        status = conn.execute("SELECT handler, outcome, detail FROM index_status").fetchall()
        assert {h: o for h, o, _ in status} == result["indexOutcomes"]  # every handler, the clean one too
        details = {h: d for h, _, d in status}
        assert "RuntimeError" in details["broken"]
        assert details["budgeted"] == "budget of 2 words reached"
        # only what did not simply complete is a row (migration 0027); the generation names all four
        stored = conn.execute(
            "SELECT h.name FROM index_outcomes AS o JOIN index_handlers AS h ON h.id = o.handler_id ORDER BY 1"
        ).fetchall()
        assert stored == [("broken",), ("budgeted",), ("quitter",)]
        doc = archive.get({"documentId": result["documentId"]})
        assert doc["indexOutcomes"] == result["indexOutcomes"]
        assert doc["generation"] == result["generation"]

        again = archive.admit(turn("one two three four five"))
        assert again["created"] is False and again["indexOutcomes"] == result["indexOutcomes"]


def test_in_a_batch_a_failing_handler_costs_only_its_own_rows_and_none_is_written_twice(db_path):
    # A batch runs a document's handlers together in one savepoint first; one that fails or gives
    # up undoes that, and each runs again in its own: the outcomes and rows are those of one
    # `admit` a document (above), and no handler's rows are written twice.
    from cwa.store import index_queue
    from cwa.store.admission import admit

    handlers = [WordIndex("full"), WordIndex("budgeted", budget=2), WordIndex("broken", fail=True)]
    with Archive.open(db_path, handlers=handlers) as archive:
        for handler in [*handlers, WordIndex("quitter")]:
            archive.conn.execute(f"CREATE TABLE words_{handler.name} (document_row, word)")
        conn = archive.conn
        words = 0
        for text, batch in (("one two three four five", handlers), ("six seven", handlers[:2])):
            queued = admit(conn, turn(text), handlers=batch, now=archive.clock(), deferred=True)
            assert index_queue.index_queued(conn, batch, archive.clock()) == 1
            words += len(archive.get({"documentId": queued["documentId"]})["text"].split())

        def count(name):
            return conn.execute(f"SELECT count(*) FROM words_{name}").fetchone()[0]

        assert count("full") == words  # each document's serialized words, once
        assert count("budgeted") == 2 + 2 and count("broken") == 0
        outcomes = conn.execute("SELECT handler, outcome FROM index_status").fetchall()
        assert sorted(outcomes) == sorted(
            [("full", "complete"), ("budgeted", "partial"), ("broken", "skipped")]
            + [("full", "complete"), ("budgeted", "partial")]
        )


def test_each_admission_gets_its_own_generation(archive):
    first = archive.admit(turn("a"))
    second = archive.admit(turn("b"))
    assert second["generation"] > first["generation"]
    every = {"exact": "complete", "lexical": "complete", "structural": "complete", "semantic": "complete"}
    assert first["indexOutcomes"] == every
    # a clean document writes no outcome row; its generation's handlers say what ran
    assert archive.conn.execute("SELECT count(*) FROM index_outcomes").fetchone()[0] == 0
    assert archive.get({"documentId": first["documentId"]})["indexOutcomes"] == every
    assert archive.admit(turn("a"))["indexOutcomes"] == every  # the existing document's answer too
    # admission names these handlers' bits without reading `index_handlers`: the ids must be its own
    assert dict(archive.conn.execute("SELECT name, id FROM index_handlers")) == SEEDED_HANDLER_IDS


def test_prepare_runs_before_the_write_lock_is_taken(db_path):
    import apsw

    class LockProbe:
        """Its prepare step writes through a second connection with no busy wait: that only
        succeeds if admission does not hold the write lock yet."""

        name = "probe"

        def prepare(self, kind, document):
            other = apsw.Connection(str(db_path))
            other.set_busy_timeout(0)
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            other.close()
            return len(document.text)

        def index(self, conn, target):
            assert target.prepared[self.name] == len(target.document.text)
            return HandlerResult("complete")

    with Archive.open(db_path, handlers=[LockProbe()]) as archive:
        assert archive.admit(turn("probe"))["indexOutcomes"] == {"probe": "complete"}


def test_a_documents_context_reads_only_the_tail_of_the_message_before_and_gets_the_same_terms(archive):
    """The first window's context is the last terms of the session's previous message; reading
    only its tail (a log may be 200 KB) gives the terms the whole message ends with, whatever
    the tail's first, possibly cut, token or character."""
    import random

    from cwa.index.lexical import CONTEXT_TAIL_BYTES, CONTEXT_TERMS, _last_terms, context_terms
    from cwa.index.terms import terms
    from cwa.store.reads import read_bytes

    rng, tails = random.Random(7), 0
    words = [
        "alpha",
        "beta_gamma",
        "Δelta",
        "naïve",
        "über-cool",
        "foo.bar/baz",
        "日本語テキスト",
        "CamelCaseName",
        "a1",
    ]
    for n in range(60):
        count = rng.choice([5, 200, 1_500, 12_000])
        text = " ".join(rng.choice(words) + rng.choice(["", ",", "\n", "é"]) for _ in range(count))
        admitted = archive.admit(turn(text, session=f"s{n}"))
        row, start, end = archive.conn.execute(
            "SELECT d.id, m.text_start, m.end_byte FROM documents AS d JOIN messages AS m ON m.document_row = d.id"
            " WHERE d.document_id = ? ORDER BY m.ordinal LIMIT 1",
            (admitted["documentId"],),
        ).fetchone()
        whole, _ = read_bytes(archive.conn, row, start, end)
        expected = context_terms(terms(whole.decode("utf-8")))
        assert context_terms(_last_terms(archive.conn, row, start, end, CONTEXT_TERMS)) == expected
        tails += end - start > CONTEXT_TAIL_BYTES
    assert tails >= 10  # the tail-only path was taken, not just the whole-message one


def test_the_next_documents_context_comes_from_the_last_one_indexed_and_never_from_a_rolled_back_one(db_path):
    """Indexing a session's next document reuses the context its previous one gave (no second
    read and tokenizing); a document whose admission rolled back gave up its row, another process
    admitted another document into it, and the rolled-back one's context never reaches that
    document's successor."""
    import apsw
    import pytest

    from cwa.errors import CwaError
    from cwa.index.lexical import ClosingContexts, LexicalHandler, context_terms, previous_context
    from cwa.index.terms import terms

    seen: dict[str, list[str]] = {}

    class Recorder:  # what the lexical handler gave the document's first window as context
        name = "recorder"

        def index(self, conn, target):
            first = target.document.messages[0]
            text = target.document.text[first.text_start : first.end].decode("utf-8")
            seen[text] = list(target.prepared["lexical"].windows[0].columns["context"])
            if "BREAK" in text:  # the storage fails after indexing: the whole admission rolls back
                raise apsw.FullError("the imagined disk is full")
            return HandlerResult("complete")

    # the second and third are as long: only their bytes tell them apart
    texts = ["first about zebra quagga", "BREAK about walrus!", "third about narwhal", "fourth about okapi"]
    lexical = LexicalHandler()
    with Archive.open(db_path, handlers=[lexical, Recorder()]) as archive:
        archive.admit(turn(texts[0]))
        with pytest.raises(CwaError):
            archive.admit(turn(texts[1]))
        with Archive.open(db_path) as other:  # another process, with its own handlers, takes the row
            other.admit(turn(texts[2]))
        fourth = archive.admit(turn(texts[3]))["documentId"]
        rows = [r for (r,) in archive.conn.execute("SELECT id FROM documents ORDER BY id")]
        assert rows == [1, 2, 3]  # the third took the row the rolled-back second had
        assert seen[texts[3]] == context_terms(terms(f"answer to: {texts[2]}"))
        assert all(not t.endswith("walrus") for t in seen[texts[3]])
        fourth_row = archive.conn.execute("SELECT id FROM documents WHERE document_id = ?", (fourth,)).fetchone()[0]
        # the same context as reading the previous message again
        assert previous_context(archive.conn, "turn", fourth_row, ClosingContexts()) == seen[texts[3]]
        # and the fourth's context for the next one is kept, under its own bytes
        last = archive.conn.execute(
            "SELECT g.text_digest, m.text_start, m.end_byte FROM document_digests AS g JOIN messages AS m"
            " ON m.document_row = g.document_row WHERE g.document_row = ? ORDER BY m.ordinal DESC LIMIT 1",
            (fourth_row,),
        ).fetchone()
        assert lexical.closing.get(fourth_row, *last) == context_terms(terms(f"answer to: {texts[3]}"))


def test_a_rebuild_with_a_helper_process_writes_what_one_without_it_writes(tmp_path, monkeypatch):
    # `cwa index rebuild` lets a helper process read and prepare each document while it writes;
    # on two copies of one archive, a rebuild with the helper and one without it (too few
    # documents for it) leave the same derived rows, window ids included.
    import shutil

    from cwa.index import prepare_helper, queue_worker

    first, second = tmp_path / "first.db", tmp_path / "second.db"
    documents = queue_worker.HELPER_MIN_DOCUMENTS + 8
    with Archive.open(first) as archive:
        for n in range(documents):
            text = f"RetryPolicy in src/shard_{n % 5}/ledger_{n}.py failed with LedgerError {n}: see `make lint`"
            archive.admit(turn(text, session=f"s{n % 3}"))
    shutil.copy(first, second)
    answered = []
    receive = prepare_helper.Helper.receive

    def counted(self):
        found = receive(self)
        answered.extend(found)
        return found

    monkeypatch.setattr(prepare_helper.Helper, "receive", counted)
    with Archive.open(first) as archive:
        assert archive.call("index-rebuild", {})["documents"] == documents  # with the helper
    assert len(answered) == documents  # every document prepared by the helper process
    monkeypatch.setattr(queue_worker, "HELPER_MIN_DOCUMENTS", documents + 1)
    with Archive.open(second) as archive:
        assert archive.call("index-rebuild", {})["documents"] == documents  # alone
    rebuilt = derived_rows(first)
    assert rebuilt == derived_rows(second)
    assert rebuilt["windows"] and rebuilt["fts"] and rebuilt["postings"]  # there are rows to compare


def test_a_rebuild_keeps_every_anchor_text_its_documents_share(tmp_path):
    # A rebuild drops and indexes again each document of a transaction while the transaction's
    # FTS5 rows wait for its end; dropping one document must not take from the dictionary a text
    # that a document indexed earlier in the same transaction names again.
    from cwa.store.anchor_lists import text_ids

    with Archive.open(tmp_path / "archive.db") as archive:
        ids = [
            archive.admit(turn(f"E_SHARED_42 again in src/shared_{n % 2}.py, note {n}", session=f"s{n}"))["documentId"]
            for n in range(6)
        ]
        assert archive.call("index-rebuild", {})["documents"] == 6
        conn = archive.conn
        named = {text_id for (packed,) in conn.execute("SELECT packed FROM anchors") for text_id in text_ids(packed)}
        stored = {text_id for (text_id,) in conn.execute("SELECT id FROM anchor_texts")}
        assert named and named <= stored  # every text a list names is in the dictionary
        found = archive.search({"project": "/work/p", "query": "E_SHARED_42", "limit": 10})["results"]
        assert {hit["documentId"] for hit in found if hit["matchType"].startswith("exact")} == set(ids)
        found = archive.search({"project": "/work/p", "query": "src/shared_1.py", "limit": 10})["results"]
        assert {hit["documentId"] for hit in found if hit["matchType"].startswith("exact")} == set(ids[1::2])


def test_a_rebuild_marks_the_documents_each_of_its_transactions_indexed(tmp_path, monkeypatch):
    # A rebuild spans many short transactions; each marks the documents it indexed with the
    # rebuild's generation before it commits (in one statement), so what a rebuild killed midway
    # has done is said by the documents themselves, and at the end every one carries it.
    from cwa.index import rebuild

    monkeypatch.setattr(rebuild, "FIRST_BATCH", 2)
    monkeypatch.setattr(rebuild, "MAX_BATCH", 3)  # at least four transactions for ten documents
    with Archive.open(tmp_path / "archive.db") as archive:
        ids = [archive.admit(turn(f"note {n} on src/mod_{n}.py", session=f"s{n % 2}"))["documentId"] for n in range(10)]
        earlier = max(archive.get({"documentId": i})["generation"] for i in ids)
        conn = archive.conn
        marked_after_each = []

        def progress(done, total):  # after each transaction's commit
            newest = conn.execute("SELECT max(id) FROM index_generations").fetchone()[0]
            marked = conn.execute("SELECT count(*) FROM documents WHERE index_generation = ?", (newest,))
            marked_after_each.append((done, marked.fetchone()[0]))

        result = rebuild.rebuild_indexes(conn, archive.handlers, archive.clock(), progress)
        assert result["documents"] == 10 and result["generation"] > earlier
        assert len(marked_after_each) >= 4 and all(done == marked for done, marked in marked_after_each)
        assert {archive.get({"documentId": i})["generation"] for i in ids} == {result["generation"]}
        finished = "SELECT finished_at IS NOT NULL FROM index_generations WHERE id = ?"
        assert conn.execute(finished, (result["generation"],)).fetchone()[0] == 1

"""Canonical admission and derived indexing have separate success boundaries: a handler that
gives up, runs out of budget or fails never costs the document, and its outcome is recorded."""

from __future__ import annotations

from dataclasses import dataclass

from conftest import turn

from cwa.api import Archive
from cwa.store.derived import HandlerResult, IndexTarget


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
        details = dict(conn.execute("SELECT handler, detail FROM index_status").fetchall())
        assert "RuntimeError" in details["broken"]
        assert details["budgeted"] == "budget of 2 words reached"
        doc = archive.get({"documentId": result["documentId"]})
        assert doc["indexOutcomes"] == result["indexOutcomes"]
        assert doc["generation"] == result["generation"]

        again = archive.admit(turn("one two three four five"))
        assert again["created"] is False and again["indexOutcomes"] == result["indexOutcomes"]


def test_each_admission_gets_its_own_generation(archive):
    first = archive.admit(turn("a"))
    second = archive.admit(turn("b"))
    assert second["generation"] > first["generation"]
    assert first["indexOutcomes"] == {
        "exact": "complete",
        "lexical": "complete",
        "structural": "complete",
        "semantic": "complete",
    }


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

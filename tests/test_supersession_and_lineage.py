"""Subject keys, explicit supersession at admission, and recorded session lineage."""

from __future__ import annotations

import pytest
from conftest import turn

from cwa.errors import Conflict, NotFound


def test_subject_key_replacement_becomes_the_next_version(archive):
    first = archive.admit(turn("use sleep(1)", subjectKey="retry-policy", createdAt="2026-11-01T00:00:00Z"))
    with pytest.raises(Conflict) as caught:
        archive.admit(turn("use backoff", subjectKey="retry-policy", createdAt="2026-11-02T00:00:00Z"))
    assert caught.value.details["documentId"] == first["documentId"]

    second = archive.admit(
        turn(
            "use backoff",
            subjectKey="retry-policy",
            createdAt="2026-11-02T00:00:00Z",
            supersedes={"documentId": first["documentId"], "version": 1},
        )
    )
    assert second["documentId"] == first["documentId"] and second["version"] == 2
    old = archive.get({"documentId": first["documentId"], "version": 1})
    new = archive.get({"documentId": first["documentId"]})
    assert old["state"] == "superseded" and new["state"] == "live" and new["version"] == 2
    assert new["supersedes"] == {"documentId": first["documentId"], "version": 1}
    assert old["supersededBy"] == {"documentId": first["documentId"], "version": 2}
    assert new["supersededBy"] is None
    live = archive.conn.execute("SELECT count(*) FROM live_documents WHERE subject_key = 'retry-policy'").fetchone()
    assert live == (1,)


def test_supersession_rules(archive):
    old = archive.admit(turn("old", createdAt="2026-11-01T00:00:00Z"))
    ref = {"documentId": old["documentId"], "version": 1}
    with pytest.raises(Conflict, match="older"):
        archive.admit(turn("from the past", createdAt="2026-10-01T00:00:00Z", supersedes=ref))
    with pytest.raises(NotFound) as other:  # another project's document: as if it did not exist
        archive.admit(turn("elsewhere", project="/other", createdAt="2026-11-03T00:00:00Z", supersedes=ref))
    with pytest.raises(NotFound) as unknown:
        archive.admit(
            turn(
                "elsewhere",
                project="/other",
                createdAt="2026-11-03T00:00:00Z",
                supersedes={"documentId": "doc-unknown", "version": 1},
            )
        )
    assert other.value.message.replace(old["documentId"], "X") == unknown.value.message.replace("doc-unknown", "X")
    with pytest.raises(NotFound):
        archive.admit(turn("x", supersedes={"documentId": old["documentId"], "version": 9}))
    replacement = archive.admit(turn("new", createdAt="2026-11-02T00:00:00Z", supersedes=ref))
    assert replacement["documentId"] != old["documentId"] and replacement["version"] == 1
    with pytest.raises(Conflict, match="not live"):
        archive.admit(turn("again", createdAt="2026-11-04T00:00:00Z", supersedes=ref))


def test_parent_lineage_is_recorded_once(archive):
    archive.admit(turn("child turn", session="child", parentSessionId="parent"))
    archive.admit(turn("parent turn", session="parent"))
    archive.admit(turn("later child turn", session="child"))  # no parent named: keeps the record
    rows = dict(archive.conn.execute("SELECT session_id, parent_session_id FROM session_lineage").fetchall())
    assert rows == {"child": "parent", "parent": None}
    with pytest.raises(Conflict) as caught:
        archive.admit(turn("re-parent", session="child", parentSessionId="someone-else"))
    assert caught.value.details["reason"] == "lineage-mismatch"
    with pytest.raises(Conflict) as caught:
        archive.admit(turn("cycle", session="parent", parentSessionId="child"))
    assert caught.value.details["reason"] == "lineage-cycle"
    # the failed admissions left nothing behind
    assert archive.conn.execute("SELECT count(*) FROM sessions").fetchone() == (2,)
    assert archive.conn.execute("SELECT count(*) FROM documents").fetchone() == (3,)

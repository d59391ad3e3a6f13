"""Admission is idempotent: the same input returns the same ids and writes nothing."""

from __future__ import annotations

from conftest import row_counts, turn

from cwa.api import Archive


def test_same_admission_twice_returns_same_ids_and_writes_nothing(db_path):
    request = turn("where is ERR_LOCK_TIMEOUT raised?", metadata={"source": "pi", "n": 1})
    with Archive.open(db_path) as archive:
        first = archive.admit(request)
    counts_before = row_counts(db_path)
    file_before = db_path.read_bytes()
    wal_before = db_path.with_name(db_path.name + "-wal").read_bytes()
    with Archive.open(db_path) as archive:
        second = archive.admit(request)
        third = archive.admit(dict(reversed(list(request.items()))))  # key order is irrelevant
    assert first["created"] is True
    assert second["created"] is False and third["created"] is False
    for repeat in (second, third):
        assert repeat["documentId"] == first["documentId"]
        assert repeat["version"] == first["version"]
        assert repeat["generation"] == first["generation"]
        assert repeat["messageKeys"] == first["messageKeys"]
    assert row_counts(db_path) == counts_before
    assert db_path.read_bytes() == file_before
    assert db_path.with_name(db_path.name + "-wal").read_bytes() == wal_before


def test_defaulted_created_at_does_not_break_idempotency(db_path):
    ticks = iter(["2026-11-01T00:00:00.000Z", "2026-11-05T00:00:00.000Z"])
    with Archive.open(db_path, clock=lambda: next(ticks)) as archive:
        first = archive.admit(turn("retry"))
        second = archive.admit(turn("retry"))
        stored = archive.get({"documentId": first["documentId"]})
    assert second["created"] is False and second["documentId"] == first["documentId"]
    assert stored["createdAt"] == "2026-11-01T00:00:00.000Z"


def test_different_content_or_explicit_time_is_a_different_document(archive):
    base = archive.admit(turn("a", createdAt="2026-11-01T10:00:00Z"))
    other_time = archive.admit(turn("a", createdAt="2026-11-02T10:00:00Z"))
    other_text = archive.admit(turn("b", createdAt="2026-11-01T10:00:00Z"))
    other_session = archive.admit(turn("a", session="s2", createdAt="2026-11-01T10:00:00Z"))
    ids = {r["documentId"] for r in (base, other_time, other_text, other_session)}
    assert len(ids) == 4


def test_equivalent_timestamps_normalize_to_one_document(archive):
    first = archive.admit(turn("t", createdAt="2026-11-01T10:00:00+00:00"))
    same = archive.admit(turn("t", createdAt="2026-11-01T11:00:00+01:00"))
    millis = archive.admit(turn("t", createdAt=1793527200000))
    assert same["created"] is False and millis["created"] is False
    assert same["documentId"] == first["documentId"] == millis["documentId"]

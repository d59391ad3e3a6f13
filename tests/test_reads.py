"""Direct reads: inline answers for small sources, manifests for large ones, byte ranges that
touch only the chunks they need, and not-found for unknown ids."""

from __future__ import annotations

import apsw
import blake3
import pytest
from conftest import turn

from cwa.api import Archive
from cwa.errors import InvalidRequest, LimitExceeded, NotFound
from cwa.limits import GET_MANIFEST_CHUNKS, GET_MANIFEST_MESSAGES, MIB


def _big_tool_output(lines: int) -> str:
    return "".join(f"{n:07d} src/module_{n % 97}.py:{n % 400} OK ✓ résultat\n" for n in range(lines))


def test_large_document_answers_with_manifest_only(archive):
    messages = [{"role": "toolResult", "toolName": "bash", "text": _big_tool_output(40_000)}]
    messages += [{"role": "assistant", "text": f"note {n}"} for n in range(30)]
    admitted = archive.admit({"project": "/p", "sessionId": "s", "kind": "tool-result", "messages": messages})
    doc = archive.get({"documentId": admitted["documentId"]})
    assert doc["byteLength"] > MIB
    assert doc["complete"] is False
    assert "text" not in doc
    assert len(doc["messages"]) == GET_MANIFEST_MESSAGES
    assert doc["manifest"]["messageCount"] == 31
    assert doc["manifest"]["chunkCount"] == len(
        archive.conn.execute(
            "SELECT 1 FROM document_chunks dc JOIN documents d ON d.id = dc.document_row WHERE d.document_id = ?",
            (admitted["documentId"],),
        ).fetchall()
    )
    assert len(doc["manifest"]["chunks"]) <= GET_MANIFEST_CHUNKS


def test_manifest_lists_at_most_256_chunk_occurrences(archive):
    # ~7 MiB of newline-free text: ~112 chunks of 64 KiB is under the cap, so use short lines
    # making 16 KiB chunks: 7 MiB / 16 KiB ≈ 450 chunks.
    text = ("y" * 99 + "\n") * (7 * MIB // 100)
    admitted = archive.admit(
        {"project": "/p", "sessionId": "s", "kind": "tool-result", "messages": [{"role": "toolResult", "text": text}]}
    )
    doc = archive.get({"documentId": admitted["documentId"]})
    assert doc["manifest"]["chunkCount"] > GET_MANIFEST_CHUNKS
    assert len(doc["manifest"]["chunks"]) == GET_MANIFEST_CHUNKS


def test_byte_range_read_touches_only_intersecting_chunks(db_path):
    text = _big_tool_output(60_000)
    with Archive.open(db_path) as archive:
        admitted = archive.admit(
            {
                "project": "/p",
                "sessionId": "s",
                "kind": "tool-result",
                "messages": [{"key": "t", "role": "toolResult", "text": text}],
            }
        )
        doc = archive.get({"documentId": admitted["documentId"]})
        chunks = doc["manifest"]["chunks"] if doc["complete"] else None
    raw = apsw.Connection(str(db_path))
    row = raw.execute("SELECT id FROM documents WHERE document_id = ?", (admitted["documentId"],)).fetchone()[0]
    spans = raw.execute(
        "SELECT ordinal, chunk_id, start_byte, end_byte FROM document_chunks WHERE document_row = ? ORDER BY ordinal",
        (row,),
    ).fetchall()
    assert chunks is None and len(spans) > 10
    middle = spans[len(spans) // 2]
    start, end = middle[2] + 10, middle[3] + 10  # straddles this chunk and the next
    keep = {middle[1], spans[len(spans) // 2 + 1][1]}
    # Destroy every other chunk's payload: a read that touched one would return garbage.
    raw.execute("UPDATE chunks SET data = zeroblob(byte_length) WHERE id NOT IN (?, ?)", tuple(keep))
    raw.close()

    with Archive.open(db_path) as archive:
        piece = archive.get({"documentId": admitted["documentId"], "range": {"start": start, "end": end}})
    expected = ((b"[toolResult]\n") + text.encode())[start:end].decode()
    assert piece["text"] == expected
    assert piece["chunksRead"] == 2
    assert piece["range"] == {"start": start, "end": end}


def test_range_boundaries_inside_a_character_widen_to_whole_characters(archive):
    admitted = archive.admit(
        {"project": "/p", "sessionId": "s", "kind": "turn", "messages": [{"role": "user", "text": "ab漢字cd"}]}
    )
    header = len("[user]\n")
    piece = archive.get(
        {"documentId": admitted["documentId"], "range": {"start": header + 3, "end": header + 6}}
    )  # inside 漢 .. inside 字
    assert piece["text"] == "漢字"
    assert piece["range"] == {"start": header + 2, "end": header + 8}


def test_range_errors(archive):
    doc_id = archive.admit(turn("short"))["documentId"]
    with pytest.raises(InvalidRequest):
        archive.get({"documentId": doc_id, "range": {"start": 5, "end": 2}})
    with pytest.raises(InvalidRequest):
        archive.get({"documentId": doc_id, "range": {"start": 0, "end": 10_000}})
    big = archive.admit(
        {
            "project": "/p",
            "sessionId": "s",
            "kind": "tool-result",
            "messages": [{"role": "toolResult", "text": "z" * (2 * MIB)}],
        }
    )["documentId"]
    with pytest.raises(LimitExceeded):
        archive.get({"documentId": big, "range": {"start": 0, "end": MIB + 1}})


def test_unknown_document_and_version_are_not_found(archive):
    doc_id = archive.admit(turn())["documentId"]
    with pytest.raises(NotFound):
        archive.get({"documentId": "doc-does-not-exist"})
    with pytest.raises(NotFound):
        archive.get({"documentId": doc_id, "version": 2})
    assert archive.get({"documentId": doc_id, "version": 1})["version"] == 1


def test_small_document_answer_is_complete(archive):
    admitted = archive.admit(turn("question?", metadata={"tool": "pi", "nested": {"a": [1, 2]}}, parentSessionId="s0"))
    doc = archive.get({"documentId": admitted["documentId"]})
    assert doc["complete"] is True
    assert doc["text"] == "[user]\nquestion?\n\n[assistant]\nanswer to: question?"
    assert doc["metadata"] == {"tool": "pi", "nested": {"a": [1, 2]}}
    assert doc["parentSessionId"] == "s0"
    assert doc["sourceKeys"] == {"first": admitted["messageKeys"][0], "last": admitted["messageKeys"][1], "count": 2}
    assert [m["role"] for m in doc["messages"]] == ["user", "assistant"]
    assert doc["retentionClass"] == "conversation" and doc["state"] == "live"


def test_a_one_chunk_document_s_digest_is_its_chunk_s_hash_stored_once(archive):
    # a document of one chunk stores x'' for its text digest (its chunk's hash is the same blake3
    # of the same bytes); a longer one its digest; every reader gives the whole text's digest
    short = archive.admit(turn("the backup failed: disk full"))
    output = [{"role": "toolResult", "text": _big_tool_output(3_000)}]
    long = archive.admit({"project": "/p", "sessionId": "s", "kind": "tool-result", "messages": output})
    conn = archive.conn
    for admitted, one_chunk in ((short, True), (long, False)):
        row, stored = conn.execute(
            "SELECT id, text_digest FROM documents WHERE document_id = ?", (admitted["documentId"],)
        ).fetchone()
        chunks = conn.execute("SELECT count(*) FROM document_chunks WHERE document_row = ?", (row,)).fetchone()[0]
        text = conn.execute(
            "SELECT text FROM document_texts WHERE document_id = ?", (admitted["documentId"],)
        ).fetchone()[0]
        whole = blake3.blake3(text.encode()).hexdigest()
        assert (chunks == 1) is one_chunk
        assert stored == (b"" if one_chunk else bytes.fromhex(whole))
        assert archive.get({"documentId": admitted["documentId"]})["textDigest"] == whole
        overview = "SELECT text_digest FROM document_overview WHERE document_row = ?"
        assert conn.execute(overview, (row,)).fetchone()[0] == whole
        digests = "SELECT lower(hex(text_digest)) FROM document_digests WHERE document_row = ?"
        assert conn.execute(digests, (row,)).fetchone()[0] == whole

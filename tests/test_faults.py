"""SIGKILL at random points of admission, checkpoint, maintenance (with vacuum) and index rebuild:
after each kill the archive passes its integrity check, every acknowledged document is there
with its exact bytes, no partial checkpoint is usable, and a retry gives the same ids.
30 kills in all (eval/reliability/soak.py runs the same cycles for longer)."""

from __future__ import annotations

import random

import fault_workers as workers
import pytest
from conftest import hermetic_env

ADMISSION_KILLS, CHECKPOINT_KILLS, MAINTENANCE_KILLS, REBUILD_KILLS = 10, 8, 8, 8


@pytest.fixture
def env(tmp_path):
    return hermetic_env(tmp_path, tmp_path / "archive.db") | workers.QUIET


def test_sigkill_during_admission_loses_nothing_acknowledged_and_retries_give_the_same_ids(tmp_path, env):
    found = workers.admission_kills(tmp_path, env, ADMISSION_KILLS, random.Random(11))
    assert found["kills"] == ADMISSION_KILLS and found["acknowledged"] >= 20
    assert found["integrity"] == "ok" and found["missing"] == found["wrong"] == 0
    assert found["retryMismatches"] == 0  # a retried request: the same id, nothing new


def test_sigkill_during_a_checkpoint_never_leaves_a_usable_partial_and_the_retry_completes(tmp_path, env):
    found = workers.checkpoint_kills(tmp_path, env, CHECKPOINT_KILLS, random.Random(12))
    assert found["kills"] >= CHECKPOINT_KILLS // 2 and found["integrity"] == "ok"
    assert found["partialVisible"] == 0  # no part searchable without its root
    assert found["retryMismatches"] == 0 and found["incomplete"] == 0


def test_sigkill_during_maintenance_and_vacuum_keeps_the_archive_whole(tmp_path, env):
    found = workers.maintenance_kills(tmp_path, env, MAINTENANCE_KILLS, random.Random(13))
    assert found["kills"] >= MAINTENANCE_KILLS // 2 and found["damaged"] == []
    assert found["finalExit"] == 0 and found["purgeQueued"] == 0 and found["redactedFound"] == 0


def test_sigkill_during_index_rebuild_leaves_search_working_and_a_rerun_gives_the_same_results(tmp_path, env):
    found = workers.rebuild_kills(tmp_path, env, REBUILD_KILLS, random.Random(14))
    assert found["kills"] == REBUILD_KILLS and found["integrityFailures"] == 0
    assert found["searchesFindingNothing"] == 0  # mid-rebuild, every document is still findable
    assert found["rerunExit"] == 0 and found["sameResultsAfterRerun"] is True
    # a killed rebuild leaves FTS5's merges of deleted rows held, a complete one gives them back
    assert found["mergesHeldAfterKills"] is True and found["mergesHeldAfterRerun"] is False

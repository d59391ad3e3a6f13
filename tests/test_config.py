"""Settings: exact defaults, each precedence step, zero-day retention, invalid values, the alias,
trust of project files, and user-global-only keys."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from conftest import DISK_GUARD_OFF, hermetic_env, run_cwa

from cwa.config import SETTINGS, env_name, load_settings

EXPECTED_DEFAULTS = {
    "ephemeralRetentionDays": 14,
    "conversationRetentionDays": 90,
    "derivedRetentionDays": 30,
    "ephemeralAutoRetrievalDays": 7,
    "conversationAutoRetrievalDays": 30,
    "derivedAutoRetrievalDays": 30,
    "maxInlineUserTokens": 16000,
    "rotationContextRatio": 0.65,
    "rotationTurns": 20,
    "retainTurns": 5,
    "maxToolResultTokens": 4000,
    "toolResultBudgetRatio": 0.30,
    "toolResultBudgetFloorTokens": 1000,
    "dedupToolResults": True,
    "hintBudgetTokens": 160,
    "activeHintBudgetTokens": 640,
    "hintSourceCooldownHours": 24,
    "semanticRetrieval": True,
    "rerankerEnabled": True,
    "rerankerCandidates": 40,
    "rerankerPath": "",
    "ranker": "learned",
    "rankerPath": "",
    "neighborCredit": 0.0,
    "diskCriticalMebibytes": 2048,
    "searchResults": 3,
    "maxReadScope": "project",
    "trustedProjects": [],
}


@pytest.fixture
def home(tmp_path) -> dict:
    env = {k: v for k, v in hermetic_env(tmp_path).items() if k not in DISK_GUARD_OFF}  # exact defaults
    return {
        "env": env,
        "user": Path(env["XDG_CONFIG_HOME"]) / "cwa" / "config.json",
        "pi_user": Path(env["PI_CODING_AGENT_DIR"]) / "settings.json",
        "project": tmp_path / "repo",
    }


def write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)


def test_defaults_are_exact(home):
    settings = load_settings(home["project"], env=home["env"])
    assert settings.values == EXPECTED_DEFAULTS
    assert set(settings.origins.values()) == {"default"}
    assert settings.retention_days("ephemeral") == 14
    assert settings.retention_days("conversation") == 90
    assert settings.retention_days("derived") == 30
    assert settings.retention_days("durable") is None


def test_each_precedence_step_overrides_the_one_below(home):
    project = home["project"]
    write(
        home["user"],
        {
            "searchResults": 4,
            "hintBudgetTokens": 100,
            "trustedProjects": [str(project)],
            "conversationRetentionDays": 60,
            "derivedRetentionDays": 10,
            "hintSourceCooldownHours": 2,
        },
    )
    write(
        home["pi_user"],
        {
            "cwa": {
                "searchResults": 5,
                "hintBudgetTokens": 110,
                "conversationRetentionDays": 61,
                "derivedRetentionDays": 11,
            },
            "theme": "dark",
        },
    )
    write(project / ".cwa.json", {"searchResults": 6, "hintBudgetTokens": 120, "conversationRetentionDays": 62})
    write(project / ".pi" / "settings.json", {"cwa": {"searchResults": 7, "hintBudgetTokens": 130}})
    env = {**home["env"], "CWA_SEARCH_RESULTS": "8"}

    settings = load_settings(project, env=env)
    assert settings.trusted_project is True
    assert (settings["searchResults"], settings.origins["searchResults"]) == (8, "environment")
    assert (settings["hintBudgetTokens"], settings.origins["hintBudgetTokens"]) == (130, "pi-project")
    assert (settings["conversationRetentionDays"], settings.origins["conversationRetentionDays"]) == (62, "project")
    assert (settings["derivedRetentionDays"], settings.origins["derivedRetentionDays"]) == (11, "pi-user")
    assert (settings["hintSourceCooldownHours"], settings.origins["hintSourceCooldownHours"]) == (2, "user-global")
    assert (settings["ephemeralRetentionDays"], settings.origins["ephemeralRetentionDays"]) == (14, "default")


def test_untrusted_project_files_are_not_read(home):
    project = home["project"]
    write(project / ".cwa.json", {"searchResults": 9})
    write(project / ".pi" / "settings.json", {"cwa": {"hintBudgetTokens": 1}})
    settings = load_settings(project, env=home["env"])
    assert settings.trusted_project is False
    assert settings["searchResults"] == 3 and settings["hintBudgetTokens"] == 160
    assert {s.name: s.status for s in settings.sources}["project"] == "untrusted"


def test_trust_covers_subfolders_and_resolves_symlinks(home, tmp_path):
    project = home["project"]
    (project / "sub").mkdir(parents=True)
    link = tmp_path / "link-to-repo"
    link.symlink_to(project)
    write(home["user"], {"trustedProjects": [str(link)]})
    write(project / "sub" / ".cwa.json", {"searchResults": 10})
    settings = load_settings(project / "sub", env=home["env"])
    assert settings.trusted_project is True and settings["searchResults"] == 10


def test_zero_day_retention_disables_expiry_for_that_class_only(home):
    write(home["user"], {"ephemeralRetentionDays": 0})
    settings = load_settings(None, env=home["env"])
    assert settings["ephemeralRetentionDays"] == 0
    assert settings.retention_days("ephemeral") is None
    assert settings.retention_days("conversation") == 90


@pytest.mark.parametrize(
    "bad",
    [-1, "14", 14.5, True, None, 99_999_999, [14]],
    ids=["negative", "string", "float", "boolean", "null", "out-of-range", "list"],
)
def test_invalid_value_falls_through_to_the_next_valid_source(home, bad):
    project = home["project"]
    write(home["user"], {"ephemeralRetentionDays": 21, "trustedProjects": [str(project)]})
    write(project / ".cwa.json", {"ephemeralRetentionDays": bad})
    settings = load_settings(project, env=home["env"])
    assert settings["ephemeralRetentionDays"] == 21
    assert settings.origins["ephemeralRetentionDays"] == "user-global"
    assert [(r.key, r.source) for r in settings.rejections] == [("ephemeralRetentionDays", "project")]


def test_invalid_environment_value_falls_through(home):
    write(home["user"], {"hintSourceCooldownHours": 5})
    env = {**home["env"], "CWA_HINT_SOURCE_COOLDOWN_HOURS": "-2", "CWA_SEMANTIC_RETRIEVAL": "maybe"}
    settings = load_settings(None, env=env)
    assert settings["hintSourceCooldownHours"] == 5
    assert settings["semanticRetrieval"] is True
    assert {(r.key, r.source) for r in settings.rejections} == {
        ("hintSourceCooldownHours", "environment"),
        ("semanticRetrieval", "environment"),
    }


def test_environment_booleans_and_names(home):
    env = {**home["env"], "CWA_RERANKER_ENABLED": "false", "CWA_CONVERSATION_RETENTION_DAYS": "0"}
    settings = load_settings(None, env=env)
    assert settings["rerankerEnabled"] is False
    assert settings["conversationRetentionDays"] == 0
    assert env_name("conversationRetentionDays") == "CWA_CONVERSATION_RETENTION_DAYS"
    assert {env_name(s.key) for s in SETTINGS} >= {"CWA_MAX_READ_SCOPE", "CWA_HINT_BUDGET_TOKENS"}


# Every key's environment form: a valid non-default value as text, what it must resolve to, and
# text of the wrong type that must be rejected (the next source then applies).
ENVIRONMENT_FORMS = {
    "ephemeralRetentionDays": ("21", 21, "2.5"),
    "conversationRetentionDays": ("0", 0, "ninety"),
    "derivedRetentionDays": ("+45", 45, "1e2"),
    "ephemeralAutoRetrievalDays": ("3", 3, "3 days"),
    "conversationAutoRetrievalDays": ("60", 60, "-1"),
    "derivedAutoRetrievalDays": ("10", 10, ""),
    "diskCriticalMebibytes": ("0", 0, "off"),
    "maxInlineUserTokens": ("20000", 20000, "20000.0"),
    "rotationContextRatio": ("0.5", 0.5, "0.99"),
    "rotationTurns": ("30", 30, "0"),
    "retainTurns": ("3", 3, "three"),
    "maxToolResultTokens": ("8000", 8000, "100"),
    "toolResultBudgetRatio": ("0.2", 0.2, "-0.1"),
    "toolResultBudgetFloorTokens": ("2000", 2000, "1.5"),
    "dedupToolResults": ("no", False, "sometimes"),
    "hintBudgetTokens": ("90", 90, "4001"),
    "activeHintBudgetTokens": ("320", 320, "lots"),
    "hintSourceCooldownHours": ("0", 0, "-2"),
    "semanticRetrieval": ("off", False, "maybe"),
    "rerankerEnabled": ("0", False, "2"),
    "rerankerCandidates": ("12", 12, "0"),
    "rerankerPath": ("/opt/models/reranker", "/opt/models/reranker", "relative/path"),
    "ranker": ("fused", "fused", "linear"),
    "rankerPath": ("/opt/cwa/ranker.json", "/opt/cwa/ranker.json", "ranker.json"),
    "neighborCredit": ("0.5", 0.5, "1.5"),
    "searchResults": ("7", 7, "seven"),
    "maxReadScope": ("session", "session", "everything"),
    "trustedProjects": ('["/srv/a", "/srv/b"]', ["/srv/a", "/srv/b"], "/srv/a"),
}
USER_GLOBAL_ONLY = {s.key for s in SETTINGS if s.user_global_only}


def test_every_key_has_an_environment_form_that_parses_as_its_type(home):
    assert set(ENVIRONMENT_FORMS) == {s.key for s in SETTINGS}
    for key, (text, expected, wrong) in ENVIRONMENT_FORMS.items():
        settings = load_settings(None, env={**home["env"], env_name(key): text})
        if key in USER_GLOBAL_ONLY:  # read, typed, and refused for its source
            assert settings[key] == EXPECTED_DEFAULTS[key]
            assert [(r.key, r.value, r.reason) for r in settings.rejections] == [
                (key, expected, "honoured only from the user-global config")
            ]
            continue
        assert (settings[key], settings.origins[key]) == (expected, "environment"), key
        assert type(settings[key]) is type(EXPECTED_DEFAULTS[key]) and not settings.rejections, key
        refused = load_settings(None, env={**home["env"], env_name(key): wrong})
        assert (refused[key], refused.origins[key]) == (EXPECTED_DEFAULTS[key], "default"), key
        assert [(r.key, r.source) for r in refused.rejections] == [(key, "environment")], key


def test_alias_is_honoured_and_the_preferred_name_wins_at_one_level(home):
    write(home["user"], {"epochHintBudgetTokens": 300})
    settings = load_settings(None, env=home["env"])
    assert settings["activeHintBudgetTokens"] == 300
    assert "epochHintBudgetTokens" not in settings.values

    write(home["user"], {"epochHintBudgetTokens": 300, "activeHintBudgetTokens": 500})
    assert load_settings(None, env=home["env"])["activeHintBudgetTokens"] == 500

    write(home["pi_user"], {"cwa": {"epochHintBudgetTokens": 200}})  # alias at a higher level
    assert load_settings(None, env=home["env"])["activeHintBudgetTokens"] == 200

    env = {**home["env"], "CWA_EPOCH_HINT_BUDGET_TOKENS": "100", "CWA_ACTIVE_HINT_BUDGET_TOKENS": "150"}
    assert load_settings(None, env=env)["activeHintBudgetTokens"] == 150


def test_max_read_scope_is_read_only_from_the_user_global_config(home):
    project = home["project"]
    write(home["user"], {"trustedProjects": [str(project)]})
    write(home["pi_user"], {"cwa": {"maxReadScope": "all"}})
    write(project / ".cwa.json", {"maxReadScope": "all", "trustedProjects": ["/"]})
    env = {**home["env"], "CWA_MAX_READ_SCOPE": "all"}
    settings = load_settings(project, env=env)
    assert settings["maxReadScope"] == "project"
    assert settings["trustedProjects"] == [str(project)]
    rejected = {(r.key, r.source) for r in settings.rejections}
    assert rejected == {
        ("maxReadScope", "pi-user"),
        ("maxReadScope", "project"),
        ("maxReadScope", "environment"),
        ("trustedProjects", "project"),
    }
    write(home["user"], {"maxReadScope": "all"})
    assert load_settings(project, env=home["env"])["maxReadScope"] == "all"


def test_unreadable_file_is_reported_and_ignored(home):
    write(home["user"], "{ not json")
    settings = load_settings(None, env=home["env"])
    assert settings.values == EXPECTED_DEFAULTS
    assert {s.name: s.status for s in settings.sources}["user-global"] == "unreadable"


def test_config_show_sources_reports_rejections(home, tmp_path):
    write(home["user"], {"searchResults": 0, "colour": "blue"})
    home["project"].mkdir()
    completed = run_cwa(["config", "show", "--sources", "--json"], home["env"], cwd=home["project"])
    assert completed.returncode == 0, completed.stderr
    report = orjson.loads(completed.stdout)
    assert report["values"]["searchResults"] == 3
    assert report["rejected"] == [
        {"key": "searchResults", "source": "user-global", "value": 0, "reason": "must be between 1 and 100"}
    ]
    assert report["unknownKeys"] == [{"source": "user-global", "key": "colour"}]
    human = run_cwa(["config", "show", "--sources"], home["env"], cwd=home["project"])
    assert b"rejected values" in human.stdout and b"searchResults = 0 from user-global" in human.stdout


def test_config_trust_edits_the_user_global_file(home):
    home["project"].mkdir()
    write(home["user"], {"searchResults": 4})
    trusted = run_cwa(["config", "trust", "--json"], home["env"], cwd=home["project"])
    assert trusted.returncode == 0, trusted.stderr
    stored = json.loads(home["user"].read_text())
    assert stored == {"searchResults": 4, "trustedProjects": [str(home["project"].resolve())]}
    assert load_settings(home["project"], env=home["env"]).trusted_project is True
    run_cwa(["config", "untrust"], home["env"], cwd=home["project"])
    assert json.loads(home["user"].read_text())["trustedProjects"] == []

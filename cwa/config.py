"""One resolved settings object, from layered sources (docs/configuration.md).

Lowest to highest precedence:
  1. built-in defaults
  2. user-global   $XDG_CONFIG_HOME/cwa/config.json (default ~/.config/cwa/config.json)
  3. Pi user       the "cwa" object of $PI_CODING_AGENT_DIR/settings.json (~/.pi/agent/settings.json)
  4. project       <project>/.cwa.json                       (only for a trusted project)
  5. Pi project    the "cwa" object of <project>/.pi/settings.json (only for a trusted project)
  6. environment   CWA_<KEY_IN_UPPER_SNAKE_CASE>

A value that is invalid (wrong type, negative, out of range) is skipped, and the next valid value
of lower precedence applies; every skipped value is reported. Some keys are honoured only from
the user-global file, so repository content cannot widen its own authorization. A project is
trusted when its real path is, or lies under, a path in the user-global `trustedProjects` list.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cwa import limits
from cwa.errors import InvalidRequest

USER_GLOBAL = "user-global"


def _int_range(low: int, high: int) -> Callable[[Any], Any]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("must be an integer")
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}")
        return value

    return check


def _fraction(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("must be a number")
    if not 0 <= value <= 1:
        raise ValueError("must be between 0 and 1")
    return float(value)


def _ratio(low: float, high: float) -> Callable[[Any], Any]:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("must be a number")
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}")
        return float(value)

    return check


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def _one_of(*choices: str) -> Callable[[Any], Any]:
    def check(value: Any) -> str:
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value

    return check


def _absolute_paths(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("must be a list of paths")
    if not all(os.path.isabs(os.path.expanduser(v)) for v in value):
        raise ValueError("paths must be absolute")
    return list(value)


def _optional_absolute_path(value: Any) -> str:
    if not isinstance(value, str) or (value and not os.path.isabs(os.path.expanduser(value))):
        raise ValueError("must be an absolute path, or empty")
    return value


@dataclass(frozen=True)
class Setting:
    key: str
    default: Any
    check: Callable[[Any], Any]
    help: str
    user_global_only: bool = False
    alias: str | None = None  # a compatibility name; the key itself wins when both are set


DAYS = _int_range(0, 36_500)
MAX_DISK_CRITICAL_MEBIBYTES = 1 << 30  # a pebibyte: more than any disk, still a bounded number

SETTINGS: tuple[Setting, ...] = (
    Setting("ephemeralRetentionDays", 14, DAYS, "storage retention of tool payloads (0 = never expire)"),
    Setting("conversationRetentionDays", 90, DAYS, "storage retention of conversation sources (0 = never expire)"),
    Setting("derivedRetentionDays", 30, DAYS, "storage retention of derived evidence (0 = never expire)"),
    Setting("ephemeralAutoRetrievalDays", 7, DAYS, "age limit for automatic hints from tool payloads (0 = no limit)"),
    Setting(
        "conversationAutoRetrievalDays", 30, DAYS, "age limit for automatic hints from conversation (0 = no limit)"
    ),
    Setting("derivedAutoRetrievalDays", 30, DAYS, "age limit for automatic hints from derived evidence (0 = no limit)"),
    Setting(
        "diskCriticalMebibytes",
        2048,
        _int_range(0, MAX_DISK_CRITICAL_MEBIBYTES),
        "admission fails with disk-low when the archive's file system has less free space (0 = off)",
    ),
    Setting(
        "maxInlineUserTokens", 16_000, _int_range(256, 10_000_000), "larger user input is archived as a checkpoint"
    ),
    Setting(
        "rotationContextRatio",
        0.65,
        _ratio(0.05, 0.95),
        "share of the usable input at which the session engine rotates to a new epoch",
    ),
    Setting("rotationTurns", 20, _int_range(1, 10_000), "user messages in an epoch that make it rotate"),
    Setting("retainTurns", 5, _int_range(1, 1_000), "latest complete interaction groups a rotation keeps"),
    Setting(
        "maxToolResultTokens",
        4_000,
        _int_range(500, 10_000_000),
        "larger tool results are archived and shown as a preview",
    ),
    Setting(
        "toolResultBudgetRatio",
        0.30,
        _fraction,
        "share of the rotation target inline tool results may use before the floor applies",
    ),
    Setting(
        "toolResultBudgetFloorTokens",
        1_000,
        _int_range(500, 10_000_000),
        "once the tool-result budget is used, larger results are archived and shown as a preview",
    ),
    Setting("dedupToolResults", True, _boolean, "an exact repeat of a tool result in the epoch becomes a short marker"),
    Setting(
        "hintBudgetTokens", 160, _int_range(0, limits.MAX_HINT_BUDGET_TOKENS), "token budget of one automatic hint"
    ),
    Setting(
        "activeHintBudgetTokens",
        640,
        _int_range(0, limits.MAX_ACTIVE_HINT_BUDGET_TOKENS),
        "token budget of all hints still in the live context",
        alias="epochHintBudgetTokens",
    ),
    Setting(
        "hintSourceCooldownHours",
        24,
        _int_range(0, limits.MAX_COOLDOWN_HOURS),
        "hours before a revealed source may be hinted again",
    ),
    Setting("semanticRetrieval", True, _boolean, "use local embeddings in explicit search and gather"),
    Setting("rerankerEnabled", True, _boolean, "rerank with a cross-encoder once one is installed"),
    Setting("rerankerCandidates", 40, _int_range(1, 200), "how many fused candidates the reranker scores"),
    Setting(
        "rerankerPath",
        "",
        _optional_absolute_path,
        "folder with a cross-encoder's model.onnx and tokenizer.json (default: the models folder)",
        user_global_only=True,
    ),
    Setting(
        "ranker",
        "learned",
        _one_of("learned", "fused"),
        "order of search's lexical/semantic tier: the learned ranker, or the earlier rank fusion",
    ),
    Setting(
        "rankerPath",
        "",
        _optional_absolute_path,
        "ranker weights to use instead of the shipped ones (eval/retrieval/train_ranker.py writes them)",
        user_global_only=True,
    ),
    Setting(
        "neighborCredit",
        0.0,
        _fraction,
        "share of a search hit's rank credit its session neighbours gain (0 = off; try 0.5 for dialogue)",
    ),
    Setting("searchResults", 3, _int_range(1, limits.MAX_SEARCH_LIMIT), "default number of search results"),
    Setting(
        "maxReadScope",
        "project",
        _one_of("session", "project", "all"),
        "widest search scope a caller may ask for",
        user_global_only=True,
    ),
    Setting(
        "trustedProjects",
        [],
        _absolute_paths,
        "project folders whose .cwa.json and .pi/settings.json are read",
        user_global_only=True,
    ),
)
BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
ALIASES: dict[str, str] = {s.alias: s.key for s in SETTINGS if s.alias}

RETENTION_KEYS = {
    "ephemeral": "ephemeralRetentionDays",
    "conversation": "conversationRetentionDays",
    "derived": "derivedRetentionDays",
}


def _copy(value: Any) -> Any:
    return list(value) if isinstance(value, list) else value


def env_name(key: str) -> str:
    return "CWA_" + re.sub(r"(?<!^)(?=[A-Z])", "_", key).upper()


_BOOLEAN_WORDS = {
    "true": True,
    "yes": True,
    "on": True,
    "1": True,
    "false": False,
    "no": False,
    "off": False,
    "0": False,
}


def parse_env(text: str, setting: Setting) -> Any:
    """An environment value is text: read it as its setting's type (the type of its default).
    Text that does not parse is passed on as it is, so the setting's check rejects and reports it."""
    kind, value = type(setting.default), text.strip()
    try:
        if kind is bool:
            return _BOOLEAN_WORDS.get(value.lower(), text)
        if kind is int:
            return int(value) if re.fullmatch(r"[+-]?[0-9]+", value) else text
        if kind is float:
            return float(value)
        if kind is list:
            return orjson.loads(value)
    except (ValueError, orjson.JSONDecodeError):
        return text
    return text


@dataclass
class SourceReport:
    name: str
    location: str
    status: str  # loaded | missing | unreadable | untrusted | not-an-object
    detail: str | None = None


@dataclass
class Rejection:
    key: str
    source: str
    value: Any
    reason: str


@dataclass
class Settings:
    values: dict[str, Any]
    origins: dict[str, str]
    sources: list[SourceReport] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    unknown_keys: list[tuple[str, str]] = field(default_factory=list)  # (source, key)
    trusted_project: bool = False

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def retention_days(self, retention_class: str) -> int | None:
        """Storage retention in days, or None when the class never expires."""
        key = RETENTION_KEYS.get(retention_class)
        if key is None:  # durable
            return None
        return self.values[key] or None

    def to_json(self, with_sources: bool = False) -> dict[str, Any]:
        result: dict[str, Any] = {
            "values": self.values,
            "origins": self.origins,
        }
        if with_sources:
            result["trustedProject"] = self.trusted_project
            result["sources"] = [vars(s) for s in self.sources]
            result["rejected"] = [vars(r) for r in self.rejections]
            result["unknownKeys"] = [{"source": s, "key": k} for s, k in self.unknown_keys]
        return result


def user_config_path(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", str(Path.home()))) / ".config")
    return Path(base) / "cwa" / "config.json"


def pi_settings_path(env: Mapping[str, str]) -> Path:
    agent_dir = env.get("PI_CODING_AGENT_DIR") or str(Path(env.get("HOME", str(Path.home()))) / ".pi" / "agent")
    return Path(agent_dir).expanduser() / "settings.json"


def _read_object(path: Path, namespace: str | None) -> tuple[dict[str, Any] | None, str, str | None]:
    """(values, status, detail) of a JSON settings file, or of its `namespace` object."""
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None, "missing", None
    except (OSError, orjson.JSONDecodeError) as exc:
        return None, "unreadable", str(exc)
    if namespace is not None:
        if not isinstance(data, dict):
            return None, "not-an-object", None
        if namespace not in data:
            return {}, "loaded", f'no "{namespace}" object'
        data = data[namespace]
    if not isinstance(data, dict):
        return None, "not-an-object", None
    return data, "loaded", None


def working_project() -> Path:
    """The project folder of a command line: the real path of the working directory."""
    return Path(os.path.realpath(os.getcwd()))


def is_trusted(project_dir: Path, trusted: list[str]) -> bool:
    real = Path(os.path.realpath(project_dir))
    for entry in trusted:
        root = Path(os.path.realpath(os.path.expanduser(entry)))
        if real == root or root in real.parents:
            return True
    return False


def load_settings(
    project_dir: Path | str | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve every setting for a project folder (None: user-level sources only)."""
    env = os.environ if env is None else env
    layers: list[tuple[str, dict[str, Any]]] = [("default", {s.key: _copy(s.default) for s in SETTINGS})]
    reports: list[SourceReport] = []

    def add_file(name: str, path: Path, namespace: str | None) -> dict[str, Any]:
        values, status, detail = _read_object(path, namespace)
        location = f"{path}" + (f' ("{namespace}")' if namespace else "")
        reports.append(SourceReport(name, location, status, detail))
        layers.append((name, values or {}))
        return values or {}

    user_values = add_file(USER_GLOBAL, user_config_path(env), None)
    add_file("pi-user", pi_settings_path(env), "cwa")

    trusted_list: list[str] = []
    try:
        trusted_list = _absolute_paths(user_values.get("trustedProjects", []))
    except ValueError:
        pass
    trusted = project_dir is not None and is_trusted(Path(project_dir), trusted_list)
    if project_dir is not None:
        project_dir = Path(project_dir)
        for name, path, namespace in (
            ("project", project_dir / ".cwa.json", None),
            ("pi-project", project_dir / ".pi" / "settings.json", "cwa"),
        ):
            if trusted:
                add_file(name, path, namespace)
            else:
                status = "untrusted" if path.exists() else "missing"
                detail = "add the folder to trustedProjects (cwa config trust)" if path.exists() else None
                reports.append(SourceReport(name, str(path), status, detail))

    env_values = {}
    for setting in SETTINGS:
        for name in (setting.key, setting.alias):
            if name and env_name(name) in env:
                env_values[name] = parse_env(env[env_name(name)], setting)
    layers.append(("environment", env_values))
    reports.append(SourceReport("environment", "CWA_* variables", "loaded"))

    return _resolve(layers, reports, trusted)


def _resolve(layers: list[tuple[str, dict[str, Any]]], reports: list[SourceReport], trusted: bool) -> Settings:
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    rejections: list[Rejection] = []
    unknown: list[tuple[str, str]] = []
    for source, raw in layers:
        for key in raw:
            if key not in BY_KEY and key not in ALIASES:
                unknown.append((source, key))
    for setting in SETTINGS:
        # Every source is checked so that every invalid value is reported; the first valid one
        # from the top wins, and within one source the key wins over its alias.
        for source, raw in reversed(layers):
            for name in (setting.key, setting.alias):
                if not name or name not in raw:
                    continue
                value = raw[name]
                if setting.user_global_only and source not in ("default", USER_GLOBAL):
                    rejections.append(Rejection(name, source, value, "honoured only from the user-global config"))
                    continue
                try:
                    checked = setting.check(value)
                except ValueError as exc:
                    rejections.append(Rejection(name, source, value, str(exc)))
                    continue
                if setting.key not in origins:
                    values[setting.key], origins[setting.key] = checked, source
    return Settings(values, origins, reports, rejections, unknown, trusted)


def edit_trusted(folder: Path | str, add: bool, env: Mapping[str, str] | None = None) -> list[str]:
    """Add or remove a folder (by real path) in the user-global trustedProjects list, rewriting
    the file atomically; the other keys are kept. Returns the new list."""
    target = user_config_path(os.environ if env is None else env)
    try:
        data = orjson.loads(target.read_bytes()) if target.exists() else {}
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"{target} is not valid JSON; fix it first: {exc}", reason="bad-json") from exc
    if not isinstance(data, dict):
        raise InvalidRequest(f"{target} must hold a JSON object", reason="not-an-object")
    real = os.path.realpath(folder)
    trusted = [p for p in data.get("trustedProjects", []) if isinstance(p, str) and os.path.realpath(p) != real]
    if add:
        trusted.append(real)
    data["trustedProjects"] = trusted
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_suffix(".json.tmp")
    temporary.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    os.replace(temporary, target)
    return trusted

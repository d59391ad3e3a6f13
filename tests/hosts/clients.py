"""Claude Code, Codex and OpenCode as installed by .ci/install-tools, run offline against a faux
model server (tests/hosts/faux_models.py), in a home folder of the test's own."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from conftest import DISK_GUARD_OFF, REPO

BIN = REPO / ".cache" / "hosts" / "node_modules" / ".bin"
NODE = REPO / ".cache" / "pi" / "node_modules" / ".bin"  # Node 22, which the clients need
OPENCODE_PLUGIN_MODULES = REPO / ".cache" / "hosts" / "plugin" / "node_modules"


def client(name: str) -> Path:
    path = BIN / name
    assert path.exists(), f"{name} is not installed: run .ci/install-tools"  # fail, never skip
    return path


def environment(home: Path, model_url: str) -> dict[str, str]:
    """No CWA_* of the caller's: every hook finds its archive through the --db it was installed with."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CWA_", "ANTHROPIC_", "OPENAI_", "CODEX_"))}
    env.update(DISK_GUARD_OFF)
    env.update(
        HOME=str(home),
        PATH=f"{NODE}{os.pathsep}{BIN}{os.pathsep}{env.get('PATH', '')}",
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        # Claude Code
        ANTHROPIC_BASE_URL=model_url,
        ANTHROPIC_API_KEY="dummy",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        # Codex
        CODEX_HOME=str(home / ".codex"),
        FAUX_KEY="dummy",
        # OpenCode
        OPENCODE_DISABLE_AUTOUPDATE="1",
        OPENCODE_DISABLE_MODELS_FETCH="1",
        OPENCODE_DISABLE_SHARE="1",
        OPENCODE_DISABLE_LSP_DOWNLOAD="1",
    )
    home.mkdir(parents=True, exist_ok=True)
    return env


def run(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """A client run in `cwd`; PWD says so too (OpenCode takes its directory from PWD, as a shell sets it)."""
    env = {**env, "PWD": str(cwd)}
    return subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def codex_config(home: Path, model_url: str) -> None:
    folder = home / ".codex"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(
        'model = "m"\nmodel_provider = "faux"\napproval_policy = "never"\nsandbox_mode = "danger-full-access"\n\n'
        f'[model_providers.faux]\nname = "faux"\nbase_url = "{model_url}/v1"\nwire_api = "responses"\n'
        'env_key = "FAUX_KEY"\n'
    )


def opencode_project(home: Path, project: Path, model_url: str) -> None:
    """The faux provider in the project's opencode.json, and OpenCode's plugin package where it
    would otherwise install it at every start."""
    import json

    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "faux": {
                "npm": "@ai-sdk/openai-compatible",
                "options": {"baseURL": f"{model_url}/v1", "apiKey": "dummy"},
                "models": {"m": {"tool_call": True}},
            }
        },
        "model": "faux/m",
        "small_model": "faux/m",
        "permission": {"bash": "allow"},
    }
    (project / "opencode.json").write_text(json.dumps(config))
    assert OPENCODE_PLUGIN_MODULES.is_dir(), "OpenCode's plugin package is missing: run .ci/install-tools"
    for folder in (project / ".opencode", home / ".config" / "opencode"):
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "node_modules").exists():
            shutil.copytree(OPENCODE_PLUGIN_MODULES, folder / "node_modules", symlinks=True)

"""Other agents' sessions (Claude Code, Codex, OpenCode; Pi's files too), read from their own
stores and archived exactly as the session engine archives Pi's: `cwa import` for the past, the
client hooks (`cwa hook`) for what happens next. docs/capture.md.
"""

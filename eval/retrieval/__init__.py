"""Automatic-hint evaluation: fixture cases, the runner, and its gates (shipped as cwa.evaluation)."""

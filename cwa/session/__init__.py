"""The session layer: what a host's conversation turns into, above retrieval and below the api.

Today it holds the oversized-input checkpoint (cwa/session/checkpoint.py); the epoch-window
engine builds here next (docs/architecture.md).
"""

"""cwa: a context-window archive for coding agents."""

__version__ = "0.1.0"

"""The derived-index handlers every admission and rebuild runs, in order."""

from __future__ import annotations

from cwa.index.exact import ExactHandler
from cwa.index.lexical import LexicalHandler
from cwa.index.semantic import SemanticQueueHandler
from cwa.index.structure import StructuralHandler
from cwa.store.derived import IndexHandler


def default_handlers() -> tuple[IndexHandler, ...]:
    return (ExactHandler(), LexicalHandler(), StructuralHandler(), SemanticQueueHandler())

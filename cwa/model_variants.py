"""Which embedding graph an archive uses, and `cwa models optimize`, which measures the choice.

By default every archive embeds with the runtime graph (cwa/models.py `runtime_graph`): the
packaged all-MiniLM-L6-v2 int8 weights kept int8 at run time, built once per user from the
installed package. The packaged graph (its int8 weights dequantized to float32 at load) is used
instead when the onnx package that builds the runtime graph is missing, or when `cwa models
optimize` rejected the runtime graph for this archive.

`cwa models optimize` measures both graphs on the archive's own windows: time to embed them, and
known-item recall (a span from the middle of each window must find that window among all of
them). The runtime graph is kept when it is at least MIN_SPEEDUP faster, its recall@1 and
recall@10 are not lower and its vectors stay close to the packaged graph's (mean cosine ≥
MIN_COSINE); otherwise the archive goes back to the packaged graph. The verdict and the figures go
to `models/embedding-variant.json` beside the archive.

The two graphs' fingerprints differ, so a change of graph rebuilds the archive's vectors by the
usual path (a changed fingerprint drops them and queues every window again); vectors of the two
are never mixed.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from cwa import limits
from cwa.errors import Conflict, ModelMissing
from cwa.file_writes import write_atomically
from cwa.models import (
    RUNTIME_VARIANT,
    Embedder,
    ModelFiles,
    ModelUnavailable,
    build_runtime_graph,
    locate,
    runtime_graph,
    runtime_graph_unavailable,
)

MANIFEST = "embedding-variant.json"
MIN_SPEEDUP = limits.VARIANT_MIN_SPEEDUP
MIN_COSINE = limits.VARIANT_MIN_COSINE
QUERY_WORDS = 8
SAMPLE_MIN_WORDS = QUERY_WORDS + 4  # a sampled window holds a query span and more
MIN_SAMPLE = 40  # windows of at least SAMPLE_MIN_WORDS words
SAMPLE = 400


def folder(archive_path: str | os.PathLike) -> Path:
    return Path(archive_path).resolve().parent / "models"


def active(archive_path: str | os.PathLike | None) -> ModelFiles:
    """The embedding graph this archive uses: the runtime graph, unless `cwa models optimize`
    rejected it for this archive or it cannot be built; else the installed model
    (ModelUnavailable when there is none)."""
    base = locate()
    manifest = _read_manifest(archive_path) if archive_path else None
    if manifest and manifest.get("source") == base.graph_key and not manifest.get("accepted"):
        return base
    runtime = runtime_graph(base)
    return base if runtime_graph_unavailable(runtime) else runtime


def variant_status(archive_path: str | os.PathLike) -> dict[str, Any]:
    """Which embedding model the archive uses, and the last `cwa models optimize` verdict."""
    try:
        used = active(archive_path)
    except ModelUnavailable:
        return {"model": None, "optimized": None}
    manifest = _read_manifest(archive_path)
    verdict = None
    if manifest:
        verdict = {k: manifest.get(k) for k in ("accepted", "speedup", "meanCosine", "windows", "createdAt")}
        verdict["file"] = manifest.get("file")
        verdict["current"] = manifest.get("source") == locate().graph_key
    return {
        "model": {
            "variant": used.variant,
            "fingerprint": used.fingerprint,
            "weights": str(used.weights),
            "built": used.weights.is_file(),  # the runtime graph is built at the first model load
        },
        "optimized": verdict,
    }


def _read_manifest(archive_path: str | os.PathLike) -> dict[str, Any] | None:
    """The last verdict beside the archive (re-read only when the file changes), or None."""
    path = folder(archive_path) / MANIFEST
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return None
    return _manifest(path, stamp)


@functools.lru_cache(maxsize=16)
def _manifest(path: Path, stamp: int) -> dict[str, Any] | None:
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None


def optimize(
    sample: Callable[[], list[str]],
    archive_path: str | os.PathLike,
    now: str,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Build (once) and benchmark the variant for this archive; record whether it is used.
    `sample()` gives up to SAMPLE of the archive's window texts of SAMPLE_MIN_WORDS+ words."""
    try:
        base = locate()
    except ModelUnavailable as exc:
        raise ModelMissing(str(exc), reason="model-unavailable") from exc
    texts = sample()
    if len(texts) < MIN_SAMPLE:
        raise Conflict(
            f"the archive holds {len(texts)} window(s) of {SAMPLE_MIN_WORDS}+ words; the variant is measured on "
            f"at least {MIN_SAMPLE} of them: archive more sessions, then run `cwa models optimize` again",
            reason="too-few-windows",
            windows=len(texts),
            needed=MIN_SAMPLE,
        )
    optimized = runtime_graph(base)
    target = optimized.weights
    unavailable = runtime_graph_unavailable(optimized)
    if unavailable:
        why = {
            "onnx-missing": "building the runtime graph needs the onnx package (a dependency of cwa): pip install onnx",
            "cache-unwritable": f"the runtime graph cannot be built: {target.parent} cannot be written (set XDG_CACHE_HOME)",
        }
        raise ModelMissing(why[unavailable], reason=unavailable)
    step = _stepper(progress, 4)
    if not target.is_file():
        build_runtime_graph(base.weights, target, step)
    else:
        step()
        step()
    measured = {"original": _measure(Embedder(base), texts), "optimized": _measure(Embedder(optimized), texts)}
    step()
    original_vectors, optimized_vectors = measured["original"].pop("vectors"), measured["optimized"].pop("vectors")
    cosine = float((original_vectors * optimized_vectors).sum(axis=1).mean())
    speedup = measured["original"]["msPerWindow"] / measured["optimized"]["msPerWindow"]
    accepted = (
        speedup >= MIN_SPEEDUP
        and measured["optimized"]["knownItemR@1"] >= measured["original"]["knownItemR@1"]
        and measured["optimized"]["knownItemR@10"] >= measured["original"]["knownItemR@10"]
        and cosine >= MIN_COSINE
    )
    report = {
        "accepted": accepted,
        "variant": RUNTIME_VARIANT,
        "source": base.graph_key,
        "fingerprint": optimized.fingerprint if accepted else base.fingerprint,
        "file": str(target),
        "sha256": hashlib.sha256(target.read_bytes()).hexdigest(),
        "bytes": target.stat().st_size,
        "windows": len(texts),
        "speedup": round(speedup, 3),
        "meanCosine": round(cosine, 4),
        "measured": measured,
        "criteria": {"minSpeedup": MIN_SPEEDUP, "minCosine": MIN_COSINE, "recall": "not lower"},
        "createdAt": now,
    }
    out = folder(archive_path)
    out.mkdir(parents=True, exist_ok=True)
    write_atomically(out / MANIFEST, orjson.dumps(report, option=orjson.OPT_INDENT_2))
    step()
    return report


def _measure(model: Embedder, texts: list[str]) -> dict[str, Any]:
    """Time to embed the sample (best of two runs), and known-item recall over it."""
    model.embed(texts[:8])  # warm-up: first-run allocations are not the model's speed
    runs = []
    for _ in range(2):
        started = time.perf_counter()
        vectors = model.embed(texts)
        runs.append(time.perf_counter() - started)
    queries_ = []
    for text in texts:
        words = text.split()
        middle = len(words) // 3
        queries_.append(" ".join(words[middle : middle + QUERY_WORDS]))
    similarity = model.embed(queries_) @ vectors.T
    order = (-similarity).argsort(axis=1)[:, :10]
    hits = [list(row).index(i) if i in row else None for i, row in enumerate(order)]
    return {
        "msPerWindow": round(min(runs) * 1000 / len(texts), 3),
        "knownItemR@1": round(sum(h == 0 for h in hits) / len(texts), 4),
        "knownItemR@10": round(sum(h is not None for h in hits) / len(texts), 4),
        "vectors": vectors,
    }


def _stepper(progress, total: int):
    done = [0]

    def step() -> None:
        done[0] += 1
        if progress:
            progress(done[0], total)

    return step

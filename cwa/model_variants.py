"""The optional faster embedding variant: `cwa models optimize`.

The packaged all-MiniLM-L6-v2 weights are int8 but dequantized when loaded, so they run at fp32
speed. `cwa models optimize` folds them into an fp32 graph (onnxruntime's basic graph
optimization), re-quantizes that dynamically with per-channel int8 weights
(`onnxruntime.quantization.quantize_dynamic`), and stores the result beside the archive in
`models/`, named by the source model's fingerprint. It then measures both on the archive's own
windows — time to embed them, and known-item recall (a span from the middle of each window must
find that window among all of them) — and accepts the variant only when it is at least
MIN_SPEEDUP faster, its recall@1 and recall@10 are not lower and its vectors stay close to the
original's (mean cosine ≥ MIN_COSINE). The verdict and the figures go to `models/embedding-variant.json`.

An accepted variant is used for that archive from then on (search, `cwa index embed`, `cwa serve`).
Its fingerprint differs from the packaged model's, so the archive's vectors are rebuilt by the
usual path (a changed fingerprint drops them and queues every window again); vectors of the two
variants are never mixed.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from cwa import limits
from cwa.errors import Conflict, ModelMissing
from cwa.models import Embedder, ModelFiles, ModelUnavailable, locate

VARIANT = "int8-dynamic-per-channel"
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
    """The embedding model this archive uses: its accepted optimized variant, else the installed
    model (ModelUnavailable when there is none)."""
    base = locate()
    if not archive_path:
        return base
    manifest = _read_manifest(archive_path)
    if not manifest or not manifest.get("accepted") or manifest.get("source") != base.fingerprint:
        return base
    weights = folder(archive_path) / manifest["file"]
    return replace(base, weights=weights, variant=VARIANT) if weights.is_file() else base


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
        verdict["file"] = str(folder(archive_path) / manifest.get("file", ""))
        verdict["current"] = manifest.get("source") == locate().fingerprint
    return {
        "model": {"variant": used.variant, "fingerprint": used.fingerprint, "weights": str(used.weights)},
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
    step = _stepper(progress, 4)
    out = folder(archive_path)
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"minilm-{base.fingerprint.split(':')[1]}-{VARIANT}.onnx"
    if not target.is_file():
        _build(base.weights, target, step)
    else:
        step()
        step()
    optimized = replace(base, weights=target, variant=VARIANT)
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
        "variant": VARIANT,
        "source": base.fingerprint,
        "fingerprint": optimized.fingerprint if accepted else base.fingerprint,
        "file": target.name,
        "sha256": hashlib.sha256(target.read_bytes()).hexdigest(),
        "bytes": target.stat().st_size,
        "windows": len(texts),
        "speedup": round(speedup, 3),
        "meanCosine": round(cosine, 4),
        "measured": measured,
        "criteria": {"minSpeedup": MIN_SPEEDUP, "minCosine": MIN_COSINE, "recall": "not lower"},
        "createdAt": now,
    }
    _write_atomically(out / MANIFEST, orjson.dumps(report, option=orjson.OPT_INDENT_2))
    step()
    return report


def _build(weights: Path, target: Path, step) -> None:
    try:
        import onnxruntime
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise ModelMissing(
            "cwa models optimize needs the onnx package: pip install 'cwa[optimize]'", reason="onnx-missing"
        ) from exc
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".optimize-") as work:
        folded = Path(work) / "fp32.onnx"
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)  # int8 → fp32 constants folded
        options.log_severity_level = 3
        onnxruntime.InferenceSession(str(weights), options, providers=["CPUExecutionProvider"])
        step()
        quantized = Path(work) / target.name
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # quantize_dynamic logs advice meant for image models
        try:
            quantize_dynamic(str(folded), str(quantized), weight_type=QuantType.QInt8, per_channel=True)
        finally:
            root.setLevel(level)
        os.replace(quantized, target)
        step()


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


def _write_atomically(path: Path, data: bytes) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.replace(temporary, path)

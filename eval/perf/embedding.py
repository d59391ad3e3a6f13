"""Embedding throughput and peak memory, against a baseline tree.

    python eval/perf/embedding.py [--texts 640] [--baseline /tmp/base] [--graph packaged] [--fresh-cache] [--json]

Each tree (this checkout, and a baseline checkout such as `git worktree add /tmp/base <rev>`) gets
a fresh process that loads the installed model through that tree's code and embeds the same texts
(the messages of the synthetic coding sessions, eval/retrieval/sessions.py, fixed seed: prose of
20-80 words and tool output of up to 256 tokens) in calls of 64, as `cwa index embed` drains its
queue. Reported per tree: texts/s over the calls, the process's peak RSS (VmHWM) once the model
is loaded and after embedding, the seconds the model took to load, and the mean cosine between
the two trees' vectors. `--graph packaged` measures the packaged graph instead of the one an
archive embeds with (the runtime graph, or the packaged one in trees before it);
`--fresh-cache` gives each child an empty cache folder, so the load includes building the
runtime graph.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa_eval.perf.scale import tree_environment

CHILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import numpy
from cwa.model_variants import active
from cwa.models import embedder, locate
def peak():
    status = Path("/proc/self/status").read_text()
    return int(next(l.split()[1] for l in status.splitlines() if l.startswith("VmHWM:"))) * 1024
texts = [line for line in Path(sys.argv[2]).read_text().split("\\x00") if line]
started = time.perf_counter()
model = embedder(locate() if sys.argv[4] == "packaged" else active(None))  # default: what an archive uses
model.embed(["warm up"])
load_seconds = time.perf_counter() - started
loaded = peak()
started = time.perf_counter()
vectors = numpy.concatenate([model.embed(texts[i:i + 64]) for i in range(0, len(texts), 64)])
seconds = time.perf_counter() - started
numpy.save(sys.argv[3], vectors)
print(len(texts) / seconds, loaded, peak(), load_seconds)
"""


def texts(count: int) -> list[str]:
    from cwa_eval.retrieval.sessions import synthetic_sessions

    found = [m["text"] for d in synthetic_sessions(count) for m in d["messages"]]
    return found[:count]


def measure(tree: Path, source: Path, out: Path, graph: str, fresh_cache: bool) -> dict:
    env = tree_environment(tree)
    if fresh_cache:
        env["XDG_CACHE_HOME"] = str(out.with_suffix(".cache"))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(source), str(out), graph],
        check=True,
        capture_output=True,
        cwd=out.parent,
        env=env,
    )
    rate, loaded, peak, load_seconds = done.stdout.decode().split()
    return {
        "textsPerSecond": round(float(rate), 1),
        "peakRssAfterLoadBytes": int(loaded),
        "peakRssBytes": int(peak),
        "loadSeconds": round(float(load_seconds), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=640)
    parser.add_argument("--baseline", type=Path, help="a checkout of the baseline revision")
    parser.add_argument("--graph", choices=("active", "packaged"), default="active")
    parser.add_argument("--fresh-cache", action="store_true", help="build the runtime graph in each child")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    trees = {"this tree": Path(__file__).resolve().parents[2]}
    if args.baseline:
        trees = {"baseline": args.baseline.resolve(), **trees}
    report: dict = {"texts": args.texts}
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "texts"
        source.write_text("\x00".join(texts(args.texts)))
        outputs = {name: Path(folder) / f"{n}.npy" for n, name in enumerate(trees)}
        for name, tree in trees.items():
            report[name] = measure(tree, source, outputs[name], args.graph, args.fresh_cache)
        if len(trees) == 2:
            import numpy

            first, second = (numpy.load(path) for path in outputs.values())
            report["meanCosine"] = round(float((first * second).sum(axis=1).mean()), 6)
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    for name in trees:
        found = report[name]
        print(
            f"{name}: {found['textsPerSecond']} texts/s; peak RSS {found['peakRssAfterLoadBytes'] / 2**20:.0f} MiB "
            f"after loading ({found['loadSeconds']} s), {found['peakRssBytes'] / 2**20:.0f} MiB after embedding "
            f"{args.texts} texts"
        )
    if "meanCosine" in report:
        print(f"mean cosine between the trees' vectors: {report['meanCosine']}")


if __name__ == "__main__":
    main()

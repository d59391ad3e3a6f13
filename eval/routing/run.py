"""Run the routing evaluation against a configured model (never in CI: no model there).

    python eval/routing/run.py --model-command 'llm -m some-model' [--out results.jsonl]
    CWA_ROUTING_MODEL_COMMAND='ollama run qwen3' python eval/routing/run.py
    python eval/routing/run.py --show-prompt retry-shim     # the exact prompt, no model needed
    python eval/routing/run.py --score results.jsonl         # score recorded answers again

The command gets the system part, a blank line, then the user part on standard input and prints
its answer; each raw answer is recorded with its parsed route and the guidance fingerprint.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import load_cases, render, result_of, score


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-command", default=os.environ.get("CWA_ROUTING_MODEL_COMMAND"))
    parser.add_argument("--out", type=Path, default=Path("routing-results.jsonl"))
    parser.add_argument("--show-prompt", metavar="CASE_ID")
    parser.add_argument("--score", type=Path, metavar="RESULTS")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    cases = load_cases()
    if args.show_prompt:
        for case in (c for c in cases if c["id"] == args.show_prompt):
            prompt = render(case)
            print(f"--- marker: {bool(case.get('marker'))}\n[system]\n{prompt['system']}\n[user]\n{prompt['user']}\n")
        return 0
    if args.score:
        rows = [orjson.loads(line) for line in args.score.read_bytes().splitlines() if line.strip()]
        print(orjson.dumps(score(rows), option=orjson.OPT_INDENT_2).decode())
        return 0
    if not args.model_command:
        print("no model configured: pass --model-command or set CWA_ROUTING_MODEL_COMMAND", file=sys.stderr)
        return 2
    command = shlex.split(args.model_command)
    rows = []
    with args.out.open("wb") as out:
        for number, case in enumerate(cases, 1):
            prompt = render(case)
            done = subprocess.run(
                command,
                input=f"{prompt['system']}\n\n{prompt['user']}".encode(),
                capture_output=True,
                timeout=args.timeout,
            )
            if done.returncode != 0:
                print(
                    f"the model command failed on {case['id']}: {done.stderr.decode(errors='replace')[-500:]}",
                    file=sys.stderr,
                )
                return 1
            row = result_of(case, done.stdout.decode(errors="replace"), args.model_command)
            rows.append(row)
            out.write(orjson.dumps(row) + b"\n")
            print(
                f"[{number}/{len(cases)}] {case['id']} marker={row['marker']} expected={row['expected']} "
                f"route={row['route']}",
                file=sys.stderr,
            )
    print(orjson.dumps(score(rows), option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())

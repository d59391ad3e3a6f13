"""cwa's evaluation harness (`cwa_eval`), beside the product and not inside it: retrieval
benchmarks (retrieval/: LoCoMo, synthetic coding sessions, the ranker's training), performance
at scale (perf/), and the `cwa eval locomo | coding | long | perf` commands (cli.py), which it adds to
cwa's `eval` group through entry points. Install it from a checkout with `pip install -e ./eval`.
The scripts in reliability/ and routing/ run from the checkout (`python eval/...`).
"""

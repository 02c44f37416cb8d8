"""What one query process costs on an index's serving store (``lazygraph bench serving``): memory,
opening time, lookup latency and vector recall, as one JSON object.

    python benchmarks/bench_serving.py --index DIR [--subqueries 200] [--chunks N] [--seed S]

With ``--chunks`` a synthetic index of N chunks is generated in DIR first (``gen_synthetic_index.py``).
"""

import sys

from lazygraph import api

if __name__ == "__main__":
    sys.exit(api.run_benchmark("serving", sys.argv[1:]))

"""A synthetic index of N chunks: the real Delta tables and the serving store, with distributions taken
from hotpotqa100 and wiki2mh (``lazygraph bench synthetic-index``; the module doc says how each was
chosen).

    python benchmarks/gen_synthetic_index.py --chunks 100000 --out DIR [--seed 0] [--no-store]
"""

import sys

from lazygraph import api

if __name__ == "__main__":
    sys.exit(api.run_benchmark("synthetic-index", sys.argv[1:]))

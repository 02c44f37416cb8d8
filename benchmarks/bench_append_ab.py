"""What one append costs, side by side in one Spark session (``lazygraph bench append-ab``): the
defaults against the index job before its two append cuts, one document against a 1 % batch.

    python benchmarks/bench_append_ab.py --input ../shared/datasets/wiki2mh_corpus/corpus.jsonl \
        --workdir DIR --variants defaults,before,defaults,before,defaults,one,one
"""

import sys

from lazygraph import api

if __name__ == "__main__":
    sys.exit(api.run_benchmark("append-ab", sys.argv[1:]))

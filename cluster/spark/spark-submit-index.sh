#!/usr/bin/env bash
# Build a lazygraph index as a Spark application on a cluster (standalone, YARN or Kubernetes).
#
#   cluster/spark/spark-submit-index.sh --master MASTER --input DOCS --index INDEX_URI [--append] \
#       [-- any further spark-submit options]
#
# Examples:
#   cluster/spark/spark-submit-index.sh --master spark://head:7077 \
#       --input s3a://bucket/corpus.jsonl --index s3a://bucket/indexes/corpus
#   cluster/spark/spark-submit-index.sh --master yarn --input hdfs:///data/docs --index hdfs:///indexes/docs \
#       -- --num-executors 20 --executor-cores 4 --executor-memory 8g
#   cluster/spark/spark-submit-index.sh --master local[2] --input lazygraph/demo_data/sample_corpus.jsonl \
#       --index /tmp/sample-index          # the same path on one machine, to try it out
#
# The driver runs here (client mode), so this machine needs lazygraph installed (cluster/bootstrap.sh).
# Executors run the Python stages (spaCy, embeddings) too, so they need the same Python packages:
#   - the same environment at the same path on every node (default: $LAZYGRAPH_HOME/venv), or
#   - LAZYGRAPH_PYTHON_ARCHIVE=/path/env.tar.gz: a packed environment (venv-pack or conda-pack) that
#     YARN or Kubernetes unpacks next to each executor.
#
# Environment variables read here:
#   LAZYGRAPH_HOME              cache root with venv/ and jars/ (default ~/.cache/lazygraph)
#   LAZYGRAPH_CONFIG            lazygraph settings YAML (index options, spark.conf, ...)
#   LAZYGRAPH_SPARK__DRIVER_MEMORY  driver memory (default 4g)
#   SPARK_PROPERTIES_FILE       spark-defaults file (default: cluster/spark/spark-defaults.conf if present)
#   LAZYGRAPH_SPARK_PACKAGES=1  let Spark resolve the Delta jars from Maven (--packages) instead of the cache
#   LAZYGRAPH_PYTHON_ARCHIVE    packed Python environment for the executors (see above)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
home=${LAZYGRAPH_HOME:-$HOME/.cache/lazygraph}
venv=${LAZYGRAPH_VENV:-$home/venv}
delta_version=4.4.0
delta_packages="io.delta:delta-spark_4.0_2.13:$delta_version,io.delta:delta-storage:$delta_version"

die() { echo "spark-submit-index: $*" >&2; exit 1; }

master="" input="" index="" append=()
while [ $# -gt 0 ]; do
  case "$1" in
    --master) master=$2; shift 2 ;;
    --input) input=$2; shift 2 ;;
    --index) index=$2; shift 2 ;;
    --append) append=(--append); shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,30p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[ -n "$master" ] || die "--master is required (spark://host:7077, yarn, k8s://https://host:6443 or local[N])"
[ -n "$input" ] || die "--input is required (JSON Lines or a folder of .txt/.md files)"
[ -n "$index" ] || die "--index is required (file://, hdfs://, s3a://, abfss:// ...)"
[ -x "$venv/bin/python" ] || die "no lazygraph environment at $venv; run cluster/bootstrap.sh first (or set LAZYGRAPH_VENV)"

python="$venv/bin/python"
submit="$venv/bin/spark-submit"
[ -x "$submit" ] || submit=$(command -v spark-submit) || die "spark-submit not found (it ships with pyspark in $venv)"

# The lazygraph CLI is the application; `index` is its command.
entry=$("$python" -c 'import lazygraph, pathlib; print(pathlib.Path(lazygraph.__file__).with_name("__main__.py"))')

# In client mode the driver JVM starts before lazygraph's settings are read, so its memory is set here.
args=(--master "$master" --deploy-mode client --name "lazygraph-index"
      --driver-memory "${LAZYGRAPH_SPARK__DRIVER_MEMORY:-4g}")
props=${SPARK_PROPERTIES_FILE:-$here/spark-defaults.conf}
[ -f "$props" ] && args+=(--properties-file "$props")

if [ "${LAZYGRAPH_SPARK_PACKAGES:-0}" = 1 ]; then
  args+=(--packages "$delta_packages")
else
  # The jars `lazygraph setup` verified; spark-submit ships them to the executors.
  "$python" -m lazygraph setup --skip-model >/dev/null
  jars=$(ls "$home"/jars/*.jar 2>/dev/null | paste -sd, -)
  [ -n "$jars" ] || die "no jars in $home/jars; run \`lazygraph setup\`"
  # An s3:// or s3a:// location needs the S3A connector on the driver's classpath from its start, so its
  # jars (fetched and verified once) go in --jars too, unless Spark ships hadoop-aws (the cluster image).
  s3a=$("$python" - "$input" "$index" <<'PY'
import sys
from lazygraph.runtime.spark import needs_s3a, s3a_jars
from lazygraph.settings import load_settings
settings = load_settings()
if needs_s3a(settings, sys.argv[1:]):
    print(",".join(str(jar) for jar in s3a_jars(settings)))
PY
  ) || die "fetching the S3A connector's jars failed (see the message above)"
  [ -z "$s3a" ] || jars="$jars,$s3a"
  args+=(--jars "$jars")
fi

if [ -n "${LAZYGRAPH_PYTHON_ARCHIVE:-}" ]; then
  args+=(--archives "$LAZYGRAPH_PYTHON_ARCHIVE#lazygraph_env"
         --conf spark.pyspark.python=./lazygraph_env/bin/python
         --conf spark.pyspark.driver.python="$python")
else
  export PYSPARK_PYTHON="$python"
fi
export PYSPARK_DRIVER_PYTHON="$python" OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# lazygraph builds its Spark session from its settings; keep its master the one given here.
export LAZYGRAPH_SPARK__MASTER="$master"

cd "$repo"
exec "$submit" "${args[@]}" "$@" "$entry" index --input "$input" --index "$index" "${append[@]}"

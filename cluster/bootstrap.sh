#!/usr/bin/env bash
# Sets up everything lazygraph needs on one machine, idempotently and cached, then runs
# the command given after it (if any) inside that environment:
#   1. a Python virtual environment with the pinned packages (llama-cpp-python is
#      built from source once; pip keeps the built wheel in its cache);
#   2. lazygraph itself, installed editable from this checkout;
#   3. the Delta Lake jars from Maven Central and the embedded LLM file
#      (via `lazygraph setup`, which verifies sizes and checksums).
# Everything lands under $LAZYGRAPH_HOME (default ~/.cache/lazygraph), so a
# second run, or a fresh checkout on the same machine, reuses it.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
home=${LAZYGRAPH_HOME:-$HOME/.cache/lazygraph}
python=${LAZYGRAPH_PYTHON:-python3}
mkdir -p "$home"

die() { echo "lazygraph bootstrap: $*" >&2; exit 1; }

command -v "$python" >/dev/null || die "no '$python' on PATH; install Python 3.11 or newer (or set LAZYGRAPH_PYTHON)."
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "Python 3.11 or newer is required; '$python' is $("$python" -V 2>&1). Set LAZYGRAPH_PYTHON to a newer interpreter."
command -v java >/dev/null \
  || die "no 'java' on PATH; Spark 4 needs a Java 17 or 21 runtime (e.g. 'apt-get install openjdk-17-jre-headless'), or set JAVA_HOME."
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
[ "${java_major:-0}" -ge 17 ] || die "Spark 4 needs Java 17 or newer; 'java' is version ${java_major:-unknown}. Install Java 17 and set JAVA_HOME."

# The environment is keyed by the pinned requirements, so a change of pins builds a new one.
key=$(cat "$repo/requirements.txt" "$repo/requirements-model.txt" | sha256sum | cut -c1-12)
venv="$home/venv-$key"
if [ ! -f "$venv/.complete" ]; then
  echo "lazygraph bootstrap: creating the Python environment in $venv (first run only; several minutes)"
  # Built in place (a venv cannot be moved); the .complete marker says it finished.
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  # llama-cpp-python compiles llama.cpp; use every core and a CPU-only build.
  export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
  export CMAKE_ARGS=${CMAKE_ARGS:-"-DGGML_NATIVE=ON -DGGML_CUDA=OFF"}
  "$venv/bin/pip" install --progress-bar off -r "$repo/requirements.txt" -r "$repo/requirements-model.txt" \
    || die "installing Python packages failed (see pip's message above). Check that PyPI is reachable, then run this command again; nothing was left half-installed."
  touch "$venv/.complete"
fi

# Point the environment at this checkout (cheap; re-done when the checkout moves).
if [ "$(cat "$venv/.checkout" 2>/dev/null)" != "$repo" ]; then
  "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$repo" \
    || die "installing lazygraph from $repo failed."
  echo "$repo" > "$venv/.checkout"
fi
ln -sfn "$venv" "$home/venv"

"$venv/bin/python" -m lazygraph setup

# Anything after the options runs inside the environment, from the checkout:
#   bash cluster/bootstrap.sh lazygraph demo     bash cluster/bootstrap.sh pytest
if [ $# -gt 0 ]; then
  cd "$repo"
  export PATH="$venv/bin:$PATH" OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
  exec "$@"
fi

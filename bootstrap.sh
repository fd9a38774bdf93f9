#!/usr/bin/env bash
# memsim set-up on Debian 12: install what is missing (apt), configure, build, then
#   ./bootstrap.sh quickstart [OUT]   run configs/experiments/quickstart.yaml (default OUT: out/quickstart)
#   ./bootstrap.sh test               run the whole test suite (release build, then a clang 14 build and its unit
#                                     tests, then the ASan+UBSan build)
#   ./bootstrap.sh build              set up and build only
# Idempotent: a second run installs nothing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")"

packages=(cmake ninja-build g++ clang-14 clang-format-14 lld pkg-config
          libsimgrid-dev libboost-dev libfmt-dev libyaml-cpp-dev nlohmann-json3-dev libsimdjson-dev libcli11-dev
          zlib1g-dev libgtest-dev libgmock-dev libbenchmark-dev
          python3-matplotlib python3-numpy python3-torch libtorch-dev
          slurm-wlm munge  # the slurm test starts its own single-node cluster
          libclang-rt-14-dev)  # the fuzz preset's libFuzzer

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
  for package in "${missing[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
      echo "bootstrap: ERROR: package $package could not be installed" >&2
      exit 1
    fi
  done
fi

jobs=$(nproc)
build() {
  cmake --preset "$1" >/dev/null
  cmake --build --preset "$1" -j "$jobs"
}

mode=${1:-quickstart}
case "$mode" in
  build)
    build release
    ;;
  quickstart)
    build release
    out=${2:-out/quickstart}
    time ./build/release/experiments/memsim run configs/experiments/quickstart.yaml --out "$out"
    ;;
  test)
    # Each pass says how long it took: the CI has a time limit, and this shows which pass to make faster.
    timed() {
      local start=$SECONDS
      "$@"
      echo "bootstrap: $* took $((SECONDS - start)) s"
    }
    timed build release
    timed ctest --preset release -j "$jobs"
    if [ "${MEMSIM_SKIP_CLANG:-0}" != 1 ]; then
      timed build clang # warnings are errors here too
      timed ctest --preset clang -j "$jobs" -L unit
    fi
    if [ "${MEMSIM_SKIP_SANITIZERS:-0}" != 1 ]; then
      timed build debug
      # The Slurm cluster test and the format check run once, in the release pass.
      timed ctest --preset debug -j "$jobs" -LE 'slow|slurm|format'
    fi
    ;;
  *)
    echo "usage: ./bootstrap.sh [quickstart [OUT] | test | build]" >&2
    exit 2
    ;;
esac

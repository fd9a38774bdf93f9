#!/bin/bash
# On the GPU machine: build and run uvm_bandwidth.cu; writes $OUT/uvm-bandwidth.csv and the device's name.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp}
nvcc -O2 -std=c++17 -arch=native -o /tmp/uvm_bandwidth "$here/uvm_bandwidth.cu"
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv > "$out/uvm-device.csv"
/tmp/uvm_bandwidth "${1:-5}" | tee "$out/uvm-bandwidth.csv"

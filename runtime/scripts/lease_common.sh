# Sourced by the lease scripts (lease_*.sh DIR OUT TAG DEVICE_MODEL): their arguments, the carried memsim-cuda with
# its shared libraries, and `stamp`, a log line with the seconds since the lease started.
set -u
dir=$1
out=$2
tag=$3
device_model=$4
export LD_LIBRARY_PATH=$PWD/$dir/lib
bin=$PWD/$dir/memsim-cuda
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }

#!/bin/bash
# A sharded sweep on a real single-node Slurm cluster: starts munged, slurmctld and slurmd on localhost from
# configuration generated in a temporary folder (no systemd, no cgroups, no accounting), submits a 3-task array of
# experiments/slurm/memsim-sweep.sbatch with `sbatch --wait`, merges the shards with `memsim merge`, and requires
# results.csv and the plot to be byte-identical to a local unsharded run. The daemons are stopped on every exit.
# Exit 77 (skipped) only when the Slurm or munge programs are not installed; a cluster that does not come up fails
# with the daemons' logs.
#
#   slurm_sweep_test.sh MEMSIM SOURCE_DIR
set -uo pipefail

memsim=$1
source_dir=$2
data=$source_dir/tests/experiments/data

for program in munged mungekey slurmctld slurmd sbatch sinfo scancel; do
  if ! command -v "$program" >/dev/null; then
    echo "SKIPPED: $program is not installed (Debian packages slurm-wlm and munge; ./bootstrap.sh installs them)"
    exit 77
  fi
done

work=$(mktemp -d /tmp/memsim-slurm-test.XXXXXX)
chmod 711 "$work"
daemons=()      # pids, stopped by teardown
daemon_names=() # for messages
failed=0

show_logs() {
  for log in "$work"/log/*; do
    [[ -f $log ]] || continue
    echo "----- $log (last 40 lines)"
    tail -n 40 "$log"
  done
}

teardown() {
  if [[ -n ${SLURM_CONF:-} ]]; then # jobs of this cluster only
    timeout 10 scancel --quiet --user "$(id -un)" 2>/dev/null
  fi
  for pid in "${daemons[@]}"; do
    kill "$pid" 2>/dev/null
  done
  for pid in "${daemons[@]}"; do # up to 10 s each to stop, then SIGKILL
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  if [[ $failed -ne 0 ]]; then
    show_logs
  fi
  rm -rf "$work"
}
trap teardown EXIT
trap 'fail "interrupted"' INT TERM

fail() {
  echo "FAILED: $*"
  failed=1
  exit 1
}

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

mkdir -p "$work/munge" "$work/state" "$work/spool" "$work/log" "$work/sweep"
chmod 711 "$work/munge"

# munge: a fresh key and a private socket.
mungekey --create --keyfile="$work/munge/munge.key" || fail "mungekey could not create a key"
chmod 400 "$work/munge/munge.key"
munged --foreground --force --socket="$work/munge/munge.socket" --key-file="$work/munge/munge.key" \
  --log-file="$work/log/munged.log" --pid-file="$work/munge/munged.pid" --seed-file="$work/munge/munged.seed" \
  >"$work/log/munged.out" 2>&1 &
daemons+=($!)
daemon_names+=(munged)
for _ in $(seq 50); do
  [[ -S $work/munge/munge.socket ]] && break
  sleep 0.1
done
[[ -S $work/munge/munge.socket ]] || fail "munged did not create its socket"

controller_port=$(free_port)
node_port=$(free_port)
[[ $node_port != "$controller_port" ]] || node_port=$((controller_port + 1))
cat >"$work/slurm.conf" <<CONF
ClusterName=memsim-test
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
SlurmctldPort=$controller_port
SlurmdPort=$node_port
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
MessageTimeout=5
MailProg=/bin/true
SlurmdParameters=config_overrides
NodeName=memsim-node NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=memsim Nodes=memsim-node Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$work/slurm.conf

slurmctld -D -i >"$work/log/slurmctld.out" 2>&1 &
daemons+=($!)
daemon_names+=(slurmctld)
slurmd -D -N memsim-node >"$work/log/slurmd.out" 2>&1 &
daemons+=($!)
daemon_names+=(slurmd)
deadline=$((SECONDS + 30))
state=""
while [[ $state != idle ]]; do
  for i in "${!daemons[@]}"; do
    kill -0 "${daemons[$i]}" 2>/dev/null || fail "${daemon_names[$i]} exited while the cluster started"
  done
  [[ $SECONDS -lt $deadline ]] || fail "the Slurm node did not become idle within 30 s (state: '${state:-none}')"
  sleep 0.2
  state=$(timeout 5 sinfo --noheader --nodes=memsim-node --format=%t 2>/dev/null)
done

# A real small experiment: 3 planners x 3 budgets of the 4-layer chain = 9 cells, 3 per shard.
plots=""
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  plots="outputs: {plots: [time_vs_budget]}"
else
  echo "note: python3-matplotlib is missing: comparing results.csv only"
fi
cat >"$work/sweep/chain.yaml" <<YAML
format: memsim-experiment
version: 1
name: slurm-chain
machine: $data/small.machine.yaml
workloads:
  - {name: chain4, trace: $data/chain4.trace.json}
planners: [keep-all, vdnn-all, checkpoint-sqrt]
sweep:
  budget: {fraction_of_peak: [1.0, 0.8, 0.5]}
$plots
YAML

cd "$work/sweep" || fail "no sweep folder"
started=$SECONDS
MEMSIM=$memsim timeout 90 sbatch --wait --array=1-3 --output="$work/log/task-%a.out" \
  "$source_dir/experiments/slurm/memsim-sweep.sbatch" "$work/sweep/chain.yaml" "$work/sweep/shards" ||
  fail "sbatch --wait reported a failed array task, or the array did not finish within 90 s"
echo "3-task array done in $((SECONDS - started)) s"
for shard in 1 2 3; do
  count=$(find "$work/sweep/shards/shard-$shard/cells" -name '*.json' ! -name '*.cell.json' | wc -l)
  [[ $count -eq 3 ]] || fail "shard $shard cached $count cells, expected 3"
done

"$memsim" merge "$work/sweep/merged" "$work/sweep/shards"/shard-* || fail "memsim merge failed"
"$memsim" run "$work/sweep/chain.yaml" --out "$work/sweep/local" --jobs 2 >/dev/null || fail "the local run failed"

cmp "$work/sweep/merged/results.csv" "$work/sweep/local/results.csv" ||
  fail "merged results.csv differs from the local run's"
[[ $(wc -l <"$work/sweep/merged/results.csv") -eq 10 ]] || fail "results.csv does not have 9 rows"
if [[ -n $plots ]]; then
  cmp "$work/sweep/merged/time_vs_budget.png" "$work/sweep/local/time_vs_budget.png" ||
    fail "merged plot differs from the local run's"
fi
echo "PASSED: Slurm array of 3 shards merged byte-identical to the local run"

#pragma once
// Ring collectives (v2): allreduce, allgather and reducescatter of a tensor of S bytes over a group of N devices
// run as a synchronous ring. The tensor is cut into N equal chunks of ceil(S / N) bytes (padded to a multiple of N);
// in every phase each device of the ring sends one chunk to the next device (group order, the last to the first),
// all N transfers at once along the machine's routes, sharing links like any transfer; a phase starts when every
// transfer of the previous one has arrived. reducescatter and allgather take N - 1 phases, allreduce 2 (N - 1)
// (a reduce-scatter then an all-gather). With equal links of bandwidth W and route latency L, and nothing else
// in flight, an allreduce takes 2 (N - 1) (L + S / (N W)) = 2 (N - 1) / N * S / W + 2 (N - 1) L.
#include "memsim/planners/plan.hpp"

#include <cstdint>
#include <vector>

namespace memsim {

struct ChunkTransfer {
  int from = 0;
  int to = 0;
  std::uint64_t bytes = 0;
};

int ring_phase_count(StepKind kind, std::size_t group_size);
// The transfers of phase `phase` (0-based) of a ring over `group` for a tensor of `bytes`.
std::vector<ChunkTransfer> ring_phase(const std::vector<int>& group, std::uint64_t bytes, int phase);
// Bytes all phases move together.
std::uint64_t ring_bytes(StepKind kind, const std::vector<int>& group, std::uint64_t bytes);

} // namespace memsim

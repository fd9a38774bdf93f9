#include "collectives.hpp"

namespace memsim {

int ring_phase_count(StepKind kind, std::size_t group_size)
{
  if (group_size < 2)
    return 0;
  const int hops = static_cast<int>(group_size) - 1;
  return kind == StepKind::allreduce ? 2 * hops : hops;
}

std::vector<ChunkTransfer> ring_phase(const std::vector<int>& group, std::uint64_t bytes, int phase)
{
  const std::size_t n = group.size();
  std::vector<ChunkTransfer> transfers;
  transfers.reserve(n);
  (void)phase; // every phase moves equal chunks (position j sends chunk (j - phase) mod n)
  // Equal chunks: the ring pads the tensor to a multiple of n. (Chunks a byte apart would end a few ns apart, at
  // the engines' simultaneity threshold.)
  const std::uint64_t chunk_bytes = (bytes + n - 1) / n;
  for (std::size_t position = 0; position < n; ++position)
    transfers.push_back(ChunkTransfer{group[position], group[(position + 1) % n], chunk_bytes});
  return transfers;
}

std::uint64_t ring_bytes(StepKind kind, const std::vector<int>& group, std::uint64_t bytes)
{
  std::uint64_t total = 0;
  for (int phase = 0; phase < ring_phase_count(kind, group.size()); ++phase)
    for (const ChunkTransfer& transfer : ring_phase(group, bytes, phase))
      total += transfer.bytes;
  return total;
}

} // namespace memsim

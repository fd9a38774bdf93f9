#include "memsim/sim/device_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <tuple>

namespace memsim {

DevicePool::DevicePool(std::uint64_t arena_bytes, std::uint64_t alignment)
    : arena_bytes_(arena_bytes / alignment * alignment), alignment_(alignment)
{
  if (alignment == 0)
    throw std::invalid_argument("pool alignment must be positive");
  if (arena_bytes_ > 0) {
    blocks_.emplace(0, Block{arena_bytes_, false, {}});
    free_offsets_.insert(0);
  }
}

std::uint64_t DevicePool::aligned(std::uint64_t bytes) const
{
  return (bytes + alignment_ - 1) / alignment_ * alignment_;
}

std::optional<DevicePool::Placement> DevicePool::place(std::uint64_t bytes, const IsOrdered& is_ordered)
{
  if (bytes == 0)
    return Placement{};
  const std::uint64_t need = aligned(bytes);

  // A candidate is a run of adjacent free blocks starting at `first` that covers `need`.
  struct Candidate {
    std::uint64_t offset = 0;
    std::uint64_t covered = 0;
    std::size_t block_count = 0;
    std::vector<StepId> waits;
  };
  std::optional<Candidate> best;
  auto better = [](const Candidate& a, const Candidate& b) {
    // Fewest waits, then tightest fit, then lowest offset (deterministic).
    return std::make_tuple(a.waits.size(), a.covered, a.offset) < std::make_tuple(b.waits.size(), b.covered, b.offset);
  };
  auto needs_no_wait = [&](const Block& block) {
    return std::all_of(block.releases.begin(), block.releases.end(), is_ordered);
  };
  for (std::uint64_t start : free_offsets_) {
    auto first = blocks_.find(start);
    // Adjacent free blocks that need no wait are one block once settle() merges them: treat them as one here too
    // (a candidate starts only at such a run's first block and covers all of it), so that where a block goes does
    // not depend on when the owner settled (memsim-cuda settles now and then, the simulators at every release).
    const bool first_free_now = needs_no_wait(first->second);
    if (first != blocks_.begin()) {
      auto previous = std::prev(first);
      if (!previous->second.live && first_free_now && needs_no_wait(previous->second))
        continue;
    }
    Candidate candidate{first->first, 0, 0, {}};
    bool settled_run = true;
    for (auto it = first; it != blocks_.end() && !it->second.live; ++it) {
      const bool free_now = needs_no_wait(it->second);
      if (candidate.covered >= need && !(settled_run && free_now))
        break;
      settled_run = settled_run && free_now;
      candidate.covered += it->second.size;
      ++candidate.block_count;
      for (StepId release : it->second.releases)
        if (!is_ordered(release) &&
            std::find(candidate.waits.begin(), candidate.waits.end(), release) == candidate.waits.end())
          candidate.waits.push_back(release);
    }
    if (candidate.covered < need)
      continue;
    if (!best || better(candidate, *best))
      best = std::move(candidate);
    if (best->waits.empty() && best->covered == need)
      break; // cannot do better
  }
  if (!best)
    return std::nullopt;

  // Carve: the run's blocks become one live block; what is left of the last block stays free with its
  // own release steps (the earlier blocks are consumed whole).
  auto it = blocks_.find(best->offset);
  std::vector<StepId> last_releases;
  for (std::size_t i = 0; i < best->block_count; ++i) {
    last_releases = std::move(it->second.releases);
    free_offsets_.erase(it->first);
    it = blocks_.erase(it);
  }
  blocks_.emplace(best->offset, Block{need, true, {}});
  if (best->covered > need) {
    blocks_.emplace(best->offset + need, Block{best->covered - need, false, std::move(last_releases)});
    free_offsets_.insert(best->offset + need);
  }
  std::sort(best->waits.begin(), best->waits.end());
  return Placement{best->offset, std::move(best->waits)};
}

void DevicePool::release(std::uint64_t offset, StepId release_step)
{
  auto it = blocks_.find(offset);
  if (it == blocks_.end() || !it->second.live)
    throw std::logic_error(fmt::format("device pool: no live block at offset {}", offset));
  it->second.live = false;
  it->second.releases = {release_step};
  free_offsets_.insert(offset);
}

void DevicePool::settle(const IsOrdered& ordered_for_all_future)
{
  for (auto start = free_offsets_.begin(); start != free_offsets_.end();) {
    auto it = blocks_.find(*start);
    Block& block = it->second;
    if (!block.live)
      std::erase_if(block.releases, [&](StepId release) { return ordered_for_all_future(release); });
    auto next = std::next(it);
    if (!block.live && block.releases.empty() && next != blocks_.end() && !next->second.live) {
      std::erase_if(next->second.releases, [&](StepId release) { return ordered_for_all_future(release); });
      if (next->second.releases.empty()) {
        block.size += next->second.size;
        free_offsets_.erase(next->first);
        blocks_.erase(next);
        continue; // try to merge the following block too
      }
    }
    ++start;
  }
}

std::uint64_t DevicePool::largest_free_block() const
{
  std::uint64_t largest = 0;
  std::uint64_t run = 0;
  for (const auto& [offset, block] : blocks_) {
    run = block.live ? 0 : run + block.size;
    largest = std::max(largest, run);
  }
  return largest;
}

std::uint64_t DevicePool::free_bytes() const
{
  std::uint64_t total = 0;
  for (std::uint64_t offset : free_offsets_)
    total += blocks_.at(offset).size;
  return total;
}

} // namespace memsim

#pragma once
// The device memory arena (placement allocator) of memsim-cuda and of the simulators (--allocator pool): one
// implementation, CUDA-free, so the simulators predict the fragmentation the GPU would have.
// One cudaMalloc'd arena is carved by this allocator. A block freed by a plan step becomes reusable only
// after that step's CUDA event: a later allocation that takes it must wait on the event (stream-ordered
// reuse, like cudaFreeAsync/cudaMallocAsync), so the GPU never holds two owners of one byte at once.
#include "memsim/planners/plan.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace memsim {

class DevicePool {
public:
  explicit DevicePool(std::uint64_t arena_bytes, std::uint64_t alignment = 256);

  // Whether the step whose end releases a block has completed before the allocating step starts.
  using IsOrdered = std::function<bool(StepId release_step)>;

  struct Placement {
    std::uint64_t offset = 0;
    std::vector<StepId> waits; // release steps the allocating step must wait on before it may use the block
  };

  // Best fit among blocks that need no wait; otherwise the contiguous run of free blocks that needs the
  // fewest waits. nullopt when no run of free blocks is large enough (the arena is full or fragmented).
  // Zero bytes always succeed at offset 0 without waits.
  std::optional<Placement> place(std::uint64_t bytes, const IsOrdered& is_ordered);
  // Marks the block at `offset` free from the end of `release_step` on.
  void release(std::uint64_t offset, StepId release_step);
  // Forgets release steps that every future allocation is ordered after, and merges the free blocks that
  // no longer need any wait (keeps the block list short on long plans).
  void settle(const IsOrdered& ordered_for_all_future);

  std::uint64_t aligned(std::uint64_t bytes) const;
  std::uint64_t arena_bytes() const { return arena_bytes_; }
  std::uint64_t largest_free_block() const; // contiguous free bytes, whatever their release steps
  std::uint64_t free_bytes() const;
  std::size_t block_count() const { return blocks_.size(); }

private:
  struct Block {
    std::uint64_t size = 0;
    bool live = false;
    std::vector<StepId> releases; // free blocks: the steps whose end freed them (empty: never used)
  };
  std::uint64_t arena_bytes_;
  std::uint64_t alignment_;
  std::map<std::uint64_t, Block> blocks_; // by offset; they tile the arena
  std::set<std::uint64_t> free_offsets_;  // offsets of the free blocks (searched without the live ones)
};

} // namespace memsim

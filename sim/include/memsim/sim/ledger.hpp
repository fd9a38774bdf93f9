#pragma once
// The memory ledger of the execution core: which (instance, tensor) is resident in which memory space (each GPU
// and the host), bytes in use and peaks, and -- with the pool allocator -- where each block lives. Every
// executor (SimGrid engine, fast engine, memsim-cuda's program builder) accounts memory through it, so they
// cannot disagree on what fits. The simulators decide in simulated time order, where every release precedes later
// allocations; memsim-cuda decides in list order on a real GPU, where a released block is reusable only once its
// release step is ordered before the allocating step (stream_ordered_reuse: placements report the waits).
#include "memsim/sim/device_pool.hpp"
#include "memsim/sim/timeline.hpp"
#include "memsim/traces/trace.hpp"

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace memsim {

// `bytes` counts bytes only (what the v1 simulator did); `pool` also places every device allocation in one
// arena of the budget with memsim-cuda's best-fit allocator, so fragmentation can make a plan fail.
enum class AllocatorKind { bytes, pool };
std::string_view to_string(AllocatorKind kind);
std::optional<AllocatorKind> allocator_kind_from_string(std::string_view text);

struct LedgerConfig {
  std::vector<std::uint64_t> device_capacity; // per GPU: the budget (already min(budget, GPU memory))
  std::uint64_t host_capacity = std::numeric_limits<std::uint64_t>::max();
  AllocatorKind allocator = AllocatorKind::bytes;
  std::uint64_t alignment = 256; // pool blocks are rounded up to this (memsim-cuda's default)
  std::size_t instance_count = 1;
  // pool: per GPU the arena's size when it differs from the capacity (memsim-cuda's arena has slack beyond the
  // budget for alignment); empty or 0: the capacity.
  std::vector<std::uint64_t> arena_bytes;
  // pool: released blocks stay apart (with their release steps) until settle() says every future allocation is
  // ordered after the release; allocations pass an Ordering and get the waits their block needs (memsim-cuda).
  bool stream_ordered_reuse = false;
  // v2 shared_across_instances: per tensor, 1 when every instance uses one slot (that of instance 0). Empty: none.
  std::vector<std::uint8_t> shared_tensor;
};

// What a stream-ordered allocation may reuse without waiting, and the release steps it must wait on.
struct Ordering {
  DevicePool::IsOrdered is_ordered;
  std::vector<StepId> waits; // filled by the allocation
};

// Why an allocation was refused, with the numbers a message needs.
struct Denial {
  FailureKind kind = FailureKind::out_of_memory;
  std::uint64_t in_use = 0;
  std::uint64_t requested = 0;
  std::uint64_t capacity = 0;
  std::uint64_t largest_free_block = 0; // pool only
};

class MemoryLedger {
public:
  MemoryLedger(const Trace& trace, const LedgerConfig& config);

  std::size_t device_count() const { return device_count_; }
  // Spaces are GPU indices; the host is space -1.
  static constexpr int kHost = -1;

  bool resident(int space, int instance, TensorId tensor) const { return slots(space)[slot(instance, tensor)] != 0; }
  // Makes the tensor resident (its full size); a denial leaves the ledger unchanged. `ordering`: see
  // LedgerConfig::stream_ordered_reuse (nullptr: every release is ordered before).
  std::optional<Denial> allocate(int space, int instance, TensorId tensor, StepId by, Ordering* ordering = nullptr);
  void release(int space, int instance, TensorId tensor, StepId by);
  // v2 views (zero-time, bytes in use unchanged): split makes `parts` resident in place of the resident `parent`,
  // merge the inverse. The caller checks residency first; a part (split) or the parent (merge) already resident is
  // a double_allocation denial and changes nothing. Under the pool allocator the parts live at offsets in the
  // parent's block, and a block returns to the pool only when nothing that holds it (a part, or a parent merged
  // from parts) is resident any more: freeing one part lowers the bytes in use but frees no pool space.
  std::optional<Denial> split(int space, int instance, TensorId parent, const std::vector<TensorId>& parts, StepId by);
  std::optional<Denial> merge(int space, int instance, TensorId parent, const std::vector<TensorId>& parts, StepId by);
  // The tensor a denied split or merge is reported against: the last part already resident (split), else the parent.
  TensorId view_clash(int space, int instance, TensorId parent, const std::vector<TensorId>& parts,
                      bool splitting) const;
  // Anonymous bytes (an op's workspace). `handle` identifies the block for release_bytes (pool: its offset).
  std::optional<Denial> allocate_bytes(int space, std::uint64_t bytes, StepId by, std::uint64_t& handle,
                                       Ordering* ordering = nullptr);
  void release_bytes(int space, std::uint64_t bytes, std::uint64_t handle, StepId by);
  // pool: where a resident tensor's block lives (0 with the bytes allocator).
  std::uint64_t offset(int space, int instance, TensorId tensor) const;
  // stream_ordered_reuse: forgets the releases every future allocation is ordered after and merges free blocks.
  void settle(int space, const DevicePool::IsOrdered& ordered_for_all_future);

  std::uint64_t in_use(int space) const { return account(space).in_use; }
  std::uint64_t peak(int space) const { return account(space).peak; }
  std::uint64_t capacity(int space) const { return account(space).capacity; }
  std::uint64_t largest_free_block(int space) const; // pool: contiguous; bytes: capacity - in use
  // Whether allocations of these sizes, made in this order, would all succeed now (changes nothing).
  bool fits(int space, const std::vector<std::uint64_t>& sizes) const;

private:
  // pool: a block that views share (created by a split or merge); it returns to the pool when `holders` is 0.
  struct SharedBlock {
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
    int holders = 0;
  };
  struct Account {
    std::vector<std::uint8_t> resident; // per slot
    std::vector<std::uint64_t> offset;  // pool: per slot, where the block lives
    // pool: the slots that are views, with the shared blocks they hold (others own the block at `offset`).
    std::map<std::size_t, std::vector<std::size_t>> views;
    std::vector<SharedBlock> shared_blocks;
    std::uint64_t in_use = 0;
    std::uint64_t peak = 0;
    std::uint64_t capacity = 0;
    std::optional<DevicePool> pool;
  };
  std::size_t slot(int instance, TensorId tensor) const
  {
    const auto t = static_cast<std::size_t>(tensor);
    if (!shared_.empty() && shared_[t])
      return t; // one slot for every instance
    return static_cast<std::size_t>(instance) * tensor_count_ + t;
  }
  // pool: the shared blocks a resident slot holds (a block of its own becomes a shared block first).
  std::vector<std::size_t> take_blocks(Account& account, std::size_t index, std::uint64_t bytes);
  void drop_blocks(Account& account, const std::vector<std::size_t>& blocks, int count, StepId by);
  Account& account(int space) { return space == kHost ? host_ : devices_[static_cast<std::size_t>(space)]; }
  const Account& account(int space) const { return space == kHost ? host_ : devices_[static_cast<std::size_t>(space)]; }
  const std::vector<std::uint8_t>& slots(int space) const { return account(space).resident; }
  // Reserves bytes (and a pool block); nullopt on success.
  std::optional<Denial> reserve(Account& account, std::uint64_t bytes, std::uint64_t& offset, Ordering* ordering);
  void unreserve(Account& account, std::uint64_t bytes, std::uint64_t offset, StepId by);

  const Trace* trace_;
  std::size_t tensor_count_ = 0;
  std::size_t device_count_ = 0;
  bool stream_ordered_reuse_ = false;
  std::vector<std::uint8_t> shared_;
  std::vector<Account> devices_;
  Account host_;
};

// The one message format for failures (every executor). `step` describes the step ("step 3 (compute on
// gpu0/compute)"), `action` what it did to the object ("allocates", "reads", ...), `object` the tensor or bytes
// ("tensor 4 'a' (100 bytes)"), `space` the memory space ("gpu0", "host"); `blocked_on` the step a deadlocked one
// waits for. Without a time (memsim-cuda's program before it runs) the message says "before it runs" instead.
struct FailureText {
  std::string step;
  std::string action;
  std::string object;
  std::string space;
  std::optional<double> time_s;
  Denial numbers;
  StepId blocked_on = -1;
};
std::string failure_message(FailureKind kind, const FailureText& text);
// The parts of a FailureText, the same for every executor.
std::string describe_step(const Step& step);
std::string describe_tensor(const Trace& trace, TensorId id);
std::string space_name(int space); // "gpu0", "host"
// The message when the tensors resident from the start do not fit on `device` (named `name`).
std::string initial_residents_message(int device, const std::string& name, std::uint64_t needed,
                                      std::uint64_t capacity);

} // namespace memsim

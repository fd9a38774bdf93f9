#pragma once
// The memory ledger of the execution core: which (instance, tensor) is resident in which memory space (each GPU
// and the host), bytes in use and peaks, and -- with the pool allocator -- where each block lives. Every
// executor (SimGrid engine, fast engine, memsim-cuda's program builder) accounts memory through it, so they
// cannot disagree on what fits.
#include "memsim/sim/device_pool.hpp"
#include "memsim/sim/timeline.hpp"
#include "memsim/traces/trace.hpp"

#include <cstdint>
#include <limits>
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
  // Makes the tensor resident (its full size); a denial leaves the ledger unchanged.
  std::optional<Denial> allocate(int space, int instance, TensorId tensor, StepId by);
  void release(int space, int instance, TensorId tensor, StepId by);
  // Anonymous bytes (an op's workspace). `handle` identifies the block for release_bytes.
  std::optional<Denial> allocate_bytes(int space, std::uint64_t bytes, StepId by, std::uint64_t& handle);
  void release_bytes(int space, std::uint64_t bytes, std::uint64_t handle, StepId by);

  std::uint64_t in_use(int space) const { return account(space).in_use; }
  std::uint64_t peak(int space) const { return account(space).peak; }
  std::uint64_t capacity(int space) const { return account(space).capacity; }
  std::uint64_t largest_free_block(int space) const; // pool: contiguous; bytes: capacity - in use
  // Whether allocations of these sizes, made in this order, would all succeed now (changes nothing).
  bool fits(int space, const std::vector<std::uint64_t>& sizes) const;

private:
  struct Account {
    std::vector<std::uint8_t> resident; // per slot
    std::vector<std::uint64_t> offset;  // pool: per slot, where the block lives
    std::uint64_t in_use = 0;
    std::uint64_t peak = 0;
    std::uint64_t capacity = 0;
    std::optional<DevicePool> pool;
  };
  std::size_t slot(int instance, TensorId tensor) const
  {
    return static_cast<std::size_t>(instance) * tensor_count_ + static_cast<std::size_t>(tensor);
  }
  Account& account(int space) { return space == kHost ? host_ : devices_[static_cast<std::size_t>(space)]; }
  const Account& account(int space) const
  {
    return space == kHost ? host_ : devices_[static_cast<std::size_t>(space)];
  }
  const std::vector<std::uint8_t>& slots(int space) const { return account(space).resident; }
  // Reserves bytes (and a pool block); nullopt on success.
  std::optional<Denial> reserve(Account& account, std::uint64_t bytes, std::uint64_t& offset);
  void unreserve(Account& account, std::uint64_t bytes, std::uint64_t offset, StepId by);

  const Trace* trace_;
  std::size_t tensor_count_ = 0;
  std::size_t device_count_ = 0;
  std::vector<Account> devices_;
  Account host_;
};

// The one message format for failures (every executor). `step` describes the step ("step 3 (compute on
// gpu0/compute)"), `action` what it did to the object ("allocates", "reads", ...), `object` the tensor or bytes
// ("tensor 4 'a' (100 bytes)"), `space` the memory space ("gpu0", "host"); `blocked_on` the step a deadlocked one
// waits for.
struct FailureText {
  std::string step;
  std::string action;
  std::string object;
  std::string space;
  double time_s = 0;
  Denial numbers;
  StepId blocked_on = -1;
};
std::string failure_message(FailureKind kind, const FailureText& text);

} // namespace memsim

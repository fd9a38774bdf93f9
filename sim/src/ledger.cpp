#include "memsim/sim/ledger.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>

namespace memsim {

namespace {
constexpr std::array<std::pair<AllocatorKind, std::string_view>, 2> kAllocatorKinds{{
    {AllocatorKind::bytes, "bytes"},
    {AllocatorKind::pool, "pool"},
}};
} // namespace

std::string_view to_string(AllocatorKind kind)
{
  for (const auto& [value, name] : kAllocatorKinds)
    if (value == kind)
      return name;
  return "bytes";
}

std::optional<AllocatorKind> allocator_kind_from_string(std::string_view text)
{
  for (const auto& [value, name] : kAllocatorKinds)
    if (name == text)
      return value;
  return std::nullopt;
}

MemoryLedger::MemoryLedger(const Trace& trace, const LedgerConfig& config)
    : trace_(&trace), tensor_count_(trace.tensors.size()), device_count_(config.device_capacity.size()),
      stream_ordered_reuse_(config.stream_ordered_reuse), shared_(config.shared_tensor)
{
  const std::size_t slot_count = config.instance_count * tensor_count_;
  devices_.resize(device_count_);
  for (std::size_t d = 0; d < device_count_; ++d) {
    Account& device = devices_[d];
    device.resident.assign(slot_count, 0);
    device.capacity = config.device_capacity[d];
    if (config.allocator == AllocatorKind::pool) {
      device.offset.assign(slot_count, 0);
      const std::uint64_t arena =
          d < config.arena_bytes.size() && config.arena_bytes[d] > 0 ? config.arena_bytes[d] : device.capacity;
      device.pool.emplace(arena, config.alignment);
    }
  }
  host_.resident.assign(slot_count, 0);
  host_.capacity = config.host_capacity;
}

std::optional<Denial> MemoryLedger::reserve(Account& account, std::uint64_t bytes, std::uint64_t& offset,
                                            Ordering* ordering)
{
  if (bytes > account.capacity || account.in_use > account.capacity - bytes)
    return Denial{FailureKind::out_of_memory, account.in_use, bytes, account.capacity,
                  account.pool ? account.pool->largest_free_block() : 0};
  if (account.pool) {
    // In simulated time every release is ordered before later allocations: no stream-ordered waits.
    static const DevicePool::IsOrdered always = [](StepId) { return true; };
    auto placement = account.pool->place(bytes, ordering ? ordering->is_ordered : always);
    if (!placement)
      return Denial{FailureKind::fragmentation, account.in_use, bytes, account.capacity,
                    account.pool->largest_free_block()};
    offset = placement->offset;
    if (ordering)
      ordering->waits = std::move(placement->waits);
  }
  account.in_use += bytes;
  account.peak = std::max(account.peak, account.in_use);
  return std::nullopt;
}

void MemoryLedger::unreserve(Account& account, std::uint64_t bytes, std::uint64_t offset, StepId by)
{
  account.in_use -= bytes;
  if (account.pool && bytes > 0) {
    account.pool->release(offset, by);
    // Merge the freed block with free neighbours now: nothing waits on releases in simulated time.
    if (!stream_ordered_reuse_)
      account.pool->settle([](StepId) { return true; });
  }
}

std::optional<Denial> MemoryLedger::allocate(int space, int instance, TensorId tensor, StepId by, Ordering* ordering)
{
  (void)by;
  Account& target = account(space);
  const std::size_t index = slot(instance, tensor);
  const std::uint64_t bytes = trace_->tensor(tensor).bytes;
  if (target.resident[index])
    return Denial{FailureKind::double_allocation, target.in_use, bytes, target.capacity, 0};
  std::uint64_t offset = 0;
  if (auto denial = reserve(target, bytes, offset, ordering)) {
    if (space == kHost)
      denial->kind = FailureKind::host_out_of_memory;
    return denial;
  }
  target.resident[index] = 1;
  if (target.pool)
    target.offset[index] = offset;
  return std::nullopt;
}

void MemoryLedger::release(int space, int instance, TensorId tensor, StepId by)
{
  Account& target = account(space);
  const std::size_t index = slot(instance, tensor);
  if (!target.resident[index])
    throw std::logic_error(fmt::format("memory ledger: tensor {} of instance {} is not resident", tensor, instance));
  target.resident[index] = 0;
  if (target.pool) {
    if (auto view = target.views.find(index); view != target.views.end()) {
      target.in_use -= trace_->tensor(tensor).bytes;
      const std::vector<std::size_t> blocks = std::move(view->second);
      target.views.erase(view);
      drop_blocks(target, blocks, 1, by);
      return;
    }
  }
  unreserve(target, trace_->tensor(tensor).bytes, target.pool ? target.offset[index] : 0, by);
}

std::vector<std::size_t> MemoryLedger::take_blocks(Account& account, std::size_t index, std::uint64_t bytes)
{
  if (auto view = account.views.find(index); view != account.views.end()) {
    std::vector<std::size_t> blocks = std::move(view->second);
    account.views.erase(view);
    return blocks;
  }
  account.shared_blocks.push_back(SharedBlock{account.offset[index], bytes, 1});
  return {account.shared_blocks.size() - 1};
}

void MemoryLedger::drop_blocks(Account& account, const std::vector<std::size_t>& blocks, int count, StepId by)
{
  for (std::size_t block : blocks) {
    SharedBlock& shared = account.shared_blocks[block];
    shared.holders -= count;
    if (shared.holders == 0 && shared.bytes > 0) {
      account.pool->release(shared.offset, by);
      if (!stream_ordered_reuse_)
        account.pool->settle([](StepId) { return true; });
    }
  }
}

TensorId MemoryLedger::view_clash(int space, int instance, TensorId parent, const std::vector<TensorId>& parts,
                                  bool splitting) const
{
  TensorId clash = parent;
  if (splitting)
    for (TensorId part : parts)
      if (resident(space, instance, part))
        clash = part;
  return clash;
}

std::optional<Denial> MemoryLedger::split(int space, int instance, TensorId parent, const std::vector<TensorId>& parts,
                                          StepId by)
{
  (void)by;
  Account& target = account(space);
  for (TensorId part : parts)
    if (target.resident[slot(instance, part)])
      return Denial{FailureKind::double_allocation, target.in_use, trace_->tensor(part).bytes, target.capacity, 0};
  const std::size_t parent_index = slot(instance, parent);
  target.resident[parent_index] = 0;
  std::vector<std::size_t> blocks;
  std::uint64_t offset = 0;
  if (target.pool) {
    offset = target.offset[parent_index];
    blocks = take_blocks(target, parent_index, trace_->tensor(parent).bytes);
    for (std::size_t block : blocks)
      target.shared_blocks[block].holders += static_cast<int>(parts.size()) - 1;
  }
  std::uint64_t in_use = target.in_use - trace_->tensor(parent).bytes;
  for (TensorId part : parts) {
    const std::size_t index = slot(instance, part);
    target.resident[index] = 1;
    in_use += trace_->tensor(part).bytes;
    if (target.pool) {
      target.offset[index] = offset; // the parts lie one after another in the parent's block
      offset += trace_->tensor(part).bytes;
      target.views[index] = blocks;
    }
  }
  target.in_use = in_use;
  target.peak = std::max(target.peak, target.in_use);
  return std::nullopt;
}

std::optional<Denial> MemoryLedger::merge(int space, int instance, TensorId parent, const std::vector<TensorId>& parts,
                                          StepId by)
{
  Account& target = account(space);
  const std::size_t parent_index = slot(instance, parent);
  if (target.resident[parent_index])
    return Denial{FailureKind::double_allocation, target.in_use, trace_->tensor(parent).bytes, target.capacity, 0};
  std::vector<std::size_t> held;
  std::uint64_t in_use = target.in_use;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::size_t index = slot(instance, parts[i]);
    target.resident[index] = 0;
    in_use -= trace_->tensor(parts[i]).bytes;
    if (!target.pool)
      continue;
    if (i == 0)
      target.offset[parent_index] = target.offset[index];
    std::vector<std::size_t> blocks = take_blocks(target, index, trace_->tensor(parts[i]).bytes);
    for (std::size_t block : blocks) {
      if (std::find(held.begin(), held.end(), block) == held.end()) {
        held.push_back(block);
        ++target.shared_blocks[block].holders; // the parent holds it
      }
    }
    drop_blocks(target, blocks, 1, by); // the part no longer does
  }
  target.resident[parent_index] = 1;
  if (target.pool)
    target.views[parent_index] = std::move(held);
  target.in_use = in_use + trace_->tensor(parent).bytes;
  target.peak = std::max(target.peak, target.in_use);
  return std::nullopt;
}

bool MemoryLedger::fits(int space, const std::vector<std::uint64_t>& sizes) const
{
  const Account& target = account(space);
  std::uint64_t total = 0;
  for (std::uint64_t bytes : sizes)
    total += bytes;
  if (total > target.capacity || target.in_use > target.capacity - total)
    return false;
  if (!target.pool)
    return true;
  DevicePool trial = *target.pool; // placement depends on the order: place them as the step would
  for (std::uint64_t bytes : sizes)
    if (!trial.place(bytes, [](StepId) { return true; }))
      return false;
  return true;
}

std::optional<Denial> MemoryLedger::allocate_bytes(int space, std::uint64_t bytes, StepId by, std::uint64_t& handle,
                                                   Ordering* ordering)
{
  (void)by;
  handle = 0;
  auto denial = reserve(account(space), bytes, handle, ordering);
  if (denial && space == kHost)
    denial->kind = FailureKind::host_out_of_memory;
  return denial;
}

void MemoryLedger::release_bytes(int space, std::uint64_t bytes, std::uint64_t handle, StepId by)
{
  unreserve(account(space), bytes, handle, by);
}

std::uint64_t MemoryLedger::offset(int space, int instance, TensorId tensor) const
{
  const Account& target = account(space);
  return target.pool ? target.offset[slot(instance, tensor)] : 0;
}

void MemoryLedger::settle(int space, const DevicePool::IsOrdered& ordered_for_all_future)
{
  Account& target = account(space);
  if (target.pool)
    target.pool->settle(ordered_for_all_future);
}

std::uint64_t MemoryLedger::largest_free_block(int space) const
{
  const Account& target = account(space);
  return target.pool ? target.pool->largest_free_block() : target.capacity - std::min(target.capacity, target.in_use);
}

std::string failure_message(FailureKind kind, const FailureText& text)
{
  const Denial& n = text.numbers;
  const std::string at = text.time_s ? fmt::format("at t={:.9f}s", *text.time_s) : std::string("before it runs");
  switch (kind) {
  case FailureKind::out_of_memory:
    return fmt::format("out of memory: {} {} {} on {} {} with {} bytes in use; budget is {} bytes", text.step,
                       text.action, text.object, text.space, at, n.in_use, n.capacity);
  case FailureKind::fragmentation:
    return fmt::format("out of memory (fragmentation): {} {} {} on {} {} with {} bytes in use of the budget of "
                       "{} bytes, but the largest free block is {} bytes",
                       text.step, text.action, text.object, text.space, at, n.in_use, n.capacity, n.largest_free_block);
  case FailureKind::host_out_of_memory:
    return fmt::format("host memory full: {} needs {} bytes for {} {} with {} of {} bytes in use", text.step,
                       n.requested, text.object, at, n.in_use, n.capacity);
  case FailureKind::double_allocation:
    return fmt::format("{} {} {} on {} but it is already resident there (double allocation) {}", text.step, text.action,
                       text.object, text.space, at);
  case FailureKind::not_resident:
    return fmt::format("{} {} {} but it is not resident on {} {} (never produced, freed, or not yet "
                       "prefetched)",
                       text.step, text.action, text.object, text.space, at);
  case FailureKind::no_host_copy:
    return fmt::format("{} {} {} {} but the host has no copy (it was never offloaded)", text.step, text.action,
                       text.object, at);
  case FailureKind::deadlock:
    return fmt::format("deadlock {}: {} waits for step {}, which can never run (stream order and deps form "
                       "a cycle)",
                       at, text.step, text.blocked_on);
  }
  return text.step;
}

std::string describe_step(const Step& step)
{
  return fmt::format("step {} ({} on {}/{})", step.id, to_string(step.kind), space_name(step.device), step.stream);
}

std::string describe_tensor(const Trace& trace, TensorId id)
{
  return fmt::format("tensor {} '{}' ({} bytes)", id, trace.tensor(id).name, trace.tensor(id).bytes);
}

std::string space_name(int space) { return space == MemoryLedger::kHost ? "host" : fmt::format("gpu{}", space); }

std::string initial_residents_message(int device, const std::string& name, std::uint64_t needed, std::uint64_t capacity)
{
  return fmt::format("out of memory: device {} ('{}'): the tensors resident from the start need {} bytes, budget is "
                     "{} bytes",
                     device, name, needed, capacity);
}

} // namespace memsim

#include "memsim/sim/memory_cursor.hpp"

#include "memsim/sim/flat_trace.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace memsim {

MemoryCursor::MemoryCursor(const FlatTrace& ops, std::span<const TensorId> on_device,
                           std::span<const TensorId> counted_elsewhere)
    : ops_(&ops), bytes_(ops.tensor_bytes()), on_device_(bytes_.size(), 0)
{
  for (TensorId id : counted_elsewhere)
    bytes_.at(static_cast<std::size_t>(id)) = 0;
  for (TensorId id : on_device)
    allocate(id);
  start_bytes_ = in_use_;
  peak_ = in_use_;
}

void MemoryCursor::allocate(TensorId tensor)
{
  std::uint8_t& flag = on_device_.at(static_cast<std::size_t>(tensor));
  if (flag)
    throw std::logic_error(fmt::format("memory cursor: tensor {} '{}' is allocated twice", tensor,
                                       ops_->trace().tensor(tensor).name));
  flag = 1;
  in_use_ += bytes_[static_cast<std::size_t>(tensor)];
}

void MemoryCursor::note(std::uint64_t bytes, std::optional<OpId> op)
{
  if (bytes > peak_) {
    peak_ = bytes;
    peak_op_ = op;
  }
}

std::uint64_t MemoryCursor::run(OpId id)
{
  for (TensorId out : ops_->outputs(id))
    allocate(out);
  const std::uint64_t during = in_use_ + ops_->workspace_bytes(id);
  note(during, id);
  return during;
}

void MemoryCursor::bring(TensorId tensor)
{
  allocate(tensor);
  note(in_use_, std::nullopt);
}

void MemoryCursor::free(TensorId tensor)
{
  std::uint8_t& flag = on_device_.at(static_cast<std::size_t>(tensor));
  if (!flag)
    throw std::logic_error(fmt::format("memory cursor: tensor {} '{}' is freed but not on the device", tensor,
                                       ops_->trace().tensor(tensor).name));
  flag = 0;
  in_use_ -= bytes_[static_cast<std::size_t>(tensor)];
}

} // namespace memsim

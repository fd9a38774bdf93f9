#include "memsim/sim/memory_cursor.hpp"

#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace memsim {

MemoryCursor::MemoryCursor(const Trace& trace, std::span<const TensorId> on_device,
                           std::span<const TensorId> counted_elsewhere)
    : trace_(&trace), bytes_(trace.tensors.size()), on_device_(trace.tensors.size(), 0)
{
  for (const Tensor& tensor : trace.tensors)
    bytes_[static_cast<std::size_t>(tensor.id)] = tensor.bytes;
  start(on_device, counted_elsewhere);
}

MemoryCursor::MemoryCursor(const TraceAnalysis& analysis, std::span<const TensorId> on_device,
                           std::span<const TensorId> counted_elsewhere)
    : trace_(&analysis.trace()), analysis_(&analysis), bytes_(analysis.tensor_bytes()), on_device_(bytes_.size(), 0)
{
  start(on_device, counted_elsewhere);
}

void MemoryCursor::start(std::span<const TensorId> on_device, std::span<const TensorId> counted_elsewhere)
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
                                       trace_->tensor(tensor).name));
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
  const std::span<const TensorId> outputs =
      analysis_ ? analysis_->outputs(id) : std::span<const TensorId>(trace_->op(id).outputs);
  for (TensorId out : outputs)
    allocate(out);
  const std::uint64_t during = in_use_ + (analysis_ ? analysis_->workspace_bytes(id) : trace_->op(id).workspace_bytes);
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
                                       trace_->tensor(tensor).name));
  flag = 0;
  in_use_ -= bytes_[static_cast<std::size_t>(tensor)];
}

} // namespace memsim

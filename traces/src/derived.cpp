// v2 trace additions that need checks beyond one field: tensor shapes against bytes, derived ops' sources.
#include "memsim/traces/trace.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace memsim {

std::optional<std::string> shape_problem(const Tensor& tensor, std::uint64_t element_bytes)
{
  if (tensor.shape.empty())
    return std::nullopt;
  std::uint64_t elements = 1;
  for (std::int64_t extent : tensor.shape)
    elements *= static_cast<std::uint64_t>(extent);
  if (element_bytes > 0 && elements * element_bytes == tensor.bytes)
    return std::nullopt;
  for (std::uint64_t size : {1u, 2u, 4u, 8u})
    if (elements * size == tensor.bytes)
      return std::nullopt;
  return fmt::format("shape [{}] holds {} elements, but {} bytes is not {} x an element size{}",
                     fmt::join(tensor.shape, ", "), elements, tensor.bytes, elements,
                     element_bytes > 0 ? fmt::format(" (the trace's dtype takes {} bytes)", element_bytes) : "");
}

std::optional<std::string> derived_op_problem(const Op& op, std::int64_t op_count)
{
  const std::optional<OpId> source = op.split_of     ? std::optional<OpId>(op.split_of->op)
                                     : op.fused_from ? std::optional<OpId>(op.fused_from->op)
                                                     : std::nullopt;
  if (!source)
    return std::nullopt;
  if (*source < 0 || *source >= op_count)
    return fmt::format("op {} derives from op {}, which does not exist", op.id, *source);
  if (*source == op.id)
    return fmt::format("op {} cannot derive from itself", op.id);
  return std::nullopt;
}

void time_derived_ops(std::vector<Op>& ops)
{
  for (Op& op : ops) {
    if (op.has_time || !(op.split_of || op.fused_from))
      continue;
    const auto source = static_cast<std::size_t>(op.split_of ? op.split_of->op : op.fused_from->op);
    if (source >= ops.size())
      continue; // validation reports it
    const double source_time = ops[source].time_s;
    op.time_s = op.split_of ? source_time / op.split_of->parts : source_time * op.fused_from->models;
  }
}

std::optional<std::int64_t> trace_batch_size(const Trace& trace)
{
  if (trace.source.batch > 0)
    return trace.source.batch;
  for (const Tensor& tensor : trace.tensors)
    if (tensor.kind == TensorKind::input && tensor.batch_axis && !tensor.shape.empty())
      return tensor.shape[static_cast<std::size_t>(*tensor.batch_axis)];
  return std::nullopt;
}

std::optional<std::int64_t> trace_samples_per_iteration(const Trace& trace)
{
  const std::optional<std::int64_t> batch = trace_batch_size(trace);
  if (!batch)
    return std::nullopt;
  return *batch * trace.source.models;
}

} // namespace memsim

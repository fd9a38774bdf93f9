#include "memsim/hwmodels/rescale.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/cost_model.hpp"
#include "memsim/hwmodels/efficiency.hpp"

#include <fmt/format.h>

#include <cmath>

namespace memsim {

namespace {

// round(value x batch / recorded), at least 1 when value was positive; exact in 128-bit integers.
std::uint64_t scale_count(std::uint64_t value, std::int64_t batch, std::int64_t recorded)
{
  const auto numerator = static_cast<unsigned __int128>(value) * static_cast<unsigned __int128>(batch);
  const auto scaled = static_cast<std::uint64_t>((numerator + static_cast<unsigned __int128>(recorded) / 2) /
                                                 static_cast<unsigned __int128>(recorded));
  return value > 0 && scaled == 0 ? 1 : scaled;
}

void rescale_tensor(Tensor& tensor, std::int64_t batch, std::int64_t recorded)
{
  if (!is_batch_proportional(tensor))
    return;
  if (tensor.shape.empty()) {
    tensor.bytes = scale_count(tensor.bytes, batch, recorded);
    return;
  }
  auto& extent = tensor.shape[static_cast<std::size_t>(*tensor.batch_axis)];
  if (extent <= 0)
    return;
  const std::uint64_t bytes_per_index = tensor.bytes / static_cast<std::uint64_t>(extent);
  extent = static_cast<std::int64_t>(scale_count(static_cast<std::uint64_t>(extent), batch, recorded));
  tensor.bytes = bytes_per_index * static_cast<std::uint64_t>(extent);
}

double io_bytes(const Op& op, const std::vector<Tensor>& tensors)
{
  double bytes = 0;
  for (TensorId id : op.inputs)
    bytes += static_cast<double>(tensors[static_cast<std::size_t>(id)].bytes);
  for (TensorId id : op.outputs)
    bytes += static_cast<double>(tensors[static_cast<std::size_t>(id)].bytes);
  return bytes;
}

} // namespace

bool is_batch_proportional(const Tensor& tensor)
{
  if (!tensor.shape.empty())
    return tensor.batch_axis.has_value();
  return tensor.kind == TensorKind::input || tensor.kind == TensorKind::activation ||
         tensor.kind == TensorKind::gradient;
}

Trace rescale_trace(const Trace& trace, std::int64_t batch, const std::optional<Gpu>& target,
                    const std::string& source_name)
{
  const std::int64_t recorded = trace.source.batch;
  if (recorded <= 0)
    throw InputError(source_name + ": at /source/batch",
                     "the trace does not say its batch size (source.batch), so it cannot be rescaled");
  if (batch <= 0)
    throw InputError(source_name, fmt::format("batch {} must be positive", batch));
  // The cost model on a one-GPU machine of the target; without one, the recording GPU (its preset if any, else
  // a spec named after it: on the recording GPU the curve's half-work is all the model needs).
  Machine machine;
  machine.name = "rescale-target";
  const CostModel probe(trace, machine);
  Gpu gpu;
  if (target) {
    gpu = *target;
  } else if (probe.recording_gpu()) {
    gpu = *probe.recording_gpu();
  } else {
    gpu.name = "gpu0";
    gpu.model = trace.source.device;
  }
  machine.gpus.push_back(gpu);
  const CostModel cost(trace, machine);

  Trace scaled = trace;
  for (Tensor& tensor : scaled.tensors)
    rescale_tensor(tensor, batch, recorded);
  const double ratio = static_cast<double>(batch) / static_cast<double>(recorded);
  for (std::size_t i = 0; i < scaled.ops.size(); ++i) {
    const Op& old_op = trace.ops[i];
    Op& op = scaled.ops[i];
    bool touches_batch = false;
    for (const std::vector<TensorId>* ids : {&op.inputs, &op.outputs})
      for (TensorId id : *ids)
        touches_batch = touches_batch || is_batch_proportional(trace.tensor(id));
    if (!touches_batch) {
      op.time_s = cost.kernel_time(old_op, gpu, 1.0);
      continue;
    }
    if (op.flops)
      *op.flops *= ratio;
    const double old_io = io_bytes(old_op, trace.tensors);
    if (op.bytes_accessed && old_io > 0)
      *op.bytes_accessed *= io_bytes(op, scaled.tensors) / old_io;
    op.workspace_bytes = scale_count(op.workspace_bytes, batch, recorded);
    const OpClass op_class = classify_op(old_op);
    const double old_work = op_work(old_op, op_class);
    const double work_scale = op_class == OpClass::unsized ? ratio
                              : old_work > 0               ? op_work(op, op_class) / old_work
                                                           : 1.0;
    if (op.has_time) // a derived op without time stays timed from its source
      op.time_s = cost.kernel_time(old_op, gpu, work_scale);
  }
  scaled.source.tool =
      fmt::format("memsim trace rescale from batch {} on {} ({})", recorded,
                  trace.source.device.empty() ? "an unnamed GPU" : trace.source.device, trace.source.tool);
  scaled.source.batch = batch;
  scaled.source.device = gpu.model;
  validate_trace(scaled, source_name);
  return scaled;
}

} // namespace memsim

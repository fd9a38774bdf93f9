#include "memsim/hwmodels/cost_model.hpp"

#include <algorithm>

namespace memsim {

CostModel::CostModel(const Trace& trace, const Machine& machine) : trace_(&trace), machine_(&machine) {}

double CostModel::op_time(const Op& op, std::size_t gpu_index) const
{
  const Gpu& gpu = machine_->gpus.at(gpu_index);
  const bool recorded_here = trace_->source.device.empty() || trace_->source.device == gpu.model;
  if (recorded_here || (!op.flops && !op.bytes_accessed))
    return op.time_s + gpu.kernel_launch_s;
  // Roofline rescale: the op is bound by arithmetic or by HBM traffic, whichever is slower on this GPU.
  double seconds = 0;
  if (op.flops) {
    auto peak = gpu.peak_flops.find(trace_->source.dtype);
    if (peak == gpu.peak_flops.end())
      peak = gpu.peak_flops.find("fp32");
    if (peak != gpu.peak_flops.end() && peak->second > 0)
      seconds = std::max(seconds, *op.flops / peak->second);
  }
  if (op.bytes_accessed && gpu.hbm_bandwidth > 0)
    seconds = std::max(seconds, *op.bytes_accessed / gpu.hbm_bandwidth);
  return seconds + gpu.kernel_launch_s;
}

double CostModel::host_op_time(const Op& op) const
{
  if (op.cpu_time_s)
    return *op.cpu_time_s;
  const HostSpec& host = machine_->host;
  bool known = false;
  double seconds = 0;
  if (op.flops && host.flops > 0) {
    seconds = std::max(seconds, *op.flops / host.flops);
    known = true;
  }
  if (host.memory_bandwidth > 0) {
    double bytes = 0;
    if (op.bytes_accessed) {
      bytes = *op.bytes_accessed;
    } else {
      for (TensorId id : op.inputs)
        bytes += static_cast<double>(trace_->tensor(id).bytes);
      for (TensorId id : op.outputs)
        bytes += static_cast<double>(trace_->tensor(id).bytes);
    }
    seconds = std::max(seconds, bytes / host.memory_bandwidth);
    known = true;
  }
  return known ? seconds : op.time_s;
}

double CostModel::ideal_time(std::size_t gpu) const
{
  double total = 0;
  for (const Op& op : trace_->ops)
    total += op_time(op, gpu);
  return total;
}

} // namespace memsim

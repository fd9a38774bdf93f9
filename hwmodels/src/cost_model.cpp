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

double CostModel::ideal_time(std::size_t gpu) const
{
  double total = 0;
  for (const Op& op : trace_->ops)
    total += op_time(op, gpu);
  return total;
}

} // namespace memsim

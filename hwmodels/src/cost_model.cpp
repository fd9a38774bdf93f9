#include "memsim/hwmodels/cost_model.hpp"

#include <algorithm>
#include <map>

namespace memsim {

namespace {

// Derived ops may name derived ops; a chain longer than this is a cycle, and the op keeps its placeholder time.
constexpr int kMaxDerivationDepth = 64;

// GPU specs of the presets by model name, read once (first file in name order wins).
const std::map<std::string, Gpu>& preset_gpus()
{
  static const std::map<std::string, Gpu> gpus = [] {
    std::map<std::string, Gpu> by_model;
    const std::filesystem::path dir = default_presets_dir();
    if (!std::filesystem::is_directory(dir))
      return by_model;
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.path().extension() == ".yaml")
        files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      try {
        for (const Gpu& gpu : load_machine(file).gpus)
          by_model.emplace(gpu.model, gpu);
      } catch (const std::exception&) {
        // A broken preset is reported when it is used as a machine; here it just names no GPU.
      }
    }
    return by_model;
  }();
  return gpus;
}

} // namespace

std::optional<Gpu> find_preset_gpu(const std::string& model)
{
  const auto& gpus = preset_gpus();
  auto found = gpus.find(model);
  return found == gpus.end() ? std::nullopt : std::optional<Gpu>(found->second);
}

double reference_peak(const Gpu& gpu, OpClass op_class, const std::string& dtype)
{
  if (op_class == OpClass::memory)
    return gpu.hbm_bandwidth;
  if (op_class == OpClass::launch || op_class == OpClass::unsized)
    return 0;
  auto peak = gpu.peak_flops.find(dtype);
  if (peak == gpu.peak_flops.end())
    peak = gpu.peak_flops.find("fp32");
  return peak == gpu.peak_flops.end() ? 0 : peak->second;
}

CostModel::CostModel(const Trace& trace, const Machine& machine) : trace_(&trace), machine_(&machine)
{
  const std::string& model = trace.source.device;
  if (model.empty())
    return;
  for (const Gpu& gpu : machine.gpus)
    if (gpu.model == model) {
      recording_gpu_ = gpu;
      return;
    }
  recording_gpu_ = find_preset_gpu(model);
}

double CostModel::op_time(const Op& op, std::size_t gpu_index, double scale) const
{
  const Gpu& gpu = machine_->gpus.at(gpu_index);
  return kernel_time(op, gpu, scale) + gpu.kernel_launch_s;
}

double CostModel::kernel_time(const Op& op, const Gpu& target, double scale) const
{
  return kernel_time_at_depth(op, target, scale, 0);
}

double CostModel::kernel_time_at_depth(const Op& op, const Gpu& target, double scale, int depth) const
{
  if (!op.has_time && (op.split_of || op.fused_from) && depth < kMaxDerivationDepth) {
    const OpId source = op.split_of ? op.split_of->op : op.fused_from->op;
    if (source >= 0 && static_cast<std::size_t>(source) < trace_->ops.size() && source != op.id) {
      const double factor = op.split_of ? 1.0 / op.split_of->parts : static_cast<double>(op.fused_from->models);
      return kernel_time_at_depth(trace_->op(source), target, scale * factor, depth + 1);
    }
  }
  const OpClass op_class = classify_op(op);
  const bool recorded_here = trace_->source.device.empty() || trace_->source.device == target.model;
  if (op_class == OpClass::launch || (recorded_here && scale == 1.0))
    return op.time_s;
  if (op_class == OpClass::unsized) // no work known: proportional to the size, the same on any GPU
    return op.time_s * scale;
  const double work = op_work(op, op_class);
  const EfficiencyCurve& target_curve = *target.efficiency.curve(op_class);
  const double target_peak = reference_peak(target, op_class, trace_->source.dtype);
  // On the recording GPU (or where a peak is unknown, so GPUs cannot be compared) the op keeps its measured
  // efficiency relative to the curve: time scales as (scale * work + half) / (work + half). The peak cancels.
  const auto same_gpu_time = [&] {
    return op.time_s * (scale * work + target_curve.half) / (work + target_curve.half);
  };
  if (recorded_here || !(target_peak > 0))
    return same_gpu_time();
  if (!recording_gpu_) // an unknown recording GPU: the target's curve alone
    return target_curve.seconds(scale * work, target_peak);
  const EfficiencyCurve& source_curve = *recording_gpu_->efficiency.curve(op_class);
  const double source_peak = reference_peak(*recording_gpu_, op_class, trace_->source.dtype);
  if (!(source_peak > 0))
    return same_gpu_time();
  // Measured efficiency / source curve's efficiency at the recorded work is kept on the target's curve.
  return op.time_s * target_curve.seconds(scale * work, target_peak) / source_curve.seconds(work, source_peak);
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

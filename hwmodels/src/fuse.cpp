// k models fused horizontally: tensors and work x k, op times from the efficiency curve or a batch-k*b rescale.
#include "memsim/hwmodels/fuse.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/cost_model.hpp"
#include "memsim/hwmodels/rescale.hpp"

#include <fmt/format.h>

#include <limits>

namespace memsim {

namespace {

constexpr int kMaxModels = 1024;

std::uint64_t times_models(std::uint64_t value, int models, const std::string& where)
{
  const auto k = static_cast<std::uint64_t>(models);
  if (value > std::numeric_limits<std::uint64_t>::max() / k)
    throw InputError(where, fmt::format("{} bytes x {} models does not fit in 64 bits", value, models));
  return value * k;
}

// The k-model structure without new times: bytes, shapes (a leading model axis), work x k; renamed.
Trace widen_to_models(const Trace& trace, int models, std::string_view fusion, const std::string& source_name)
{
  Trace fused = trace;
  for (Tensor& tensor : fused.tensors) {
    tensor.bytes = times_models(tensor.bytes, models, fmt::format("{}: at /tensors/{}", source_name, tensor.id));
    if (tensor.shape.empty())
      continue;
    tensor.shape.insert(tensor.shape.begin(), models);
    if (tensor.batch_axis)
      ++*tensor.batch_axis;
  }
  const auto k = static_cast<double>(models);
  for (Op& op : fused.ops) {
    if (op.flops)
      *op.flops *= k;
    if (op.bytes_accessed)
      *op.bytes_accessed *= k;
    if (op.cpu_time_s)
      *op.cpu_time_s *= k;
    op.workspace_bytes =
        times_models(op.workspace_bytes, models, fmt::format("{}: at /ops/{}/workspace_bytes", source_name, op.id));
  }
  fused.name = fused_trace_name(trace.name, models);
  fused.source.models = trace.source.models * models;
  fused.source.tool = fmt::format("memsim gen fuse: {} models, {} model ({})", models, fusion, trace.source.tool);
  return fused;
}

// The recording GPU's spec: the one given (its model must be the trace's device), the device's preset, or a spec
// named after the device with the default curves (on the recording GPU the curves' half-work is all that counts).
Gpu recording_gpu_for(const Trace& trace, const std::optional<Gpu>& given, const std::string& source_name)
{
  if (given) {
    if (!trace.source.device.empty() && given->model != trace.source.device)
      throw InputError(source_name + ": at /source/device",
                       fmt::format("the trace was recorded on '{}', not on the given GPU '{}' (model '{}'): fusion "
                                   "is timed on the recording GPU",
                                   trace.source.device, given->name, given->model));
    return *given;
  }
  if (std::optional<Gpu> preset = find_preset_gpu(trace.source.device))
    return *preset;
  Gpu gpu;
  gpu.name = "gpu0";
  gpu.model = trace.source.device;
  return gpu;
}

} // namespace

const ParamList<FuseSpec>& fuse_params()
{
  static const ParamList<FuseSpec> params{
      param("models", &FuseSpec::models, "models fused into one (K; 1 gives the trace back unchanged)",
            {.min = 1, .max = kMaxModels}),
      param("fusion", &FuseSpec::fusion, "how the fused ops are timed (memsim gen fuse --help)",
            {.choices = {"efficiency", "batch-proxy", "measured"}}),
      param("measured", &FuseSpec::measured,
            "directory of recorded fused traces <model>-b<batch>-k<K>-<tag>.trace.json[.gz] (fusion measured)"),
      param("machine", &FuseSpec::machine,
            "machine preset or file with a GPU of the trace's device model whose efficiency curves time the fused "
            "ops (default: the device's preset, else the default curves)")};
  return params;
}

FusionModel parse_fusion_model(const std::string& name)
{
  if (name == "efficiency")
    return FusionModel::efficiency;
  if (name == "batch-proxy")
    return FusionModel::batch_proxy;
  if (name == "measured")
    return FusionModel::measured;
  throw InputError("--fusion",
                   fmt::format("unknown fusion model '{}' (valid: efficiency, batch-proxy, measured)", name));
}

std::string fused_trace_name(const std::string& name, int models)
{
  return models == 1 ? name : fmt::format("{}-k{}", name, models);
}

Trace fuse_trace(const Trace& trace, int models, FusionModel model, const std::optional<Gpu>& recording_gpu,
                 const std::string& source_name)
{
  if (models < 1 || models > kMaxModels)
    throw InputError(source_name, fmt::format("models {} must be in [1, {}]", models, kMaxModels));
  if (models == 1)
    return trace;
  if (model == FusionModel::measured)
    throw InputError(source_name, "the measured fusion model reads recorded traces: use measured_fused_trace");
  if (model == FusionModel::batch_proxy && trace.source.batch <= 0)
    throw InputError(source_name + ": at /source/batch",
                     "the trace does not say its batch size (source.batch), which the batch-proxy fusion model needs");
  const Gpu gpu = recording_gpu_for(trace, recording_gpu, source_name);
  Trace fused =
      widen_to_models(trace, models, model == FusionModel::efficiency ? "efficiency" : "batch-proxy", source_name);
  const auto k = static_cast<double>(models);
  if (model == FusionModel::efficiency) {
    Machine machine;
    machine.name = "fuse-recording-gpu";
    machine.gpus.push_back(gpu);
    const CostModel cost(trace, machine);
    for (std::size_t i = 0; i < fused.ops.size(); ++i)
      if (fused.ops[i].has_time) // a derived op without time stays timed from its (fused) source
        fused.ops[i].time_s = cost.kernel_time(trace.ops[i], gpu, k);
  } else {
    const Trace at_batch = rescale_trace(trace, trace.source.batch * models, gpu, source_name);
    for (std::size_t i = 0; i < fused.ops.size(); ++i) {
      Op& op = fused.ops[i];
      if (!op.has_time)
        continue;
      // μ-TWO's update rule t = launch + k (t1 - launch): time_s excludes the launch the simulator adds.
      op.time_s = op.phase == Phase::update ? k * trace.ops[i].time_s : at_batch.ops[i].time_s;
    }
  }
  time_derived_ops(fused.ops); // their placeholders follow the fused sources (what summaries show)
  validate_trace(fused, source_name);
  return fused;
}

} // namespace memsim

#pragma once
// k copies of one model fused horizontally into one trace (`memsim gen fuse`, μ-TWO/HFTA; shared/specs/mu-two.md
// §3). Every tensor's bytes are k x the single model's (a leading model axis on its shape); every op becomes the
// k-model op, timed by one of three fusion models. fuse_trace(t, 1, any model) is t exactly.
#include "memsim/common/params.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/traces/trace.hpp"

#include <filesystem>
#include <optional>
#include <string>

namespace memsim {

enum class FusionModel {
  efficiency,  // each op at k x its work on the recording GPU's efficiency curve (CostModel, RESCALING.md)
  batch_proxy, // each op's time in the same trace rescaled to batch k*b; update ops k x their kernel time
  measured,    // a recorded vmap-fused trace of k models (replaces the trace: its ops differ)
};

// `memsim gen fuse`'s parameters, declared once (fuse_params()).
struct FuseSpec {
  int models = 1;
  std::string fusion = "efficiency";
  std::string measured; // directory of recorded fused traces (fusion measured)
  std::string machine;  // preset or file with a GPU of the trace's device model: its efficiency curves
};
const ParamList<FuseSpec>& fuse_params();
// "efficiency" -> FusionModel::efficiency ...; throws InputError("--fusion", ...) otherwise.
FusionModel parse_fusion_model(const std::string& name);

// The trace's name for k models: "<name>-k<k>" (the recorded fused traces' naming), `name` itself at k = 1.
std::string fused_trace_name(const std::string& name, int models);

// The k-model trace from the single-model `trace` under `model` (efficiency or batch_proxy; measured needs
// measured_fused_trace). `recording_gpu`: the spec of the GPU the trace was recorded on, whose model must be
// the trace's source.device (nullopt: the device's preset, else the default curves). Ops with flops x k,
// bytes_accessed x k, workspace x k, cpu_time_s x k; derived ops without time stay derived. batch_proxy throws
// InputError(source_name + ": at /source/batch", ...) when the trace has no source.batch. Throws
// InputError(source_name, ...) for models < 1.
Trace fuse_trace(const Trace& trace, int models, FusionModel model, const std::optional<Gpu>& recording_gpu,
                 const std::string& source_name);

// The recorded fused trace of `models` copies of `trace`'s model in `directory`: a file
// "<stem>-b<batch>-k<models>-<tag>.trace.json[.gz]" where <stem>-b<batch> is the trace's name (a trailing
// "-k<n>" dropped) and <batch> its source.batch, whose own source.batch equals the trace's and whose name is
// "<stem>-b<batch>-k<models>" (or "<stem>-b<batch>" at models 1). Among several (tags), the one recorded on the
// trace's device; still several or none: InputError naming the directory and what was looked for.
// The result is the recording, named fused_trace_name(trace.name, models).
Trace measured_fused_trace(const Trace& trace, int models, const std::filesystem::path& directory,
                           const std::string& source_name);

// `models` copies of `trace` under `model`: the trace itself at 1, measured_fused_trace from `measured` (the
// directory of recordings) for FusionModel::measured, else fuse_trace. What `memsim gen fuse`, an experiment's
// `sweep.models` and max-scale's models axis run.
Trace fuse_models(const Trace& trace, int models, FusionModel model, const std::filesystem::path& measured,
                  const std::optional<Gpu>& recording_gpu, const std::string& source_name);

} // namespace memsim

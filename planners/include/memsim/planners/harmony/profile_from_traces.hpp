#pragma once
// A layer profile (memsim/traces/layer_profile.hpp) derived from memsim traces of one model at several batch sizes,
// so that Harmony's estimator and search run on memsim's own models. The rules (which ops and bytes count where) are
// in traces/src/LAYER_PROFILE.md, "Profiles from memsim traces". It lives with the planners because the peaks are
// accounted by the execution core's MemoryCursor.
#include "memsim/traces/layer_profile.hpp"
#include "memsim/traces/trace.hpp"

#include <functional>
#include <string>
#include <vector>

namespace memsim::harmony {

// One trace and where it came from (a file name; errors name it).
struct SourcedTrace {
  std::string source;
  Trace trace;
};

struct LayerProfileOptions {
  // Seconds of one update op on the host CPU (the CLI passes a machine's host roofline, CostModel::host_op_time).
  // Empty: the op's cpu_time_s when recorded, else its recorded time_s (the GPU's, a lower bound for a CPU step).
  std::function<double(const Op&)> host_update_time;
  // X(u,l) must equal u times the per-sample bytes (taken at the smallest u) within this relative tolerance.
  double proportionality_tolerance = 0.05;
  std::string model;  // "" = the first trace's name
  std::string source; // provenance; "" = the traces' sources, batches and device
};

// The traces are the same model at distinct batch sizes (source.batch or the batch extent of an input); each
// becomes a sampled u of both passes. Throws InputError naming the trace's source when the traces do not share
// one op/tensor structure, a batch size is unknown or repeated, the forward is not a chain of layers, or X is not
// proportional to u.
LayerProfile layer_profile_from_traces(const std::vector<SourcedTrace>& traces,
                                       const LayerProfileOptions& options = {});

} // namespace memsim::harmony

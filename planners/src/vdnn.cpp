// vDNN (Rhu et al., MICRO 2016): offload forward activations to the host after their last forward use and prefetch
// them back `lookahead` layers before the backward op that needs them. vdnn-all moves every such activation,
// vdnn-conv only the inputs of convolutions.
//
// Options for the variants the TSPLIT paper ran (the authors' vdnnExecutor): `sync=layer` makes every op wait for
// the transfers that ran with the op before it (the executor synchronises both streams after every op, the
// "layer-wise synchronization" the paper blames for vDNN's slowness); `offload_start=consumer_start` starts an
// offload with its last forward reader instead of after it; `move_input` moves the network input too.
// Budget safety: async_account.hpp.
#include "async_account.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>

#include <map>

namespace memsim {
namespace {

struct VdnnOptions {
  int lookahead = 1; // layers
  std::string sync = "memory";
  std::string offload_start = "after_last_use";
  bool move_input = false;
};

bool is_convolution(const Op& op) { return op.phase == Phase::forward && op.type.find("conv") != std::string::npos; }

bool reads_convolution_input(const TraceAnalysis& analysis, TensorId id)
{
  for (OpId reader : analysis.readers(id))
    if (is_convolution(analysis.trace().op(reader)))
      return true;
  return false;
}

Plan plan_vdnn(const Trace& trace, const PlanRequest& request, const VdnnOptions& options, bool conv_only,
               const char* name)
{
  if (conv_only && std::none_of(trace.ops.begin(), trace.ops.end(), is_convolution))
    throw Infeasible(fmt::format("{} is not applicable: the model has no convolutions", name));
  const int lookahead = options.lookahead;
  const TraceAnalysis analysis(trace);

  // First backward op of each layer (backward runs from the last layer down).
  OpId first_backward = static_cast<OpId>(trace.ops.size());
  std::map<int, OpId> backward_start_of_layer;
  for (const Op& op : trace.ops)
    if (op.phase == Phase::backward) {
      first_backward = std::min(first_backward, op.id);
      backward_start_of_layer.emplace(op.layer, op.id);
    }

  // The sequence is the trace order: positions are op ids.
  std::vector<planning::SequenceEntry> sequence;
  for (const Op& op : trace.ops)
    sequence.push_back({op.id, false});
  std::vector<planning::MovedTensor> moved;
  for (const Tensor& tensor : trace.tensors) {
    const auto producer = analysis.producer(tensor.id);
    const bool network_input = options.move_input && !producer && tensor.kind == TensorKind::input;
    if (!network_input && (!producer || trace.op(*producer).phase != Phase::forward))
      continue;
    if (conv_only && !reads_convolution_input(analysis, tensor.id))
      continue;
    std::optional<OpId> last_forward_use = producer;
    std::optional<OpId> first_backward_use;
    for (OpId reader : analysis.readers(tensor.id)) {
      if (trace.op(reader).phase == Phase::backward) {
        first_backward_use = reader;
        break;
      }
      last_forward_use = reader;
    }
    if (!first_backward_use || !last_forward_use)
      continue; // not needed by the backward (the default schedule already frees it), or never read before it
    // Prefetch when the backward of the layer `lookahead` above the consumer starts (just after the op before it).
    const int consumer_layer = trace.op(*first_backward_use).layer;
    OpId start = first_backward;
    auto ahead = backward_start_of_layer.find(consumer_layer + static_cast<int>(lookahead));
    if (ahead != backward_start_of_layer.end())
      start = ahead->second;
    const OpId trigger = std::clamp<OpId>(start - 1, *last_forward_use, *first_backward_use - 1);
    moved.push_back({tensor.id, static_cast<std::size_t>(*last_forward_use),
                     static_cast<std::size_t>(*first_backward_use), static_cast<std::size_t>(trigger)});
  }

  planning::SwapEmission emission;
  emission.planner = name;
  emission.budget_bytes = request.budget_bytes;
  emission.sync = options.sync == "layer" ? planning::SwapSync::layer : planning::SwapSync::memory;
  emission.offload_at_consumer_start = options.offload_start == "consumer_start";
  Plan plan;
  plan.estimate.peak_bytes = planning::emit_with_swaps(analysis, sequence, moved, emission, plan).peak_bytes;
  return plan;
}

Plan plan_vdnn_all(const Trace& trace, const Machine&, const PlanRequest& request, const VdnnOptions& options)
{
  return plan_vdnn(trace, request, options, false, "vdnn-all");
}
Plan plan_vdnn_conv(const Trace& trace, const Machine&, const PlanRequest& request, const VdnnOptions& options)
{
  return plan_vdnn(trace, request, options, true, "vdnn-conv");
}

ParamList<VdnnOptions> vdnn_params()
{
  return {param("lookahead", &VdnnOptions::lookahead,
                "prefetch when the backward of the layer this many layers above the consumer starts",
                {.min = 0, .max = 1000}),
          param("sync", &VdnnOptions::sync,
                "memory: compute waits for a transfer only when it needs the memory or the tensor; layer: every op "
                "also waits for the transfers that ran with the op before it (vDNN's per-layer synchronisation)",
                {.choices = {"memory", "layer"}}),
          param("offload_start", &VdnnOptions::offload_start,
                "start an offload after the tensor's last forward reader, or when that reader starts",
                {.choices = {"after_last_use", "consumer_start"}}),
          param("move_input", &VdnnOptions::move_input,
                "also offload the network input (initially resident) and prefetch it for the backward")};
}

} // namespace

MEMSIM_REGISTER_PLANNER(vdnn_all, "vdnn-all",
                        "vDNN: offload every forward activation needed by the backward, prefetch it layers ahead",
                        vdnn_params(), plan_vdnn_all);
MEMSIM_REGISTER_PLANNER(vdnn_conv, "vdnn-conv", "vDNN: offload and prefetch only the inputs of convolutions",
                        vdnn_params(), plan_vdnn_conv);

} // namespace memsim

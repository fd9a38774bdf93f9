#include "memsim/traces/summary.hpp"

#include "memsim/common/error.hpp"
#include "memsim/traces/views.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace memsim {
namespace {

constexpr std::array<TensorKind, 7> kKinds{TensorKind::input,    TensorKind::weight,      TensorKind::activation,
                                           TensorKind::gradient, TensorKind::weight_grad, TensorKind::optimizer_state,
                                           TensorKind::other};
constexpr std::array<Phase, 4> kPhases{Phase::forward, Phase::loss, Phase::backward, Phase::update};

std::string human_bytes(std::uint64_t bytes)
{
  const double value = static_cast<double>(bytes);
  if (value >= 1024.0 * 1024 * 1024)
    return fmt::format("{:.3f} GiB", value / (1024.0 * 1024 * 1024));
  if (value >= 1024.0 * 1024)
    return fmt::format("{:.3f} MiB", value / (1024.0 * 1024));
  if (value >= 1024.0)
    return fmt::format("{:.3f} KiB", value / 1024.0);
  return fmt::format("{} B", bytes);
}

} // namespace

TraceSummary summarize_trace(const Trace& trace, const MemoryProfile& default_profile)
{
  TraceSummary summary;
  summary.name = trace.name;
  summary.source = trace.source;
  summary.ops = trace.ops.size();
  summary.tensors = trace.tensors.size();
  for (const Tensor& tensor : trace.tensors) {
    const auto kind = static_cast<std::size_t>(tensor.kind);
    ++summary.tensors_by_kind[kind];
    summary.bytes_by_kind[kind] += tensor.bytes;
    if (tensor.kind == TensorKind::activation)
      summary.activation_bytes += tensor.bytes;
  }
  int max_layer = -1;
  for (const Op& op : trace.ops) {
    const auto phase = static_cast<std::size_t>(op.phase);
    ++summary.ops_by_phase[phase];
    summary.time_by_phase_s[phase] += op.time_s;
    max_layer = std::max(max_layer, op.layer);
    summary.ops_with_flops += op.flops.has_value();
    summary.ops_with_bytes_accessed += op.bytes_accessed.has_value();
  }
  summary.layers = static_cast<std::size_t>(max_layer + 1);
  summary.total_time_s = trace.total_time_s();
  summary.resident_bytes = default_profile.resident_bytes;
  summary.default_peak_bytes = default_profile.peak_bytes;
  summary.default_peak_op = default_profile.peak_op;
  // Activations still alive when the last forward (or loss) op ends: what keep-all holds for backward.
  const auto lifetimes = default_lifetimes(trace);
  OpId last_forward = -1;
  for (const Op& op : trace.ops)
    if (op.phase == Phase::forward || op.phase == Phase::loss)
      last_forward = op.id;
  for (const Tensor& tensor : trace.tensors) {
    const auto& lifetime = lifetimes[static_cast<std::size_t>(tensor.id)];
    if (tensor.kind == TensorKind::activation && lifetime.produced_by && *lifetime.produced_by <= last_forward &&
        (!lifetime.released_after || *lifetime.released_after > last_forward))
      summary.saved_activation_bytes += tensor.bytes;
  }
  try {
    summary.chain_layers = chain_view(trace).layers.size();
    summary.chain_view = true;
  } catch (const Infeasible& error) {
    summary.chain_view_reason = error.what();
  } catch (const InputError& error) {
    summary.chain_view_reason = error.what();
  }
  return summary;
}

nlohmann::json summary_to_json(const TraceSummary& summary)
{
  using nlohmann::json;
  json tensors_by_kind = json::object();
  for (TensorKind kind : kKinds) {
    const auto i = static_cast<std::size_t>(kind);
    tensors_by_kind[std::string(to_string(kind))] = {{"count", summary.tensors_by_kind[i]},
                                                     {"bytes", summary.bytes_by_kind[i]}};
  }
  json ops_by_phase = json::object();
  for (Phase phase : kPhases) {
    const auto i = static_cast<std::size_t>(phase);
    ops_by_phase[std::string(to_string(phase))] = {{"count", summary.ops_by_phase[i]},
                                                   {"time_s", summary.time_by_phase_s[i]}};
  }
  json result = {{"name", summary.name},
                 {"source",
                  {{"tool", summary.source.tool},
                   {"device", summary.source.device},
                   {"dtype", summary.source.dtype},
                   {"batch", summary.source.batch},
                   {"date", summary.source.date}}},
                 {"ops", summary.ops},
                 {"tensors", summary.tensors},
                 {"layers", summary.layers},
                 {"tensors_by_kind", tensors_by_kind},
                 {"ops_by_phase", ops_by_phase},
                 {"total_time_s", summary.total_time_s},
                 {"resident_bytes", summary.resident_bytes},
                 {"default_peak_bytes", summary.default_peak_bytes},
                 {"default_peak_op", summary.default_peak_op},
                 {"activation_bytes", summary.activation_bytes},
                 {"saved_activation_bytes", summary.saved_activation_bytes},
                 {"ops_with_flops", summary.ops_with_flops},
                 {"ops_with_bytes_accessed", summary.ops_with_bytes_accessed},
                 {"chain_view", summary.chain_view}};
  if (summary.chain_view)
    result["chain_layers"] = summary.chain_layers;
  else
    result["chain_view_reason"] = summary.chain_view_reason;
  return result;
}

std::string format_summary(const TraceSummary& summary)
{
  std::string text = fmt::format("trace '{}'", summary.name);
  if (!summary.source.tool.empty() || !summary.source.device.empty())
    text += fmt::format(" (tool: {}; device: {}; dtype {}; batch {}{})", summary.source.tool, summary.source.device,
                        summary.source.dtype, summary.source.batch,
                        summary.source.date.empty() ? "" : "; " + summary.source.date);
  text += fmt::format("\n  ops: {} in {} layers (", summary.ops, summary.layers);
  for (Phase phase : kPhases) {
    const auto i = static_cast<std::size_t>(phase);
    text += fmt::format("{}{} {} = {:.6f} s", phase == Phase::forward ? "" : ", ", to_string(phase),
                        summary.ops_by_phase[i], summary.time_by_phase_s[i]);
  }
  text += fmt::format(")\n  total_time_s: {:.6f}\n  tensors: {}\n", summary.total_time_s, summary.tensors);
  for (TensorKind kind : kKinds) {
    const auto i = static_cast<std::size_t>(kind);
    if (summary.tensors_by_kind[i] > 0)
      text += fmt::format("    {:<16} {:>7}  {:>14} B  ({})\n", to_string(kind), summary.tensors_by_kind[i],
                          summary.bytes_by_kind[i], human_bytes(summary.bytes_by_kind[i]));
  }
  text += fmt::format("  resident_bytes: {} ({})\n", summary.resident_bytes, human_bytes(summary.resident_bytes));
  text += fmt::format("  default_peak_bytes: {} ({}) while op {} runs\n", summary.default_peak_bytes,
                      human_bytes(summary.default_peak_bytes), summary.default_peak_op);
  text += fmt::format("  activation_bytes: {} ({}); alive at the end of forward: {} ({})\n", summary.activation_bytes,
                      human_bytes(summary.activation_bytes), summary.saved_activation_bytes,
                      human_bytes(summary.saved_activation_bytes));
  text += fmt::format("  rescaling data: {} ops with flops, {} with bytes_accessed\n", summary.ops_with_flops,
                      summary.ops_with_bytes_accessed);
  if (summary.chain_view)
    text += fmt::format("  chain view: yes, {} layers\n", summary.chain_layers);
  else
    text += fmt::format("  chain view: no: {}\n", summary.chain_view_reason);
  return text;
}

} // namespace memsim

#include "swap_recompute_stats.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/cost_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <set>

namespace memsim::planning {

double HostLink::time(std::uint64_t bytes) const
{
  return bandwidth > 0 ? latency_s + static_cast<double>(bytes) / bandwidth : std::numeric_limits<double>::infinity();
}

HostLink host_link(const Machine& machine, const std::string& from, const std::string& to)
{
  HostLink link;
  try {
    link.bandwidth = std::numeric_limits<double>::infinity();
    for (const RouteHop& hop : machine.route(from, to)) {
      link.bandwidth = std::min(link.bandwidth, machine.links.at(hop.link).bandwidth);
      link.latency_s += machine.links.at(hop.link).latency_s;
    }
  } catch (const InputError&) {
    link = {};
  }
  return link;
}

IdleMetric idle_metric_from(const std::string& name)
{
  if (name == "inactive")
    return IdleMetric::inactive;
  if (name == "produced")
    return IdleMetric::produced;
  if (name == "free_time")
    return IdleMetric::free_time;
  throw InputError("idle_metric", fmt::format("unknown idle metric '{}' (inactive, produced or free_time)", name));
}

GraphStats graph_stats(const TraceAnalysis& analysis, const Machine& machine, IdleMetric metric)
{
  const Trace& trace = analysis.trace();
  GraphStats stats;
  const CostModel cost(trace, machine);
  for (const Op& op : trace.ops)
    stats.op_time.push_back(cost.op_time(op, 0));
  stats.read_by_backward.assign(trace.tensors.size(), false);
  for (const Tensor& tensor : trace.tensors)
    for (OpId reader : analysis.readers(tensor.id))
      if (!forward_like(trace.op(reader).phase))
        stats.read_by_backward[static_cast<std::size_t>(tensor.id)] = true;
  std::vector<double> before(trace.ops.size() + 1, 0);
  for (std::size_t i = 0; i < trace.ops.size(); ++i)
    before[i + 1] = before[i] + stats.op_time[i];
  stats.inactive_s.assign(trace.tensors.size(), 0);
  const std::string gpu = machine.gpus.at(0).name;
  const HostLink d2h = host_link(machine, gpu, kHostNodeName), h2d = host_link(machine, kHostNodeName, gpu);
  for (const Tensor& tensor : trace.tensors) {
    const auto producer = analysis.producer(tensor.id);
    if (!producer)
      continue;
    OpId last_forward = *producer;
    std::optional<OpId> first_backward;
    for (OpId reader : analysis.readers(tensor.id)) {
      if (forward_like(trace.op(reader).phase))
        last_forward = std::max(last_forward, reader);
      else if (!first_backward)
        first_backward = reader;
    }
    if (!first_backward)
      continue;
    const OpId idle_from = metric == IdleMetric::produced ? *producer : last_forward;
    double idle = before[static_cast<std::size_t>(*first_backward)] - before[static_cast<std::size_t>(idle_from) + 1];
    if (metric == IdleMetric::free_time)
      idle -= d2h.time(tensor.bytes) + h2d.time(tensor.bytes);
    stats.inactive_s[static_cast<std::size_t>(tensor.id)] = idle;
  }
  return stats;
}

Lineage recompute_lineage(const TraceAnalysis& analysis, const GraphStats& stats, const std::vector<bool>& dropped,
                          const std::vector<bool>& swapped, TensorId target)
{
  const Trace& trace = analysis.trace();
  auto retained = [&](TensorId id) {
    const auto producer = analysis.producer(id);
    return producer && !dropped[static_cast<std::size_t>(*producer)] &&
           stats.read_by_backward[static_cast<std::size_t>(id)];
  };
  Lineage result;
  std::set<OpId> seen;
  std::vector<OpId> work{*analysis.producer(target)};
  std::set<TensorId> sources;
  while (!work.empty()) {
    const OpId id = work.back();
    work.pop_back();
    if (!seen.insert(id).second)
      continue;
    const Op& op = trace.op(id);
    result.time_s += stats.op_time[static_cast<std::size_t>(id)];
    result.possible = result.possible && forward_like(op.phase);
    for (TensorId out : op.outputs)
      result.possible = result.possible && !swapped[static_cast<std::size_t>(out)];
    for (TensorId in : op.inputs) {
      const auto producer = analysis.producer(in);
      if (!producer)
        continue; // a primal: weights and inputs stay on the device
      if (retained(in))
        sources.insert(in);
      else
        work.push_back(*producer);
    }
  }
  result.ops.assign(seen.begin(), seen.end());
  result.sources.assign(sources.begin(), sources.end());
  return result;
}

} // namespace memsim::planning

#pragma once
// What μ-TWO's swap/recompute choice (shared/specs/mu-two.md §5, §6.3) knows about one graph, shared by the
// single-graph scheduler (hfta-capuchin) and the multiplexed ring (mu-two): op times, host link times, which
// tensors the backward reads, their inactive time and the lineage a recomputation replays.
#include "memsim/hwmodels/machine.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/trace.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace memsim::planning {

struct HostLink {
  double bandwidth = 0; // 0: no route to the host
  double latency_s = 0;
  double time(std::uint64_t bytes) const;
};
HostLink host_link(const Machine& machine, const std::string& from, const std::string& to);

inline bool forward_like(Phase phase) { return phase == Phase::forward || phase == Phase::loss; }

// How long a tensor is idle, the swap candidate's key (A11: the paper defines it three ways).
enum class IdleMetric {
  inactive,  // end of its last forward access to the start of its first backward access (§4.1, Table B; default)
  produced,  // end of its producer to the start of its first backward access (§1's "from when they are produced")
  free_time, // inactive minus its D2H and H2D times (Capuchin's free time, as the authors' code ranks)
};
IdleMetric idle_metric_from(const std::string& name); // "inactive", "produced" or "free_time"

struct GraphStats {
  std::vector<double> op_time;        // by op: the cost model's time on GPU 0
  std::vector<bool> read_by_backward; // by tensor
  std::vector<double> inactive_s;     // by tensor: its idle time under the metric, in the graph's FW;BW order
};
GraphStats graph_stats(const TraceAnalysis& analysis, const Machine& machine, IdleMetric metric = IdleMetric::inactive);

// A recomputation's subgraph (§6.3): from the producer back to retained tensors (sources) and initially resident
// ones (primals); other forward tensors are temporaries whose producers join it.
struct Lineage {
  std::vector<OpId> ops;
  std::vector<TensorId> sources;
  double time_s = 0;
  bool possible = true; // no op of it writes a swapped tensor, all are forward ops
};
// `dropped` by op, `swapped` by tensor: the decisions so far.
Lineage recompute_lineage(const TraceAnalysis& analysis, const GraphStats& stats, const std::vector<bool>& dropped,
                          const std::vector<bool>& swapped, TensorId target);

} // namespace memsim::planning

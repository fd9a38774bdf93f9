#pragma once
// A trace's iterations as partitioning problems (blocks.hpp): ops timed by the cost model on GPU 0, the host link's
// bandwidth and latency, tensors renumbered per iteration. Public so that a runtime policy can partition the
// iterations it predicts the same way.
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/dynn/blocks.hpp"
#include "memsim/traces/trace.hpp"

#include <vector>

namespace memsim::dynn {

struct IterationProblem {
  int iteration = 0;
  std::vector<OpId> ops;         // local op index -> trace op
  std::vector<TensorId> tensors; // local tensor index -> trace tensor
  BlockProblem problem;
};

// One problem per run of consecutive ops with the same `iteration`, in trace order. An update-phase op updates the
// weights and optimizer state it reads in place (the Adam step); a tensor is needed after its iteration when a later
// op reads or writes it.
std::vector<IterationProblem> iteration_problems(const Trace& trace, const Machine& machine,
                                                 std::uint64_t capacity_bytes);

} // namespace memsim::dynn

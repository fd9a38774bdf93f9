#pragma once
// A lower bound of any schedule's device memory while an op runs, for schedules that move no preexisting tensor
// (planners whose candidates are activations, such as mu-two's ring): preexisting_bytes + working_bytes(op).
// - preexisting (TraceAnalysis::preexisting): inputs, weights and optimizer state that no op produces. They exist
//   before the iteration and stay unless a plan moves them (the initial-residency rule, memsim/sim/execution.hpp),
//   whether or not an op reads them.
// - working: what the op holds besides them while it runs: its other inputs and outputs, each once, and its
//   workspace (the execution core allocates outputs and workspace when the op starts, with its inputs resident).
#include "memsim/sim/trace_analysis.hpp"

#include <cstdint>

namespace memsim {

std::uint64_t preexisting_bytes(const TraceAnalysis& analysis);
std::uint64_t working_bytes(const TraceAnalysis& analysis, OpId op);

} // namespace memsim

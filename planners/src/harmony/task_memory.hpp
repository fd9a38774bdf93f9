#pragma once
// Harmony's per-task GPU memory estimate (sim_data_struct.CofTask), which it reports but does not enforce.
#include "task_graph.hpp"

#include "memsim/traces/layer_profile.hpp"

#include <vector>

namespace memsim::harmony {

// FWD: X_in + pack memory + Y + stashed X; BWD: 2 X_in (input and its gradient) + dY + pack memory + dX; UPD: 0.
// Sizes at the group's first microbatch size.
double task_memory_bytes(const LayerProfile& profile, const Task& task);

// The largest task per rank (dp: rank 0 only, like the time estimate).
std::vector<double> rank_memory_bytes(const LayerProfile& profile, const TaskGraph& graph);

} // namespace memsim::harmony

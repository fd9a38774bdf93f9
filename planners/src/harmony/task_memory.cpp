// Harmony's per-task memory estimate.
#include "task_memory.hpp"

#include <algorithm>

namespace memsim::harmony {

double task_memory_bytes(const LayerProfile& profile, const Task& task)
{
  if (task.type == TaskType::update)
    return 0.0;
  const int u = task.microbatches.front();
  const std::size_t R = profile.num_layers();
  const auto x = [&](std::size_t layer) { return static_cast<double>(profile.input_bytes(u, layer)); };
  const double input = x(task.pack.first);
  const double input_gradient = task.pack.first != 0 ? input : 0.0;
  const double output = task.pack.last != R - 1 ? x(task.pack.last + 1) : 0.0;
  const LayerPass pass = task.type == TaskType::forward ? LayerPass::forward : LayerPass::backward;
  const auto compute = static_cast<double>(profile.pack_memory_bytes(pass, u, task.pack.first, task.pack.last));
  double total = 0.0;
  if (task.type == TaskType::forward) {
    double stashed = 0.0;
    for (const auto& stash : task.stashes)
      stashed += x(stash.first);
    total += input;
    total += compute;
    total += output;
    total += stashed;
  } else {
    total += input * 2;
    total += output; // dY
    total += compute;
    total += input_gradient;
  }
  return total;
}

std::vector<double> rank_memory_bytes(const LayerProfile& profile, const TaskGraph& graph)
{
  std::vector<double> memory(graph.single_rank ? 1 : static_cast<std::size_t>(graph.gpus), 0.0);
  for (const Task& task : graph.tasks) {
    const auto rank = static_cast<std::size_t>(task.rank);
    if (rank < memory.size())
      memory[rank] = std::max(memory[rank], task_memory_bytes(profile, task));
  }
  return memory;
}

} // namespace memsim::harmony

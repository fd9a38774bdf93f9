#include "memsim/planners/dynn/problem.hpp"

#include "memsim/hwmodels/cost_model.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace memsim::dynn {
namespace {

bool updated_in_place(const Op& op, const Tensor& tensor)
{
  return op.phase == Phase::update && (tensor.kind == TensorKind::weight || tensor.kind == TensorKind::optimizer_state);
}

} // namespace

std::vector<IterationProblem> iteration_problems(const Trace& trace, const Machine& machine,
                                                 std::uint64_t capacity_bytes)
{
  const CostModel cost(trace, machine);
  double bandwidth = std::numeric_limits<double>::infinity();
  double latency = 0;
  for (const RouteHop& hop : machine.route(machine.gpus.at(0).name, kHostNodeName)) {
    bandwidth = std::min(bandwidth, machine.links.at(hop.link).bandwidth);
    latency += machine.links.at(hop.link).latency_s;
  }
  std::vector<std::size_t> last_access(trace.tensors.size(), 0);
  for (std::size_t i = 0; i < trace.ops.size(); ++i) {
    for (TensorId t : trace.ops[i].inputs)
      last_access[static_cast<std::size_t>(t)] = i;
    for (TensorId t : trace.ops[i].outputs)
      last_access[static_cast<std::size_t>(t)] = i;
  }

  std::vector<IterationProblem> problems;
  std::size_t begin = 0;
  while (begin < trace.ops.size()) {
    std::size_t end = begin;
    while (end < trace.ops.size() && trace.ops[end].iteration == trace.ops[begin].iteration)
      ++end;
    IterationProblem iteration;
    iteration.iteration = trace.ops[begin].iteration;
    BlockProblem& problem = iteration.problem;
    problem.capacity = capacity_bytes;
    problem.h2d_bytes_per_s = bandwidth;
    problem.d2h_bytes_per_s = bandwidth;
    problem.latency_s = latency;
    std::unordered_map<TensorId, std::uint32_t> local;
    auto local_of = [&](TensorId id) {
      auto [it, inserted] = local.try_emplace(id, static_cast<std::uint32_t>(iteration.tensors.size()));
      if (inserted) {
        iteration.tensors.push_back(id);
        problem.bytes.push_back(trace.tensor(id).bytes);
        problem.needed_after.push_back(last_access[static_cast<std::size_t>(id)] >= end ? 1 : 0);
      }
      return it->second;
    };
    for (std::size_t i = begin; i < end; ++i) {
      const Op& op = trace.ops[i];
      iteration.ops.push_back(op.id);
      BlockOp block_op;
      block_op.time_s = cost.op_time(op, 0);
      block_op.workspace_bytes = op.workspace_bytes;
      auto add = [&](std::uint32_t t) {
        if (std::find(block_op.tensors.begin(), block_op.tensors.end(), t) == block_op.tensors.end())
          block_op.tensors.push_back(t);
      };
      for (TensorId id : op.inputs) {
        add(local_of(id));
        if (updated_in_place(op, trace.tensor(id)))
          block_op.updated.push_back(local_of(id));
      }
      for (TensorId id : op.outputs) {
        add(local_of(id));
        block_op.produced.push_back(local_of(id));
      }
      problem.ops.push_back(std::move(block_op));
    }
    problems.push_back(std::move(iteration));
    begin = end;
  }
  return problems;
}

} // namespace memsim::dynn

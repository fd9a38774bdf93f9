// Harmony's task graph: task order, binding to ranks and the channel of every boundary tensor.
#include "task_graph.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace memsim::harmony {
namespace {

void check_contiguous(const std::vector<LayerPack>& packs, std::size_t end, const char* option)
{
  std::size_t next = 0;
  for (const LayerPack& pack : packs) {
    if (pack.first != next || pack.last < pack.first)
      throw InputError(option, fmt::format("packs must be contiguous and ascending from layer 0: found {}-{} where "
                                           "layer {} starts the next pack",
                                           pack.first, pack.last, next));
    next = pack.last + 1;
  }
  if (next != end)
    throw InputError(option, fmt::format("packs cover layers 0..{}, expected 0..{}", next - 1, end - 1));
}

void check_configuration(std::size_t layers, int gpus, int minibatch, Mode mode, const Configuration& config)
{
  if (gpus < 1)
    throw InputError("--gpus", fmt::format("must be at least 1, found {}", gpus));
  if (config.packs_backward.empty())
    throw InputError("--packs-bwd", "no backward packs");
  check_contiguous(config.packs_backward, layers, "--packs-bwd");
  const std::size_t forward_end = config.packs_backward.back().first;
  if (forward_end == 0) {
    if (!config.packs_forward.empty())
      throw InputError("--packs-fwd", "must be empty when one backward pack holds the whole model");
    if (config.u_forward != config.u_backward)
      throw InputError("--u-fwd", "must equal --u-bwd when one backward pack holds the whole model");
  } else {
    check_contiguous(config.packs_forward, forward_end, "--packs-fwd");
  }
  if (minibatch < (mode == Mode::dp ? gpus : 1))
    throw InputError("--minibatch", fmt::format("{} samples leave a rank without any", minibatch));
  const int per_rank = mode == Mode::dp ? minibatch / gpus + (minibatch % gpus != 0 ? 1 : 0) : minibatch;
  for (const auto& [u, option] : {std::pair{config.u_forward, "--u-fwd"}, std::pair{config.u_backward, "--u-bwd"}})
    if (u < 1 || u > per_rank)
      throw InputError(option, fmt::format("microbatch size {} must be in [1, {}] (the {} samples per {})", u, per_rank,
                                           per_rank, mode == Mode::dp ? "rank" : "minibatch"));
}

Link link_between(const std::vector<Task>& tasks, std::size_t from, std::size_t to)
{
  return {tasks[from].rank != tasks[to].rank ? Channel::p2p : Channel::swap, static_cast<int>(to)};
}

// Task order and channels of one task list (pp: the global list; dp: one rank's).
std::vector<Task> compose_tasks(std::size_t layers, int gpus, Mode mode, const Configuration& config,
                                const std::vector<int>& forward_sizes, const std::vector<int>& backward_sizes)
{
  std::vector<Task> tasks;
  const std::size_t forwards = config.packs_forward.size();
  for (std::size_t i = 0; i < forwards; ++i) {
    Task task;
    task.type = TaskType::forward;
    task.pack = config.packs_forward[i];
    task.microbatches = forward_sizes;
    task.rank = mode == Mode::pp ? static_cast<int>(i % static_cast<std::size_t>(gpus)) : 0;
    tasks.push_back(task);
  }
  for (std::size_t k = 0; k < config.packs_backward.size(); ++k) {
    const LayerPack pack = config.packs_backward[config.packs_backward.size() - 1 - k];
    const int rank = mode == Mode::pp ? static_cast<int>((forwards + k) % static_cast<std::size_t>(gpus)) : 0;
    Task backward;
    backward.type = TaskType::backward;
    backward.pack = pack;
    backward.microbatches = backward_sizes;
    backward.rank = rank;
    tasks.push_back(backward);
    Task update;
    update.type = TaskType::update;
    update.pack = pack;
    update.rank = rank; // the CPU process of the rank that ran the backward
    tasks.push_back(update);
  }
  for (Task& task : tasks) {
    task.has_data = task.pack.first == 0;
    task.has_criterion = task.pack.last == layers - 1;
  }
  for (std::size_t idx = 0; idx < tasks.size(); ++idx) {
    Task& task = tasks[idx];
    if (task.type == TaskType::forward) {
      task.input = task.has_data ? Link{Channel::data, -1} : link_between(tasks, idx, idx - 1);
      task.output = link_between(tasks, idx, idx + 1);
      // Stash the input of every layer that starts a backward pack (the recompute checkpoints).
      for (std::size_t b = forwards; b < tasks.size(); b += 2)
        if (tasks[b].pack.first >= task.pack.first && tasks[b].pack.first <= task.pack.last)
          task.stashes.emplace_back(tasks[b].pack.first, static_cast<int>(b));
      std::sort(task.stashes.begin(), task.stashes.end()); // ascending layers, as the forward runs
    } else if (task.type == TaskType::backward) {
      if (task.has_criterion) {
        task.input = task.has_data ? Link{Channel::data, -1} : link_between(tasks, idx, idx - 1);
      } else {
        task.gradient_in = link_between(tasks, idx, idx - 2);
        for (std::size_t f = 0; f < forwards; ++f)
          if (task.pack.first >= tasks[f].pack.first && task.pack.first <= tasks[f].pack.last) {
            task.input = {Channel::message, static_cast<int>(f)};
            task.stash_source = static_cast<int>(f);
          }
        if (task.stash_source < 0)
          throw InputError("--packs-fwd", fmt::format("no forward pack holds layer {}, which starts a backward pack",
                                                      task.pack.first));
      }
      if (!task.has_data)
        task.gradient_out = link_between(tasks, idx, idx + 2);
    }
  }
  // pp with U_F != U_B: the last forward's output goes through the host to be re-split (Harmony's last_fwd_msg).
  if (mode == Mode::pp && gpus > 1 && config.u_forward != config.u_backward && forwards > 0) {
    Task& last_forward = tasks[forwards - 1];
    Task& loss = tasks[forwards];
    if (last_forward.output.channel == Channel::p2p)
      last_forward.output = {Channel::message, static_cast<int>(forwards)};
    if (loss.input.channel == Channel::p2p)
      loss.input = {Channel::message, static_cast<int>(forwards - 1)};
  }
  return tasks;
}

} // namespace

std::vector<int> split_minibatch(int samples, int u)
{
  if (u < 1 || samples < u)
    throw std::invalid_argument(fmt::format("cannot split {} samples into microbatches of {}", samples, u));
  std::vector<int> sizes(static_cast<std::size_t>(samples / u), u);
  if (samples % u != 0)
    sizes.push_back(samples % u);
  return sizes;
}

TaskGraph compose_task_graph(std::size_t layers, int gpus, int minibatch, Mode mode, const Configuration& config)
{
  check_configuration(layers, gpus, minibatch, mode, config);
  TaskGraph graph;
  const int samples = mode == Mode::dp ? minibatch / gpus + (minibatch % gpus != 0 ? 1 : 0) : minibatch; // rank 0
  graph.microbatches_forward = split_minibatch(samples, config.u_forward);
  graph.microbatches_backward = split_minibatch(samples, config.u_backward);
  graph.tasks = compose_tasks(layers, gpus, mode, config, graph.microbatches_forward, graph.microbatches_backward);
  graph.gpus = gpus;
  graph.single_rank = mode == Mode::dp || gpus == 1;
  if (mode == Mode::dp) {
    graph.ranks = gpus;
  } else {
    std::vector<bool> used(static_cast<std::size_t>(gpus), false);
    for (const Task& task : graph.tasks)
      used[static_cast<std::size_t>(task.rank)] = true;
    graph.ranks = static_cast<int>(std::count(used.begin(), used.end(), true));
  }
  return graph;
}

MicrobatchConversion convert_microbatches(const std::vector<int>& forward, const std::vector<int>& backward,
                                          int u_backward)
{
  MicrobatchConversion conversion;
  int residual = 0;
  std::size_t converted = 0;
  for (std::size_t i = 0; i < forward.size(); ++i) {
    const int samples = residual + forward[i];
    residual = 0;
    const std::vector<int> pieces = samples >= u_backward ? split_minibatch(samples, u_backward) : std::vector{samples};
    std::vector<int> made;
    for (std::size_t j = 0; j < pieces.size(); ++j) {
      if (converted >= backward.size())
        throw std::logic_error("microbatch conversion ran past the backward microbatches");
      if (pieces[j] == backward[converted]) {
        made.push_back(static_cast<int>(converted++));
        conversion.forward_of_backward.push_back(static_cast<int>(i));
      } else if (pieces[j] < backward[converted] && j + 1 == pieces.size()) {
        residual = pieces[j];
      } else {
        throw std::logic_error("forward and backward microbatches do not re-split");
      }
    }
    conversion.backward_of_forward.push_back(std::move(made));
  }
  if (converted != backward.size())
    throw std::logic_error("microbatch conversion left backward microbatches unmade");
  return conversion;
}

} // namespace memsim::harmony

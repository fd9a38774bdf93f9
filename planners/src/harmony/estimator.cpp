// Harmony's event-driven runtime estimate, with prefetch off (sim_data_struct.py: In_WB, In_X, In_sX, In_dY,
// Compute_FWD/BWD, Out_sX/Y/dX/dWB, Compute_ARD/DEL, CPU_Update; Executor._duration).
#include "memsim/planners/harmony/estimator.hpp"

#include "task_graph.hpp"
#include "task_memory.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>

namespace memsim::harmony {
namespace {

enum class Stream { swap_in, swap_out, p2p_in, p2p_out, compute, cpu };
enum class Kind { WB, X, sX, FWD, Y, MSGsX, MSGY, REC, BWD, dY, dX, ARD, dWB, DEL, Update };

const char* stream_name(Stream stream)
{
  static constexpr const char* names[] = {"SwapIn", "SwapOut", "P2PIn", "P2POut", "Compute", "CPU"};
  return names[static_cast<int>(stream)];
}

const char* kind_name(Kind kind)
{
  static constexpr const char* names[] = {"WB",  "X",  "sX", "FWD", "Y",   "MSGsX", "MSGY",  "REC",
                                          "BWD", "dY", "dX", "ARD", "dWB", "DEL",   "Update"};
  return names[static_cast<int>(kind)];
}

// An event's identity, as Harmony's "task.microbatch.subpack.stream.kind". subpack -1 = the task's last sub-pack.
using Key = std::tuple<int, int, int, Stream, Kind>;

struct Event {
  Key key;
  int rank = 0;
  int microbatch_size = 0; // 0 for per-task events
  std::size_t first = 0;   // layers the duration is computed on
  std::size_t last = 0;
  std::vector<int> inputs;
  std::vector<Key> named_inputs; // resolved to indices once every event exists
  std::optional<Key> peer;       // the other end of a p2p transfer
  std::size_t position = 0;      // in its (rank, stream) queue
  double begin = 0;
  double duration = 0;
  bool done = false;
  double end() const { return begin + duration; }
};

class EventGraph {
public:
  EventGraph(const LayerProfile& profile, const TaskGraph& graph, const EstimatorSettings& settings)
      : profile_(profile), graph_(graph), settings_(settings),
        ranks_(graph.single_rank ? 1 : static_cast<std::size_t>(graph.gpus))
  {
    const bool converted = graph.microbatches_forward != graph.microbatches_backward;
    if (converted)
      conversion_ = convert_microbatches(graph.microbatches_forward, graph.microbatches_backward,
                                         graph.microbatches_backward.front());
  }

  Estimate run()
  {
    build();
    resolve();
    execute();
    return result();
  }

private:
  // ------------------------------------------------------------------------------------------------ structure

  const Task& task(int index) const { return graph_.tasks.at(static_cast<std::size_t>(index)); }

  // Forward sub-packs are split at stashed layers: boundaries = stash layers (and the pack's first layer).
  std::vector<std::size_t> subpack_starts(const Task& t) const
  {
    std::vector<std::size_t> starts;
    if (t.type != TaskType::forward || t.stashes.empty())
      return {t.pack.first};
    if (t.stashes.front().first != t.pack.first)
      starts.push_back(t.pack.first);
    for (const auto& stash : t.stashes)
      starts.push_back(stash.first);
    return starts;
  }
  int last_subpack(const Task& t) const { return static_cast<int>(subpack_starts(t).size()) - 1; }
  LayerPack subpack(const Task& t, int index) const
  {
    const std::vector<std::size_t> starts = subpack_starts(t);
    const auto i = static_cast<std::size_t>(index);
    return {starts.at(i), i + 1 < starts.size() ? starts[i + 1] - 1 : t.pack.last};
  }

  Key key(int task_index, int microbatch, int sub, Stream stream, Kind kind) const
  {
    if (sub == -1)
      sub = last_subpack(task(task_index));
    return {task_index, microbatch, sub, stream, kind};
  }

  int add(int task_index, int microbatch, int sub, Stream stream, Kind kind, int size_override = 0)
  {
    const Task& t = task(task_index);
    Event event;
    event.key = key(task_index, microbatch, sub, stream, kind);
    event.rank = t.rank;
    const bool per_task =
        kind == Kind::WB || kind == Kind::DEL || kind == Kind::ARD || kind == Kind::dWB || kind == Kind::Update;
    event.microbatch_size =
        size_override != 0 ? size_override : (per_task ? 0 : t.microbatches.at(static_cast<std::size_t>(microbatch)));
    switch (kind) {
    case Kind::FWD: {
      const LayerPack layers = subpack(t, sub);
      event.first = layers.first;
      event.last = layers.last;
      break;
    }
    case Kind::sX:
    case Kind::MSGsX: event.first = event.last = subpack(t, sub).first; break;
    case Kind::X:
    case Kind::dX: event.first = event.last = t.pack.first; break;
    case Kind::Y:
    case Kind::dY:
    case Kind::MSGY: event.first = event.last = t.pack.last; break;
    default: event.first = t.pack.first; event.last = t.pack.last;
    }
    const int index = static_cast<int>(events_.size());
    if (!index_.emplace(event.key, index).second)
      throw std::logic_error("duplicate Harmony event");
    std::vector<int>& queue = queue_of(t.rank, stream);
    event.position = queue.size();
    queue.push_back(index);
    events_.push_back(std::move(event));
    return index;
  }

  std::vector<int>& queue_of(int rank, Stream stream)
  {
    auto& streams = queues_.at(static_cast<std::size_t>(rank));
    for (auto& [s, queue] : streams)
      if (s == stream)
        return queue;
    streams.emplace_back(stream, std::vector<int>{});
    return streams.back().second;
  }

  void needs(int event, int input) { events_[static_cast<std::size_t>(event)].inputs.push_back(input); }
  void needs(int event, int task_index, int microbatch, int sub, Stream stream, Kind kind)
  {
    events_[static_cast<std::size_t>(event)].named_inputs.push_back(key(task_index, microbatch, sub, stream, kind));
  }

  // ------------------------------------------------------------------------------------------------ events

  int weights_in(int t, int left)
  {
    const int w = add(t, 0, 0, Stream::swap_in, Kind::WB);
    if (left >= 0)
      needs(w, left, 0, 0, Stream::compute, Kind::DEL); // no prefetch: after the previous task freed its memory
    return w;
  }

  // X of the first layer of a FWD or criterion BWD; waits for `after` (the weights, or the previous microbatch).
  int input_in(int t, int i, int left, int after)
  {
    const Task& task = this->task(t);
    int x = 0;
    switch (task.input.channel) {
    case Channel::data: x = add(t, i, 0, Stream::swap_in, Kind::X); break;
    case Channel::p2p:
      x = add(t, i, 0, Stream::p2p_in, Kind::X);
      events_[static_cast<std::size_t>(x)].peer = key(t - 1, i, -1, Stream::p2p_out, Kind::Y);
      break;
    case Channel::message:
      x = add(t, i, 0, Stream::swap_in, Kind::X);
      needs(x, task.input.task, i, -1, Stream::cpu, Kind::MSGY);
      break;
    case Channel::swap: {
      x = add(t, i, 0, Stream::swap_in, Kind::X);
      const bool loss = task.type == TaskType::backward;
      const int from = loss && conversion_ ? conversion_->forward_of_backward.at(static_cast<std::size_t>(i)) : i;
      needs(x, left, from, -1, Stream::swap_out, Kind::Y);
      break;
    }
    case Channel::none: throw std::logic_error("task without an input channel");
    }
    needs(x, after);
    return x;
  }

  int forward_compute(int t, int i, int w, int x)
  {
    const Task& task = this->task(t);
    int sub = 0;
    int compute = add(t, i, sub, Stream::compute, Kind::FWD);
    if (i == 0)
      needs(compute, w);
    needs(compute, x);
    for (const auto& stash : task.stashes) {
      if (stash.first != task.pack.first)
        compute = add(t, i, ++sub, Stream::compute, Kind::FWD);
      needs(compute, t, i, sub, Stream::swap_out, Kind::sX); // no prefetch: the stash leaves before going on
    }
    return compute;
  }

  std::vector<std::pair<int, int>> backward_microbatches(int i) const // (index, size) made from forward i
  {
    if (!conversion_)
      return {{i, graph_.microbatches_forward.at(static_cast<std::size_t>(i))}};
    std::vector<std::pair<int, int>> made;
    for (const int b : conversion_->backward_of_forward.at(static_cast<std::size_t>(i)))
      made.emplace_back(b, graph_.microbatches_backward.at(static_cast<std::size_t>(b)));
    return made;
  }

  void stashes_out(int t, int i, int x)
  {
    const Task& task = this->task(t);
    int sub = 0;
    for (const auto& stash : task.stashes) {
      int out = 0;
      if (stash.first == task.pack.first) {
        out = add(t, i, 0, Stream::swap_out, Kind::sX);
        needs(out, x);
      } else {
        ++sub;
        out = add(t, i, sub, Stream::swap_out, Kind::sX);
        needs(out, t, i, sub - 1, Stream::compute, Kind::FWD);
      }
      for (const auto& [b, size] : backward_microbatches(i)) {
        const int message = add(t, b, sub, Stream::cpu, Kind::MSGsX, size);
        needs(message, out);
      }
    }
  }

  int output_out(int t, int i, int compute)
  {
    const Task& task = this->task(t);
    const int sub = std::get<2>(events_[static_cast<std::size_t>(compute)].key);
    int y = 0;
    switch (task.output.channel) {
    case Channel::p2p:
      y = add(t, i, sub, Stream::p2p_out, Kind::Y);
      events_[static_cast<std::size_t>(y)].peer = key(t + 1, i, 0, Stream::p2p_in, Kind::X);
      needs(y, compute);
      break;
    case Channel::message:
      y = add(t, i, sub, Stream::swap_out, Kind::Y);
      needs(y, compute);
      for (const auto& [b, size] : backward_microbatches(i)) {
        const int message = add(t, b, sub, Stream::cpu, Kind::MSGY, size);
        needs(message, y);
      }
      break;
    case Channel::swap:
      y = add(t, i, sub, Stream::swap_out, Kind::Y);
      needs(y, compute);
      break;
    default: throw std::logic_error("forward task without an output channel");
    }
    return y;
  }

  int gradient_in(int t, int i, int left)
  {
    const Task& task = this->task(t);
    int dy = 0;
    if (task.gradient_in.channel == Channel::p2p) {
      dy = add(t, i, 0, Stream::p2p_in, Kind::dY);
      events_[static_cast<std::size_t>(dy)].peer = key(t - 2, i, 0, Stream::p2p_out, Kind::dX);
    } else {
      dy = add(t, i, 0, Stream::swap_in, Kind::dY);
      needs(dy, left, i, 0, Stream::swap_out, Kind::dX);
    }
    needs(dy, t, i, 0, Stream::compute, Kind::REC); // no prefetch: after this microbatch's recompute
    return dy;
  }

  int gradient_out(int t, int i, int backward)
  {
    const Task& task = this->task(t);
    if (task.gradient_out.channel == Channel::none)
      return -1;
    int dx = 0;
    if (task.gradient_out.channel == Channel::p2p) {
      dx = add(t, i, 0, Stream::p2p_out, Kind::dX);
      events_[static_cast<std::size_t>(dx)].peer = key(t + 2, i, 0, Stream::p2p_in, Kind::dY);
    } else {
      dx = add(t, i, 0, Stream::swap_out, Kind::dX);
    }
    needs(dx, backward);
    return dx;
  }

  void forward_task(int t, int left, bool dp)
  {
    const Task& task = this->task(t);
    const int w = weights_in(t, left);
    int previous = -1; // pp: the previous microbatch's compute; dp: its output swap
    int y = -1;
    for (int i = 0; i < static_cast<int>(task.microbatches.size()); ++i) {
      const int x = input_in(t, i, left, i == 0 ? w : previous);
      const int compute = forward_compute(t, i, w, x);
      stashes_out(t, i, x);
      y = output_out(t, i, compute);
      previous = dp ? y : compute;
    }
    const int del = add(t, 0, 0, Stream::compute, Kind::DEL);
    if (dp)
      needs(del, y);
  }

  void backward_task(int t, int left, bool dp)
  {
    const Task& task = this->task(t);
    const int w = weights_in(t, left);
    int backward = -1;
    int dx = -1;
    for (int i = 0; i < static_cast<int>(task.microbatches.size()); ++i) {
      // The next microbatch's input waits for the previous backward (pp) or its dX (dp, when there is one).
      const int after = i == 0 ? w : (dp && dx >= 0 ? dx : backward);
      int x = 0;
      int dy = -1;
      if (task.has_criterion) {
        x = input_in(t, i, left, after);
      } else {
        x = add(t, i, 0, Stream::swap_in, Kind::sX);
        const Task& source = this->task(task.stash_source);
        int sub = 0;
        for (std::size_t s = 0; s < source.stashes.size(); ++s)
          if (source.stashes[s].first == task.pack.first)
            sub = static_cast<int>(s) + 1 - (source.stashes.front().first == source.pack.first ? 1 : 0);
        needs(x, task.stash_source, i, sub, Stream::cpu, Kind::MSGsX);
        needs(x, after);
        dy = gradient_in(t, i, left);
      }
      const int recompute = add(t, i, 0, Stream::compute, Kind::REC);
      if (i == 0)
        needs(recompute, w);
      needs(recompute, x);
      backward = add(t, i, 0, Stream::compute, Kind::BWD);
      if (dy >= 0)
        needs(backward, dy);
      dx = gradient_out(t, i, backward);
    }
    int all_reduce = -1;
    if (dp && graph_.ranks > 1) {
      all_reduce = add(t, 0, 0, Stream::compute, Kind::ARD);
      if (dx >= 0)
        needs(all_reduce, dx);
    }
    const int gradients = add(t, 0, 0, Stream::swap_out, Kind::dWB);
    needs(gradients, backward);
    if (all_reduce >= 0)
      needs(gradients, all_reduce);
    else if (dp && dx >= 0)
      needs(gradients, dx);
    const int del = add(t, 0, 0, Stream::compute, Kind::DEL);
    needs(del, gradients);
  }

  void build()
  {
    queues_.resize(ranks_);
    const bool dp = graph_.single_rank;
    for (std::size_t rank = 0; rank < ranks_; ++rank) {
      int left = -1;
      for (int t = 0; t < static_cast<int>(graph_.tasks.size()); ++t) {
        const Task& task = this->task(t);
        if (static_cast<std::size_t>(task.rank) != rank)
          continue;
        if (task.type == TaskType::forward)
          forward_task(t, left, dp);
        else if (task.type == TaskType::backward)
          backward_task(t, left, dp);
        else
          needs(add(t, 0, 0, Stream::cpu, Kind::Update), left, 0, 0, Stream::swap_out, Kind::dWB);
        if (task.type != TaskType::update)
          left = t;
      }
    }
  }

  int find(const Key& k) const
  {
    const auto found = index_.find(k);
    if (found == index_.end())
      throw std::logic_error(fmt::format("Harmony event {}.{}.{}.{}.{} is missing", std::get<0>(k), std::get<1>(k),
                                         std::get<2>(k), stream_name(std::get<3>(k)), kind_name(std::get<4>(k))));
    return found->second;
  }

  // Named inputs become indices; then each p2p end takes its peer's inputs and the peer's stream predecessor, so
  // both ends of a transfer start together (Event.solve_peer).
  void resolve()
  {
    for (Event& event : events_)
      for (const Key& k : event.named_inputs)
        event.inputs.push_back(find(k));
    for (Event& event : events_) {
      if (!event.peer)
        continue;
      const Event& peer = events_[static_cast<std::size_t>(find(*event.peer))];
      event.inputs.insert(event.inputs.end(), peer.inputs.begin(), peer.inputs.end());
      if (peer.position > 0)
        event.inputs.push_back(queue_of(peer.rank, std::get<3>(peer.key)).at(peer.position - 1));
      std::sort(event.inputs.begin(), event.inputs.end());
      event.inputs.erase(std::unique(event.inputs.begin(), event.inputs.end()), event.inputs.end());
    }
  }

  // ------------------------------------------------------------------------------------------------ timing

  double bytes_at(int u, std::size_t layer) const
  {
    return layer < profile_.num_layers() ? static_cast<double>(profile_.input_bytes(u, layer)) : 0.0;
  }

  double duration(const Event& event) const
  {
    const double N = graph_.ranks;
    const int u = event.microbatch_size;
    const Stream stream = std::get<3>(event.key);
    const bool over_p2p = stream == Stream::p2p_in || stream == Stream::p2p_out;
    const double link = over_p2p ? settings_.bw_p2p : settings_.bw_swap / N;
    switch (std::get<4>(event.key)) {
    case Kind::FWD:
    case Kind::REC: return profile_.pack_time_s(LayerPass::forward, u, event.first, event.last);
    case Kind::BWD:
      return profile_.pack_time_s(LayerPass::backward, u, event.first, event.last) -
             profile_.pack_time_s(LayerPass::forward, u, event.first, event.last);
    case Kind::Update: return profile_.pack_update_s(event.first, event.last);
    case Kind::DEL: return settings_.time_del;
    case Kind::ARD: return 2.0 * (N - 1) / N * static_cast<double>(weight_bytes(event)) / settings_.bw_p2p;
    case Kind::WB:
    case Kind::dWB: return static_cast<double>(weight_bytes(event)) / (settings_.bw_swap / N);
    case Kind::X:
    case Kind::sX:
    case Kind::dX: return bytes_at(u, event.first) / link;
    case Kind::Y:
    case Kind::dY: return bytes_at(u, event.last + 1) / link;
    case Kind::MSGsX:
    case Kind::MSGY: {
      const Task& source = task(std::get<0>(event.key));
      int destination = 0;
      double bytes = 0;
      if (std::get<4>(event.key) == Kind::MSGsX) {
        for (const auto& stash : source.stashes)
          if (stash.first == event.first)
            destination = stash.second;
        bytes = bytes_at(u, event.first);
      } else {
        destination = source.output.task;
        bytes = bytes_at(u, event.last + 1);
      }
      if (task(destination).rank == source.rank)
        return 0.0;                                // same process: no host-memory copy
      return bytes / (settings_.bw_msg / N) * 2.0; // host memory read and write
    }
    }
    return 0.0;
  }

  std::uint64_t weight_bytes(const Event& event) const
  {
    return profile_.pack_weight_bytes(event.first, event.last) + profile_.pack_buffer_bytes(event.first, event.last);
  }

  // Each (rank, stream) runs its events in order; an event starts when its inputs and its predecessor have ended.
  void execute()
  {
    std::vector<std::pair<std::vector<int>*, std::size_t>> cursors;
    for (auto& streams : queues_)
      for (auto& [stream, queue] : streams)
        cursors.emplace_back(&queue, 0);
    std::size_t remaining = events_.size();
    while (remaining > 0) {
      bool progressed = false;
      for (auto& [queue, next] : cursors) {
        while (next < queue->size()) {
          Event& event = events_[static_cast<std::size_t>((*queue)[next])];
          const bool ready = std::all_of(event.inputs.begin(), event.inputs.end(),
                                         [&](int input) { return events_[static_cast<std::size_t>(input)].done; });
          if (!ready)
            break;
          double begin = next > 0 ? events_[static_cast<std::size_t>((*queue)[next - 1])].end() : 0.0;
          for (const int input : event.inputs)
            begin = std::max(begin, events_[static_cast<std::size_t>(input)].end());
          event.begin = begin;
          event.duration = duration(event);
          event.done = true;
          order_.push_back((*queue)[next]);
          ++next;
          --remaining;
          progressed = true;
        }
      }
      if (!progressed)
        throw Infeasible(fmt::format("Harmony's task graph deadlocks after {} of {} events", events_.size() - remaining,
                                     events_.size()));
    }
  }

  Estimate result() const
  {
    Estimate out;
    out.rank_end_s.assign(ranks_, 0.0);
    out.rank_compute_s.assign(ranks_, 0.0);
    for (std::size_t rank = 0; rank < ranks_; ++rank) {
      if (queues_[rank].empty())
        out.rank_end_s[rank] = 1e-10; // Harmony's value for an idle rank
      for (const auto& [stream, queue] : queues_[rank])
        out.rank_end_s[rank] = std::max(out.rank_end_s[rank], events_[static_cast<std::size_t>(queue.back())].end());
    }
    for (const int index : order_) {
      const Event& event = events_[static_cast<std::size_t>(index)];
      const Kind kind = std::get<4>(event.key);
      if (kind == Kind::FWD || kind == Kind::REC || kind == Kind::BWD)
        out.rank_compute_s[static_cast<std::size_t>(event.rank)] += event.duration;
      out.events.push_back({std::get<0>(event.key), std::get<1>(event.key), std::get<2>(event.key), event.rank,
                            stream_name(std::get<3>(event.key)), kind_name(kind), event.begin, event.end()});
    }
    out.iteration_s = *std::max_element(out.rank_end_s.begin(), out.rank_end_s.end());
    return out;
  }

  const LayerProfile& profile_;
  const TaskGraph& graph_;
  const EstimatorSettings& settings_;
  std::size_t ranks_;
  std::optional<MicrobatchConversion> conversion_;
  std::vector<Event> events_;
  std::map<Key, int> index_;
  std::vector<std::vector<std::pair<Stream, std::vector<int>>>> queues_; // per rank, streams in first-use order
  std::vector<int> order_;
};

void check_sampled(const LayerProfile& profile, LayerPass pass, int u, const char* option)
{
  const std::vector<int>& sampled = profile.sampled(pass);
  if (u < sampled.front() || u > sampled.back())
    throw InputError(option,
                     fmt::format("microbatch size {} is outside the profile's sampled {} sizes [{}, {}]", u,
                                 pass == LayerPass::forward ? "forward" : "backward", sampled.front(), sampled.back()));
}

} // namespace

Estimate estimate(const LayerProfile& profile, int gpus, int minibatch, Mode mode, const Configuration& configuration,
                  const EstimatorSettings& settings)
{
  check_sampled(profile, LayerPass::forward, configuration.u_forward, "--u-fwd");
  check_sampled(profile, LayerPass::backward, configuration.u_backward, "--u-bwd");
  check_sampled(profile, LayerPass::forward, configuration.u_backward, "--u-bwd"); // the recompute
  if (!(settings.bw_swap > 0 && settings.bw_p2p > 0 && settings.bw_msg > 0 && settings.time_del >= 0))
    throw InputError("", "bandwidths must be positive and time_del non-negative");
  const TaskGraph graph = compose_task_graph(profile.num_layers(), gpus, minibatch, mode, configuration);
  Estimate result = EventGraph(profile, graph, settings).run();
  result.rank_memory_bytes = rank_memory_bytes(profile, graph);
  return result;
}

std::vector<LayerPack> parse_packs(const std::string& text, const std::string& option)
{
  std::vector<LayerPack> packs;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const std::size_t dash = item.find('-');
    try {
      std::size_t used = 0;
      const unsigned long first = std::stoul(item.substr(0, dash), &used);
      if (used != (dash == std::string::npos ? item.size() : dash))
        throw std::invalid_argument(item);
      unsigned long last = first;
      if (dash != std::string::npos) {
        last = std::stoul(item.substr(dash + 1), &used);
        if (used != item.size() - dash - 1)
          throw std::invalid_argument(item);
      }
      packs.push_back({first, last});
    } catch (const std::logic_error&) {
      throw InputError(option, fmt::format("expected packs like 0-9,10-19 (inclusive layer ranges), found '{}'", item));
    }
    start = comma + 1;
  }
  return packs;
}

std::string format_packs(const std::vector<LayerPack>& packs)
{
  std::string text;
  for (const LayerPack& pack : packs)
    text += fmt::format("{}{}-{}", text.empty() ? "" : ",", pack.first, pack.last);
  return text;
}

} // namespace memsim::harmony

#include "tsplit_model.hpp"

#include "tsplit_dims.hpp"

#include "memsim/common/error.hpp"

#include <algorithm>
#include <array>
#include <limits>

namespace memsim::tsplit {
namespace {

constexpr double kMaxOccupancy = 0.95; // Eq. 3 divides by 1 - Oc; keep it finite
constexpr std::array<int, 11> kPartCounts{2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};

bool is_feature_map(TensorKind kind) { return kind == TensorKind::activation || kind == TensorKind::gradient; }

} // namespace

std::uint64_t part_bytes(std::uint64_t bytes, int parts, int u, std::int64_t extent)
{
  const auto p = static_cast<std::uint64_t>(parts);
  if (extent < parts) {
    const std::uint64_t share = bytes / p;
    return u == 0 ? bytes - share * (p - 1) : share;
  }
  const auto rows_of = [&](int v) { return static_cast<std::uint64_t>(extent / parts + (v < extent % parts ? 1 : 0)); };
  const auto e = static_cast<std::uint64_t>(extent);
  const auto share_of = [&](int v) {
    return static_cast<std::uint64_t>(static_cast<long double>(bytes) * rows_of(v) / e);
  };
  if (u > 0)
    return share_of(u);
  std::uint64_t rest = 0;
  for (int v = 1; v < parts; ++v)
    rest += share_of(v);
  return bytes - rest;
}

Model::Model(const TraceAnalysis& analysis, const Machine& machine, std::uint64_t budget, const Options& options)
    : analysis_(&analysis), trace_(&analysis.trace()), options_(options), budget_(budget),
      cost_(analysis.trace(), machine)
{
  const Trace& trace = *trace_;
  try {
    bandwidth_ = std::numeric_limits<double>::infinity();
    for (const RouteHop& hop : machine.route(machine.gpus.at(0).name, kHostNodeName)) {
      bandwidth_ = std::min(bandwidth_, machine.links.at(hop.link).bandwidth);
      latency_ += machine.links.at(hop.link).latency_s;
    }
  } catch (const InputError&) {
    bandwidth_ = 0; // no host link: nothing can be swapped
  }
  extent_ = trace_batch_size(trace).value_or(0);
  dims_ = parse_dims(options.dims);
  op_time_.reserve(trace.ops.size());
  for (const Op& op : trace.ops) {
    splits_declared_ = splits_declared_ || !op.split.empty();
    op_time_.push_back(cost_.op_time(op, 0));
  }
  configs_.resize(trace.tensors.size());
  splits_.resize(trace.ops.size());
  reads_.resize(trace.tensors.size());
  for (const Tensor& tensor : trace.tensors) {
    const std::span<const OpId> readers = analysis.readers(tensor.id);
    reads_[static_cast<std::size_t>(tensor.id)].assign(readers.begin(), readers.end());
    const bool kind_allowed =
        tensor.kind == TensorKind::activation || (options.swap_gradients && tensor.kind == TensorKind::gradient);
    if (kind_allowed && analysis.producer(tensor.id) && !analysis.readers(tensor.id).empty())
      candidates_.push_back(tensor.id);
  }
  evaluate();
}

std::optional<OpId> Model::last_read_before(TensorId tensor, OpId op) const
{
  const std::vector<OpId>& list = reads(tensor);
  auto it = std::lower_bound(list.begin(), list.end(), op);
  if (it == list.begin())
    return std::nullopt;
  return *std::prev(it);
}

std::optional<OpId> Model::next_read_after(TensorId tensor, OpId op) const
{
  const std::vector<OpId>& list = reads(tensor);
  auto it = std::upper_bound(list.begin(), list.end(), op);
  if (it == list.end())
    return std::nullopt;
  return *it;
}

double Model::transfer_time(std::uint64_t bytes, int transfers) const
{
  return static_cast<double>(bytes) / bandwidth_ + transfers * latency_;
}

double Model::free_d2h(OpId first, OpId last) const
{
  if (last < first)
    return 0;
  return free_d2h_sum_[static_cast<std::size_t>(last) + 1] - free_d2h_sum_[static_cast<std::size_t>(first)];
}

double Model::free_h2d(OpId first, OpId last) const
{
  if (last < first)
    return 0;
  return free_h2d_sum_[static_cast<std::size_t>(last) + 1] - free_h2d_sum_[static_cast<std::size_t>(first)];
}

double Model::micro_op_time(OpId op, int parts) const
{
  Op micro = trace_->op(op);
  micro.id = static_cast<OpId>(trace_->ops.size()); // a derived op: the cost model times it from its source
  micro.has_time = false;
  micro.split_of = SplitOf{op, 0, parts, "batch"}; // the time does not depend on the dim
  return cost_.op_time(micro, 0);
}

void Model::evaluate()
{
  const Trace& trace = *trace_;
  const std::size_t n = trace.ops.size();
  const std::vector<std::uint64_t>& base = analysis_->default_profile().in_use_during;
  std::vector<std::int64_t> delta(n + 1, 0);
  std::vector<std::uint64_t> recompute_extra(n, 0);
  auto remove = [&](OpId first, OpId last, std::uint64_t bytes) {
    if (last < first)
      return;
    delta[static_cast<std::size_t>(first)] -= static_cast<std::int64_t>(bytes);
    delta[static_cast<std::size_t>(last) + 1] += static_cast<std::int64_t>(bytes);
  };
  struct Transfer {
    double ready = 0;
    double seconds = 0;
    TensorId tensor = 0;
  };
  std::vector<double> start(n + 1, 0);
  for (std::size_t k = 0; k < n; ++k)
    start[k + 1] = start[k] + op_time_[k];
  std::vector<Transfer> d2h;
  std::vector<Transfer> h2d;
  for (const Tensor& tensor : trace.tensors) {
    const TensorConfig& c = configs_[static_cast<std::size_t>(tensor.id)];
    if (c.move == Move::swap) {
      remove(c.gap_start + 1, c.trigger - 1, tensor.bytes);
      // Whole tensors leave from their producer's end; split parts from the split view after their last read.
      const OpId leave = c.parts > 1
                             ? last_read_before(tensor.id, c.gap_start).value_or(*analysis_->producer(tensor.id))
                             : *analysis_->producer(tensor.id);
      const double seconds = transfer_time(tensor.bytes, c.parts);
      d2h.push_back({start[static_cast<std::size_t>(leave) + 1], seconds, tensor.id});
      h2d.push_back({start[static_cast<std::size_t>(c.trigger)], seconds, tensor.id});
    } else if (c.move == Move::recompute) {
      const Op& producer = trace.op(*analysis_->producer(tensor.id));
      for (const Gap& gap : c.gaps) {
        remove(gap.after + 1, gap.until - 1, tensor.bytes);
        const Op& consumer = trace.op(gap.until);
        std::uint64_t consumer_allocates = consumer.workspace_bytes;
        for (TensorId out : consumer.outputs)
          consumer_allocates += trace.tensor(out).bytes;
        auto& extra = recompute_extra[static_cast<std::size_t>(gap.until)];
        if (producer.workspace_bytes > consumer_allocates)
          extra = std::max(extra, producer.workspace_bytes - consumer_allocates);
      }
    }
  }
  memory_.assign(n, 0);
  std::int64_t running = 0;
  for (std::size_t k = 0; k < n; ++k) {
    running += delta[k];
    memory_[k] = static_cast<std::uint64_t>(static_cast<std::int64_t>(base[k]) + running) + recompute_extra[k];
    if (splits_[k].parts > 1)
      memory_[k] -= split_saving(static_cast<OpId>(k), splits_[k]);
  }
  last_over_.assign(n, -1);
  for (std::size_t k = 0; k < n; ++k)
    last_over_[k] = memory_[k] > budget_ ? static_cast<OpId>(k) : (k > 0 ? last_over_[k - 1] : -1);

  // PCIe occupancy: each direction a FIFO of whole transfers on the ideal compute-only timeline (§3.3).
  auto occupancy = [&](std::vector<Transfer>& queue) {
    std::stable_sort(queue.begin(), queue.end(), [](const Transfer& a, const Transfer& b) {
      return a.ready < b.ready || (a.ready == b.ready && a.tensor < b.tensor);
    });
    std::vector<std::pair<double, double>> busy;
    double free_at = 0;
    for (const Transfer& t : queue) {
      const double begin = std::max(free_at, t.ready);
      free_at = begin + t.seconds;
      busy.emplace_back(begin, free_at);
    }
    std::vector<double> result(n, 0);
    std::size_t b = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const double lo = start[k];
      const double hi = start[k + 1];
      while (b < busy.size() && busy[b].second <= lo)
        ++b;
      double covered = 0;
      for (std::size_t c = b; c < busy.size() && busy[c].first < hi; ++c)
        covered += std::min(hi, busy[c].second) - std::max(lo, busy[c].first);
      result[k] = hi > lo ? std::min(covered / (hi - lo), kMaxOccupancy) : 0;
    }
    return result;
  };
  occupancy_d2h_ = occupancy(d2h);
  occupancy_h2d_ = occupancy(h2d);
  free_d2h_sum_.assign(n + 1, 0);
  free_h2d_sum_.assign(n + 1, 0);
  for (std::size_t k = 0; k < n; ++k) {
    free_d2h_sum_[k + 1] = free_d2h_sum_[k] + (1 - occupancy_d2h_[k]) * op_time_[k];
    free_h2d_sum_[k + 1] = free_h2d_sum_[k] + (1 - occupancy_h2d_[k]) * op_time_[k];
  }
}

OpId Model::trigger_for(OpId op, OpId next_read) const
{
  const OpId over = last_over_[static_cast<std::size_t>(next_read - 1)];
  return std::clamp<OpId>(over + 1, op + 1, next_read);
}

bool Model::resident_at(TensorId tensor, OpId op) const
{
  const Tensor& t = trace_->tensor(tensor);
  if (is_initially_resident(t.kind))
    return true;
  const TensorLifetime& life = analysis_->lifetime(tensor);
  if (!life.produced_by || *life.produced_by >= op || (life.released_after && *life.released_after < op))
    return false;
  const TensorConfig& c = configs_[static_cast<std::size_t>(tensor)];
  switch (c.move) {
  case Move::reside: return true;
  case Move::swap: return !(c.gap_start < op && op < c.trigger);
  case Move::recompute:
    return std::none_of(c.gaps.begin(), c.gaps.end(), [&](const Gap& gap) { return gap.after < op && op < gap.until; });
  case Move::drop: return op <= c.gap_start;
  }
  return false;
}

// One op regenerates the tensor (its producer, with one output), from inputs on the device at `read_at`: the
// chains stay one op long (ℐ = {Op_j}); recompute_mode decides how often it runs (recompute_gaps).
bool Model::recomputable(TensorId tensor, OpId read_at) const
{
  if (!options_.recompute)
    return false;
  const OpId producer = *analysis_->producer(tensor);
  const Op& op = trace_->op(producer);
  if (op.phase != Phase::forward || op.outputs.size() != 1)
    return false;
  for (TensorId input : op.inputs)
    if (!resident_at(input, read_at))
      return false;
  return true;
}

double Model::swap_cost(TensorId tensor, OpId op, OpId trigger) const
{
  const double seconds = transfer_time(trace_->tensor(tensor).bytes, 1);
  const OpId producer = *analysis_->producer(tensor);
  const double forward = std::max(seconds - free_d2h(producer + 1, op - 1), 0.0);
  const OpId next = *next_read_after(tensor, op);
  const double backward = std::max(seconds - free_h2d(trigger, next - 1), 0.0);
  return forward + backward;
}

double Model::recompute_cost(TensorId tensor) const { return op_time(*analysis_->producer(tensor)); }

// memory: every later reader regenerates it (a reader right after the previous one shares its copy: no op lies in
// between to gain from the room). speed: one regeneration, kept to the last reader. lru, read statically: it stays
// over a later gap where the memory account (which still counts it) fits the budget, the room least needed; where
// the budget is exceeded it is dropped and regenerated for the next reader. A reader whose producer inputs are gone
// keeps it too.
std::vector<Gap> Model::recompute_gaps(TensorId tensor, OpId gap_start, OpId first_read) const
{
  std::vector<Gap> gaps{{gap_start, first_read}};
  if (options_.recompute_mode == "speed")
    return gaps;
  OpId previous = first_read;
  for (std::optional<OpId> read = next_read_after(tensor, first_read); read; read = next_read_after(tensor, *read)) {
    bool drop = *read > previous + 1 && recomputable(tensor, *read);
    if (drop && options_.recompute_mode == "lru")
      drop = std::any_of(memory_.begin() + previous + 1, memory_.begin() + *read,
                         [&](std::uint64_t bytes) { return bytes > budget_; });
    if (drop)
      gaps.push_back({previous, *read});
    previous = *read;
  }
  return gaps;
}

bool better_non_split(const Candidate& a, const Candidate& b)
{
  return a.ratio() < b.ratio() ||
         (a.ratio() == b.ratio() && (a.saved > b.saved || (a.saved == b.saved && a.producer < b.producer)));
}

bool better_split(const Candidate& a, const Candidate& b)
{
  return a.ratio() < b.ratio() || (a.ratio() == b.ratio() && a.saved > b.saved);
}

std::optional<Candidate> best_of(const std::vector<Candidate>& candidates, CandidateOrder better)
{
  const Candidate* best = nullptr;
  for (const Candidate& c : candidates)
    if (!best || better(c, *best))
      best = &c;
  return best ? std::optional<Candidate>(*best) : std::nullopt;
}

std::optional<Candidate> prefer_whole_or_split(const std::optional<Candidate>& keep_whole,
                                               const std::optional<Candidate>& split)
{
  return keep_whole && (!split || keep_whole->ratio() <= split->ratio()) ? keep_whole : split;
}

std::optional<Candidate> Model::best_non_split(OpId op) const
{
  return best_of(non_split_candidates(op), better_non_split);
}

std::optional<Candidate> Model::best_split(OpId op) const { return best_of(split_candidates(op), better_split); }

std::vector<Candidate> Model::non_split_candidates(OpId op) const
{
  std::vector<Candidate> found;
  auto consider = [&](const Candidate& c) {
    if (c.saved != 0)
      found.push_back(c);
  };
  for (TensorId id : candidates_) {
    if (configs_[static_cast<std::size_t>(id)].move != Move::reside)
      continue;
    const OpId producer = *analysis_->producer(id);
    if (producer >= op)
      continue;
    const std::vector<OpId>& list = reads(id);
    if (std::binary_search(list.begin(), list.end(), op))
      continue;
    const std::optional<OpId> next = next_read_after(id, op);
    if (!next)
      continue;
    Candidate c;
    c.tensor = id;
    c.producer = producer;
    c.saved = trace_->tensor(id).bytes;
    if (bandwidth_ > 0) {
      c.move = Move::swap;
      c.cost_s = swap_cost(id, op, trigger_for(op, *next));
      consider(c);
    }
    if (recomputable(id, *next)) {
      c.move = Move::recompute;
      c.cost_s = recompute_cost(id) *
                 static_cast<double>(recompute_gaps(id, last_read_before(id, op).value_or(producer), *next).size());
      consider(c);
    }
  }
  return found;
}

// Micro-op u holds the input parts not yet freed, the output parts 0..u and its workspace share. Input part v is
// freed after its last reader, micro-op v + halo: with a halo (spatial conv/pool), one more part stays per micro-op.
std::uint64_t Model::split_saving(OpId op_id, const SplitDecision& split) const
{
  const Op& op = trace_->op(op_id);
  const int parts = split.parts;
  std::uint64_t freed_before = 0; // input parts no later micro-op reads
  std::uint64_t input_total = 0;
  for (TensorId x : split.inputs)
    input_total += trace_->tensor(x).bytes;
  std::uint64_t produced = 0;
  std::uint64_t output_total = 0;
  for (TensorId y : op.outputs)
    if (is_feature_map(trace_->tensor(y).kind))
      output_total += trace_->tensor(y).bytes;
  std::uint64_t worst = 0;
  for (int u = 0; u < parts; ++u) {
    for (TensorId y : op.outputs)
      if (is_feature_map(trace_->tensor(y).kind))
        produced += part_bytes(trace_->tensor(y).bytes, parts, u, split.extent);
    const std::uint64_t workspace =
        options_.split_workspace ? part_bytes(op.workspace_bytes, parts, u, split.extent) : op.workspace_bytes;
    worst = std::max(worst, input_total - freed_before + produced + workspace);
    if (u >= split.halo)
      for (TensorId x : split.inputs)
        freed_before += part_bytes(trace_->tensor(x).bytes, parts, u - split.halo, split.extent);
  }
  return input_total + output_total + op.workspace_bytes - worst;
}

// Micro-op u+1+halo waits until part u of the swapped inputs has left (the pipeline of §3.3; with a halo, micro-op
// u+1 still reads part u); the parts start leaving after their last earlier read. Returns the compute stall.
double Model::split_swap_stall(OpId op, const SplitDecision& split, const std::vector<TensorId>& swapped) const
{
  if (swapped.empty())
    return 0;
  OpId leave = -1;
  for (TensorId x : swapped)
    leave = std::max(leave, last_read_before(x, op).value_or(*analysis_->producer(x)));
  double done = -free_d2h(leave + 1, op - 1);
  const int parts = split.parts;
  const double micro = micro_op_time(op, parts);
  double start = 0; // of micro-op k
  for (int k = 1; k < parts; ++k) {
    start += micro;
    const int gone = k - 1 - split.halo; // the part micro-op k needs room from
    if (gone < 0)
      continue;
    std::uint64_t bytes = 0;
    for (TensorId x : swapped)
      bytes += part_bytes(trace_->tensor(x).bytes, parts, gone, split.extent);
    done += transfer_time(bytes, static_cast<int>(swapped.size()));
    start = std::max(start, done);
  }
  return std::max(start + micro - parts * micro, 0.0);
}

void Model::price_split(Candidate& c, OpId op) const
{
  const SplitDecision split{c.parts, c.dim, c.extent, c.halo, c.inputs};
  c.saved = split_saving(op, split);
  c.cost_s = std::max(c.parts * micro_op_time(op, c.parts) - op_time(op), 0.0);
  std::vector<TensorId> swapped;
  for (std::size_t k = 0; k < c.inputs.size(); ++k) {
    const TensorId x = c.inputs[k];
    if (c.moves[k] == Move::swap) {
      swapped.push_back(x);
      const OpId next = *next_read_after(x, op);
      const TensorConfig& config = configs_[static_cast<std::size_t>(x)];
      const OpId trigger = config.move == Move::swap ? config.trigger : trigger_for(op, next);
      c.cost_s += std::max(transfer_time(trace_->tensor(x).bytes, c.parts) - free_h2d(trigger, next - 1), 0.0);
    } else if (c.moves[k] == Move::recompute) {
      const TensorConfig& config = configs_[static_cast<std::size_t>(x)];
      const std::size_t regenerations =
          config.move == Move::recompute ? config.gaps.size() : recompute_gaps(x, op, *next_read_after(x, op)).size();
      c.cost_s += recompute_cost(x) * static_cast<double>(regenerations);
    }
  }
  c.cost_s += split_swap_stall(op, split, swapped);
}

int Model::most_parts(std::int64_t extent) const
{
  return static_cast<int>(std::min<std::int64_t>(extent, options_.max_split));
}

void Model::consider_split(std::vector<Candidate>& found, const Candidate& c) const
{
  if (c.saved != 0)
    found.push_back(c);
}

// Over the dims the op allows and `dims` names (tsplit_dims.hpp), in their fixed order: on a tie the earlier dim.
std::vector<Candidate> Model::split_candidates(OpId op_id) const
{
  const Op& op = trace_->op(op_id);
  std::vector<Candidate> found; // every split with ΔM > 0, in the order ties keep
  if (!options_.split || op.phase == Phase::update)
    return found;
  const SplitDecision& current = splits_[static_cast<std::size_t>(op_id)];
  if (current.parts > 1) { // a larger p for the same inputs and dim, scored on the margin
    Candidate now;
    now.split = true;
    now.parts = current.parts;
    now.dim = current.dim;
    now.extent = current.extent;
    now.halo = current.halo;
    now.inputs = current.inputs;
    for (TensorId x : current.inputs)
      now.moves.push_back(configs_[static_cast<std::size_t>(x)].move);
    price_split(now, op_id);
    for (int parts : kPartCounts) {
      if (parts <= current.parts || parts > most_parts(current.extent))
        continue;
      Candidate c = now;
      c.parts = parts;
      price_split(c, op_id);
      if (c.saved <= now.saved)
        continue;
      c.saved -= now.saved;
      c.cost_s = std::max(c.cost_s - now.cost_s, 0.0);
      consider_split(found, c);
    }
    return found;
  }
  for (const SplitAxis& axis : split_axes(*trace_, op, dims_, extent_, splits_declared_)) {
    const int most = most_parts(axis.extent);
    // Inputs that can be freed part by part: partitioned feature maps this op reads last before a gap.
    std::vector<TensorId> dead;
    std::vector<TensorId> live;
    for (TensorId x : axis.partitioned_inputs) {
      if (!analysis_->producer(x) || configs_[static_cast<std::size_t>(x)].move != Move::reside)
        continue;
      if (!next_read_after(x, op_id)) {
        if (options_.split_dead_inputs)
          dead.push_back(x);
      } else {
        live.push_back(x);
      }
    }
    Candidate c;
    c.split = true;
    c.dim = axis.dim;
    c.extent = axis.extent;
    c.halo = axis.halo;
    if (dead.empty() && live.empty()) {
      if (!options_.split_workspace || op.workspace_bytes == 0)
        continue;
      for (int parts : kPartCounts) { // nothing to free part by part: only the workspace shrinks
        if (parts > most)
          break;
        c.parts = parts;
        price_split(c, op_id);
        consider_split(found, c);
      }
      continue;
    }
    for (Move move : {Move::swap, Move::recompute}) {
      c.move = move;
      c.inputs.clear();
      c.moves.clear();
      for (TensorId x : dead) {
        c.inputs.push_back(x);
        c.moves.push_back(Move::drop);
      }
      for (TensorId x : live) {
        const bool possible = move == Move::swap ? bandwidth_ > 0 : recomputable(x, *next_read_after(x, op_id));
        if (possible) {
          c.inputs.push_back(x);
          c.moves.push_back(move);
        }
      }
      if (c.inputs.empty() || (move == Move::recompute && c.inputs.size() == dead.size() && !dead.empty()))
        continue; // the dead-only option is offered once
      for (int parts : kPartCounts) {
        if (parts > most)
          break;
        c.parts = parts;
        price_split(c, op_id);
        consider_split(found, c);
      }
    }
  }
  return found;
}

void Model::apply(const Candidate& c, OpId op)
{
  auto add_recompute_reads = [&](TensorId tensor) {
    for (const Gap& gap : configs_[static_cast<std::size_t>(tensor)].gaps)
      for (TensorId input : trace_->op(*analysis_->producer(tensor)).inputs) {
        std::vector<OpId>& list = reads_[static_cast<std::size_t>(input)];
        auto it = std::lower_bound(list.begin(), list.end(), gap.until);
        if (it == list.end() || *it != gap.until)
          list.insert(it, gap.until);
      }
  };
  if (!c.split) {
    TensorConfig& config = configs_[static_cast<std::size_t>(c.tensor)];
    const OpId next = *next_read_after(c.tensor, op);
    config.move = c.move;
    config.gap_start = last_read_before(c.tensor, op).value_or(c.producer);
    config.gap_end = next;
    config.trigger = c.move == Move::swap ? trigger_for(op, next) : -1;
    config.needed_at = op;
    if (c.move == Move::recompute) {
      config.gaps = recompute_gaps(c.tensor, config.gap_start, next);
      add_recompute_reads(c.tensor);
    }
  } else {
    SplitDecision& decision = splits_[static_cast<std::size_t>(op)];
    const bool first = decision.parts == 1;
    decision.parts = c.parts;
    decision.dim = c.dim;
    decision.extent = c.extent;
    decision.halo = c.halo;
    decision.inputs = c.inputs;
    for (std::size_t k = 0; k < c.inputs.size(); ++k) {
      const TensorId x = c.inputs[k];
      TensorConfig& config = configs_[static_cast<std::size_t>(x)];
      config.parts = c.parts;
      if (!first)
        continue;
      const std::optional<OpId> next = next_read_after(x, op);
      config.move = c.moves[k];
      config.gap_start = op;
      config.gap_end = next.value_or(-1);
      config.trigger = c.moves[k] == Move::swap ? trigger_for(op, *next) : -1;
      config.needed_at = op;
      if (c.moves[k] == Move::recompute) {
        config.gaps = recompute_gaps(x, op, *next);
        add_recompute_reads(x);
      }
    }
  }
  evaluate();
}

} // namespace memsim::tsplit

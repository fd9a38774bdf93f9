// Layer profiles from memsim traces of one model at several batch sizes (rules: LAYER_PROFILE.md, "Profiles from
// memsim traces").
#include "memsim/planners/harmony/profile_from_traces.hpp"

#include "memsim/common/error.hpp"
#include "memsim/sim/memory_cursor.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>

namespace memsim::harmony {
namespace {

constexpr std::size_t kNoLayer = std::numeric_limits<std::size_t>::max();

bool is_forward(Phase phase) { return phase == Phase::forward || phase == Phase::loss; }

// The op/tensor structure every trace must share: the same ops (phase, layer, type, inputs, outputs) over the same
// tensors (kinds). Sizes and times may differ.
void check_same_structure(const SourcedTrace& reference, const SourcedTrace& other)
{
  const Trace& a = reference.trace;
  const Trace& b = other.trace;
  const auto differs = [&](const std::string& what) {
    return InputError(other.source, fmt::format("not the same model as {}: {}", reference.source, what));
  };
  if (a.tensors.size() != b.tensors.size())
    throw differs(fmt::format("{} tensors instead of {}", b.tensors.size(), a.tensors.size()));
  if (a.ops.size() != b.ops.size())
    throw differs(fmt::format("{} ops instead of {}", b.ops.size(), a.ops.size()));
  for (std::size_t i = 0; i < a.tensors.size(); ++i)
    if (a.tensors[i].kind != b.tensors[i].kind)
      throw differs(fmt::format("tensor {} ('{}') is {}, not {}", i, b.tensors[i].name, to_string(b.tensors[i].kind),
                                to_string(a.tensors[i].kind)));
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    const Op& x = a.ops[i];
    const Op& y = b.ops[i];
    if (x.phase != y.phase || x.layer != y.layer || x.type != y.type || x.inputs != y.inputs || x.outputs != y.outputs)
      throw differs(fmt::format("op {} ('{}', {} layer {}) differs from '{}' ({} layer {})", i, y.name,
                                to_string(y.phase), y.layer, x.name, to_string(x.phase), x.layer));
  }
}

// What the model's structure says per chain layer, independent of the batch size.
struct Chain {
  std::vector<int> layer_ids;                      // trace layer indices in chain order (ascending)
  std::vector<std::vector<OpId>> forward_ops;      // forward and loss ops, trace order
  std::vector<std::vector<OpId>> pass_ops;         // forward + loss + backward ops, trace order
  std::vector<std::vector<OpId>> update_ops;       // trace order
  std::vector<std::vector<TensorId>> entering;     // X(l)
  std::vector<std::vector<TensorId>> parameters;   // weights each layer owns that an update op touches
  std::vector<std::vector<TensorId>> buffers;      // the other weights it owns
  std::vector<std::vector<TensorId>> states;       // optimizer state its update ops touch first
  std::vector<std::size_t> forward_producer_layer; // per tensor: chain layer of its forward producer, else kNoLayer
  std::vector<std::size_t> last_forward_reader;    // per tensor: last chain layer whose forward reads it
};

Chain chain_of(const SourcedTrace& sourced)
{
  const Trace& trace = sourced.trace;
  Chain chain;
  for (const Op& op : trace.ops)
    if (op.phase != Phase::update)
      chain.layer_ids.push_back(op.layer);
  std::sort(chain.layer_ids.begin(), chain.layer_ids.end());
  chain.layer_ids.erase(std::unique(chain.layer_ids.begin(), chain.layer_ids.end()), chain.layer_ids.end());
  if (chain.layer_ids.empty())
    throw InputError(sourced.source, "no forward or backward ops: nothing to profile");
  std::map<int, std::size_t> index;
  for (std::size_t l = 0; l < chain.layer_ids.size(); ++l)
    index.emplace(chain.layer_ids[l], l);
  const std::size_t L = chain.layer_ids.size();
  chain.forward_ops.resize(L);
  chain.pass_ops.resize(L);
  chain.update_ops.resize(L);
  chain.entering.resize(L);
  chain.parameters.resize(L);
  chain.buffers.resize(L);
  chain.states.resize(L);
  const std::size_t T = trace.tensors.size();
  chain.forward_producer_layer.assign(T, kNoLayer);
  chain.last_forward_reader.assign(T, kNoLayer);

  std::vector<std::size_t> weight_owner(T, kNoLayer);
  std::vector<bool> updated(T, false);
  bool has_update = false;
  for (const Op& op : trace.ops) {
    if (op.phase == Phase::update) {
      const auto found = index.find(op.layer);
      if (found == index.end())
        throw InputError(sourced.source, fmt::format("update op {} ('{}') is in layer {}, which has no forward or "
                                                     "backward op",
                                                     op.id, op.name, op.layer));
      has_update = true;
      chain.update_ops[found->second].push_back(op.id);
      for (const auto* list : {&op.inputs, &op.outputs})
        for (const TensorId id : *list) {
          const auto t = static_cast<std::size_t>(id);
          updated[t] = true;
          if (trace.tensors[t].kind == TensorKind::weight && weight_owner[t] == kNoLayer)
            weight_owner[t] = found->second; // a weight only the update reads (rare); forward owners win below
          if (trace.tensors[t].kind == TensorKind::optimizer_state &&
              std::find(chain.states[found->second].begin(), chain.states[found->second].end(), id) ==
                  chain.states[found->second].end()) {
            bool earlier = false;
            for (std::size_t k = 0; k < found->second && !earlier; ++k)
              earlier = std::find(chain.states[k].begin(), chain.states[k].end(), id) != chain.states[k].end();
            if (!earlier)
              chain.states[found->second].push_back(id);
          }
        }
      continue;
    }
    const std::size_t l = index.at(op.layer);
    chain.pass_ops[l].push_back(op.id);
    if (!is_forward(op.phase))
      continue;
    chain.forward_ops[l].push_back(op.id);
    for (const TensorId id : op.inputs) {
      const auto t = static_cast<std::size_t>(id);
      const std::size_t producer = chain.forward_producer_layer[t];
      if (producer != kNoLayer && producer > l)
        throw InputError(sourced.source,
                         fmt::format("op {} ('{}', layer {}) reads '{}' from the later layer {}: the forward is not "
                                     "a chain of layers",
                                     op.id, op.name, op.layer, trace.tensors[t].name, chain.layer_ids[producer]));
      if (chain.last_forward_reader[t] == kNoLayer || chain.last_forward_reader[t] < l)
        chain.last_forward_reader[t] = l;
    }
    for (const TensorId id : op.outputs)
      if (chain.forward_producer_layer[static_cast<std::size_t>(id)] == kNoLayer)
        chain.forward_producer_layer[static_cast<std::size_t>(id)] = l;
  }
  // Weights belong to the first layer (chain order) whose forward, loss or backward ops read them.
  std::vector<std::size_t> first_reader(T, kNoLayer);
  for (std::size_t l = 0; l < L; ++l)
    for (const OpId id : chain.pass_ops[l])
      for (const TensorId t : trace.op(id).inputs)
        if (first_reader[static_cast<std::size_t>(t)] == kNoLayer)
          first_reader[static_cast<std::size_t>(t)] = l;
  for (std::size_t t = 0; t < T; ++t) {
    const Tensor& tensor = trace.tensors[t];
    if (tensor.kind == TensorKind::weight) {
      const std::size_t owner = first_reader[t] != kNoLayer ? first_reader[t] : weight_owner[t];
      if (owner == kNoLayer)
        continue; // read by no op: not part of any layer
      (updated[t] || !has_update ? chain.parameters : chain.buffers)[owner].push_back(tensor.id);
    }
    // X: the data batch (input tensors) enters layer 0; a forward output of layer p enters p+1 .. its last reader.
    const std::size_t last = chain.last_forward_reader[t];
    if (last == kNoLayer)
      continue;
    std::size_t first_entered = kNoLayer;
    if (tensor.kind == TensorKind::input)
      first_entered = 0;
    else if (chain.forward_producer_layer[t] != kNoLayer)
      first_entered = chain.forward_producer_layer[t] + 1;
    if (first_entered == kNoLayer)
      continue;
    for (std::size_t l = first_entered; l <= last; ++l)
      chain.entering[l].push_back(tensor.id);
  }
  return chain;
}

std::uint64_t bytes_of(const Trace& trace, const std::vector<TensorId>& tensors)
{
  std::uint64_t sum = 0;
  for (const TensorId id : tensors)
    sum += trace.tensor(id).bytes;
  return sum;
}

// Peak bytes of running `ops` (trace order) alone, accounted by the execution core's MemoryCursor. Resident for the
// whole run: `held` and every tensor the ops read without producing (weights, buffers, inputs, incoming gradients).
// A tensor the ops produce is allocated when its op starts, with the op's workspace, and freed after its last read
// among the ops unless `kept_to_end(t)`.
template <typename KeptToEnd>
std::int64_t run_alone_peak(const SourcedTrace& sourced, const TraceAnalysis& analysis, const std::vector<OpId>& ops,
                            const std::vector<TensorId>& held, const KeptToEnd& kept_to_end)
{
  const Trace& trace = sourced.trace;
  std::map<TensorId, std::size_t> last_use; // tensors the ops produce -> index in ops of their last use
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = trace.op(ops[i]);
    for (const TensorId id : op.outputs) {
      if (is_initially_resident(trace.tensor(id).kind))
        throw InputError(sourced.source, fmt::format("op {} ('{}') writes the initially resident '{}' as an output",
                                                     op.id, op.name, trace.tensor(id).name));
      last_use.emplace(id, i);
    }
  }
  std::vector<TensorId> resident = held;
  for (const OpId id : ops)
    for (const TensorId t : trace.op(id).inputs)
      if (last_use.count(t) == 0)
        resident.push_back(t);
  std::sort(resident.begin(), resident.end());
  resident.erase(std::unique(resident.begin(), resident.end()), resident.end());
  for (std::size_t i = 0; i < ops.size(); ++i)
    for (const TensorId t : trace.op(ops[i]).inputs)
      if (const auto found = last_use.find(t); found != last_use.end())
        found->second = std::max(found->second, i);
  std::vector<std::vector<TensorId>> frees(ops.size());
  for (const auto& [t, i] : last_use)
    if (!kept_to_end(t))
      frees[i].push_back(t);

  MemoryCursor cursor(analysis.flat(), resident);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    cursor.run(ops[i]);
    for (const TensorId t : frees[i])
      cursor.free(t);
  }
  return static_cast<std::int64_t>(cursor.peak());
}

double sum_times(const Trace& trace, const std::vector<OpId>& ops)
{
  double sum = 0;
  for (const OpId id : ops)
    sum += trace.op(id).time_s;
  return sum;
}

// The chain layer's name: its index in the trace and the module of its first op ("3 (layer.2)").
std::string layer_name(const Trace& trace, int layer_id, const std::vector<OpId>& ops)
{
  if (ops.empty())
    return fmt::format("{}", layer_id);
  const std::string& op_name = trace.op(ops.front()).name;
  return fmt::format("{} ({})", layer_id, op_name.substr(0, op_name.find(':')));
}

ProfiledMicrobatch profile_at_batch(const SourcedTrace& sourced, const Chain& chain)
{
  const Trace& trace = sourced.trace;
  const TraceAnalysis analysis(trace);
  const std::size_t L = chain.layer_ids.size();
  ProfiledMicrobatch sample;
  for (std::size_t l = 0; l < L; ++l) {
    const double forward_s = sum_times(trace, chain.forward_ops[l]);
    sample.forward_time_s.push_back(forward_s);
    double backward_s = forward_s; // Harmony's BWD task recomputes the layer's forward first
    for (const OpId id : chain.pass_ops[l])
      if (!is_forward(trace.op(id).phase))
        backward_s += trace.op(id).time_s;
    sample.backward_time_s.push_back(backward_s);
    sample.input_bytes.push_back(bytes_of(trace, chain.entering[l]));

    // Forward without autograd: the layer's outputs that enter the next layer stay; temporaries go.
    const auto enters_next = [&](TensorId t) {
      const auto i = static_cast<std::size_t>(t);
      return chain.last_forward_reader[i] != kNoLayer && chain.last_forward_reader[i] > l;
    };
    sample.forward_peak_bytes.push_back(run_alone_peak(sourced, analysis, chain.forward_ops[l], chain.entering[l],
                                                       enters_next));
    // Recompute + backward: what any other op reads (dX, weight gradients, Y) stays to the end.
    const std::vector<OpId>& pass = chain.pass_ops[l];
    const auto read_elsewhere = [&](TensorId t) {
      if (trace.tensor(t).kind == TensorKind::weight_grad)
        return true;
      for (const OpId reader : analysis.readers(t))
        if (!std::binary_search(pass.begin(), pass.end(), reader))
          return true;
      return false;
    };
    sample.backward_peak_bytes.push_back(run_alone_peak(sourced, analysis, pass, chain.entering[l], read_elsewhere));
  }
  return sample;
}

} // namespace

LayerProfile layer_profile_from_traces(const std::vector<SourcedTrace>& traces, const LayerProfileOptions& options)
{
  if (traces.empty())
    throw InputError("", "no traces to profile");
  std::vector<std::pair<int, const SourcedTrace*>> by_batch;
  if (!(options.proportionality_tolerance >= 0))
    throw InputError("", "the proportionality tolerance must not be negative");
  for (const SourcedTrace& sourced : traces) {
    for (const Op& op : sourced.trace.ops)
      if (op.iteration != 0)
        throw InputError(sourced.source, fmt::format("op {} ('{}') is in iteration {}: a layer profile is made of "
                                                     "one training iteration",
                                                     op.id, op.name, op.iteration));
    const std::optional<std::int64_t> batch = trace_batch_size(sourced.trace);
    if (!batch || *batch <= 0 || *batch > std::numeric_limits<int>::max())
      throw InputError(sourced.source, "unknown batch size (source.batch, or an input tensor's shape and batch_axis)");
    for (const auto& [u, other] : by_batch)
      if (u == *batch)
        throw InputError(sourced.source, fmt::format("batch {} is also the batch of {}", u, other->source));
    by_batch.emplace_back(static_cast<int>(*batch), &sourced);
  }
  std::sort(by_batch.begin(), by_batch.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const SourcedTrace& reference = *by_batch.front().second;
  for (const auto& entry : by_batch)
    if (entry.second != &reference)
      check_same_structure(reference, *entry.second);
  const Chain chain = chain_of(reference);
  const std::size_t L = chain.layer_ids.size();

  LayerProfile profile;
  profile.model = options.model.empty() ? reference.trace.name : options.model;
  if (options.source.empty()) {
    std::string files;
    for (const auto& [u, sourced] : by_batch)
      files += fmt::format("{}{}", files.empty() ? "" : ", ", sourced->source);
    profile.source =
        fmt::format("memsim traces {} ({}, {})", files, reference.trace.source.device, reference.trace.source.dtype);
  } else {
    profile.source = options.source;
  }
  const Trace& smallest = reference.trace;
  for (std::size_t l = 0; l < L; ++l) {
    ProfiledLayer layer;
    layer.name = layer_name(smallest, chain.layer_ids[l], chain.pass_ops[l]);
    layer.weight_bytes = bytes_of(smallest, chain.parameters[l]);
    layer.buffer_bytes = bytes_of(smallest, chain.buffers[l]);
    layer.optimizer_state_bytes = bytes_of(smallest, chain.states[l]);
    for (const OpId id : chain.update_ops[l]) {
      const Op& op = smallest.op(id);
      layer.cpu_update_s += options.host_update_time ? options.host_update_time(op) : op.cpu_time_s.value_or(op.time_s);
    }
    const std::uint64_t entering = bytes_of(smallest, chain.entering[l]);
    const auto u = static_cast<std::uint64_t>(by_batch.front().first);
    layer.input_bytes_per_sample = (entering + u / 2) / u;
    profile.layers.push_back(std::move(layer));
  }
  for (const auto& [u, sourced] : by_batch) {
    ProfiledMicrobatch sample = profile_at_batch(*sourced, chain);
    for (std::size_t l = 0; l < L; ++l) {
      const double expected = static_cast<double>(u) * static_cast<double>(profile.layers[l].input_bytes_per_sample);
      const auto found = static_cast<double>(sample.input_bytes[l]);
      if (std::abs(found - expected) > options.proportionality_tolerance * std::max(found, expected))
        throw InputError(sourced->source,
                         fmt::format("X(u={}, layer {}) = {} B is not u x {} B per sample (X at u={} in {}) within "
                                     "{}%: Harmony scales X with u",
                                     u, profile.layers[l].name, sample.input_bytes[l],
                                     profile.layers[l].input_bytes_per_sample, by_batch.front().first, reference.source,
                                     options.proportionality_tolerance * 100));
    }
    profile.sampled_forward.push_back(u);
    profile.microbatches.emplace(u, std::move(sample));
  }
  profile.sampled_backward = profile.sampled_forward;
  return profile;
}

} // namespace memsim::harmony

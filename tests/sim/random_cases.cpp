#include "random_cases.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

namespace memsim::test {

namespace {

constexpr std::uint64_t kMB = 1000000;

template <typename T>
T pick(std::mt19937_64& rng, std::initializer_list<T> values)
{
  std::uniform_int_distribution<std::size_t> index(0, values.size() - 1);
  return *(values.begin() + static_cast<std::ptrdiff_t>(index(rng)));
}

bool chance(std::mt19937_64& rng, double p) { return std::uniform_real_distribution<double>(0.0, 1.0)(rng) < p; }

int uniform(std::mt19937_64& rng, int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng); }

Link random_link(std::mt19937_64& rng, std::string name, std::string a, std::string b)
{
  return Link{std::move(name),
              std::move(a),
              std::move(b),
              pick(rng, {1e9, 2e9, 4e9, 8e9, 16e9}),
              pick(rng, {0.0, 0.0, 1e-6, 2e-6, 5e-6}),
              chance(rng, 0.5) ? Duplex::split : Duplex::shared};
}

} // namespace

Trace random_trace(std::mt19937_64& rng)
{
  Trace trace;
  trace.name = "random";
  trace.source = TraceSource{"test", "test-gpu", "fp32", 1, ""};
  auto tensor = [&](std::string name, std::uint64_t bytes, TensorKind kind) {
    trace.tensors.push_back(
        Tensor{static_cast<TensorId>(trace.tensors.size()), std::move(name), bytes, kind, {}, {}, {}});
    return trace.tensors.back().id;
  };
  auto op = [&](std::string name, Phase phase, int layer, std::vector<TensorId> in, std::vector<TensorId> out) {
    Op o;
    o.id = static_cast<OpId>(trace.ops.size());
    o.name = std::move(name);
    o.type = "linear";
    o.phase = phase;
    o.layer = layer;
    o.inputs = std::move(in);
    o.outputs = std::move(out);
    o.time_s = pick(rng, {0.0, 0.00025, 0.0005, 0.0005, 0.001, 0.001, 0.0015});
    o.workspace_bytes = pick<std::uint64_t>(rng, {0, 0, 0, kMB / 4, kMB});
    trace.ops.push_back(o);
  };
  const int layers = uniform(rng, 1, 4);
  auto activation_bytes = [&] { return pick<std::uint64_t>(rng, {kMB / 2, kMB, kMB, 3 * kMB / 2, 2 * kMB}); };
  std::vector<TensorId> acts{tensor("x", activation_bytes(), TensorKind::input)};
  std::vector<TensorId> weights;
  for (int l = 0; l < layers; ++l) {
    const TensorId w =
        tensor(fmt::format("w{}", l), pick<std::uint64_t>(rng, {kMB / 4, kMB / 2, kMB}), TensorKind::weight);
    const TensorId a = tensor(fmt::format("a{}", l), activation_bytes(), TensorKind::activation);
    op(fmt::format("f{}", l), Phase::forward, l, {acts.back(), w}, {a});
    acts.push_back(a);
    weights.push_back(w);
  }
  if (chance(rng, 0.2))
    tensor("unused", kMB, TensorKind::weight); // no op reads it: still resident from the start
  TensorId grad = tensor(fmt::format("g{}", layers - 1), trace.tensor(acts.back()).bytes, TensorKind::gradient);
  op("loss", Phase::loss, layers - 1, {acts.back()}, {grad});
  std::vector<TensorId> weight_grads(static_cast<std::size_t>(layers));
  for (int l = layers - 1; l >= 0; --l) {
    const auto layer = static_cast<std::size_t>(l);
    const TensorId wg = tensor(fmt::format("dw{}", l), trace.tensor(weights[layer]).bytes, TensorKind::weight_grad);
    weight_grads[layer] = wg;
    std::vector<TensorId> outs{wg};
    TensorId next_grad = -1;
    if (l > 0) {
      next_grad = tensor(fmt::format("g{}", l - 1), trace.tensor(acts[layer]).bytes, TensorKind::gradient);
      outs.push_back(next_grad);
    }
    op(fmt::format("b{}", l), Phase::backward, l, {grad, acts[layer], weights[layer]}, outs);
    grad = next_grad;
  }
  if (chance(rng, 0.5))
    for (int l = 0; l < layers; ++l) {
      const auto layer = static_cast<std::size_t>(l);
      const TensorId state =
          tensor(fmt::format("s{}", l), trace.tensor(weights[layer]).bytes, TensorKind::optimizer_state);
      const TensorId done = tensor(fmt::format("u{}", l), kMB / 4, TensorKind::other);
      op(fmt::format("update{}", l), Phase::update, l, {weights[layer], weight_grads[layer], state}, {done});
    }
  validate_trace(trace, trace.name);
  return trace;
}

Machine random_machine(std::mt19937_64& rng)
{
  Machine machine;
  machine.name = "random";
  const int gpus = uniform(rng, 1, 4);
  const double launch = pick(rng, {0.0, 0.0, 1e-6});
  for (int g = 0; g < gpus; ++g)
    machine.gpus.push_back(Gpu{fmt::format("gpu{}", g), "test-gpu", 16ull << 30, {{"fp32", 10e12}}, 900e9, launch});
  machine.host.memory = 256ull << 30;
  const int topology = uniform(rng, 0, gpus >= 2 ? 3 : 1);
  auto gpu = [](int g) { return fmt::format("gpu{}", g); };
  switch (topology) {
  case 0: // a PCIe link per GPU straight to the host
    for (int g = 0; g < gpus; ++g)
      machine.links.push_back(random_link(rng, fmt::format("pcie{}", g), gpu(g), kHostNodeName));
    break;
  case 1: // one PCIe switch, its uplink shared by every GPU
    machine.switches = {"sw0"};
    for (int g = 0; g < gpus; ++g)
      machine.links.push_back(random_link(rng, fmt::format("gpu{}-sw0", g), gpu(g), "sw0"));
    machine.links.push_back(random_link(rng, "sw0-host", "sw0", kHostNodeName));
    break;
  case 2: // two switches, each with its own uplink
  case 3: // a tree: sw1 hangs below sw0
    machine.switches = {"sw0", "sw1"};
    for (int g = 0; g < gpus; ++g) {
      const std::string sw = g < (gpus + 1) / 2 ? "sw0" : "sw1";
      machine.links.push_back(random_link(rng, fmt::format("gpu{}-{}", g, sw), gpu(g), sw));
    }
    machine.links.push_back(random_link(rng, "sw0-host", "sw0", kHostNodeName));
    if (topology == 2)
      machine.links.push_back(random_link(rng, "sw1-host", "sw1", kHostNodeName));
    else
      machine.links.push_back(random_link(rng, "sw1-sw0", "sw1", "sw0"));
    break;
  }
  if (gpus >= 2 && chance(rng, 0.5)) { // NVLink: pairs, or every pair
    const bool mesh = chance(rng, 0.5);
    for (int a = 0; a < gpus; ++a)
      for (int b = a + 1; b < gpus; ++b)
        if (mesh || (a % 2 == 0 && b == a + 1))
          machine.links.push_back(random_link(rng, fmt::format("nvlink{}{}", a, b), gpu(a), gpu(b)));
  }
  validate_machine(machine, machine.name);
  return machine;
}

namespace {

// Builds a plan in list order while tracking what a list-order execution would hold where, so that most plans
// are valid; faults are injected afterwards.
class PlanGenerator {
public:
  PlanGenerator(const Trace& trace, const Machine& machine, std::mt19937_64& rng, const PlanShape& shape)
      : trace_(trace), rng_(rng), shape_(shape), builder_(plan_),
        devices_(shape.single_device ? 1 : static_cast<int>(machine.gpus.size()))
  {
    plan_.trace = trace.name;
    plan_.machine = machine.name;
    plan_.planner = "random";
    std::set<TensorId> produced;
    for (const Op& op : trace.ops)
      for (TensorId id : op.outputs)
        produced.insert(id);
    for (const Tensor& tensor : trace.tensors)
      initial_.push_back(preexists(tensor.kind, produced.count(tensor.id) != 0));
    for (const Op& op : trace.ops)
      for (TensorId id : op.inputs)
        last_reader_[id] = op.id;
    for (const Op& op : trace.ops)
      for (TensorId id : op.outputs)
        producer_[id] = op.id;
    in_use_.assign(static_cast<std::size_t>(devices_), 0);
  }

  Plan generate(std::string& notes)
  {
    const int instances = chance(rng_, 0.25) ? 2 : 1;
    // Where each (instance, layer) runs: one device, a pipeline over the devices, or anywhere.
    const int placement = uniform(rng_, 0, 2);
    int max_layer = 0;
    for (const Op& op : trace_.ops)
      max_layer = std::max(max_layer, op.layer);
    for (int i = 0; i < instances; ++i) {
      std::vector<int> device_of_layer;
      for (int l = 0; l <= max_layer; ++l)
        device_of_layer.push_back(placement == 0   ? i % devices_
                                  : placement == 1 ? (l * devices_) / (max_layer + 1)
                                                   : uniform(rng_, 0, devices_ - 1));
      device_of_layer_.push_back(device_of_layer);
    }
    second_stream_ = !shape_.single_stream && chance(rng_, 0.4);
    if (shape_.v2)
      choose_v2_layout(instances);
    // Account the initially resident tensors: every device running the instance gets them (approximately).
    for (const Op& op : trace_.ops)
      for (int i = 0; i < instances; ++i)
        for (TensorId id : op.inputs)
          if (initial_[static_cast<std::size_t>(id)])
            touch_initial(device(i, op), i, id);
    // Interleave the instances op by op.
    for (const Op& op : trace_.ops)
      for (int i = 0; i < instances; ++i)
        compute(op, i);
    if (shape_.v2)
      add_collectives();
    inject_faults(notes);
    if (shape_.v2)
      assign_iterations(notes);
    return std::move(plan_);
  }

private:
  using Key = std::tuple<int, int, TensorId>; // (device, instance, tensor)

  int device(int instance, const Op& op) const
  {
    return device_of_layer_[static_cast<std::size_t>(instance)][static_cast<std::size_t>(op.layer)];
  }
  std::string stream(const char* name) const { return shape_.single_stream ? "compute" : name; }
  std::string compute_stream() { return second_stream_ && chance(rng_, 0.3) ? "compute2" : "compute"; }
  std::uint64_t bytes(TensorId id) const { return trace_.tensor(id).bytes; }

  void allocate(int d, std::uint64_t b)
  {
    auto& used = in_use_[static_cast<std::size_t>(d)];
    used += b;
    peak_ = std::max(peak_, used);
  }
  void release(int d, std::uint64_t b) { in_use_[static_cast<std::size_t>(d)] -= b; }

  void touch_initial(int d, int instance, TensorId id)
  {
    if (resident_.emplace(Key{d, instance, id}, -1).second)
      allocate(d, bytes(id));
  }

  std::vector<StepId> random_extra_deps()
  {
    std::vector<StepId> deps;
    if (!plan_.steps.empty() && chance(rng_, 0.3))
      deps.push_back(uniform(rng_, 0, static_cast<int>(plan_.steps.size()) - 1));
    return deps;
  }

  // Makes (instance, tensor) resident on d in list order; the step to wait for goes into deps.
  bool ensure(int d, int instance, TensorId id, std::vector<StepId>& deps, int depth)
  {
    auto here = resident_.find(Key{d, instance, id});
    if (here != resident_.end()) {
      if (here->second >= 0)
        deps.push_back(here->second);
      return true;
    }
    for (int e = 0; e < devices_; ++e) { // on another GPU: send it over
      auto there = resident_.find(Key{e, instance, id});
      if (e == d || there == resident_.end())
        continue;
      Step send;
      send.kind = StepKind::send;
      send.device = e;
      send.stream = stream("p2p");
      send.tensor = id;
      send.instance = instance;
      send.peer = d;
      if (there->second >= 0)
        send.deps.push_back(there->second);
      const StepId sent = builder_.add(send);
      Step recv = send;
      recv.kind = StepKind::recv;
      recv.device = d;
      recv.peer = e;
      recv.deps = {sent};
      const StepId received = builder_.add(recv);
      resident_[Key{d, instance, id}] = received;
      allocate(d, bytes(id));
      deps.push_back(received);
      return true;
    }
    auto host = host_copy_.find({instance, id});
    if (host != host_copy_.end()) { // on the host: prefetch it (to any GPU)
      std::vector<StepId> prefetch_deps;
      if (host->second.first >= 0) // else on the host from the start (initial_placement)
        prefetch_deps.push_back(host->second.first);
      const StepId prefetch = builder_.prefetch(id, prefetch_deps, d, instance, stream("h2d"));
      resident_[Key{d, instance, id}] = prefetch;
      allocate(d, bytes(id));
      deps.push_back(prefetch);
      return true;
    }
    auto producer = producer_.find(id);
    if (depth == 0 && producer != producer_.end()) { // freed without a copy: recompute its producer
      const Op& op = trace_.op(producer->second);
      if (op.outputs.size() != 1)
        return false;
      std::vector<StepId> recompute_deps;
      for (TensorId input : op.inputs)
        if (!ensure(d, instance, input, recompute_deps, depth + 1))
          return false;
      const StepId recompute = builder_.recompute(op.id, recompute_deps, d, instance, "compute");
      allocate(d, bytes(id));
      resident_[Key{d, instance, id}] = recompute;
      deps.push_back(recompute);
      return true;
    }
    return false;
  }

  void free_tensor(int d, int instance, TensorId id, StepId after, const std::string& on)
  {
    builder_.free(id, {after}, on, d, instance);
    resident_.erase(Key{d, instance, id});
    release(d, bytes(id));
  }

  void compute(const Op& op, int instance)
  {
    const int d = device(instance, op);
    std::vector<StepId> deps = random_extra_deps();
    for (TensorId input : op.inputs)
      ensure(d, instance, input, deps, 0);
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    const std::string on = compute_stream();
    // A tensor produced again (the trace produces each once, but a recompute may have made it resident): skip.
    for (TensorId output : op.outputs)
      if (resident_.count(Key{d, instance, output}))
        return;
    const StepId step = builder_.compute(op.id, deps, d, instance, on);
    for (TensorId output : op.outputs) {
      resident_[Key{d, instance, output}] = step;
      allocate(d, bytes(output));
    }
    if (shape_.v2)
      for (TensorId output : op.outputs)
        maybe_split_and_merge(d, instance, output, on);
    allocate(d, op.workspace_bytes);
    release(d, op.workspace_bytes);
    // Inputs read for the last time: free them (most of the time).
    for (TensorId input : op.inputs)
      if (!initial_[static_cast<std::size_t>(input)] && last_reader_[input] == op.id && chance(rng_, 0.85) &&
          resident_.count(Key{d, instance, input}))
        free_tensor(d, instance, input, step, on);
    // Outputs read later: offload and free, or free and recompute later, or keep.
    for (TensorId output : op.outputs) {
      if (!last_reader_.count(output) || trace_.tensor(output).kind != TensorKind::activation)
        continue;
      const double fate = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
      if (fate < 0.3) {
        const StepId offload = builder_.offload(output, {step}, d, instance, stream("d2h"));
        const std::string free_on = stream(chance(rng_, 0.5) ? "d2h" : "compute");
        free_tensor(d, instance, output, offload, free_on);
        host_copy_[{instance, output}] = {builder_.last(), d};
        if (shape_.v2 && chance(rng_, 0.3))
          host_compute(instance, output, offload);
      } else if (fate < 0.45) {
        free_tensor(d, instance, output, step, on);
      }
    }
  }

  // v2: weights or optimizer state start on the host (prefetched before use), weights and gradients shared by the
  // instances.
  void choose_v2_layout(int instances)
  {
    if (chance(rng_, 0.3)) {
      const TensorKind kind = chance(rng_, 0.5) ? TensorKind::weight : TensorKind::optimizer_state;
      plan_.initial_placement.push_back(PlacementRule{kind, std::nullopt, Placement::host, std::nullopt});
      for (const Tensor& tensor : trace_.tensors)
        if (tensor.kind == kind && initial_[static_cast<std::size_t>(tensor.id)]) {
          initial_[static_cast<std::size_t>(tensor.id)] = false;
          for (int i = 0; i < instances; ++i)
            host_copy_[{i, tensor.id}] = {-1, 0};
        }
    }
    if (instances > 1 && chance(rng_, 0.4)) {
      plan_.shared_across_instances.push_back(TensorKind::weight);
      if (chance(rng_, 0.5))
        plan_.shared_across_instances.push_back(TensorKind::weight_grad);
    }
  }

  TensorId add_extra_tensor(std::string name, std::uint64_t size)
  {
    const auto id = static_cast<TensorId>(trace_.tensors.size() + plan_.extra_tensors.size());
    plan_.extra_tensors.push_back(Tensor{id, std::move(name), size, TensorKind::activation, {}, {}, {}});
    return id;
  }

  // A zero-time split of a fresh output into two parts, merged back at once (pool: the parts share its block).
  void maybe_split_and_merge(int d, int instance, TensorId output, const std::string& on)
  {
    if (!chance(rng_, 0.15) || bytes(output) % 2 != 0)
      return;
    const std::string name = trace_.tensor(output).name;
    const std::vector<TensorId> parts{add_extra_tensor(name + "#0", bytes(output) / 2),
                                      add_extra_tensor(name + "#1", bytes(output) / 2)};
    Step split;
    split.kind = StepKind::split;
    split.device = d;
    split.instance = instance;
    split.stream = on;
    split.tensor = output;
    split.parts = parts;
    split.deps = {resident_[Key{d, instance, output}]};
    const StepId split_id = builder_.add(split);
    Step merge = split;
    merge.kind = StepKind::merge;
    merge.deps = {split_id};
    resident_[Key{d, instance, output}] = builder_.add(merge);
  }

  // A host step that reads an offloaded activation after its offload and writes a small host tensor.
  void host_compute(int instance, TensorId input, StepId offload)
  {
    Op op;
    op.id = static_cast<OpId>(trace_.ops.size() + plan_.extra_ops.size());
    op.name = fmt::format("host{}", op.id);
    op.type = "cpu";
    op.phase = Phase::forward;
    op.inputs = {input};
    op.outputs = {add_extra_tensor(fmt::format("h{}", op.id), kMB / 4)};
    op.time_s = 0.001;
    if (chance(rng_, 0.5))
      op.cpu_time_s = pick(rng_, {0.0005, 0.001, 0.002});
    else
      op.bytes_accessed = pick(rng_, {1e6, 2e6});
    plan_.extra_ops.push_back(op);
    builder_.compute(op.id, {offload}, kHostDevice, instance, chance(rng_, 0.5) ? "cpu0" : "cpu1");
  }

  // Ring collectives over a weight on a group of devices, after random earlier steps.
  void add_collectives()
  {
    if (devices_ < 2 || plan_.steps.empty())
      return;
    const int count = uniform(rng_, 0, 2);
    for (int c = 0; c < count; ++c) {
      std::vector<TensorId> weights;
      for (const Tensor& tensor : trace_.tensors)
        if (tensor.kind == TensorKind::weight && initial_[static_cast<std::size_t>(tensor.id)])
          weights.push_back(tensor.id);
      if (weights.empty())
        return;
      Step step;
      step.kind = pick(rng_, {StepKind::allreduce, StepKind::allgather, StepKind::reducescatter});
      step.tensor = weights[static_cast<std::size_t>(uniform(rng_, 0, static_cast<int>(weights.size()) - 1))];
      for (int d = 0; d < devices_; ++d)
        if (d == 0 || chance(rng_, 0.7))
          step.group.push_back(d);
      if (step.group.size() < 2)
        step.group.push_back(1);
      if (chance(rng_, 0.5))
        std::reverse(step.group.begin(), step.group.end());
      step.device = step.group.front();
      step.stream = stream("coll");
      step.deps = {random_step()};
      for (int d : step.group)
        touch_initial(d, 0, *step.tensor);
      builder_.add(step);
    }
  }

  // Steps carry iterations: the plan's list cut into 2 or 3 consecutive ranges.
  void assign_iterations(std::string& notes)
  {
    if (!chance(rng_, 0.5))
      return;
    const int iterations = uniform(rng_, 2, 3);
    const auto count = static_cast<int>(plan_.steps.size());
    for (Step& step : plan_.steps)
      step.iteration = static_cast<int>(step.id) * iterations / count;
    notes += fmt::format("{} iterations; ", iterations);
  }

  StepId random_step() { return uniform(rng_, 0, static_cast<int>(plan_.steps.size()) - 1); }

  void inject_faults(std::string& notes)
  {
    if (plan_.steps.empty() || !chance(rng_, 0.35))
      return;
    const int fault = uniform(rng_, 0, 5);
    Step& victim = plan_.steps[static_cast<std::size_t>(random_step())];
    switch (fault) {
    case 0: // a race: one dep dropped
      if (!victim.deps.empty()) {
        victim.deps.erase(victim.deps.begin() + uniform(rng_, 0, static_cast<int>(victim.deps.size()) - 1));
        notes += fmt::format("dropped a dep of step {}; ", victim.id);
      }
      break;
    case 1: { // an op computed twice (double allocation unless its outputs were freed)
      Step copy = victim;
      if (!copy.op)
        break;
      copy.deps = {victim.id};
      builder_.add(copy); // may reallocate the steps: `victim` dangles from here on
      notes += fmt::format("computed step {}'s op again; ", copy.deps.front());
      break;
    }
    case 2: { // a prefetch of a tensor that was never offloaded
      const TensorId id = uniform(rng_, 0, static_cast<int>(trace_.tensors.size()) - 1);
      builder_.prefetch(id, {}, uniform(rng_, 0, devices_ - 1), 0, stream("h2d"));
      notes += fmt::format("prefetched tensor {} without an offload; ", id);
      break;
    }
    case 3: // a tensor freed twice
      if (victim.kind == StepKind::free) {
        Step copy = victim;
        copy.deps = {victim.id};
        builder_.add(copy); // may reallocate the steps: `victim` dangles from here on
        notes += fmt::format("freed step {}'s tensor twice; ", copy.deps.front());
      }
      break;
    case 4: { // a dep on a later step (a cycle through stream order deadlocks)
      const StepId later = random_step();
      if (later > victim.id) {
        victim.deps.push_back(later);
        notes += fmt::format("step {} depends on the later step {}; ", victim.id, later);
      }
      break;
    }
    case 5: // a step removed (whatever it made resident is missing later); its dependents depend on its deps
      // (not a split or an offload under v2: the loader refuses a merge or host read that nothing can feed)
      if (victim.id + 1 < static_cast<StepId>(plan_.steps.size()) &&
          !(shape_.v2 && (victim.kind == StepKind::split || victim.kind == StepKind::offload))) {
        const StepId removed = victim.id;
        const std::vector<StepId> inherited = victim.deps;
        plan_.steps.erase(plan_.steps.begin() + removed);
        for (Step& step : plan_.steps) {
          if (step.id > removed)
            --step.id;
          std::vector<StepId> deps;
          for (StepId dep : step.deps) {
            if (dep == removed)
              deps.insert(deps.end(), inherited.begin(), inherited.end());
            else
              deps.push_back(dep > removed ? dep - 1 : dep);
          }
          std::sort(deps.begin(), deps.end());
          deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
          step.deps = deps;
        }
        notes += fmt::format("removed step {}; ", removed);
      }
      break;
    }
  }

public:
  std::uint64_t peak() const { return peak_; }

private:
  const Trace& trace_;
  std::mt19937_64& rng_;
  PlanShape shape_;
  Plan plan_;
  PlanBuilder builder_;
  int devices_;
  bool second_stream_ = false;
  std::vector<bool> initial_;
  std::map<TensorId, OpId> last_reader_;
  std::map<TensorId, OpId> producer_;
  std::vector<std::vector<int>> device_of_layer_;
  std::map<Key, StepId> resident_; // -> the step that made it resident (-1: t=0)
  std::map<std::pair<int, TensorId>, std::pair<StepId, int>>
      host_copy_; // -> (step after which it is on the host, device)
  std::vector<std::uint64_t> in_use_;
  std::uint64_t peak_ = 0;
};

} // namespace

Plan random_plan(const Trace& trace, const Machine& machine, std::mt19937_64& rng, const PlanShape& shape,
                 std::string& notes)
{
  PlanGenerator generator(trace, machine, rng, shape);
  Plan plan = generator.generate(notes);
  // The budget: the GPU's memory, or around the list-order peak (tight budgets fail, loose ones fit).
  if (chance(rng, 0.7)) {
    const double fraction = pick(rng, {0.5, 0.7, 0.85, 0.95, 1.0, 1.0, 1.1, 1.3});
    plan.budget_bytes = static_cast<std::uint64_t>(fraction * static_cast<double>(generator.peak()));
    notes += fmt::format("budget {} of the list-order peak {}; ", fraction, generator.peak());
  }
  return plan;
}

RandomCase random_case(std::uint64_t seed, const PlanShape& shape)
{
  std::mt19937_64 rng(seed);
  RandomCase c;
  c.seed = seed;
  c.trace = random_trace(rng);
  c.machine = random_machine(rng);
  c.plan = random_plan(c.trace, c.machine, rng, shape, c.notes);
  if (chance(rng, 0.05)) { // host memory too small for the offloads
    c.machine.host.memory = 2 * kMB;
    c.notes += "host memory 2 MB; ";
  }
  if (shape.scopes && chance(rng, 0.5)) {
    std::map<int, std::pair<StepId, StepId>> span; // instance -> (first step, last step)
    for (const Step& step : c.plan.steps) {
      auto [found, added] = span.emplace(step.instance, std::pair{step.id, step.id});
      if (!added)
        found->second.second = step.id;
    }
    for (const auto& [instance, steps] : span)
      c.plan.instance_scopes.push_back(InstanceScope{instance, steps.first, steps.second});
    c.notes += fmt::format("{} instance scopes; ", span.size());
  }
  return c;
}

} // namespace memsim::test

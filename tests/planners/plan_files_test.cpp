// Trace and plan files through the simdjson loaders: every field round-trips, and bad documents give the
// located messages (byte offset for syntax, JSON path for schema) the nlohmann loaders gave.
#include "memsim/common/error.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/traces/trace.hpp"

#include "test_files.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <limits>

namespace memsim {
namespace {

// A weight so large that the trace's sizes only just fit in 64 bits, as the loader requires (README, Limits), with
// room for the other tensors as the tests below edit them.
constexpr std::uint64_t kLargestWeight = std::numeric_limits<std::uint64_t>::max() - (std::uint64_t{1} << 32);

Trace full_trace()
{
  Trace trace;
  trace.name = "every-field";
  trace.source = {"hand", "GPU-A", "bf16", 8, "2026-11-23"};
  trace.tensors = {{0, "w", kLargestWeight, TensorKind::weight, std::nullopt, {}, {}},
                   {1, "a", 4000, TensorKind::activation, 1, {}, {}},
                   {2, "g \"quoted\" \u00e9", 500, TensorKind::gradient, std::nullopt, {}, {}}};
  Op forward;
  forward.id = 0;
  forward.name = "matmul";
  forward.type = "gemm";
  forward.phase = Phase::forward;
  forward.layer = 3;
  forward.inputs = {0};
  forward.outputs = {1};
  forward.workspace_bytes = 100;
  forward.time_s = 0.1 + 0.2; // not exactly representable in short decimal
  forward.flops = 1e12;
  forward.bytes_accessed = 1.5e9;
  forward.split = {"a", "b"};
  Op backward;
  backward.id = 1;
  backward.name = "relu_backward";
  backward.phase = Phase::backward;
  backward.inputs = {1, 0};
  backward.outputs = {2};
  backward.time_s = 3e-300;
  trace.ops = {forward, backward};
  return trace;
}

Plan full_plan(const Trace& trace)
{
  Plan plan;
  plan.trace = trace.name;
  plan.machine = "m";
  plan.planner = "hand";
  plan.params = {{"lookahead", 2}, {"ratio", 0.5}, {"names", {"x", "y"}}, {"nested", {{"deep", nullptr}}}};
  plan.budget_bytes = std::numeric_limits<std::uint64_t>::max();
  plan.estimate.iteration_time_s = 0.25;
  plan.estimate.peak_bytes = 123456789012345ull;
  Op extra;
  extra.id = 2;
  extra.name = "extra";
  extra.phase = Phase::backward;
  extra.inputs = {1};
  extra.outputs = {3};
  extra.time_s = 1e-3;
  plan.extra_ops = {extra};
  plan.extra_tensors = {{3, "e", 10, TensorKind::other, std::nullopt, {}, {}}};
  PlanBuilder build(plan);
  const StepId f = build.compute(0);
  const StepId o = build.offload(1, {f});
  const StepId p = build.prefetch(1, {o}, 0, 1);
  plan.steps[static_cast<std::size_t>(p)].service_s = 2.5e-5; // a policy's fault handling before the bytes
  build.compute(1, {p});
  build.free(1);
  return plan;
}

std::string load_error(const std::function<void()>& load)
{
  try {
    load();
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

TEST(TraceFiles, EveryFieldRoundTrips)
{
  test::ScratchDir dir;
  const Trace trace = full_trace();
  save_trace(trace, dir / "t.trace.json");
  save_trace(trace, dir / "t.trace.json.gz");
  EXPECT_EQ(trace_to_json(load_trace(dir / "t.trace.json")), trace_to_json(trace));
  EXPECT_EQ(trace_to_json(load_trace(dir / "t.trace.json.gz")), trace_to_json(trace));
  const Trace loaded = load_trace(dir / "t.trace.json");
  EXPECT_EQ(loaded.tensors[0].bytes, kLargestWeight);
  EXPECT_EQ(loaded.ops[0].time_s, 0.1 + 0.2);
  EXPECT_EQ(loaded.ops[1].time_s, 3e-300);
  EXPECT_EQ(loaded.tensors[2].name, "g \"quoted\" \u00e9");
  EXPECT_EQ(trace_to_json(trace_from_json(trace_to_json(trace), "t.json")), trace_to_json(trace));
}

TEST(PlanFiles, EveryFieldRoundTrips)
{
  test::ScratchDir dir;
  const Plan plan = full_plan(full_trace());
  save_plan(plan, dir / "p.plan.json");
  const Plan loaded = load_plan(dir / "p.plan.json");
  EXPECT_EQ(plan_to_json(loaded), plan_to_json(plan));
  EXPECT_EQ(loaded.params["lookahead"].get<int>(), 2);
  EXPECT_TRUE(loaded.params["lookahead"].is_number_unsigned()); // as nlohmann reads it
  EXPECT_EQ(loaded.budget_bytes, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(loaded.steps[2].service_s, 2.5e-5);
  EXPECT_FALSE(plan_to_json(plan)["steps"][0].contains("service_s")); // written only when non-zero
  EXPECT_EQ(plan_to_json(plan_from_json(plan_to_json(plan), "p.json")), plan_to_json(plan));
}

// A trace document with one field replaced.
std::string trace_text(const std::function<void(nlohmann::json&)>& edit)
{
  nlohmann::json document = trace_to_json(full_trace());
  edit(document);
  return document.dump(1);
}

// The v2 additions (DESIGN.md appendix B) read, validate and write back unchanged; derived ops without a time get
// their source op's time divided by parts (split) or multiplied by models (fused).
TEST(PlanFiles, V2AdditionsRoundTrip)
{
  const Trace trace = trace_from_text(
      R"({"format": "memsim-trace", "version": 1, "name": "t", "source": {"dtype": "fp32"},
          "tensors": [{"id": 0, "name": "x", "bytes": 8000, "kind": "input", "shape": [20, 100], "batch_axis": 0},
                      {"id": 1, "name": "w", "bytes": 400, "kind": "weight"},
                      {"id": 2, "name": "a", "bytes": 8000, "kind": "activation"}],
          "ops": [{"id": 0, "name": "f", "phase": "forward", "inputs": [0, 1], "outputs": [2], "time_s": 0.004,
                   "cpu_time_s": 0.01, "iteration": 1}]})",
      "t.json");
  EXPECT_EQ(trace.tensor(0).shape, (std::vector<std::int64_t>{20, 100}));
  EXPECT_EQ(trace.tensor(0).batch_axis, 0);
  EXPECT_EQ(trace.op(0).cpu_time_s, 0.01);
  EXPECT_EQ(trace.op(0).iteration, 1);
  const std::string text = R"({"format": "memsim-plan", "version": 1, "trace": "t", "machine": "m",
      "initial_placement": [{"kind": "weight", "where": "host"}, {"tensor": 2, "where": "none", "instance": 1},
                            {"kind": "input", "where": "host"}],
      "shared_across_instances": ["weight", "weight_grad"],
      "extra_tensors": [{"id": 3, "name": "a#0", "bytes": 4000, "kind": "activation"},
                        {"id": 4, "name": "a#1", "bytes": 4000, "kind": "activation"},
                        {"id": 5, "name": "b", "bytes": 16000, "kind": "activation"}],
      "extra_ops": [{"id": 1, "name": "f#0", "phase": "forward", "inputs": [0, 1], "outputs": [3],
                     "split_of": {"op": 0, "index": 0, "parts": 2, "dim": "batch"}},
                    {"id": 2, "name": "f2", "phase": "forward", "inputs": [0, 1], "outputs": [5],
                     "fused_from": {"op": 0, "models": 2}}],
      "steps": [{"id": 0, "kind": "compute", "op": 0, "deps": []},
                {"id": 1, "kind": "split", "tensor": 2, "parts": [3, 4], "deps": [0]},
                {"id": 2, "kind": "merge", "tensor": 2, "parts": [3, 4], "deps": [1]},
                {"id": 3, "kind": "compute", "op": 0, "device": -1, "stream": "cpu0", "deps": [], "iteration": 2},
                {"id": 4, "kind": "allgather", "tensor": 1, "group": [1, 0], "device": 1, "deps": []}]})";
  const Plan plan = plan_from_text(text, "p.json");
  validate_plan(plan, trace, 2, "p.json");
  // memsim-cuda validates without a machine (any device count): the residency bound counts the GPUs the plan uses.
  validate_plan(plan, trace, std::numeric_limits<int>::max(), "p.json");
  EXPECT_EQ(plan.steps[1].parts, (std::vector<TensorId>{3, 4}));
  EXPECT_EQ(plan.steps[3].device, kHostDevice);
  EXPECT_EQ(plan.steps[3].iteration, 2);
  EXPECT_EQ(plan.steps[4].group, (std::vector<int>{1, 0}));
  EXPECT_EQ(plan.steps[4].stream, "coll");
  ASSERT_EQ(plan.initial_placement.size(), 3u);
  EXPECT_EQ(plan.initial_placement[1].where, Placement::none);
  EXPECT_EQ(plan.initial_placement[1].instance, 1);
  EXPECT_TRUE(shared_across_instances(plan, TensorKind::weight_grad));
  EXPECT_FALSE(shared_across_instances(plan, TensorKind::optimizer_state));
  EXPECT_EQ(v2_feature(plan), "initial_placement");
  EXPECT_EQ(plan_to_json(plan_from_json(plan_to_json(plan), "again")), plan_to_json(plan));
  const Trace extended = trace_with_extras(trace, plan);
  EXPECT_DOUBLE_EQ(extended.op(1).time_s, 0.002);                      // split in 2
  EXPECT_DOUBLE_EQ(extended.op(2).time_s, 0.008);                      // 2 models fused
  EXPECT_FALSE(plan_to_json(plan)["extra_ops"][0].contains("time_s")); // still derived when written back
}

TEST(TraceFiles, LocatedMessages)
{
  auto error_of = [](const std::string& text) { return load_error([&] { (void)trace_from_text(text, "t.json"); }); };
  EXPECT_EQ(error_of(trace_text([](auto& d) { d["ops"][1]["inputs"][1] = "w"; })),
            "t.json: at /ops/1/inputs/1: expected an integer, found \"w\"");
  EXPECT_EQ(error_of(trace_text([](auto& d) { d["ops"][1]["tim_s"] = 1; })),
            "t.json: at /ops/1/tim_s: unknown key 'tim_s' (valid keys: id, name, type, phase, layer, inputs, outputs, "
            "workspace_bytes, time_s, flops, bytes_accessed, split, cpu_time_s, iteration, split_of, fused_from)");
  EXPECT_EQ(error_of(trace_text([](auto& d) { d["tensors"][1]["bytes"] = -1; })),
            "t.json: at /tensors/1/bytes: expected a non-negative integer, found -1");
  EXPECT_EQ(error_of(trace_text([](auto& d) { d["tensors"][1].erase("bytes"); })),
            "t.json: at /tensors/1: missing required key 'bytes'");
  EXPECT_EQ(error_of(trace_text([](auto& d) { d["ops"] = nlohmann::json::object(); })),
            "t.json: at /ops: expected an array, found object");
  EXPECT_EQ(error_of("[]"), "t.json: at /: expected an object, found array");
  // Counts written as 1e6 read as integers, as before.
  const Trace scientific = trace_from_text(trace_text([](auto& d) { d["tensors"][1]["bytes"] = 1e6; }), "t.json");
  EXPECT_EQ(scientific.tensors[1].bytes, 1000000u);
  // A repeated key is refused (nlohmann silently kept the last one).
  std::string repeated = trace_text([](auto&) {});
  repeated.replace(repeated.find("\"name\": \"every-field\""), 1, "\"name\": \"x\", \"");
  EXPECT_EQ(error_of(repeated), "t.json: at /name: duplicate key 'name'");
}

TEST(TraceFiles, SyntaxErrorsNameTheByte)
{
  test::ScratchDir dir;
  std::string text = trace_to_json(full_trace()).dump();
  const std::size_t cut = text.find("\"ops\"");
  test::write_file(dir / "cut.trace.json", text.substr(0, cut));
  // The end of input counts as one byte past the text, as json_io reported it.
  EXPECT_EQ(load_error([&] {
              (void)load_trace(dir / "cut.trace.json");
            }).rfind((dir / "cut.trace.json").string() + ": byte " + std::to_string(cut + 1) + ": invalid JSON: ", 0),
            0u);
  // Bytes beyond 64 bits: where the number starts.
  const std::string huge = R"({"format": "memsim-trace", "version": 1, "tensors": [{"bytes": 18446744073709551616}]})";
  EXPECT_EQ(load_error([&] { (void)trace_from_text(huge, "t.json"); }),
            "t.json: byte 64: invalid JSON: integer 18446744073709551616 does not fit in 64 bits");
  // Deep nesting inside a document: located, no crash.
  std::string deep = trace_text([](auto& d) { d["notes"] = "@"; });
  deep.replace(deep.find("\"@\""), 3, std::string(5000, '[') + std::string(5000, ']'));
  const std::string message = load_error([&] { (void)trace_from_text(deep, "t.json"); });
  EXPECT_NE(message.find("t.json: byte "), std::string::npos) << message;
  EXPECT_NE(message.find("nesting deeper than 1024 levels"), std::string::npos) << message;
}

// The executor keeps a residency slot per (instance, tensor) on every memory the plan touches; a plan whose
// instances x tensors x memories exceed 2^28 is refused at load time (README, Limits) instead of hanging the executor.
TEST(PlanFiles, ResidencySlotsAreBounded)
{
  constexpr int kTensors = 1 << 14;
  Trace trace;
  trace.name = "many-tensors";
  for (int id = 0; id < kTensors; ++id)
    trace.tensors.push_back({id, fmt::format("t{}", id), 4, TensorKind::activation, std::nullopt, {}, {}});
  Op op;
  op.name = "op";
  op.outputs = {0};
  trace.ops = {op};
  Plan plan;
  auto plan_with_last_instance = [&](int last_instance) {
    plan.steps.clear();
    PlanBuilder build(plan);
    for (int step = 0; step < last_instance; ++step)
      build.compute(0);
    build.compute(0, {}, 0, last_instance);
    return plan;
  };
  // 2^13 instances x 2^14 tensors x 2 memories (one GPU and the host) = 2^28: at the limit, accepted.
  validate_plan(plan_with_last_instance((1 << 13) - 1), trace, 1, "p.json");
  // One instance more is over it, and the message says which step and why.
  EXPECT_EQ(load_error([&] { validate_plan(plan_with_last_instance(1 << 13), trace, 1, "p.json"); }),
            "p.json: at /steps/8192/instance: 8193 instances × 16384 tensors × 2 memories (GPUs and the host) exceed "
            "the limit of 2.68435e+08 residency slots");
}

TEST(PlanFiles, LocatedMessagesInStepsAndExtras)
{
  const nlohmann::json good = plan_to_json(full_plan(full_trace()));
  auto error_of = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json document = good;
    edit(document);
    return load_error([&] { (void)plan_from_text(document.dump(), "p.json"); });
  };
  EXPECT_EQ(error_of([](auto& d) { d["steps"][3]["deps"][0] = 7; }),
            "p.json: at /steps/3/deps/0: dep 7 must name an earlier step (0..2)");
  EXPECT_EQ(error_of([](auto& d) { d["steps"][1]["kind"] = "swap"; }),
            "p.json: at /steps/1/kind: unknown step kind 'swap' (valid: compute, recompute, offload, prefetch, free, "
            "send, recv, split, merge, allreduce, allgather, reducescatter)");
  EXPECT_EQ(error_of([](auto& d) { d["steps"][4]["service_s"] = 0.001; }),
            "p.json: at /steps/4/service_s: only compute, prefetch and offload steps have a service time, not free");
  EXPECT_EQ(error_of([](auto& d) { d["steps"][2]["service_s"] = -1; }),
            "p.json: at /steps/2/service_s: expected a number that is not negative, found -1");
  EXPECT_EQ(error_of([](auto& d) { d["extra_ops"][0]["inputs"][0] = 1.5; }),
            "p.json: at /extra_ops/0/inputs/0: expected an integer, found 1.5");
  EXPECT_EQ(error_of([](auto& d) { d["extra_tensors"][0]["kind"] = "nope"; }),
            "p.json: at /extra_tensors/0/kind: unknown tensor kind 'nope' (valid: input, weight, activation, gradient, "
            "weight_grad, optimizer_state, other)");
  EXPECT_EQ(error_of([](auto& d) { d["params"] = 3; }), "p.json: at /params: expected an object, found number");
  EXPECT_EQ(error_of([](auto& d) { d["budget_bytes"] = 9223372036854775807.0 * 4; }),
            "p.json: at /budget_bytes: expected an integer, found 3.6893488147419103e+19");
  // tensor_from_json / op_from_json keep the caller's path.
  EXPECT_EQ(load_error([] {
              (void)tensor_from_json({{"id", 0}}, "x.json", "/list/4", 0);
            }),
            "x.json: at /list/4: missing required key 'bytes'");
}

} // namespace
} // namespace memsim

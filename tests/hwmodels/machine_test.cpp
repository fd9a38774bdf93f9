#include "memsim/common/error.hpp"
#include "memsim/hwmodels/cost_model.hpp"
#include "memsim/hwmodels/machine.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>

namespace memsim {
namespace {

const std::filesystem::path kData = std::filesystem::path(MEMSIM_TEST_DATA_DIR) / "data";

std::filesystem::path write_temp(const std::string& name, const std::string& text)
{
  auto path = std::filesystem::temp_directory_path() / ("memsim-hwmodels-test-" + name);
  std::ofstream(path) << text;
  return path;
}

std::string load_error(const std::string& name, const std::string& text)
{
  auto path = write_temp(name, text);
  try {
    (void)load_machine(path);
  } catch (const InputError& error) {
    std::string message = error.what();
    return message.substr(message.find(name) - 0);
  }
  return "loaded";
}

const char* kHeader = "format: memsim-machine\nversion: 1\n";

TEST(LoadMachine, ReadsEveryField)
{
  Machine machine = load_machine(kData / "tree.machine.yaml");
  EXPECT_EQ(machine.name, "tree");
  ASSERT_EQ(machine.gpus.size(), 3u);
  EXPECT_EQ(machine.gpus[0].memory, 16ull << 30);
  EXPECT_DOUBLE_EQ(machine.gpus[0].peak_flops.at("fp16"), 40e12);
  EXPECT_DOUBLE_EQ(machine.gpus[0].hbm_bandwidth, 1e12);
  EXPECT_DOUBLE_EQ(machine.gpus[0].kernel_launch_s, 5e-6);
  EXPECT_DOUBLE_EQ(machine.gpus[1].kernel_launch_s, 0.0);
  EXPECT_EQ(machine.gpus[0].model, "test-gpu");
  EXPECT_EQ(machine.host.memory, 256ull << 30);
  EXPECT_EQ(machine.switches, (std::vector<std::string>{"sw0", "sw1"}));
  ASSERT_EQ(machine.links.size(), 6u);
  EXPECT_DOUBLE_EQ(machine.links[2].bandwidth, 12e9);
  EXPECT_DOUBLE_EQ(machine.links[2].latency_s, 2e-6);
  EXPECT_EQ(machine.links[1].duplex, Duplex::shared);
  EXPECT_EQ(machine.links[0].duplex, Duplex::split);
}

TEST(LoadMachine, LocatedErrors)
{
  const std::string gpu = "gpus:\n  - {name: gpu0, memory: 16GiB, peak_flops: {fp32: 1e12}, hbm_bandwidth: 1TB/s}\n";
  const std::string host = "host: {memory: 1GiB}\n";
  const std::string link = "links:\n  - {name: l, endpoints: [gpu0, host], bandwidth: 1GB/s}\n";
  EXPECT_EQ(load_error("a.yaml", std::string(kHeader) + gpu + host + link + "colour: blue\n"),
            "a.yaml:8:1: unknown key 'colour' (valid keys: format, version, name, gpus, host, switches, links, notes)");
  EXPECT_EQ(load_error("b.yaml", std::string(kHeader) + gpu + host +
                                     "links:\n  - {name: l, endpoints: [gpu0, host], bandwidth: 1GB}\n"),
            "b.yaml:7:51: links[0].bandwidth: '1GB' is not a bandwidth: unknown unit 'GB' (accepted: B/s, KB/s, MB/s, "
            "GB/s, TB/s, GiB/s, ...; e.g. 25GB/s)");
  EXPECT_EQ(load_error("c.yaml", std::string(kHeader) + gpu + host +
                                     "links:\n  - {name: l, endpoints: [gpu0, hots], bandwidth: 1GB/s}\n"),
            "c.yaml:7:33: links[0].endpoints[1]: unknown endpoint 'hots' (nodes: gpu0, host)");
  EXPECT_EQ(load_error("d.yaml", "format: memsim-machine\nversion: 3\n"),
            "d.yaml:2:10: version: unsupported memsim-machine version 3 (this build reads version 1)");
  EXPECT_EQ(load_error("e.yaml", std::string(kHeader) + gpu + host + "links: []\n"),
            "e.yaml:4:5: gpus[0]: no route from 'gpu0' to 'host'");
}

TEST(Route, ShortestPathByHopsAndDirections)
{
  Machine machine = load_machine(kData / "tree.machine.yaml");
  auto route = machine.route("gpu0", "host");
  ASSERT_EQ(route.size(), 2u);
  EXPECT_EQ(machine.links[route[0].link].name, "gpu0-sw0");
  EXPECT_TRUE(route[0].forward);
  EXPECT_EQ(machine.links[route[1].link].name, "sw0-host");
  EXPECT_FALSE(route[1].forward); // sw0-host is written [host, sw0]
  // GPU to GPU: the direct NVLink (1 hop) beats the switch (2 hops).
  auto p2p = machine.route("gpu1", "gpu0");
  ASSERT_EQ(p2p.size(), 1u);
  EXPECT_EQ(machine.links[p2p[0].link].name, "gpu0-gpu1-nvlink");
  EXPECT_FALSE(p2p[0].forward);
  // Across switches through the host.
  EXPECT_EQ(machine.route("gpu2", "gpu0").size(), 4u);
  EXPECT_TRUE(machine.route("gpu0", "gpu0").empty());
  EXPECT_THROW((void)machine.route("gpu0", "nowhere"), InputError);
}

TEST(Route, SetHostLinkBandwidthChangesOnlyHostPaths)
{
  Machine machine = load_machine(kData / "tree.machine.yaml");
  machine.set_host_link_bandwidth(5e9);
  for (const Link& link : machine.links) {
    if (link.name == "gpu0-gpu1-nvlink")
      EXPECT_DOUBLE_EQ(link.bandwidth, 50e9);
    else
      EXPECT_DOUBLE_EQ(link.bandwidth, 5e9) << link.name;
  }
}

// gpu0 reaches the host over gpu0-sw0 (16 GB/s) and sw0-host (12 GB/s): a copy alone gets the slower, 12 GB/s.
TEST(Route, HostLinkBandwidthIsTheSlowestLinkOnTheWay)
{
  Machine machine = load_machine(kData / "tree.machine.yaml");
  EXPECT_DOUBLE_EQ(machine.host_link_bandwidth(0), 12e9);
  EXPECT_DOUBLE_EQ(machine.host_link_bandwidth(2), 12e9);
  machine.links[0].bandwidth = 8e9; // gpu0-sw0
  EXPECT_DOUBLE_EQ(machine.host_link_bandwidth(0), 8e9);
  EXPECT_DOUBLE_EQ(machine.host_link_bandwidth(1), 12e9);
}

// Between any two nodes: gpu0 -> gpu1 takes the 50 GB/s NVLink alone; gpu2 -> gpu0 crosses sw1, the host and sw0, the
// slowest being the 12 GB/s uplinks; a node to itself has no link in the way.
TEST(Route, RouteBandwidthIsTheSlowestLinkOnTheWay)
{
  Machine machine = load_machine(kData / "tree.machine.yaml");
  EXPECT_DOUBLE_EQ(machine.route_bandwidth("gpu0", "gpu1"), 50e9);
  EXPECT_DOUBLE_EQ(machine.route_bandwidth("gpu2", "gpu0"), 12e9);
  EXPECT_EQ(machine.route_bandwidth("gpu0", "gpu0"), std::numeric_limits<double>::infinity());
  machine.links[3].bandwidth = 6e9; // gpu2-sw1
  EXPECT_DOUBLE_EQ(machine.route_bandwidth("gpu2", "gpu0"), 6e9);
  EXPECT_DOUBLE_EQ(machine.route_bandwidth("gpu2", kHostNodeName), machine.host_link_bandwidth(2));
}

TEST(Presets, EveryPresetLoadsAndReachesTheHost)
{
  std::size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(default_presets_dir())) {
    if (entry.path().extension() != ".yaml")
      continue;
    ++count;
    Machine machine = load_machine(entry.path());
    EXPECT_EQ(machine.name, entry.path().stem().string());
    for (const Gpu& gpu : machine.gpus) {
      EXPECT_FALSE(machine.route(gpu.name, kHostNodeName).empty()) << machine.name;
      EXPECT_GT(gpu.peak_flops.at("fp32"), 1e12) << machine.name;
      EXPECT_GT(gpu.memory, 8ull << 30) << machine.name;
    }
  }
  EXPECT_GE(count, 6u);
  EXPECT_EQ(load_machine_or_preset("v100-32gb-pcie3", default_presets_dir()).gpus[0].memory, 32ull << 30);
  EXPECT_THROW((void)load_machine_or_preset("no-such-preset", default_presets_dir()), InputError);
}

TEST(Presets, SharedUplinkInThePcieTree)
{
  Machine machine = load_machine_or_preset("4x1080ti-pcie-tree", default_presets_dir());
  auto from0 = machine.route("gpu0", kHostNodeName);
  auto from1 = machine.route("gpu1", kHostNodeName);
  ASSERT_EQ(from0.size(), 2u);
  EXPECT_EQ(from0.back().link, from1.back().link) << "gpu0 and gpu1 share their switch's uplink";
  EXPECT_NE(from0.back().link, machine.route("gpu2", kHostNodeName).back().link);
}

TEST(CostModel, MeasuredTimeOnTheRecordingGpuClassCurveElsewhere)
{
  Machine machine = load_machine(kData / "tree.machine.yaml");
  Trace trace;
  trace.source.device = "test-gpu";
  trace.source.dtype = "fp32";
  Op op;
  op.time_s = 0.004;
  op.flops = 20e9;         // 2 ms at 10 TFLOP/s
  op.bytes_accessed = 1e9; // 1 ms at 1 TB/s
  trace.ops.push_back(op);
  CostModel same_gpu(trace, machine);
  EXPECT_DOUBLE_EQ(same_gpu.op_time(trace.ops[0], 0), 0.004 + 5e-6);
  EXPECT_DOUBLE_EQ(same_gpu.op_time(trace.ops[0], 1), 0.004);
  // Recorded on a GPU no machine or preset describes: the target's curve alone. With an ideal curve (max 1, no
  // small-size penalty) that is the roofline of the op's class: a GEMM-like op is timed by its flops.
  trace.source.device = "other-gpu";
  machine.gpus[1].efficiency.gemm = {.max = 1, .half = 0};
  CostModel rescaled(trace, machine);
  EXPECT_DOUBLE_EQ(rescaled.op_time(trace.ops[0], 1), 0.002);
  trace.ops[0].bytes_accessed = 3e9;
  EXPECT_DOUBLE_EQ(rescaled.op_time(trace.ops[0], 1), 0.002); // its class decides, not the larger term
  trace.ops[0].flops.reset();
  machine.gpus[1].efficiency.memory = {.max = 0.5, .half = 0};
  EXPECT_DOUBLE_EQ(rescaled.op_time(trace.ops[0], 1), 0.006); // memory-bound: 3 GB at 50 % of 1 TB/s
  trace.ops[0].bytes_accessed.reset();
  EXPECT_DOUBLE_EQ(rescaled.op_time(trace.ops[0], 1), 0.004); // nothing to rescale with: measured time
  EXPECT_DOUBLE_EQ(rescaled.ideal_time(1), 0.004);
}

} // namespace
} // namespace memsim

// The machine presets of Harmony's servers (issue 12 item 3): sizes, host memory, and which links their routes share.
#include "memsim/hwmodels/machine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace memsim {
namespace {

Machine preset(const std::string& name) { return load_machine_or_preset(name, default_presets_dir()); }

// The names of the links a route crosses, in order.
std::vector<std::string> route_links(const Machine& machine, const std::string& from, const std::string& to)
{
  std::vector<std::string> names;
  for (const RouteHop& hop : machine.route(from, to))
    names.push_back(machine.links[hop.link].name);
  return names;
}

bool crosses(const std::vector<std::string>& links, const std::string& name)
{
  return std::find(links.begin(), links.end(), name) != links.end();
}

constexpr std::uint64_t kGiB = 1ull << 30;
constexpr double kHarmonySwapBandwidth = 11.5 * 1024 * 1024 * 1024; // Harmony's measured bw_swap, bytes/s

TEST(HarmonyPresets, SizesAndHostMemory)
{
  struct Expected {
    const char* name;
    std::size_t gpus;
    std::uint64_t gpu_memory;
    std::uint64_t host_memory;
  };
  for (const Expected& expected :
       {Expected{"4x1080ti-pcie-tree", 4, 11 * kGiB, 375 * kGiB},
        Expected{"4x1080ti-pcie-1switch", 4, 11 * kGiB, 375 * kGiB},
        Expected{"8x1080ti-pcie-tree", 8, 11 * kGiB, 750 * kGiB}, Expected{"dgx2", 16, 32 * kGiB, 1536 * kGiB}}) {
    const Machine machine = preset(expected.name);
    ASSERT_EQ(machine.gpus.size(), expected.gpus) << expected.name;
    for (const Gpu& gpu : machine.gpus)
      EXPECT_EQ(gpu.memory, expected.gpu_memory) << expected.name << " " << gpu.name;
    EXPECT_EQ(machine.host.memory, expected.host_memory) << expected.name;
  }
}

TEST(HarmonyPresets, TwoSwitchReadingCrossesTheRootOnlyBetweenSwitches)
{
  const Machine machine = preset("4x1080ti-pcie-tree");
  EXPECT_EQ(route_links(machine, "gpu0", "gpu1"), (std::vector<std::string>{"gpu0-plx0", "gpu1-plx0"}));
  EXPECT_EQ(route_links(machine, "gpu0", "gpu2"),
            (std::vector<std::string>{"gpu0-plx0", "plx0-host", "plx1-host", "gpu2-plx1"}));
  // Host swaps: two uplinks, each shared by the two GPUs of its switch.
  EXPECT_EQ(route_links(machine, "gpu1", kHostNodeName).back(), "plx0-host");
  EXPECT_EQ(route_links(machine, "gpu3", kHostNodeName).back(), "plx1-host");
  for (const Link& link : machine.links)
    EXPECT_DOUBLE_EQ(link.bandwidth, kHarmonySwapBandwidth) << link.name;
}

TEST(HarmonyPresets, OneSwitchReadingSharesOneUplinkAndNeverCrossesTheRoot)
{
  const Machine machine = preset("4x1080ti-pcie-1switch");
  for (const Gpu& gpu : machine.gpus)
    EXPECT_EQ(route_links(machine, gpu.name, kHostNodeName),
              (std::vector<std::string>{gpu.name + "-plx0", "plx0-host"}));
  EXPECT_EQ(route_links(machine, "gpu0", "gpu3"), (std::vector<std::string>{"gpu0-plx0", "gpu3-plx0"}));
}

TEST(HarmonyPresets, EightGpusShareOneUplinkThroughTwoLeafSwitches)
{
  const Machine machine = preset("8x1080ti-pcie-tree");
  for (const Gpu& gpu : machine.gpus)
    EXPECT_EQ(route_links(machine, gpu.name, kHostNodeName).back(), "plxroot-host") << gpu.name;
  EXPECT_EQ(route_links(machine, "gpu0", "gpu3"), (std::vector<std::string>{"gpu0-plx0", "gpu3-plx0"}));
  const auto across = route_links(machine, "gpu0", "gpu4");
  EXPECT_EQ(across, (std::vector<std::string>{"gpu0-plx0", "plx0-plxroot", "plx1-plxroot", "gpu4-plx1"}));
  EXPECT_FALSE(crosses(across, "plxroot-host")) << "GPU-to-GPU traffic stays below the root switch";
}

TEST(HarmonyPresets, Dgx2PeersMeetOnTheNvswitchAndSwapThroughTheirSocket)
{
  const Machine machine = preset("dgx2");
  // Every pair, the same-PCIe-switch pairs included, goes through its two NVSwitch ports at 150 GB/s per direction.
  for (const auto& [a, b] : {std::pair{"gpu0", "gpu1"}, std::pair{"gpu0", "gpu15"}, std::pair{"gpu7", "gpu8"}}) {
    const auto hops = machine.route(a, b);
    ASSERT_EQ(hops.size(), 2u) << a << "-" << b;
    for (const RouteHop& hop : hops) {
      EXPECT_EQ(machine.links[hop.link].endpoint_b, "nvswitch");
      EXPECT_DOUBLE_EQ(machine.links[hop.link].bandwidth, 150e9);
    }
  }
  EXPECT_EQ(route_links(machine, "gpu0", kHostNodeName),
            (std::vector<std::string>{"gpu0-pex00", "pex00-pex0", "pex0-cpu0", "cpu0-host"}));
  EXPECT_EQ(route_links(machine, "gpu3", kHostNodeName),
            (std::vector<std::string>{"gpu3-pex01", "pex01-pex0", "pex0-cpu0", "cpu0-host"}));
  EXPECT_EQ(route_links(machine, "gpu15", kHostNodeName),
            (std::vector<std::string>{"gpu15-pex31", "pex31-pex3", "pex3-cpu1", "cpu1-host"}));
  // 1:2 at each second-level switch, 1:4 at each first-level switch: the first-level uplink is the PCIe bottleneck.
  EXPECT_EQ(route_links(machine, "gpu1", kHostNodeName)[1], "pex00-pex0");
  EXPECT_DOUBLE_EQ(machine.links[machine.route("gpu0", kHostNodeName)[2].link].bandwidth, 12e9);
}

} // namespace
} // namespace memsim

#pragma once
// Small machines built in code for tests: round numbers, so transfer times can be worked out by hand.
#include "memsim/hwmodels/machine.hpp"

#include <cstdint>

namespace memsim::test {

// One GPU ("test-gpu": `memory` bytes, 10 TFLOP/s fp32, 1 TB/s HBM, no launch cost) with a direct split-duplex host
// link of `link_bandwidth` bytes/s (1 GB/s: 1 MB moves in exactly 1 ms) and `latency` seconds, and 64 GiB of host
// memory.
inline Machine one_gpu_machine(std::uint64_t memory = 1ull << 34, double link_bandwidth = 1e9, double latency = 0)
{
  Machine machine;
  machine.name = "one-gpu";
  machine.gpus.push_back(Gpu{"gpu0", "test-gpu", memory, {{"fp32", 10e12}}, 1e12, 0});
  machine.host.memory = 1ull << 36;
  machine.links.push_back(Link{"gpu0-host", "gpu0", "host", link_bandwidth, latency, Duplex::split});
  return machine;
}

} // namespace memsim::test

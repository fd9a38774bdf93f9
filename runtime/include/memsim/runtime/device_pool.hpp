#pragma once
// memsim-cuda's device arena is the execution core's placement allocator (one implementation).
#include "memsim/sim/device_pool.hpp"

namespace memsim::runtime {
using memsim::DevicePool;
} // namespace memsim::runtime

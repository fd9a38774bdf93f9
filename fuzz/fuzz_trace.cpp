// Trace loader: any bytes as a memsim-trace document.
#include "fuzz_input.hpp"

#include "memsim/traces/trace.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const auto path = memsim::fuzz::input_file(data, size, ".trace.json");
  memsim::fuzz::expect_located_errors([&] { memsim::load_trace(path); });
  return 0;
}

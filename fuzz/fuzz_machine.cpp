// Machine loader: any bytes as a memsim-machine YAML document.
#include "fuzz_input.hpp"

#include "memsim/hwmodels/machine.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const auto path = memsim::fuzz::input_file(data, size, ".machine.yaml");
  memsim::fuzz::expect_located_errors([&] { memsim::load_machine(path); });
  return 0;
}

// Experiment loader: any bytes as an experiment YAML (machine presets from configs/machines).
#include "fuzz_input.hpp"

#include "memsim/experiments/experiment.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const auto path = memsim::fuzz::input_file(data, size, ".yaml", "experiment");
  memsim::fuzz::expect_located_errors([&] { memsim::experiments::load_experiment(path, MEMSIM_FUZZ_PRESETS); });
  return 0;
}

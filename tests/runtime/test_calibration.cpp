// Calibration: link fit, duplex decision, the Machine YAML the simulator loads, kernel sizing.
#include "memsim/runtime/calibration.hpp"
#include "memsim/runtime/kernel_sizing.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/machine.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace memsim;
using namespace memsim::runtime;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

// Transfers that follow time = latency + bytes / bandwidth exactly.
std::vector<TransferPoint> ideal_points(double latency_s, double bandwidth)
{
  std::vector<TransferPoint> points;
  for (std::uint64_t bytes = 4096; bytes <= (1ull << 30); bytes *= 4) {
    double t = latency_s + static_cast<double>(bytes) / bandwidth;
    points.push_back({bytes, t, t, 5});
  }
  return points;
}

CalibrationData sample_data(double bidirectional_total)
{
  CalibrationData data;
  data.gpu_name = "NVIDIA Test GPU 80GB";
  data.device_memory_bytes = 85000000000ull;
  data.multiprocessors = 132;
  data.compute_capability_major = 9;
  data.driver_version = "CUDA 13.0";
  data.host_memory_bytes = 137438953472ull;
  data.h2d = ideal_points(2e-6, 50e9);
  data.d2h = ideal_points(2.5e-6, 52e9);
  data.bidirectional_bytes = 256ull << 20;
  data.bidirectional_total_bytes_per_s = bidirectional_total;
  data.empty_kernel_s = 5.0e-6;
  data.back_to_back_kernel_s = 2.5e-6;
  data.host_launch_call_s = 3.0e-6;
  data.globaltimer_resolution_s = 32e-9;
  data.peak_flops = {{"fp32", 5.0e13}, {"bf16", 7.0e14}};
  data.hbm_bytes_per_s = 3.0e12;
  data.spin_accuracy = {{1e-3, 1.0002e-3}};
  return data;
}

} // namespace

TEST(Calibration, LeastSquaresRecoversBandwidthAndLatency)
{
  LinearFit fit = fit_transfer_times(ideal_points(2e-6, 50e9));
  EXPECT_NEAR(fit.bandwidth_bytes_per_s / 50e9, 1.0, 1e-9);
  EXPECT_NEAR(fit.latency_s, 2e-6, 1e-12);
}

TEST(Calibration, HostLinkUsesTheSlowerDirectionAndDecidesDuplex)
{
  HostLinkModel split = derive_host_link(sample_data(100e9));
  EXPECT_NEAR(split.bandwidth_bytes_per_s / 50e9, 1.0, 1e-9);
  EXPECT_NEAR(split.d2h_bytes_per_s / 52e9, 1.0, 1e-9);
  EXPECT_NEAR(split.latency_s, 2.5e-6, 1e-12);
  EXPECT_NEAR(split.overlap_factor, 100.0 / 51.0, 1e-9);
  EXPECT_TRUE(split.duplex_split);
  HostLinkModel shared = derive_host_link(sample_data(60e9));
  EXPECT_FALSE(shared.duplex_split);
}

TEST(Calibration, MachineYamlLoadsWithTheMeasuredFigures)
{
  const std::string yaml = machine_yaml(sample_data(100e9), "test-calibrated");
  EXPECT_THAT(yaml, HasSubstr("# Raw measurements"));
  EXPECT_THAT(yaml, HasSubstr("H2D 50.000GB/s and D2H 52.000GB/s"));
  const auto path = std::filesystem::temp_directory_path() / "memsim_runtime_test_calibrated.yaml";
  std::ofstream(path) << yaml;
  Machine machine = load_machine(path);
  std::filesystem::remove(path);
  EXPECT_EQ(machine.name, "test-calibrated");
  ASSERT_EQ(machine.gpus.size(), 1u);
  EXPECT_EQ(machine.gpus[0].name, "gpu0");
  EXPECT_EQ(machine.gpus[0].model, "NVIDIA Test GPU 80GB");
  EXPECT_EQ(machine.gpus[0].memory, 85000000000ull);
  EXPECT_DOUBLE_EQ(machine.gpus[0].peak_flops.at("bf16"), 7.0e14);
  EXPECT_DOUBLE_EQ(machine.gpus[0].hbm_bandwidth, 3.0e12);
  EXPECT_NEAR(machine.gpus[0].kernel_launch_s, 2.5e-6, 1e-15);
  EXPECT_EQ(machine.host.memory, 137438953472ull);
  ASSERT_EQ(machine.links.size(), 1u);
  EXPECT_EQ(machine.links[0].name, "gpu0-host");
  EXPECT_DOUBLE_EQ(machine.links[0].bandwidth, 50e9);
  EXPECT_NEAR(machine.links[0].latency_s, 2.5e-6, 1e-15);
  EXPECT_EQ(machine.links[0].duplex, Duplex::split);
}

TEST(Calibration, RawJsonReadsBackToTheSameMachineFile)
{
  const CalibrationData data = sample_data(100e9);
  const CalibrationData back = calibration_from_json(calibration_to_json(data), "raw.json");
  EXPECT_EQ(machine_yaml(back, "m"), machine_yaml(data, "m"));
  EXPECT_EQ(back.h2d.size(), data.h2d.size());
  EXPECT_EQ(back.compute_capability_major, 9);
  nlohmann::json other = calibration_to_json(data);
  other["format"] = "memsim-machine";
  EXPECT_THROW(calibration_from_json(other, "raw.json"), InputError);
  other = calibration_to_json(data);
  other.erase("h2d");
  EXPECT_THROW(calibration_from_json(other, "raw.json"), InputError);
}

TEST(Calibration, RawJsonKeepsEveryPoint)
{
  nlohmann::json raw = calibration_to_json(sample_data(60e9));
  EXPECT_EQ(raw["format"], "memsim-calibration");
  EXPECT_EQ(raw["h2d"].size(), 10u); // 4 KiB .. 1 GiB in x4 steps
  EXPECT_EQ(raw["h2d"][0]["bytes"], 4096);
  EXPECT_EQ(raw["host_link"]["duplex"], "shared");
  EXPECT_DOUBLE_EQ(raw["peak_flops"]["fp32"].get<double>(), 5.0e13);
}

TEST(KernelSizing, SpinRequestSubtractsTheMeasuredOverhead)
{
  EXPECT_EQ(spin_request_ns(1e-3, 2.5e-6), 997500u);
  EXPECT_EQ(spin_request_ns(1e-6, 2.5e-6), 0u);
  EXPECT_EQ(spin_request_ns(0, 0), 0u);
}

TEST(KernelSizing, GemmShapesMatchTheFlops)
{
  GemmShape cube = gemm_shape_for(2.0 * 512 * 512 * 512);
  EXPECT_EQ(cube.m, 512);
  EXPECT_EQ(cube.k, 512);
  EXPECT_EQ(cube.repeats, 1);
  GemmShape tiny = gemm_shape_for(10);
  EXPECT_EQ(tiny.m, 8);
  GemmShape huge = gemm_shape_for(4e13);
  EXPECT_EQ(huge.m, 8192);
  EXPECT_EQ(huge.n, 8192);
  EXPECT_LE(huge.k, 8192);
  EXPECT_EQ(huge.repeats, 37); // k = 4e13 / (2 * 8192^2) = 298023, split into 37 GEMMs
  EXPECT_NEAR(huge.flops() / 4e13, 1.0, 0.01);
  EXPECT_EQ(gemm_scratch_bytes(cube, GemmType::fp16), 3ull * 512 * 512 * 2);
  EXPECT_EQ(gemm_type_for("bf16"), GemmType::bf16);
  EXPECT_EQ(gemm_type_for("FP16"), GemmType::fp16);
  EXPECT_EQ(gemm_type_for("fp32"), GemmType::fp32);
}

TEST(Calibration, TheCommittedH100MachineFileLoads)
{
  Machine machine = load_machine(std::filesystem::path(MEMSIM_SOURCE_DIR) / "runtime/calibration/h100-calibrated.yaml");
  ASSERT_EQ(machine.gpus.size(), 1u);
  EXPECT_EQ(machine.gpus[0].model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(machine.gpus[0].memory, 85017493504ull);
  EXPECT_DOUBLE_EQ(machine.links[0].bandwidth, 54.420e9);
  EXPECT_NEAR(machine.links[0].latency_s, 4.053e-6, 1e-15);
  EXPECT_EQ(machine.links[0].duplex, Duplex::split);
  EXPECT_NEAR(machine.gpus[0].kernel_launch_s, 1.864e-6, 1e-15);
  EXPECT_DOUBLE_EQ(machine.gpus[0].peak_flops.at("fp32"), 5.164e13);
  // The route the simulator uses for offloads/prefetches exists.
  EXPECT_EQ(machine.route("gpu0", "host").size(), 1u);
}

// The efficiency sweeps: synthetic measurements on known curves come back as the machine file's efficiency block.
TEST(Calibration, EfficiencySweepsFitTheMachineFileCurves)
{
  CalibrationData data = sample_data(100e9);
  data.peak_flops = {{"fp32", 5e13}};
  data.hbm_bytes_per_s = 3e12;
  const EfficiencyCurve gemm{.max = 0.8, .half = 2e9};
  const EfficiencyCurve convolution{.max = 1.9, .half = 8e9};
  const EfficiencyCurve memory{.max = 0.9, .half = 2e7};
  for (double work = 1e8; work < 2e12; work *= 4) {
    data.gemm_sweep.push_back({work, gemm.seconds(work, 5e13)});
    data.convolution_sweep.push_back({work, convolution.seconds(work, 5e13)});
  }
  for (double bytes = 8192; bytes < 3e9; bytes *= 4)
    data.memory_sweep.push_back({bytes, memory.seconds(bytes, 3e12)});
  const GpuEfficiency fitted = fit_sweeps(data);
  EXPECT_NEAR(fitted.gemm.max, 0.8, 1e-9);
  EXPECT_NEAR(fitted.gemm.half, 2e9, 1e-3 * 2e9);
  EXPECT_NEAR(fitted.convolution.max, 1.9, 1e-9);
  EXPECT_NEAR(fitted.memory.half, 2e7, 1e-3 * 2e7);
  // The machine file carries them (4 significant digits) and loads; the raw JSON keeps every point.
  const auto path = std::filesystem::temp_directory_path() / "memsim-calibration-efficiency.yaml";
  std::ofstream(path) << machine_yaml(data, "calibrated");
  const Machine machine = load_machine(path);
  EXPECT_NEAR(machine.gpus[0].efficiency.gemm.max, 0.8, 1e-3);
  EXPECT_NEAR(machine.gpus[0].efficiency.convolution.half, 8e9, 1e-3 * 8e9);
  EXPECT_NEAR(machine.gpus[0].efficiency.memory.max, 0.9, 1e-3);
  const CalibrationData back = calibration_from_json(calibration_to_json(data), "raw.json");
  EXPECT_EQ(back.memory_sweep.size(), data.memory_sweep.size());
  EXPECT_EQ(machine_yaml(back, "calibrated"), machine_yaml(data, "calibrated"));
  // Without sweeps (no cuBLAS, or an older raw file) the defaults stay: the file leaves the block out, so refitting a
  // raw file from before the sweeps reproduces the machine file it made (the CLI test checks the committed one).
  CalibrationData bare = sample_data(100e9);
  std::vector<std::string> notes;
  const GpuEfficiency kept = fit_sweeps(bare, &notes);
  EXPECT_DOUBLE_EQ(kept.gemm.max, default_efficiency().gemm.max);
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_THAT(notes[0], HasSubstr("gemm: default curve kept"));
  const std::string bare_yaml = machine_yaml(bare, "m");
  EXPECT_THAT(bare_yaml, Not(HasSubstr("efficiency")));
  const auto bare_path = std::filesystem::temp_directory_path() / "memsim-calibration-bare.yaml";
  std::ofstream(bare_path) << bare_yaml;
  EXPECT_DOUBLE_EQ(load_machine(bare_path).gpus[0].efficiency.memory.half, default_efficiency().memory.half);
}

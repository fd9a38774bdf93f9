#pragma once
// What `memsim-cuda calibrate` measured, and the memsim-machine YAML / raw JSON made from it.
// Measuring needs a GPU (calibrate_device.cpp); deriving and writing do not, so they are unit-tested.
#include "memsim/hwmodels/efficiency.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace memsim::runtime {

struct TransferPoint {
  std::uint64_t bytes = 0;
  double median_s = 0; // one pinned cudaMemcpyAsync between two events
  double min_s = 0;
  std::size_t repetitions = 0;
};

struct SpinAccuracyPoint {
  double requested_s = 0;
  double measured_s = 0; // median, event to event
};

// One point of an efficiency sweep: the work of one kernel (flops or bytes) and its median time.
struct SweepPoint {
  double work = 0;
  double seconds = 0;
};

struct CalibrationData {
  std::string gpu_name;
  std::uint64_t device_memory_bytes = 0; // cudaMemGetInfo total
  int multiprocessors = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  std::string driver_version;
  std::uint64_t host_memory_bytes = 0;
  std::vector<TransferPoint> h2d; // pinned host -> device, by size
  std::vector<TransferPoint> d2h;
  std::uint64_t bidirectional_bytes = 0; // each direction, at once on two streams
  double bidirectional_h2d_bytes_per_s = 0;
  double bidirectional_d2h_bytes_per_s = 0;
  double bidirectional_total_bytes_per_s = 0; // 2 * bytes / (last end - first start)
  double empty_kernel_s = 0;                  // one empty kernel between two events (median)
  double back_to_back_kernel_s = 0;           // per kernel, 1000 empty kernels in a row
  double host_launch_call_s = 0;              // host time of one cudaLaunchKernel call
  double globaltimer_resolution_s = 0;
  std::map<std::string, double> peak_flops; // dtype -> FLOP/s (cuBLAS GEMM)
  std::string gemm_note;                    // e.g. why peak_flops is empty
  double hbm_bytes_per_s = 0;               // device-to-device copy, bytes read + written
  std::vector<SpinAccuracyPoint> spin_accuracy;
  // Efficiency sweeps (the cost model's curves, hwmodels/efficiency.hpp): fp32 cuBLAS GEMMs of growing size;
  // TF32 GEMMs of the im2col shapes of 3x3 convolutions (cuDNN runs fp32 convolutions in TF32; memsim-cuda has no
  // cuDNN, so these stand in for convolutions); device-to-device copies (memory-bound, bytes read + written).
  std::vector<SweepPoint> gemm_sweep;
  std::vector<SweepPoint> convolution_sweep;
  std::vector<SweepPoint> memory_sweep;
};

// The `efficiency:` curves fitted to the sweeps (fit_efficiency_curve): GEMM and convolution against the fp32
// GEMM peak, memory against hbm_bytes_per_s, as the cost model measures them. A class whose sweep is missing or
// does not fit keeps the default curve; `notes` says which.
GpuEfficiency fit_sweeps(const CalibrationData& data, std::vector<std::string>* notes = nullptr);

// The host link as the Machine file states it.
struct HostLinkModel {
  double bandwidth_bytes_per_s = 0; // min of the two directions (the Machine has one per-direction figure)
  double h2d_bytes_per_s = 0;
  double d2h_bytes_per_s = 0;
  double latency_s = 0;
  bool duplex_split = true;  // both directions at once reach about twice one direction
  double overlap_factor = 0; // bidirectional total / mean of the two one-way bandwidths
};

// Bandwidth from a least-squares fit time = latency + bytes / bandwidth over transfers >= 1 MB;
// latency = the smallest transfer's median time minus its bytes / bandwidth (never negative).
struct LinearFit {
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;
};
LinearFit fit_transfer_times(const std::vector<TransferPoint>& points);

// duplex: split when the overlap factor is at least `split_threshold` (1.6: "about 2x"), else shared.
HostLinkModel derive_host_link(const CalibrationData& data, double split_threshold = 1.6);

// The memsim-machine YAML (DESIGN appendix), raw measurements in comments. `name` is the machine name.
std::string machine_yaml(const CalibrationData& data, const std::string& name);
nlohmann::json calibration_to_json(const CalibrationData& data);
// Reads calibration_to_json's document back (`calibrate --from-raw` rewrites the YAML without a GPU).
// Throws InputError(source_name ...) on anything else.
CalibrationData calibration_from_json(const nlohmann::json& document, const std::string& source_name);

} // namespace memsim::runtime

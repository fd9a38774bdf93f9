#pragma once
// Runs a Program on the GPU: one CUDA stream per plan stream, an event pair per step, the arena, pinned
// host buffers, spin or cuBLAS kernels. Every iteration starts behind a short "gate" kernel so the host
// finishes enqueueing before the GPU starts (measured times are not host-bound).
#include "cublas_loader.hpp"

#include "memsim/runtime/execution_program.hpp"
#include "memsim/runtime/measured_timeline.hpp"

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace memsim::runtime {

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;
  int multiprocessors = 0;
  int major = 0, minor = 0;
};

// Throws NoCudaDevice when there is no driver or no GPU with that index.
DeviceInfo open_device(int index);

// Event-measured duration of (event, spin kernel of 0 ns, event), median, queued the way steps are.
double measure_spin_overhead(cudaStream_t stream, int repetitions = 64);

struct ExecutorOptions {
  std::string kernels = "spin"; // spin | gemm
  std::size_t warmup = 2;
  std::size_t iterations = 5;
  GemmType gemm_type = GemmType::fp32;
};

struct ExecutionOutcome {
  std::vector<IterationTiming> iterations; // the measured ones (warm-up excluded)
  RunInfo info;
  std::size_t spin_fallbacks = 0; // gemm mode: kernel steps without flops ran as spin kernels
};

ExecutionOutcome execute_program(const Program& program, const DeviceInfo& device, const ExecutorOptions& options,
                                 const CublasLibrary* cublas);

} // namespace memsim::runtime

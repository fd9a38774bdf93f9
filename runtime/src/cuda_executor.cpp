#include "cuda_executor.hpp"

#include "cuda_check.hpp"
#include "kernels.hpp"

#include "memsim/runtime/kernel_sizing.hpp"

#include <fmt/format.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace memsim::runtime {

namespace {

// v2 host compute: spins the CUDA runtime's host-callback thread for the step's time (*seconds), so the step
// occupies its stream from when its event waits are met until the host time has passed, like the simulator's host
// node. Calibrated by construction: it reads the steady clock.
void CUDART_CB host_busy_loop(void* seconds)
{
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(*static_cast<double*>(seconds));
  while (std::chrono::steady_clock::now() < until) {
  }
}

double median_of(std::vector<double> values)
{
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[(values.size() - 1) / 2];
}

struct Events {
  std::vector<cudaEvent_t> events;
  explicit Events(std::size_t count) : events(count, nullptr)
  {
    for (cudaEvent_t& event : events)
      MEMSIM_CUDA(cudaEventCreate(&event));
  }
  ~Events()
  {
    for (cudaEvent_t event : events)
      if (event)
        cudaEventDestroy(event);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  cudaEvent_t operator[](std::size_t i) const { return events[i]; }
};

struct Streams {
  std::vector<cudaStream_t> streams;
  explicit Streams(std::size_t count) : streams(count, nullptr)
  {
    for (cudaStream_t& stream : streams)
      MEMSIM_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~Streams()
  {
    for (cudaStream_t stream : streams)
      if (stream)
        cudaStreamDestroy(stream);
  }
  Streams(const Streams&) = delete;
  Streams& operator=(const Streams&) = delete;
  cudaStream_t operator[](std::size_t i) const { return streams[i]; }
};

struct DeviceBuffer {
  void* data = nullptr;
  explicit DeviceBuffer(std::uint64_t bytes, const char* what)
  {
    if (bytes == 0)
      return;
    cudaError_t status = cudaMalloc(&data, bytes);
    if (status != cudaSuccess) {
      cudaGetLastError(); // clear the sticky-free error so later calls work
      throw CudaError(fmt::format("cudaMalloc of {} bytes for {} failed: {}", bytes, what, cudaGetErrorString(status)));
    }
  }
  ~DeviceBuffer()
  {
    if (data)
      cudaFree(data);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* bytes() const { return static_cast<char*>(data); }
};

struct PinnedBuffers {
  std::vector<void*> buffers;
  ~PinnedBuffers()
  {
    for (void* buffer : buffers)
      if (buffer)
        cudaFreeHost(buffer);
  }
};

double elapsed_s(cudaEvent_t from, cudaEvent_t to)
{
  float ms = 0;
  MEMSIM_CUDA(cudaEventElapsedTime(&ms, from, to));
  return static_cast<double>(ms) * 1e-3;
}

} // namespace

DeviceInfo open_device(int index)
{
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    // The static runtime reports a missing driver as "driver version is insufficient": say what it is.
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!driver)
      throw NoCudaDevice("no NVIDIA driver: libcuda.so.1 cannot be loaded");
    dlclose(driver);
    throw NoCudaDevice(fmt::format("cudaGetDeviceCount: {}", cudaGetErrorString(status)));
  }
  if (count == 0)
    throw NoCudaDevice("cudaGetDeviceCount found 0 devices");
  if (index < 0 || index >= count)
    throw NoCudaDevice(fmt::format("GPU {} requested, {} present", index, count));
  MEMSIM_CUDA(cudaSetDevice(index));
  cudaDeviceProp properties{};
  MEMSIM_CUDA(cudaGetDeviceProperties(&properties, index));
  DeviceInfo info;
  info.index = index;
  info.name = properties.name;
  info.multiprocessors = properties.multiProcessorCount;
  info.major = properties.major;
  info.minor = properties.minor;
  std::size_t free_bytes = 0, total_bytes = 0;
  MEMSIM_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  info.free_bytes = free_bytes;
  info.total_bytes = total_bytes;
  return info;
}

double measure_spin_overhead(cudaStream_t stream, int repetitions)
{
  // Back-to-back (spin, end event) pairs behind a gate, as plan steps without waits run: the time
  // between consecutive end events minus the requested spin is the fixed cost to subtract.
  constexpr std::uint64_t spin_ns = 50000;
  Events events(static_cast<std::size_t>(repetitions + 1));
  MEMSIM_CUDA(kernels::launch_spin(stream, 2000000));
  MEMSIM_CUDA(cudaEventRecord(events[0], stream));
  for (int i = 1; i <= repetitions; ++i) {
    MEMSIM_CUDA(kernels::launch_spin(stream, spin_ns));
    MEMSIM_CUDA(cudaEventRecord(events[static_cast<std::size_t>(i)], stream));
  }
  MEMSIM_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> overheads;
  for (int i = 1; i <= repetitions; ++i)
    overheads.push_back(elapsed_s(events[static_cast<std::size_t>(i - 1)], events[static_cast<std::size_t>(i)]) -
                        static_cast<double>(spin_ns) * 1e-9);
  return std::max(0.0, median_of(overheads));
}

ExecutionOutcome execute_program(const Program& program, const DeviceInfo& device, const ExecutorOptions& options,
                                 const CublasLibrary* cublas)
{
  ExecutionOutcome outcome;
  outcome.info.gpu_name = device.name;
  outcome.info.kernels = options.kernels;
  outcome.info.warmup = options.warmup;
  const bool gemm = options.kernels == "gemm";

  Streams streams(program.streams.size());
  Streams root(1);
  const std::size_t step_count = program.steps.size();
  Events step_events(2 * step_count); // start, end per step
  Events iteration_start(1);
  DeviceBuffer arena(program.pool.arena_bytes, "the memory pool");

  // Every host copy is a pinned buffer allocated before the first step; tensors placed on the host at t = 0 (v2
  // initial_placement) are among them, so their prefetches copy from them.
  PinnedBuffers host;
  for (const HostBuffer& buffer : program.host_buffers) {
    void* data = nullptr;
    if (buffer.bytes > 0)
      MEMSIM_CUDA(cudaHostAlloc(&data, buffer.bytes, cudaHostAllocDefault));
    host.buffers.push_back(data);
  }

  // GEMM operands, outside the pool (they stand for the op's real work, not for its tensors).
  std::vector<GemmShape> shapes(step_count);
  std::uint64_t max_a = 0, max_b = 0, max_c = 0;
  if (gemm) {
    for (std::size_t i = 0; i < step_count; ++i) {
      const ProgramStep& step = program.steps[i];
      if (step.work != WorkKind::kernel)
        continue;
      if (!step.flops || *step.flops <= 0) {
        ++outcome.spin_fallbacks;
        continue;
      }
      shapes[i] = gemm_shape_for(*step.flops);
      const auto m = static_cast<std::uint64_t>(shapes[i].m), n = static_cast<std::uint64_t>(shapes[i].n),
                 k = static_cast<std::uint64_t>(shapes[i].k);
      max_a = std::max(max_a, m * k);
      max_b = std::max(max_b, k * n);
      max_c = std::max(max_c, m * n);
    }
  }
  const auto element = static_cast<std::uint64_t>(element_bytes(options.gemm_type));
  DeviceBuffer gemm_a(max_a * element, "GEMM operand A");
  DeviceBuffer gemm_b(max_b * element, "GEMM operand B");
  DeviceBuffer gemm_c(max_c * element, "GEMM result C");
  const bool bf16 = options.gemm_type == GemmType::bf16;
  MEMSIM_CUDA(kernels::launch_fill(root[0], gemm_a.data, max_a, static_cast<int>(element), bf16, 1));
  MEMSIM_CUDA(kernels::launch_fill(root[0], gemm_b.data, max_b, static_cast<int>(element), bf16, 2));
  std::vector<cublasHandle_t> handles(program.streams.size(), nullptr);
  struct HandleGuard {
    const CublasLibrary* cublas;
    std::vector<cublasHandle_t>& handles;
    ~HandleGuard()
    {
      for (cublasHandle_t handle : handles)
        if (cublas)
          cublas->destroy_handle(handle);
    }
  } handle_guard{cublas, handles};
  if (gemm && max_c > 0) {
    if (!cublas)
      throw CudaError("--kernels gemm needs cuBLAS");
    for (std::size_t s = 0; s < program.streams.size(); ++s)
      handles[s] = cublas->create_handle(streams[s]);
  }
  MEMSIM_CUDA(cudaDeviceSynchronize());

  outcome.info.spin_overhead_s = measure_spin_overhead(root[0]);

  // Events cost ~1.3 us of stream time each on an H100, so a step gets a start event only when its start
  // is not simply its stream predecessor's end (it waits on other streams, or is its stream's first),
  // and a step without device work gets at most one event (none if nobody waits on it).
  std::vector<char> has_start(step_count, 0), has_end(step_count, 0), waited_on(step_count, 0);
  {
    std::vector<char> stream_seen(program.streams.size(), 0);
    for (const ProgramStep& step : program.steps)
      for (StepId wait : step.waits)
        waited_on[static_cast<std::size_t>(wait)] = 1;
    for (std::size_t i = 0; i < step_count; ++i) {
      const ProgramStep& step = program.steps[i];
      const bool first = !stream_seen[step.stream];
      stream_seen[step.stream] = 1;
      const bool needs_start = first || !step.waits.empty();
      if (step.work == WorkKind::none) {
        has_end[i] = needs_start || waited_on[i];
      } else {
        has_start[i] = needs_start;
        has_end[i] = 1;
      }
    }
  }

  std::vector<double> host_seconds(step_count, 0.0); // host_busy arguments, alive until every iteration synchronized
  for (std::size_t i = 0; i < step_count; ++i)
    host_seconds[i] = program.steps[i].kernel_time_s;

  double gate_s = 0.005;
  std::vector<double> enqueue_times;
  const std::size_t total = options.warmup + options.iterations;
  for (std::size_t iteration = 0; iteration < total; ++iteration) {
    MEMSIM_CUDA(cudaDeviceSynchronize());
    const auto enqueue_begin = std::chrono::steady_clock::now();
    MEMSIM_CUDA(kernels::launch_spin(root[0], static_cast<std::uint64_t>(gate_s * 1e9)));
    MEMSIM_CUDA(cudaEventRecord(iteration_start[0], root[0]));
    for (std::size_t s = 0; s < program.streams.size(); ++s)
      MEMSIM_CUDA(cudaStreamWaitEvent(streams[s], iteration_start[0], 0));
    for (std::size_t i = 0; i < step_count; ++i) {
      const ProgramStep& step = program.steps[i];
      cudaStream_t stream = streams[step.stream];
      for (StepId wait : step.waits)
        MEMSIM_CUDA(cudaStreamWaitEvent(stream, step_events[2 * static_cast<std::size_t>(wait) + 1], 0));
      if (has_start[i])
        MEMSIM_CUDA(cudaEventRecord(step_events[2 * i], stream));
      switch (step.work) {
      case WorkKind::none: break;
      case WorkKind::kernel:
        if (gemm && shapes[i].m > 0)
          cublas->gemm(handles[step.stream], options.gemm_type, shapes[i], gemm_a.data, gemm_b.data, gemm_c.data);
        else
          MEMSIM_CUDA(kernels::launch_spin(stream, spin_request_ns(step.kernel_time_s, outcome.info.spin_overhead_s)));
        break;
      case WorkKind::copy_h2d:
        if (step.copy_bytes > 0)
          MEMSIM_CUDA(cudaMemcpyAsync(arena.bytes() + step.device_offset, host.buffers[step.host_buffer],
                                      step.copy_bytes, cudaMemcpyHostToDevice, stream));
        break;
      case WorkKind::copy_d2h:
        if (step.copy_bytes > 0)
          MEMSIM_CUDA(cudaMemcpyAsync(host.buffers[step.host_buffer], arena.bytes() + step.device_offset,
                                      step.copy_bytes, cudaMemcpyDeviceToHost, stream));
        break;
      case WorkKind::host_busy: MEMSIM_CUDA(cudaLaunchHostFunc(stream, host_busy_loop, &host_seconds[i])); break;
      }
      if (has_end[i])
        MEMSIM_CUDA(cudaEventRecord(step_events[2 * i + 1], stream));
    }
    const double enqueue_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - enqueue_begin).count();
    MEMSIM_CUDA(cudaDeviceSynchronize());
    IterationTiming timing(step_count);
    std::vector<double> stream_end(program.streams.size(), 0.0);
    for (std::size_t i = 0; i < step_count; ++i) {
      const std::size_t stream = program.steps[i].stream;
      const double end = has_end[i] ? elapsed_s(iteration_start[0], step_events[2 * i + 1]) : stream_end[stream];
      if (has_start[i])
        timing[i].start_s = elapsed_s(iteration_start[0], step_events[2 * i]);
      else if (program.steps[i].work == WorkKind::none)
        timing[i].start_s = end; // zero duration: its one event, or its predecessor's end
      else
        timing[i].start_s = stream_end[stream];
      timing[i].end_s = end;
      stream_end[stream] = end;
    }
    const double gpu_s = iteration_time(timing);
    // The host was still enqueueing when the GPU should have been nearly done: it may have waited for the
    // host (a full launch queue also blocks the host while the gate runs, so enqueue > gate alone is fine).
    if (iteration >= options.warmup && enqueue_s > gate_s + 0.9 * gpu_s)
      std::fprintf(stderr,
                   "memsim-cuda: warning: enqueueing took %.3f ms (gate %.3f ms, iteration %.3f ms): the "
                   "GPU may have waited for the host\n",
                   enqueue_s * 1e3, gate_s * 1e3, gpu_s * 1e3);
    if (iteration >= options.warmup) {
      outcome.info.enqueue_gate_s = gate_s;
      enqueue_times.push_back(enqueue_s);
      outcome.iterations.push_back(std::move(timing));
    }
    // Long enough for the host to get ahead, but no longer than two iterations: when the launch queue is
    // full the host blocks until the gate ends, and a gate grown from that would only grow. 100 ms at most:
    // the launch queue fills long before that, and a longer gate only added idle time to every iteration
    // (2 x 1.2 s per iteration of a 4,700-step plan on an H200, 2026-11-26).
    gate_s = std::clamp(1.5 * enqueue_s + 0.0005, 0.0005, std::min(0.1, std::max(0.005, 2 * gpu_s)));
  }
  outcome.info.enqueue_s = median_of(enqueue_times);
  MEMSIM_CUDA(cudaGetLastError());
  return outcome;
}

} // namespace memsim::runtime

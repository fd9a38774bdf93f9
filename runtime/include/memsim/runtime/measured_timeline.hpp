#pragma once
// Turns CUDA-event times of a Program's steps into the simulator's RunResult (sim/timeline.hpp), so a
// measured run and a simulated one are the same document and get their metrics from the same code.
#include "memsim/runtime/execution_program.hpp"
#include "memsim/sim/timeline.hpp"

#include <nlohmann/json.hpp>

#include <vector>

namespace memsim::runtime {

// Seconds since the iteration's start event.
struct StepTiming {
  double start_s = 0;
  double end_s = 0;
};
using IterationTiming = std::vector<StepTiming>; // one per Program::steps entry

// End of the last step (0 for an empty iteration).
double iteration_time(const IterationTiming& timing);
// The iteration whose time is the median (the lower one of the middle two for an even count).
std::size_t median_iteration(const std::vector<IterationTiming>& iterations);

// One iteration's RunResult: step records in step-id order, memory samples from the allocations (at the
// start of the allocating step, released at the end of the releasing step), metrics via
// metrics_from_timeline, and the program's failure (if any) as the error with its measured time.
RunResult assemble_run_result(const Program& program, const IterationTiming& timing);

struct RunInfo {
  std::string gpu_name;
  std::string kernels; // spin | gemm
  std::size_t warmup = 0;
  double spin_overhead_s = 0; // event-measured duration of a zero-length spin kernel
  double enqueue_gate_s = 0;  // the GPU waited this long at each iteration's start while the host enqueued
  double enqueue_s = 0;       // host time to enqueue one iteration (median of the measured ones)
};

// Everything about the repetitions that one RunResult cannot hold: per-iteration times, the chosen
// iteration, per-step min/median/max durations and, for kernels, requested vs measured time.
nlohmann::json measurement_summary(const Program& program, const std::vector<IterationTiming>& iterations,
                                   const RunInfo& info);

// The timeline document written by memsim-cuda run: timeline_to_json of the median iteration, plus a
// "measured" object (measurement_summary). Readers of simulated timelines ignore "measured".
nlohmann::json measured_timeline_document(const Program& program, const std::vector<IterationTiming>& iterations,
                                          const RunInfo& info);

// The raw event times of a run (`memsim-cuda run --raw-timings`), enough to rebuild the timeline document
// later without a GPU (`memsim-cuda assemble`): the pool it ran with, the run info and every iteration.
struct RawTimings {
  PoolConfig pool;
  RunInfo info;
  std::vector<IterationTiming> iterations;
};
nlohmann::json raw_timings_to_json(const RawTimings& raw);
// Throws InputError(source_name ...) on a malformed document.
RawTimings raw_timings_from_json(const nlohmann::json& document, const std::string& source_name);

} // namespace memsim::runtime

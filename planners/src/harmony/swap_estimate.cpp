#include "swap_estimate.hpp"

#include "memsim/planners/harmony/estimator.hpp"

#include <algorithm>

namespace memsim::harmony {

const char* const kSwapEstimateModel =
    "analytic: per stage and microbatch, sum over layers of max(compute, swap-in bytes / share, swap-out bytes / "
    "share) plus the boundary tensor received at bw_p2p; dp (share bw_swap/N, replicas in lockstep): m (F + B) + U; "
    "pipelines (share bw_swap), the larger of the composition and every stage's bytes per direction / bw_swap, "
    "per phase for gpipe (its flush separates them): gpipe sum_s F_s + (m-1) max_s F_s, then sum_s B_s + (m-1) "
    "max_s B_s, then max_s U_s; 1F1B sum_s (F_s + B_s) + (m-1) max_s (F_s + B_s) + max_s U_s; U per layer: max(step, "
    "in, out) + ring all-reduce 2(R-1)/R |dW| / bw_p2p; "
    "bw_swap 11.5 GiB/s, bw_p2p 8.2 GiB/s (Harmony's estimator defaults)";

const char* const kSteadyEstimateModel =
    "; several iterations (2BW's steady state, no flush): the steady iteration, not the first, max over stages of "
    "m F_s + B_s,first + (m-1) B_s + U_s - m p2p_s (the receives overlap), at least every stage's bytes of one "
    "iteration per direction / bw_swap";

namespace {

class PassModel {
public:
  PassModel(const Trace& trace, const LayerChainIds& chain, int sharing)
      : trace_(trace), chain_(chain), share_(settings_.bw_swap / sharing)
  {
  }

  double bytes(std::optional<TensorId> tensor) const
  {
    return tensor ? static_cast<double>(trace_.tensor(*tensor).bytes) : 0.0;
  }
  double time(std::optional<OpId> op) const { return op ? trace_.op(*op).time_s : 0.0; }
  double forward_compute(std::size_t l) const { return time(chain_.forward[l]) + time(chain_.save[l]); }
  double layer(double compute, double in_bytes, double out_bytes) const
  {
    return std::max({compute, in_bytes / share_, out_bytes / share_});
  }
  double p2p(double bytes) const { return bytes / settings_.bw_p2p; }

private:
  const EstimatorSettings settings_;
  const Trace& trace_;
  const LayerChainIds& chain_;
  double share_;
};

} // namespace

// The bytes per layer follow LayerSwapEmitter's steps (swap_emitter.cpp) one for one.
StagePassTimes stage_pass_times(const Trace& trace, const LayerChainIds& chain, const SwapStage& stage,
                                Recompute recompute, int sharing, int replicas)
{
  const PassModel model(trace, chain, sharing);
  StagePassTimes times;
  if (stage.previous >= 0) {
    times.forward += model.p2p(model.bytes(chain.x[stage.first]));
    times.received += model.p2p(model.bytes(chain.x[stage.first]));
  }
  for (std::size_t l = stage.first; l <= stage.last; ++l) {
    double in = model.bytes(chain.w[l]);
    if (l == stage.first && stage.previous < 0)
      in += model.bytes(chain.x[l]); // the data
    double out = 0;
    if (recompute == Recompute::none)
      out += model.bytes(chain.saved[l]);
    const bool input_kept = l == 0 || (recompute == Recompute::per_stage && l != stage.first);
    if (!input_kept)
      out += model.bytes(chain.x[l]);
    if (l == stage.last && recompute == Recompute::none)
      out += model.bytes(chain.output(l));
    times.forward += model.layer(model.forward_compute(l), in, out);
    times.forward_bytes[0] += in;
    times.forward_bytes[1] += out;
  }

  double backward = 0;
  if (stage.next >= 0) {
    backward += model.p2p(model.bytes(chain.dx[stage.last + 1]));
    times.received += model.p2p(model.bytes(chain.dx[stage.last + 1]));
  }
  if (recompute == Recompute::per_stage)
    for (std::size_t l = stage.first; l <= stage.last; ++l) {
      const double in = model.bytes(chain.w[l]) + (l == stage.first ? model.bytes(chain.x[l]) : 0.0);
      const double out = l < stage.keep_saved_from ? model.bytes(chain.saved[l]) : 0.0;
      backward += model.layer(model.forward_compute(l), in, out);
      times.backward_bytes[0] += in;
      times.backward_bytes[1] += out;
    }
  double backward_first = backward;
  double backward_accumulating = backward;
  for (std::size_t l = stage.first; l <= stage.last; ++l) {
    double compute = model.time(chain.backward[l]);
    double in = model.bytes(chain.w[l]);
    if (recompute == Recompute::per_stage) {
      if (l < stage.keep_saved_from)
        in += model.bytes(chain.saved[l]);
    } else {
      in += model.bytes(chain.x[l]);
    }
    if (recompute == Recompute::per_layer)
      compute += model.forward_compute(l);
    if (recompute == Recompute::none)
      in += model.bytes(chain.output(l)) + model.bytes(chain.saved[l]);
    const double out = model.bytes(chain.dw[l]);
    backward_first += model.layer(compute, in, out);
    backward_accumulating += model.layer(compute, in + model.bytes(chain.dw[l]), out);
    times.backward_bytes[0] += in + model.bytes(chain.dw[l]);
    times.backward_bytes[1] += out;
    times.gradient_bytes += model.bytes(chain.dw[l]);
  }
  times.backward_first = backward_first;
  times.backward_accumulating = backward_accumulating;

  for (std::size_t l = stage.first; l <= stage.last; ++l) {
    if (!chain.update[l])
      continue;
    const double weights = model.bytes(chain.w[l]) + model.bytes(chain.k[l]);
    times.update += model.layer(model.time(chain.update[l]), model.bytes(chain.dw[l]) + weights, weights);
    times.update_bytes[0] += model.bytes(chain.dw[l]) + weights;
    times.update_bytes[1] += weights;
    if (replicas > 1)
      times.update += model.p2p(2.0 * (replicas - 1) / replicas * model.bytes(chain.dw[l]));
  }
  return times;
}

double compose_data_parallel(const StagePassTimes& replica, int microbatches)
{
  return microbatches * replica.forward + replica.backward_first + (microbatches - 1) * replica.backward_accumulating +
         replica.update;
}

namespace {

// The time of `stages` running `microbatches` passes each, pass i + 1 of a stage after pass i of the next: the
// first microbatch through every stage, then the slowest stage's pass per further microbatch.
double pipelined(const std::vector<double>& first, const std::vector<double>& steady, int microbatches)
{
  double fill = 0;
  for (double time : first)
    fill += time;
  return fill + (microbatches - 1) * *std::max_element(steady.begin(), steady.end());
}

double slowest_update(const std::vector<StagePassTimes>& stages)
{
  double slowest = 0;
  for (const StagePassTimes& stage : stages)
    slowest = std::max(slowest, stage.update);
  return slowest;
}

// The host link's time for what the stages move in one phase, in its busier direction, at bw_swap.
enum Phase : unsigned { kForwards = 1, kBackwards = 2, kUpdates = 4 };
double host_link_bound(const std::vector<StagePassTimes>& stages, int microbatches, unsigned phases)
{
  std::array<double, 2> bytes{};
  for (const StagePassTimes& stage : stages)
    for (std::size_t direction = 0; direction < 2; ++direction) {
      if (phases & kForwards)
        bytes[direction] += microbatches * stage.forward_bytes[direction];
      if (phases & kBackwards)
        bytes[direction] += microbatches * stage.backward_bytes[direction] -
                            (direction == 0 ? stage.gradient_bytes : 0.0); // the first backward brings no dW in
      if (phases & kUpdates)
        bytes[direction] += stage.update_bytes[direction];
    }
  return std::max(bytes[0], bytes[1]) / EstimatorSettings{}.bw_swap;
}

} // namespace

double compose_gpipe(const std::vector<StagePassTimes>& stages, int microbatches)
{
  std::vector<double> forward, backward_first, backward;
  for (const StagePassTimes& stage : stages) {
    forward.push_back(stage.forward);
    backward_first.push_back(stage.backward_first);
    backward.push_back(stage.backward_accumulating);
  }
  // The flush separates the phases: the forwards' swap-outs cannot overlap the backwards' swap-ins.
  return std::max(pipelined(forward, forward, microbatches), host_link_bound(stages, microbatches, kForwards)) +
         std::max(pipelined(backward_first, backward, microbatches),
                  host_link_bound(stages, microbatches, kBackwards)) +
         std::max(slowest_update(stages), host_link_bound(stages, microbatches, kUpdates));
}

double compose_one_forward_one_backward(const std::vector<StagePassTimes>& stages, int microbatches)
{
  std::vector<double> first, steady;
  for (const StagePassTimes& stage : stages) {
    first.push_back(stage.forward + stage.backward_first);
    steady.push_back(stage.forward + stage.backward_accumulating);
  }
  return std::max(pipelined(first, steady, microbatches) + slowest_update(stages),
                  host_link_bound(stages, microbatches, kForwards | kBackwards | kUpdates));
}

double steady_one_forward_one_backward(const std::vector<StagePassTimes>& stages, int microbatches)
{
  double busiest = 0;
  for (const StagePassTimes& stage : stages)
    busiest = std::max(busiest, microbatches * (stage.forward - stage.received) + stage.backward_first +
                                    (microbatches - 1) * stage.backward_accumulating + stage.update);
  return std::max(busiest, host_link_bound(stages, microbatches, kForwards | kBackwards | kUpdates));
}

} // namespace memsim::harmony

#pragma once
// The parameters of μ-TWO's swap/recompute choice, shared by hfta-capuchin and mu-two and declared once: their
// options structs derive from SwapChoiceParams and list offload_release_param() and idle_metric_param().
#include "capuchin_schedule.hpp"
#include "swap_recompute_stats.hpp"

#include "memsim/common/params.hpp"

#include <concepts>
#include <string>

namespace memsim::planning {

struct SwapChoiceParams {
  SwapChoiceParams() = default; // not an aggregate, as FusedModels (GCC 12's false -Wmaybe-uninitialized)
  std::string offload_release = "safe";
  std::string idle_metric = "inactive";

  OffloadRelease release() const { return offload_release == "paper" ? OffloadRelease::paper : OffloadRelease::safe; }
  IdleMetric metric() const { return idle_metric_from(idle_metric); }
};

template <class Options>
BoundParam<Options> offload_release_param()
{
  static_assert(std::derived_from<Options, SwapChoiceParams>, "the options struct derives from SwapChoiceParams");
  return param<Options, std::string>(
      "offload_release", &Options::offload_release,
      "when the scheduler's memory replay stops counting an offloaded tensor: safe = once the op running when its "
      "D2H ends has finished; paper = at its last forward use (Alg. G)",
      {.choices = {"safe", "paper"}});
}

template <class Options>
BoundParam<Options> idle_metric_param()
{
  static_assert(std::derived_from<Options, SwapChoiceParams>, "the options struct derives from SwapChoiceParams");
  return param<Options, std::string>(
      "idle_metric", &Options::idle_metric,
      "how long a candidate is idle, the key of the swap choice (spec A11): inactive = from its last forward access "
      "to its first backward access (§4.1, Table B); produced = from its producer (§1); free_time = inactive minus "
      "its D2H and H2D times (Capuchin's free time, as the authors' code ranks)",
      {.choices = {"inactive", "produced", "free_time"}});
}

} // namespace memsim::planning

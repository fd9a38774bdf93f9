#pragma once
// The fast engine: the execution core over an in-process fluid model of the machine. Re-entrant (no global
// state, many runs per process, callable from planners) and exact: concurrent transfers progress max-min fairly
// over the links of their routes and concurrent work on one node shares it equally, which is what SimGrid's
// CM02 network model and CPU model compute with memsim's settings (see hwmodels/platform.cpp).
#include "memsim/sim/execution.hpp"
#include "memsim/sim/network_model.hpp"

namespace memsim {

class FastPhysics final : public Physics {
public:
  explicit FastPhysics(const NetworkModel& network) : network_(&network) {}
  bool start(StepId step, const Work& work) override;
  double advance(std::vector<StepId>& finished) override;
  bool idle() const override { return activities_.empty(); }

private:
  struct Activity {
    StepId step = 0;
    double remaining = 0;   // seconds of work or bytes
    double latency_end = 0; // the bandwidth (transfer) or compute phase starts then
    bool in_latency = false;
    const std::vector<std::size_t>* resources = nullptr;
    std::size_t compute_resource = 0;
    double rate = 0;
  };
  void share(); // max-min fair rates of the activities past their latency

  const NetworkModel* network_;
  std::vector<Activity> activities_;
  double now_ = 0;
  // Scratch for share(), kept to avoid allocations per event.
  std::vector<double> left_;
  std::vector<std::size_t> users_;
};

} // namespace memsim

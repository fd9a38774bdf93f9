// The SimGrid engine: the execution core driven from one controller actor. Work becomes SimGrid activities (an
// Exec on the node's host, a Comm over the route); route latency is a timer the controller keeps, paid before
// the bytes flow (see SimPlatform::route_latency_s). No activity DAG is pre-built (DESIGN.md: that does not scale
// on SimGrid 3.32), and no actor per stream: the core decides what starts, SimGrid only says when work ends.
#include "memsim/sim/simgrid_engine.hpp"

#include "memsim/hwmodels/platform.hpp"

#include <simgrid/s4u/Activity.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Exec.hpp>
#include <simgrid/s4u/Host.hpp>

#include <algorithm>
#include <string>

namespace memsim {

namespace s4u = simgrid::s4u;

namespace {

class SimGridPhysics final : public Physics {
public:
  explicit SimGridPhysics(const SimPlatform& platform) : platform_(platform) {}

  bool start(StepId step, const Work& work) override
  {
    if (work.kind == Work::Kind::compute) {
      if (work.seconds <= 0 && work.service_s <= 0)
        return true;
      Pending pause{step, 0, 0, 0, s4u::Engine::get_clock() + work.service_s, true, work.node, work.seconds};
      if (work.service_s > 0)
        timers_.push_back(pause);
      else
        start_exec(pause);
      return false;
    }
    const std::size_t from = node(work.from);
    const std::size_t to = node(work.to);
    const double latency = platform_.latency_s(from, to) + work.service_s;
    if (work.bytes == 0 && latency <= 0)
      return true;
    Pending transfer{step, from, to, work.bytes, s4u::Engine::get_clock() + latency};
    if (latency > 0)
      timers_.push_back(transfer);
    else
      start_comm(transfer);
    return false;
  }

  double advance(std::vector<StepId>& finished) override
  {
    while (finished.empty() && !idle()) {
      auto timer = std::min_element(timers_.begin(), timers_.end(),
                                    [](const Pending& a, const Pending& b) { return a.ready_at < b.ready_at; });
      bool timer_due = false;
      if (running_.empty()) {
        s4u::this_actor::sleep_until(timer->ready_at);
        timer_due = true;
      } else {
        const double timeout =
            timer == timers_.end() ? -1.0 : std::max(0.0, timer->ready_at - s4u::Engine::get_clock());
        const ssize_t index = s4u::Activity::wait_any_for(running_, timeout);
        if (index >= 0)
          take(static_cast<std::size_t>(index), finished);
        else
          timer_due = timer != timers_.end(); // the wait timed out at the timer
      }
      // Everything else that ended at this instant (one simcall per ended activity plus one, instead of a test()
      // of every activity in flight), and the timers that are due. The clock after a sleep or a timed-out wait may
      // be an ulp short of the due time (SimGrid adds the duration to the clock): a timer waited for is due, and one
      // within SimGrid's own time precision counts as now, so that an activity ending with the timer and the timer
      // are taken at one instant (as the fast engine does).
      for (ssize_t index; !running_.empty() && (index = s4u::Activity::test_any(running_)) >= 0;)
        take(static_cast<std::size_t>(index), finished);
      if (timer != timers_.end()) {
        const double due = timer->ready_at;
        if (timer_due || due <= s4u::Engine::get_clock() + kSimultaneous_s)
          fire_timers(due, finished);
      }
    }
    return s4u::Engine::get_clock();
  }

  bool idle() const override { return running_.empty() && timers_.empty(); }

private:
  struct Pending {
    StepId step = 0;
    std::size_t from = 0;
    std::size_t to = 0;
    std::uint64_t bytes = 0;
    double ready_at = 0;
    bool compute = false; // a compute's pause (Work::service_s): then the op runs
    int node = 0;         // compute: where it runs
    double seconds = 0;   // compute: its duration alone
  };

  std::size_t node(int gpu_or_host) const
  {
    return gpu_or_host < 0 ? platform_.host_node() : static_cast<std::size_t>(gpu_or_host);
  }
  s4u::Host* host(int gpu_or_host) const { return platform_.node_host(node(gpu_or_host)); }

  void start_comm(const Pending& transfer)
  {
    running_.push_back(s4u::Comm::sendto_async(platform_.node_host(transfer.from), platform_.node_host(transfer.to),
                                               transfer.bytes));
    running_steps_.push_back(transfer.step);
  }

  void start_exec(const Pending& op)
  {
    s4u::ExecPtr exec = s4u::Exec::init();
    exec->set_flops_amount(op.seconds * SimPlatform::kSimSpeed);
    exec->set_host(host(op.node));
    exec->start();
    running_.push_back(exec);
    running_steps_.push_back(op.step);
  }

  void take(std::size_t index, std::vector<StepId>& finished)
  {
    finished.push_back(running_steps_[index]);
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(index));
    running_steps_.erase(running_steps_.begin() + static_cast<std::ptrdiff_t>(index));
  }

  // Timers due at `due` (the one waited for and any at the same instant): their bytes start to flow, or their op
  // starts to compute.
  void fire_timers(double due, std::vector<StepId>& finished)
  {
    for (std::size_t i = 0; i < timers_.size();) {
      if (timers_[i].ready_at <= due + kSimultaneous_s) {
        const bool nothing_left = timers_[i].compute ? timers_[i].seconds <= 0 : timers_[i].bytes == 0;
        if (nothing_left)
          finished.push_back(timers_[i].step);
        else if (timers_[i].compute)
          start_exec(timers_[i]);
        else
          start_comm(timers_[i]);
        timers_.erase(timers_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }

  const SimPlatform& platform_;
  std::vector<s4u::ActivityPtr> running_;
  std::vector<StepId> running_steps_;
  std::vector<Pending> timers_;
};

} // namespace

RunResult simulate_with_simgrid(const Trace& trace, const Plan& plan, const Machine& machine,
                                const ExecutionConfig& config, const OpTime& op_time)
{
  std::vector<std::string> arguments{"memsim", "--log=root.thres:critical", "--log=xbt_cfg.thres:critical"};
  std::vector<char*> argv;
  for (auto& argument : arguments)
    argv.push_back(argument.data());
  int argc = static_cast<int>(argv.size());
  s4u::Engine engine(&argc, argv.data());
  const SimPlatform platform = build_platform(engine, machine);
  RunResult result;
  s4u::Actor::create("memsim-controller", platform.host, [&] {
    SimGridPhysics physics(platform);
    result = execute_plan(trace, plan, config, op_time, physics);
  });
  engine.run();
  return result;
}

} // namespace memsim

#include "memsim/sim/fast_engine.hpp"

#include <algorithm>
#include <limits>

namespace memsim {

bool FastPhysics::start(StepId step, const Work& work)
{
  Activity activity;
  activity.step = step;
  if (work.kind == Work::Kind::compute) {
    if (work.seconds <= 0 && work.service_s <= 0)
      return true;
    activity.remaining = work.seconds;
    activity.compute_resource = network_->compute_resource(work.node);
    activity.in_latency = work.service_s > 0; // a pause before the op: it does not compute meanwhile
    activity.latency_end = now_ + work.service_s;
  } else {
    const double latency = network_->latency_s(work.from, work.to) + work.service_s;
    if (work.bytes == 0 && latency <= 0)
      return true;
    activity.remaining = static_cast<double>(work.bytes);
    activity.resources = &network_->route(work.from, work.to);
    activity.in_latency = latency > 0;
    activity.latency_end = now_ + latency;
  }
  activities_.push_back(activity);
  return false;
}

// Progressive filling: repeatedly the resource with the smallest equal share fixes the rate of every activity
// crossing it. All weights are equal (memsim's SimGrid settings give every flow the same sharing penalty).
void FastPhysics::share()
{
  left_.assign(network_->capacity.begin(), network_->capacity.end());
  users_.assign(left_.size(), 0);
  auto each_resource = [](const Activity& activity, auto&& visit) {
    if (activity.resources)
      for (std::size_t resource : *activity.resources)
        visit(resource);
    else
      visit(activity.compute_resource);
  };
  std::size_t unfixed = 0;
  for (Activity& activity : activities_) {
    activity.rate = -1;
    if (activity.in_latency || (activity.resources && activity.remaining <= 0))
      continue;
    each_resource(activity, [&](std::size_t r) { ++users_[r]; });
    ++unfixed;
  }
  while (unfixed > 0) {
    std::size_t bottleneck = 0;
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t r = 0; r < left_.size(); ++r)
      if (users_[r] > 0 && left_[r] / static_cast<double>(users_[r]) < best) {
        best = left_[r] / static_cast<double>(users_[r]);
        bottleneck = r;
      }
    for (Activity& activity : activities_) {
      if (activity.rate >= 0 || activity.in_latency || (activity.resources && activity.remaining <= 0))
        continue;
      bool crosses = false;
      each_resource(activity, [&](std::size_t r) { crosses = crosses || r == bottleneck; });
      if (!crosses)
        continue;
      activity.rate = best;
      --unfixed;
      each_resource(activity, [&](std::size_t r) {
        left_[r] = std::max(0.0, left_[r] - best);
        --users_[r];
      });
    }
  }
}

double FastPhysics::advance(std::vector<StepId>& finished)
{
  while (finished.empty() && !activities_.empty()) {
    share();
    // The next instant something happens: a latency phase ends or an activity completes.
    double next = std::numeric_limits<double>::infinity();
    for (const Activity& activity : activities_) {
      if (activity.in_latency)
        next = std::min(next, activity.latency_end);
      else if (activity.remaining <= 0)
        next = std::min(next, now_); // a zero-byte transfer whose latency ended
      else
        next = std::min(next, now_ + activity.remaining / activity.rate);
    }
    const double elapsed = next - now_;
    // Everything within kSimultaneous_s of that instant happens then (as in SimGrid).
    const double horizon = next + kSimultaneous_s;
    for (auto it = activities_.begin(); it != activities_.end();) {
      Activity& activity = *it;
      bool done = false;
      if (activity.in_latency) {
        if (activity.latency_end <= horizon) {
          activity.in_latency = false;
          done = activity.remaining <= 0;
        }
      } else if (activity.remaining <= 0 || now_ + activity.remaining / activity.rate <= horizon) {
        done = true;
      } else {
        activity.remaining -= activity.rate * elapsed;
      }
      if (done) {
        finished.push_back(activity.step);
        it = activities_.erase(it);
      } else {
        ++it;
      }
    }
    now_ = next;
  }
  return now_;
}

} // namespace memsim

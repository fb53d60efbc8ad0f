// The host side of a step (sim/host_side.cpp): the data loader and checkpoint writes, replayed
// beside the step's replay.
#pragma once

#include "sim/stages.hpp"

#include <memory>
#include <optional>

namespace stepsim {

class DeferredChild;

struct HostSide {
  double step_time_s = 0; // the step with its input stall (the replayed one without a loader)
  std::optional<InputReport> input;
  std::optional<CheckpointReport> checkpoint;
};

// Made before the step's replay (it forks the process that will replay the host side, while no
// SimGrid engine exists yet); run() once the step is replayed.
class HostSideReplay {
public:
  explicit HostSideReplay(const Scenario& s);
  ~HostSideReplay();
  HostSide run(const Scenario& s, const JobPlan& job, const Workload& workload, const StepReplay& step);

private:
  std::unique_ptr<DeferredChild> child_;
};

} // namespace stepsim

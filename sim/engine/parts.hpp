// What a part of the replay that runs tasks works with, wired once by the owner (replay.cpp):
// the closed-form timing of the platform, which ranks are simulated, the scheduler, the live
// activities and the accounting.
#pragma once

namespace stepsim {
class CollectiveTiming;
}

namespace stepsim::engine {

struct SimulatedRanks;
class Scheduler;
class LiveActivities;
class Accounting;

struct Parts {
  CollectiveTiming& timing;
  const SimulatedRanks& simulated;
  Scheduler& scheduler;
  LiveActivities& activities;
  Accounting& accounting;
};

} // namespace stepsim::engine

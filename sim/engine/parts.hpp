// What a part of the replay that runs tasks works with, wired once by the owner (replay.cpp):
// the closed-form timing of the platform, which ranks are simulated and which of their peers'
// flows are replayed beside them (shadows), the scheduler, the live activities and the accounting.
#pragma once

namespace stepsim {
class CollectiveTiming;
}

namespace stepsim::engine {

struct SimulatedRanks;
class Shadows;
class Scheduler;
class LiveActivities;
class Accounting;

struct Parts {
  CollectiveTiming& timing;
  const SimulatedRanks& simulated;
  const Shadows& shadows;
  Scheduler& scheduler;
  LiveActivities& activities;
  Accounting& accounting;
};

} // namespace stepsim::engine

// The road of a federated scenario (training.federated), taken by simulate() instead of the
// step's road:
//
//   Scenario ──one-device step per client device (the step's own road, in a child process)──▶
//   local compute per client ──replay_round (sim/engine/federated_round.hpp)──▶ Report::federated
#pragma once

#include "sim/core/report.hpp"
#include "sim/core/scenario.hpp"

#include <string>

namespace stepsim {

// One round; the SimGrid engine of the round runs in this process (one call per process, as
// simulate()).
Report simulate_federated(const Scenario& s);

// What a client device's one local step cannot hold, the first such (its path and the memory
// breakdown), or "" when every client's step fits: memory_problem of a federated scenario,
// which has no platform of its own.
std::string federated_memory_problem(const Scenario& s);

} // namespace stepsim

// A check of a parsed scenario against what only a later layer knows: the device catalogue, a
// registry, the platform's node types. Each check lives in the file of what it checks and
// registers itself by name, as the schedules do:
//
//   const bool checked = ScenarioCheckRegistry::add("schedule", "the schedule exists and fits the plan",
//                                                   ScenarioCheck{check_schedule});
//
// validate() (sim/validate.cpp) runs every check in one pass, in name order, and reports every
// problem at once. A check throws InputError whose problems each start with their JSON path.
#pragma once

#include "sim/core/registry.hpp"
#include "sim/core/scenario.hpp"

#include <functional>

namespace stepsim {

struct ScenarioCheck {
  std::function<void(const Scenario& s)> run;
  // Runs only once every other check has passed (it builds on what they check, e.g. the
  // placement of ranks on node groups).
  bool after_the_others = false;
};

using ScenarioCheckRegistry = Registry<ScenarioCheck>;

} // namespace stepsim

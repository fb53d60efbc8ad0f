// validate(): the one pass of registered checks (sim/core/scenario_check.hpp) over a parsed
// scenario. The parser (sim/input/) and the model kinds have checked what the scenario alone
// decides; these check it against the device catalogue, the registries and the node types.
#include "sim/simulate.hpp"

#include "sim/core/scenario_check.hpp"

namespace stepsim {

void validate(const Scenario& s)
{
  Problems problems;
  for (const bool after_the_others : {false, true}) {
    for (const auto& [name, item] : ScenarioCheckRegistry::all()) {
      if (item.entry.after_the_others != after_the_others)
        continue;
      try {
        item.entry.run(s);
      } catch (const InputError& e) {
        for (const auto& p : e.problems())
          problems.add("", p);
      }
    }
    problems.throw_if_any();
  }
}

} // namespace stepsim

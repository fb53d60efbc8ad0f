// The automatic stage split refined by simulation (parallelism.stage_layers "auto"). The closed
// form (topologies/placement.cpp, balance_stage_layers) weighs each stage's compute and its
// tensor-parallel collectives on its own node, but not how the schedule overlaps them, nor the
// pipeline transfers between node types: on a pipeline whose stages run on different node groups
// the split it gives is where a search starts. From there, as PipeDream's partitioner refines its
// profile-based split (Narayanan et al., SOSP 2019, §3.1), single layers move between stages while
// a move shortens the simulated step (steepest descent over the moves between any two stages on
// pipelines of up to 8 stages, between neighbours on longer ones; each a whole simulation in a
// child process); the split that stops improving is the one simulated.
#include "sim/simulate.hpp"
#include "sim/stages.hpp"

#include "sim/core/input_error.hpp"

#include <limits>
#include <set>

namespace stepsim {

namespace {

// Pipelines of up to this many stages try every pair of stages at each step of the descent
// (p(p-1) simulations); longer ones neighbours only (2(p-1)).
constexpr size_t kAnyPairStages = 8;

// The simulated step of `s` with its layers split as `layers`; infinity where that split does
// not fit in memory or is not a valid plan.
double step_with(const Scenario& s, const std::vector<int>& layers)
{
  Scenario trial                       = s;
  trial.parallelism.stage_layers       = layers;
  trial.parallelism.stage_layers_auto  = false;
  try {
    return simulate_isolated(trial).step_time_s;
  } catch (const InputError&) {
    return std::numeric_limits<double>::infinity();
  }
}

bool stages_on_several_groups(const Scenario& s)
{
  const Placement p = place_ranks(s);
  std::set<int> groups(p.group_of_stage.begin(), p.group_of_stage.end());
  return groups.size() > 1;
}

} // namespace

Scenario with_refined_stage_split(const Scenario& s)
{
  const auto& par = s.parallelism;
  if (!par.stage_layers_auto || par.pipeline < 2 || par.virtual_stages != 1 ||
      static_cast<int>(par.stage_layers.size()) != par.pipeline || s.platform.node_groups.size() < 2 ||
      !stages_on_several_groups(s))
    return s;
  std::vector<int> best = par.stage_layers;
  double best_s         = step_with(s, best);
  for (;;) {
    std::vector<int> next = best;
    double next_s         = best_s;
    // A layer from stage i to stage j: neighbours only on long pipelines; any pair on short
    // ones, where a faster node group two stages away cannot be reached through a neighbour
    // that a layer more would make the slowest.
    const size_t reach = best.size() <= kAnyPairStages ? best.size() : 2;
    for (size_t i = 0; i < best.size(); ++i)
      for (size_t j = i >= reach - 1 ? i - (reach - 1) : 0; j < best.size() && j < i + reach; ++j) {
        if (j == i)
          continue;
        std::vector<int> moved = best;
        moved[i] -= 1;
        moved[j] += 1;
        if (moved[i] < 1)
          continue;
        const double t = step_with(s, moved);
        if (t < next_s) {
          next_s = t;
          next   = moved;
        }
      }
    if (next_s >= best_s)
      break;
    best   = next;
    best_s = next_s;
  }
  Scenario out               = s;
  out.parallelism.stage_layers = best;
  return out;
}

} // namespace stepsim

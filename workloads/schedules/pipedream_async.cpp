// PipeDream's asynchronous 1F1B (Narayanan et al., "PipeDream: Generalized Pipeline Parallelism
// for DNN Training", SOSP'19, Figure 8): stage s admits p-s micro-batches, then alternates one
// forward and one backward for ever; there is no flush, so the next step's micro-batches enter
// while this step's last ones are still in flight, and the pipeline never drains in steady state.
// Each stage updates its weights after every backward. A micro-batch's backward must use the
// weights its forward used (weight stashing), so stage s keeps one weight version per micro-batch
// it has in flight: p-s.
#include "workloads/schedules/schedule.hpp"

#include <algorithm>

namespace stepsim {
namespace {

// 1F1B over the whole stream of micro-batches of the lowered steps: the same warm-up, then one
// forward one backward; the drain at the end is the end of the simulation, not of a step.
std::vector<PipeOp> pipedream_order(int stage, const PipelineShape& shape)
{
  return ScheduleRegistry::get("1f1b", "parallelism.schedule").order(stage, shape);
}

// In steady state stage s holds the activations of p-s micro-batches whatever the step's m:
// without a flush, the next step's micro-batches fill the pipeline when this step's run out.
int in_flight(int stage, const PipelineShape& shape)
{
  return shape.stages - stage;
}

const bool registered = ScheduleRegistry::add(
    "pipedream_async",
    "PipeDream's asynchronous 1F1B: no flush, a weight update after every backward, p-s stashed weight versions",
    PipelineSchedule{.order                    = pipedream_order,
                     .textbook_bubble          = [](const PipelineShape&) { return 0.0; }, // steady state
                     .peak_in_flight           = in_flight,
                     .flushes                  = false,
                     .micro_batches_per_update = 1,
                     .weight_versions          = in_flight});

} // namespace
} // namespace stepsim

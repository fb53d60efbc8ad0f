// PipeDream-2BW (Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN Training", ICML'21):
// PipeDream's 1F1B without a flush, but gradients are accumulated over the m micro-batches of a
// step and the weights are updated once per step. A micro-batch in flight across an update uses
// the previous version for its backward, so a stage double-buffers its weights (2 versions: the
// paper's "2BW"); the last stage runs each micro-batch's forward and backward back to back and
// never has one in flight across an update, so it keeps one. Needs m >= p, else a micro-batch
// would outlive two updates (the paper's condition).
#include "workloads/schedules/schedule.hpp"

#include <algorithm>

namespace stepsim {
namespace {

std::vector<PipeOp> two_bw_order(int stage, const PipelineShape& shape)
{
  return ScheduleRegistry::get("1f1b", "parallelism.schedule").order(stage, shape);
}

const bool registered = ScheduleRegistry::add(
    "pipedream_2bw",
    "PipeDream-2BW: 1F1B without a flush, one weight update per m micro-batches, double-buffered weights",
    PipelineSchedule{.order               = two_bw_order,
                     .textbook_bubble     = [](const PipelineShape&) { return 0.0; }, // steady state
                     .peak_in_flight      = [](int stage, const PipelineShape& s) { return s.stages - stage; },
                     .needs_full_pipeline = true,
                     .flushes             = false,
                     .weight_versions     = [](int stage, const PipelineShape& s) {
                       return std::min(2, s.stages - stage);
                     }});

} // namespace
} // namespace stepsim

// GPipe (Huang et al. 2019): every micro-batch forward, then every micro-batch backward.
#include "workloads/schedules/schedule.hpp"

namespace stepsim {
namespace {

std::vector<PipeOp> gpipe_order(int /*stage*/, const PipelineShape& shape)
{
  std::vector<PipeOp> order;
  for (int mb = 0; mb < shape.micro_batches; ++mb)
    order.push_back({PipeOp::Type::F, mb});
  // The last micro-batch forwarded is the first whose gradient comes back.
  for (int mb = shape.micro_batches - 1; mb >= 0; --mb)
    order.push_back({PipeOp::Type::B, mb});
  return order;
}

const bool registered = ScheduleRegistry::add(
    "gpipe", "all forwards, then all backwards; holds every micro-batch's activations",
    PipelineSchedule{gpipe_order,
                     [](const PipelineShape& s) {
                       return double(s.stages - 1) / double(s.micro_batches + s.stages - 1);
                     },
                     [](int, const PipelineShape& s) { return s.micro_batches; }});

} // namespace
} // namespace stepsim

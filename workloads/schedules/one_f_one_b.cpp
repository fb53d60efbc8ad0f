// 1F1B (PipeDream-Flush, Narayanan et al. 2021): stage s warms up with p-s-1 forwards, then
// alternates one forward and one backward, then drains the remaining backwards.
#include "workloads/schedules/schedule.hpp"

#include <algorithm>

namespace stepsim {
namespace {

std::vector<PipeOp> one_f_one_b_order(int stage, const PipelineShape& shape)
{
  const int m      = shape.micro_batches;
  const int warmup = std::min(shape.stages - stage - 1, m);
  std::vector<PipeOp> order;
  for (int mb = 0; mb < warmup; ++mb)
    order.push_back({PipeOp::Type::F, mb});
  for (int i = 0; i < m - warmup; ++i) {
    order.push_back({PipeOp::Type::F, warmup + i});
    order.push_back({PipeOp::Type::B, i});
  }
  for (int mb = m - warmup; mb < m; ++mb)
    order.push_back({PipeOp::Type::B, mb});
  return order;
}

const bool registered = ScheduleRegistry::add(
    "1f1b", "one forward one backward with a flush (PipeDream-Flush, Megatron's default)",
    PipelineSchedule{one_f_one_b_order,
                     [](const PipelineShape& s) {
                       return double(s.stages - 1) / double(s.micro_batches + s.stages - 1);
                     },
                     [](int stage, const PipelineShape& s) { return std::min(s.stages - stage, s.micro_batches); }});

} // namespace
} // namespace stepsim

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): backward is split into the
// input-gradient pass B, which the previous stage waits for, and the weight-gradient pass W,
// which nobody waits for. Forwards and B passes keep 1F1B's order; stage s delays its W passes
// by its warm-up depth p-s-1 so that, in the drain, each W fills the wait for the next B's
// gradient. The last stage runs F B W with no delay.
#include "workloads/schedule.hpp"

#include <algorithm>

namespace stepsim {
namespace {

// 1F1B's order with the W passes put in: after each steady-state B once the warm-up depth is
// reached, and, in the drain, before each B (a stage waits there for the next stage's gradient,
// and a pending W fills the wait).
std::vector<PipeOp> zb_h1_order(int stage, const PipelineShape& shape)
{
  const int m      = shape.micro_batches;
  const int warmup = std::min(shape.stages - stage - 1, m);
  std::vector<PipeOp> order;
  int next_w = 0;
  for (const PipeOp& op : ScheduleRegistry::get("1f1b", "parallelism.schedule").order(stage, shape)) {
    const bool drain = op.type == PipeOp::Type::B && op.micro_batch >= m - warmup;
    if (drain && next_w < op.micro_batch)
      order.push_back({PipeOp::Type::W, next_w++});
    order.push_back(op);
    if (op.type == PipeOp::Type::B && !drain && op.micro_batch >= warmup)
      order.push_back({PipeOp::Type::W, next_w++});
  }
  while (next_w < m)
    order.push_back({PipeOp::Type::W, next_w++});
  return order;
}

const bool registered = ScheduleRegistry::add(
    "zb_h1", "zero-bubble ZB-H1: backward split into input (B) and weight (W) passes, W delayed to fill the drain",
    PipelineSchedule{zb_h1_order,
                     // With tF = tB = tW the bubble is about a third of 1F1B's (the paper's ZB-H1).
                     [](const PipelineShape& s) {
                       double bubble = (s.stages - 1) / 3.0;
                       return bubble / (s.micro_batches + bubble);
                     },
                     // The paper's ZB-H1 keeps 1F1B's peak: a delayed W holds only the inputs its
                     // weight-gradient GEMMs need, which B's freed activations make room for.
                     [](int stage, const PipelineShape& s) { return std::min(s.stages - stage, s.micro_batches); },
                     true, false, false});

} // namespace
} // namespace stepsim

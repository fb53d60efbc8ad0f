// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): backward is split into the
// input-gradient pass B, which the previous stage waits for, and the weight-gradient pass W,
// which nobody waits for. Forwards and B passes keep 1F1B's order. The order of the W passes is
// the one the paper's authors run (sail-sg/zero-bubble-pipeline-parallelism, Megatron's
// schedules.py, commit c5d5074, "delay W by rank"): stage s defers the W of its first s steady
// B passes and of its last one into a queue, runs every other W right after its B (Megatron then
// batches the B's send with the next forward's receive), and pops one deferred W after each
// drain B once s of them are due. What is still queued runs at the end. Stage 0 never defers: it
// has nothing downstream to wait for. The last stage defers most, and its deferred W passes fill
// the tail that 1F1B leaves idle while the gradients travel back up the pipeline.
#include "workloads/schedules/schedule.hpp"

#include <algorithm>
#include <deque>

namespace stepsim {
namespace {

std::vector<PipeOp> zb_h1_order(int stage, const PipelineShape& shape)
{
  using T          = PipeOp::Type;
  const int m      = shape.micro_batches;
  const int warmup = std::min(shape.stages - stage - 1, m);
  const int steady = m - warmup;
  std::vector<PipeOp> order;
  std::deque<int> deferred; // micro-batches whose W waits
  auto pop_w = [&] {
    order.push_back({T::W, deferred.front()});
    deferred.pop_front();
  };

  for (int mb = 0; mb < warmup; ++mb)
    order.push_back({T::F, mb});
  for (int i = 0; i < steady; ++i) {
    const bool last = i == steady - 1;
    order.push_back({T::F, warmup + i});
    order.push_back({T::B, i});
    if (stage > 0 && (i < stage || last))
      deferred.push_back(i);
    else
      order.push_back({T::W, i});
    if (last && stage > 0 && i >= stage)
      pop_w();
  }
  for (int j = 0; j < warmup; ++j) {
    const int mb = steady + j;
    order.push_back({T::B, mb});
    if (stage == 0) {
      order.push_back({T::W, mb});
      continue;
    }
    deferred.push_back(mb);
    if (mb >= stage)
      pop_w();
  }
  while (!deferred.empty())
    pop_w();
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

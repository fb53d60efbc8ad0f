// Interleaved 1F1B (Narayanan et al. SC'21, Megatron's virtual pipeline): each stage holds v model
// chunks; micro-batches move through the chunks in groups of p, which cuts the bubble to
// (p-1)/(v·m+p-1) at the price of v times more point-to-point traffic. The order follows
// Megatron-LM's forward_backward_pipelining_with_interleaving.
#include "workloads/schedules/schedule.hpp"

#include <algorithm>
#include <cmath>

namespace stepsim {
namespace {

PipeOp micro_step(int k, bool forward, const PipelineShape& s)
{
  const int group = s.stages * s.virtual_stages;
  int chunk       = (k % group) / s.stages;
  if (!forward)
    chunk = s.virtual_stages - 1 - chunk;
  int micro_batch = (k / group) * s.stages + k % s.stages;
  return {forward ? PipeOp::Type::F : PipeOp::Type::B, micro_batch, chunk};
}

int warmup_steps(int stage, const PipelineShape& s)
{
  const int total = s.micro_batches * s.virtual_stages;
  return std::min(total, (s.stages - stage - 1) * 2 + (s.virtual_stages - 1) * s.stages);
}

std::vector<PipeOp> interleaved_order(int stage, const PipelineShape& s)
{
  const int total  = s.micro_batches * s.virtual_stages;
  const int warmup = warmup_steps(stage, s);
  std::vector<PipeOp> order;
  for (int k = 0; k < warmup; ++k)
    order.push_back(micro_step(k, true, s));
  for (int i = 0; i < total - warmup; ++i) {
    order.push_back(micro_step(warmup + i, true, s));
    order.push_back(micro_step(i, false, s));
  }
  for (int k = total - warmup; k < total; ++k)
    order.push_back(micro_step(k, false, s));
  return order;
}

const bool registered = ScheduleRegistry::add(
    "interleaved_1f1b", "1F1B over virtual_stages model chunks per stage (Megatron's interleaved schedule)",
    PipelineSchedule{interleaved_order,
                     [](const PipelineShape& s) {
                       return double(s.stages - 1) / double(s.virtual_stages * s.micro_batches + s.stages - 1);
                     },
                     // Megatron's warm-up chunks plus the first steady-state forward (all of
                     // them when the warm-up is the whole step), in whole-stage micro-batches:
                     // stage 0 holds p + (p-1)/v (Narayanan et al. SC'21, section 2.2.2).
                     [](int stage, const PipelineShape& s) {
                       const int chunks = std::min(warmup_steps(stage, s) + 1, s.micro_batches * s.virtual_stages);
                       return static_cast<int>(std::ceil(double(chunks) / s.virtual_stages));
                     },
                     false, true, true});

} // namespace
} // namespace stepsim

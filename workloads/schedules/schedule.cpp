#include "workloads/schedules/schedule.hpp"
#include "sim/core/scenario_check.hpp"

#include <fmt/format.h>

#include <set>
#include <tuple>

namespace stepsim {

std::string check_order(const std::vector<PipeOp>& order, const PipelineShape& shape, bool splits_backward)
{
  std::set<std::tuple<int, int, int>> seen;
  for (const auto& op : order) {
    if (!seen.insert({static_cast<int>(op.type), op.micro_batch, op.chunk}).second)
      return fmt::format("pass {} of micro-batch {} chunk {} appears twice", static_cast<int>(op.type), op.micro_batch,
                         op.chunk);
  }
  size_t expected = static_cast<size_t>(shape.micro_batches) * shape.virtual_stages * (splits_backward ? 3 : 2);
  if (seen.size() != expected)
    return fmt::format("{} passes, expected {}", seen.size(), expected);
  return "";
}

namespace {

// The schedule exists and the plan gives it what it needs (stages, chunks, micro-batches).
void check_schedule(const Scenario& s)
{
  const auto& schedule = ScheduleRegistry::get(s.parallelism.schedule, "parallelism.schedule");
  if (schedule.needs_virtual_stages && s.parallelism.pipeline < 2)
    throw InputError({fmt::format("parallelism.pipeline: schedule \"{}\" needs at least 2 stages, got {}",
                                  s.parallelism.schedule, s.parallelism.pipeline)});
  if (schedule.needs_virtual_stages && s.parallelism.virtual_stages < 2)
    throw InputError({fmt::format("parallelism.virtual_stages: schedule \"{}\" needs virtual_stages >= 2, got {}",
                                  s.parallelism.schedule, s.parallelism.virtual_stages)});
  if (schedule.needs_whole_groups && s.micro_batches_per_replica() % s.parallelism.pipeline != 0)
    throw InputError({fmt::format("training.global_batch_size: schedule \"{}\" needs micro-batches per replica ({}) "
                                  "to be a multiple of pipeline {}",
                                  s.parallelism.schedule, s.micro_batches_per_replica(), s.parallelism.pipeline)});
  if (schedule.needs_full_pipeline && s.micro_batches_per_replica() < s.parallelism.pipeline)
    throw InputError({fmt::format("training.global_batch_size: schedule \"{}\" needs at least as many micro-batches "
                                  "per replica ({}) as pipeline stages ({})",
                                  s.parallelism.schedule, s.micro_batches_per_replica(), s.parallelism.pipeline)});
  if (!schedule.needs_virtual_stages && s.parallelism.virtual_stages > 1)
    throw InputError({fmt::format("parallelism.virtual_stages: {} chunks need an interleaved schedule, not \"{}\"",
                                  s.parallelism.virtual_stages, s.parallelism.schedule)});
}

const bool checked = ScenarioCheckRegistry::add("schedule", "the pipeline schedule exists and fits the plan",
                                                ScenarioCheck{check_schedule});

} // namespace

} // namespace stepsim

#include "workloads/schedules/schedule.hpp"

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

} // namespace stepsim

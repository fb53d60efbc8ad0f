#include "workloads/stage_memory.hpp"

#include "workloads/models/model_kind.hpp"

namespace stepsim {

double stage_parameters(const Scenario& s, int stage)
{
  return model_kind(s.model).stage_parameters(s, stage);
}

MemoryBreakdown stage_memory(const Scenario& s, int stage, int micro_batches_in_flight, int weight_versions)
{
  return zero_memory(s, model_kind(s.model).footprint(s, stage, micro_batches_in_flight), weight_versions);
}

} // namespace stepsim

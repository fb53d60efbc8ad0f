// Memory per rank of a pipeline stage: what the model's kind keeps there (its footprint,
// workloads/models/model_kind.hpp) under the ZeRO, FSDP and offload arithmetic of
// models/memory.hpp.
#pragma once

#include "models/memory.hpp"
#include "sim/core/report.hpp"
#include "sim/core/scenario.hpp"

namespace stepsim {

// Parameters held by one rank of a pipeline stage (before ZeRO sharding).
double stage_parameters(const Scenario& s, int stage);
// `weight_versions`: copies of the stage's weights kept at once (PipeDream's weight stashing).
MemoryBreakdown stage_memory(const Scenario& s, int stage, int micro_batches_in_flight, int weight_versions = 1);

} // namespace stepsim

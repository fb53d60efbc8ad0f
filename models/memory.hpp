// Memory per rank: weights, gradients and optimizer states as the ZeRO paper counts them
// (2Ψ + 2Ψ + 12Ψ bytes for mixed-precision Adam, divided by the data-parallel degree from the
// stage that shards each), and activations per layer per micro-batch from Korthikanti et al. 2022
// (sbh(34 + 5as/h), split by tensor and sequence parallelism, less under recompute), times the
// micro-batches the schedule keeps in flight.
#pragma once

#include "sim/core/report.hpp"
#include "sim/core/scenario.hpp"

namespace stepsim {

// Activation bytes of one transformer layer for one micro-batch on one tensor-parallel rank.
double layer_activation_bytes(const Scenario& s);
// Parameters held by one rank of a pipeline stage (before ZeRO sharding).
double stage_parameters(const Scenario& s, int stage);
// `weight_versions`: copies of the stage's weights kept at once (PipeDream's weight stashing).
MemoryBreakdown stage_memory(const Scenario& s, int stage, int micro_batches_in_flight, int weight_versions = 1);

} // namespace stepsim

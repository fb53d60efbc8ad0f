// Memory per rank: weights, gradients and optimizer states as the ZeRO paper counts them
// (2Ψ + 2Ψ + 12Ψ bytes for mixed-precision Adam, divided by the data-parallel degree from the
// stage that shards each), what ZeRO-3/FSDP gathers and ZeRO-Offload moves to the host, over the
// footprint a model kind gives for one rank of a stage (workloads/models/model_kind.hpp; its
// activations follow Korthikanti et al. 2022 for transformers). workloads/stage_memory.hpp puts
// the two together.
#pragma once

#include "sim/core/report.hpp"
#include "sim/core/scenario.hpp"

namespace stepsim {

// What one rank of a pipeline stage holds of the model, before ZeRO shards it.
struct ModelFootprint {
  double parameters = 0;        // held by one rank of the stage (experts included)
  double expert_parameters = 0; // of which a MoE's experts, sharded over their own group
  double largest_unit = 0;      // parameters of the largest unit ZeRO-3 gathers at once
  double largest_tensor = 0;    // of its largest tensor, for a framework that gathers tensor by tensor (0: unknown)
  double activations = 0;       // bytes kept for the micro-batches in flight
  double element_bytes = 2;     // weights and gradients, per parameter
  double optimizer_bytes_per_parameter = 12; // master weights and optimizer states
};

// `weight_versions`: copies of the stage's weights kept at once (PipeDream's weight stashing).
MemoryBreakdown zero_memory(const Scenario& s, const ModelFootprint& f, int weight_versions);

} // namespace stepsim

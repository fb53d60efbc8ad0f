// Lowers a scenario (model × parallel plan × pipeline schedule) into the task graphs of the ranks
// to simulate. Reduced fidelity lowers one representative rank per pipeline stage (tensor,
// context and data index 0); full fidelity lowers every rank. Durations are not set here.
#pragma once

#include "sim/core/scenario.hpp"
#include "sim/core/task_graph.hpp"

namespace stepsim {

Workload lower(const Scenario& s);
// The task graph of one rank only (0 <= rank < GPUs), whatever the fidelity: for `stepsim graph`.
Workload lower_one_rank(const Scenario& s, int rank);

// Model FLOPs of one step (no recompute), Megatron's accounting: attention scores over the whole
// sequence, backward twice the forward.
double model_flops_per_step(const Scenario& s);
// FLOPs the hardware runs in one step, recompute included.
double hardware_flops_per_step(const Scenario& s);

// Whether one GPU's flows may take bandwidth from another's on a link neither owns alone, so that a
// reduced replay must look for shadows (Workload::peers_may_contend; sim/engine/shadows.hpp).
bool peers_may_contend(const PlatformSpec& p);

} // namespace stepsim

// The planner: for a model, a platform and a global batch, every parallel configuration a
// Megatron-style job could run (tensor, pipeline and data degrees, virtual stages, micro-batch
// size, schedule, ZeRO stage, recompute), those that do not divide or do not fit dropped, the
// rest ranked first by a closed-form estimate and then by simulating the most promising ones.
//
// The estimate only orders candidates; every figure the planner prints comes from a simulation.
// With simulate = 0 every valid candidate is simulated, which is how the pruning is checked.
#pragma once

#include "sim/core/report.hpp"
#include "sim/core/scenario.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace stepsim {

struct PlanCandidate {
  nlohmann::json settings;  // {JSON path: value} applied to the base scenario
  double estimate_s = 0;    // closed-form step time, for ordering
  bool simulated    = false;
  Report report;            // when simulated
};

struct PlanResult {
  size_t enumerated = 0, invalid = 0, too_big = 0, failed = 0;
  std::string first_failure; // why the first failed simulation failed
  std::vector<PlanCandidate> candidates; // valid ones; simulated first, by tokens/s, then by estimate
};

struct PlanOptions {
  int gpus     = 0;  // 0: the platform's GPU count
  int simulate = 32; // how many of the best-estimated candidates to simulate; 0: all
  int jobs     = 1;
  bool quiet   = false;
};

// `base` is a scenario document; `base_dir` resolves paths inside it.
PlanResult plan(const nlohmann::json& base, const std::string& base_dir, const PlanOptions& options);

// Closed-form step time of a valid scenario: compute per micro-batch and stage from the cost
// model, tensor-parallel all-reduces at the node's link speed, the schedule's bubble, and the
// data-parallel gradient reduction at the NIC speed.
double estimate_step_seconds(const Scenario& s);

} // namespace stepsim

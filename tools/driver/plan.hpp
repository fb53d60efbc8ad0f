// The planner: for a model, a platform and a global batch, every parallel configuration a
// Megatron-style job could run (tensor, context (ring attention, and Ulysses or USP where the heads
// divide), expert, pipeline and data degrees, virtual
// stages, micro-batch size, every registered schedule, ZeRO stage, recompute), those that do not
// divide or do not fit dropped, the rest ranked first by a closed-form estimate and then by
// simulating the most promising ones. The platform may hold several node groups (mixed GPU
// types); the stages go to the groups as the scenario's rank order places them.
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

struct JobPlan;

struct PlanCandidate {
  nlohmann::json settings;  // {JSON path: value} applied to the base scenario
  double estimate_s = 0;    // closed-form step time, for ordering
  bool simulated    = false;
  Report report;            // when simulated
  double cost_per_token = 0; // with a price: what the GPUs cost per token at the simulated throughput
};

// What ranks the simulated candidates (plan --objective).
enum class PlanObjective { Throughput, Cost, Energy };

struct PlanResult {
  size_t enumerated = 0, invalid = 0, too_big = 0, failed = 0;
  std::string first_failure; // why the first failed simulation failed
  std::vector<PlanCandidate> candidates; // valid ones; simulated first, by the objective, then by estimate
  // When nothing fits: the configuration that came closest, its need and what the GPU allows.
  nlohmann::json closest_settings;
  double closest_need_bytes = 0, closest_capacity_bytes = 0;
  int gpus                  = 0;
};

struct PlanOptions {
  int gpus     = 0;  // 0: the platform's GPU count
  int simulate = 32; // how many of the best-estimated candidates to simulate; 0: all
  int jobs     = 1;
  bool quiet   = false;
  // Memory kept free on every GPU beyond the framework profile's reserve (its CUDA context):
  // allocator fragmentation, workspaces the model does not count.
  double headroom_bytes = 0;
  PlanObjective objective = PlanObjective::Throughput;
  double price_per_gpu_hour = 0;         // 0: each node group's platform.node_groups[].price_per_gpu_hour
  std::vector<std::string> schedules;    // empty: every registered schedule
};

// `base` is a scenario document; `base_dir` resolves paths inside it.
PlanResult plan(const nlohmann::json& base, const std::string& base_dir, const PlanOptions& options);

// The base scenario with a candidate's settings applied: what `plan --write-best` writes. Fields
// of the base that the candidate's layout does not take are dropped: a tensor-parallel overlap
// where tensor is 1, the layers a full recompute rebuilds where it recomputes none or selectively.
nlohmann::json with_settings(const nlohmann::json& base, const nlohmann::json& settings);

// Closed-form step time of a valid scenario: compute per micro-batch on each stage's device from
// the cost model (context-parallel attention over its ring of blocks, Ulysses' all-to-alls at the
// link speed of its group), tensor-parallel
// all-reduces at the stage's node link speed, the schedule's own textbook bubble, pipeline
// activations and the data-parallel gradient reduction at the NIC speed.
double estimate_step_seconds(const Scenario& s, const JobPlan& job);
double estimate_step_seconds(const Scenario& s);

} // namespace stepsim

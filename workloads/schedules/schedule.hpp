// A pipeline schedule: the order in which one stage runs the forward (F), backward (B) and,
// where the schedule splits backward, weight-gradient (W) passes of its micro-batches.
//
// Contract: for every stage, order() lists each (pass, micro-batch, chunk) exactly once; an F of
// chunk c comes after the F of chunk c-1 of the same micro-batch on the same stage; the orders of
// all stages together must be runnable (no stage waits for a pass that waits on it). Chunks exist
// only for interleaved schedules (virtual stages); the others use chunk 0.
#pragma once

#include "sim/core/registry.hpp"

#include <functional>
#include <string>
#include <vector>

namespace stepsim {

struct PipeOp {
  enum class Type { F, B, W };
  Type type;
  int micro_batch;
  int chunk = 0;
  bool operator==(const PipeOp&) const = default;
};

struct PipelineShape {
  int stages         = 1;
  int micro_batches  = 1;
  int virtual_stages = 1;
};

struct PipelineSchedule {
  std::function<std::vector<PipeOp>(int stage, const PipelineShape&)> order;
  // The schedule's bubble fraction with uniform stages and free communication.
  std::function<double(const PipelineShape&)> textbook_bubble;
  // Micro-batches whose activations a stage holds at its peak.
  std::function<int(int stage, const PipelineShape&)> peak_in_flight;
  bool splits_backward      = false; // B is input-gradient only; W passes come separately
  bool needs_virtual_stages = false;
  bool needs_whole_groups   = false; // micro-batches must be a multiple of the stages
  bool needs_full_pipeline  = false; // micro-batches per step must be at least the stages
  // false: no pipeline flush between steps (PipeDream): the next step's micro-batches enter
  // while this step's last ones are still in flight. order() then runs over the micro-batches of
  // several consecutive steps (shape.micro_batches = steps × m, numbered across steps), and the
  // lowering measures one step in steady state (Workload::steps).
  bool flushes = true;
  // Micro-batches per weight update: 0 = one update per step (gradients accumulated over the
  // step's m micro-batches); 1 = an update after every micro-batch's backward (PipeDream).
  int micro_batches_per_update = 0;
  // Weight versions a stage keeps at once (PipeDream's weight stashing); null = 1. The memory
  // model counts each version's weights.
  std::function<int(int stage, const PipelineShape&)> weight_versions = nullptr;
};

using ScheduleRegistry = Registry<PipelineSchedule>;

// Checks an order against the contract above (used by tests and by the lowering).
std::string check_order(const std::vector<PipeOp>& order, const PipelineShape& shape, bool splits_backward);

} // namespace stepsim

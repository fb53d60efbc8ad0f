// Where each rank of a job runs when the cluster mixes GPU types (several platform.node_groups),
// and how layers are spread over pipeline stages of unequal speed.
//
// Ranks are numbered as the parallel plan lays them out (parallelism.rank_order; by default tensor
// innermost, pipeline outermost), GPUs as the platform lists them (node group by node group, node
// by node). Without a placement, rank r runs on GPU r, so with pipeline outermost the first stages
// land on the first group. `platform.placement.stages` names the node group of each pipeline stage
// instead; the stage's ranks then take that group's next free GPUs in rank order.
#pragma once

#include "models/device.hpp"
#include "sim/core/scenario.hpp"

#include <string>
#include <vector>

namespace stepsim {

struct Placement {
  std::vector<int> gpu_of_rank;   // index into the platform's GPUs
  std::vector<int> group_of_rank; // index into platform.node_groups
  std::vector<int> group_of_stage; // the node group of each pipeline stage; -1 where a stage spans several
  std::vector<int> stage_of_rank;  // the pipeline stage of each rank under parallelism.rank_order
};

Placement place_ranks(const Scenario& s);

// The device of every node group, in platform order (each file read once).
std::vector<Device> group_devices(const Scenario& s);

// The device a stage runs at the pace of: its group's, or, for a stage spread over several
// groups, the slowest of them at the training precision.
const Device& stage_device(const Scenario& s, const Placement& p, const std::vector<Device>& devices, int stage);

// "GPU-A" or "GPU-A + GPU-B" (the distinct types in group order), for reports.
std::string device_names_of(const std::vector<Device>& devices);

// parallelism.stage_layers "auto": gives each pipeline stage layers in proportion to its device's
// speed, as heterogeneous-cluster planners do. The layers go one by one to the stage whose
// forward + backward time per micro-batch (embedding and head included) stays smallest, among the
// stages where one more layer still fits in the device's memory; that greedy is optimal for the
// largest stage time, which sets a pipeline's steady-state pace. A stage's layers are spread
// evenly over its chunks. Fills parallelism.stage_layers; does nothing without "auto".
void balance_stage_layers(Scenario& s);

} // namespace stepsim

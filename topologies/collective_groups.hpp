// The platform facts that collective algorithms need (models/collectives/collective.hpp GroupShape), put on
// a workload's groups, and the check that the scenario's algorithm can run each collective.
#pragma once

#include "models/collectives/collective.hpp"
#include "sim/core/scenario.hpp"
#include "sim/core/task_graph.hpp"

#include <vector>

namespace stepsim {

// Node index of every GPU of the platform (nodes numbered in node-group order).
std::vector<int> node_of_gpu(const PlatformSpec& platform);

// True when the nodes of this group have an NVSwitch that reduces in the switch (NVLS): an
// NVSwitch-class node type and a device whose catalogue entry says "nvls": true.
bool in_switch_reduction(const NodeGroupSpec& group);

// Fills each group's node_of_member, in_switch_reduction (every member's node reduces in its
// NVSwitch), in_network_reduction (platform.network.sharp, members on several nodes) and
// channels (simulation.nccl_channels). `gpu_of_rank` maps ranks to platform GPUs; empty = rank g
// runs on GPU g.
void describe_groups(Workload& w, const PlatformSpec& platform, const std::vector<int>& gpu_of_rank, int channels);

// The scenario's algorithm: simulation.collective_algorithm, a name or one per collective type.
CollectiveAlgorithm scenario_collective_algorithm(const SimulationSpec& s);

// Throws InputError naming simulation.collective_algorithm (or its per-type entry) when the
// algorithm cannot run a collective of the workload on its group.
void check_collectives(const Workload& w, const SimulationSpec& s, const CollectiveAlgorithm& algorithm);

} // namespace stepsim

// A compute cost model: the seconds one kernel takes on one device. Pure functions, registered
// by name ("kernel", "roofline"); the scenario picks one with simulation.compute_model.
#pragma once

#include "models/device.hpp"
#include "sim/core/kernel.hpp"
#include "sim/core/registry.hpp"
#include "sim/core/task_graph.hpp"

#include <functional>

namespace stepsim {

struct ComputeModel {
  std::function<double(const Kernel&, const Device&, const std::string& precision)> kernel_seconds;
};

using ComputeModelRegistry = Registry<ComputeModel>;

// Puts seconds on every work of the workload: the sum of its kernels' times.
void assign_work_seconds(Workload& workload, const Device& device, const ComputeModel& model,
                         const std::string& precision);
// The same where the simulated ranks run on different devices (mixed node groups):
// `device_of_program[i]` is the device of workload.ranks[i]. A work used on several devices is
// copied once per further device, and those ranks' compute tasks point at their copy.
void assign_work_seconds(Workload& workload, const std::vector<const Device*>& device_of_program,
                         const ComputeModel& model, const std::string& precision);

} // namespace stepsim

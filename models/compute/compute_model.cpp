#include "models/compute/compute_model.hpp"
#include "sim/core/scenario_check.hpp"

#include <boost/range/iterator_range.hpp>

#include <map>

namespace stepsim {

namespace {

// Work on the node's CPU (ZeRO-Offload's optimizer) streams its bytes at the CPU's memory
// bandwidth; everything else runs on the GPU under the chosen model.
double work_seconds(const Work& work, const Device& device, const ComputeModel& model, const std::string& precision)
{
  double seconds = 0;
  for (const auto& k : work.kernels)
    seconds += work.host_memory_Bps > 0 ? k.bytes / work.host_memory_Bps
                                        : model.kernel_seconds(k, device, k.precision.empty() ? precision : k.precision);
  return seconds;
}

// The host issues each launch of the work's GPU kernels; work on the CPU issues none.
double host_seconds(const Work& work, const Device& device)
{
  if (work.host_memory_Bps > 0 || device.calibration.host_launch_s <= 0)
    return 0;
  double launches = 0;
  for (const auto& k : work.kernels)
    launches += k.launches;
  return launches * device.calibration.host_launch_s;
}

void time_work(Work& work, const Device& device, const ComputeModel& model, const std::string& precision)
{
  work.seconds      = work_seconds(work, device, model, precision);
  work.host_seconds = host_seconds(work, device);
}

} // namespace

void assign_work_seconds(Workload& workload, const Device& device, const ComputeModel& model,
                         const std::string& precision)
{
  for (auto& work : workload.works)
    time_work(work, device, model, precision);
}

void assign_work_seconds(Workload& workload, const std::vector<const Device*>& device_of_program,
                         const ComputeModel& model, const std::string& precision)
{
  const size_t shared = workload.works.size();
  if (device_of_program.empty())
    return;
  const Device* first = device_of_program.front();
  assign_work_seconds(workload, *first, model, precision);
  std::map<std::string, size_t> copies; // device name -> index of its first copied work
  for (size_t i = 0; i < workload.ranks.size(); ++i) {
    const Device* device = device_of_program.at(i);
    if (device->name == first->name)
      continue;
    auto [it, added] = copies.emplace(device->name, workload.works.size());
    if (added)
      for (size_t w = 0; w < shared; ++w) {
        Work copy = workload.works[w];
        time_work(copy, *device, model, precision);
        workload.works.push_back(std::move(copy));
      }
    auto& graph = workload.ranks[i].graph;
    for (auto v : boost::make_iterator_range(boost::vertices(graph)))
      if (graph[v].kind == TaskKind::Compute && graph[v].work >= 0 && static_cast<size_t>(graph[v].work) < shared)
        graph[v].work += static_cast<int>(it->second);
  }
}

namespace {

const bool checked = ScenarioCheckRegistry::add(
    "compute_model", "the compute model exists", ScenarioCheck{[](const Scenario& s) {
      ComputeModelRegistry::get(s.simulation.compute_model, "simulation.compute_model");
    }});

} // namespace

} // namespace stepsim

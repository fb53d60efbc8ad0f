// The first stage of the road: where ranks run, on what, and the figures no simulation needs.
#include "sim/federated.hpp"
#include "sim/simulate.hpp"
#include "sim/stages.hpp"

#include "workloads/lower.hpp"
#include "workloads/models/model_kind.hpp"
#include "workloads/schedules/schedule.hpp"
#include "workloads/stage_memory.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace stepsim {

namespace {

// Returns the stage with the least room left in its device's memory (the one whose breakdown
// the report keeps).
int fill_analytic(const Scenario& s, const Placement& placement, const std::vector<Device>& devices, Report& r)
{
  const auto& shape_schedule = ScheduleRegistry::get(s.parallelism.schedule, "parallelism.schedule");
  PipelineShape shape{s.parallelism.pipeline, static_cast<int>(s.micro_batches_per_replica()),
                      s.parallelism.virtual_stages};
  r.name                  = s.name;
  r.gpus                  = s.platform.total_gpus();
  r.device                = device_names_of(devices);
  r.schedule              = s.parallelism.schedule;
  r.framework             = s.training.framework + (s.training.compile ? " (torch.compile)" : "");
  // What the job may use of each device: its memory less what the framework's process holds
  // beside the model (the CUDA context; sim/core/framework.hpp).
  const FrameworkProfile& framework = FrameworkRegistry::get(s.training.framework, "training.framework");
  auto usable = [&](const Device& d) { return usable_memory_bytes(d.memory_bytes, framework); };
  r.fidelity              = s.simulation.fidelity;
  r.micro_batches         = shape.micro_batches;
  r.model_flops_per_step  = model_flops_per_step(s);
  const ParameterCounts counts = model_kind(s.model).parameter_counts(s);
  r.parameters            = counts.total;
  r.active_parameters     = counts.active;
  r.stages.clear();
  r.fits_in_memory = true;
  double tightest  = -1; // the stage closest to (or furthest over) its device's capacity
  int tightest_stage = 0;
  for (int stage = 0; stage < s.parallelism.pipeline; ++stage) {
    StageReport st;
    st.stage                    = stage;
    st.textbook_bubble_fraction = shape_schedule.textbook_bubble(shape);
    MemoryBreakdown m           = stage_memory(s, stage, shape_schedule.peak_in_flight(stage, shape),
                                               shape_schedule.weight_versions ? shape_schedule.weight_versions(stage, shape) : 1);
    const Device& device        = stage_device(s, placement, devices, stage);
    st.memory_bytes             = m.total();
    st.device                   = device.name;
    st.layers                   = model_kind(s.model).reported_layers(s, stage);
    const double capacity       = usable(device);
    r.fits_in_memory            = r.fits_in_memory && m.total() <= capacity;
    if (m.total() / capacity >= tightest) {
      tightest                = m.total() / capacity;
      tightest_stage          = stage;
      r.memory_peak_bytes     = m.total();
      r.memory_capacity_bytes = capacity;
      r.memory_peak_stage     = stage;
      r.memory_peak_device    = device.name;
      r.memory                = m;
    }
    r.stages.push_back(st);
  }
  return tightest_stage;
}

} // namespace

JobPlan plan_job(const Scenario& s)
{
  JobPlan job;
  job.placement      = place_ranks(s);
  job.devices        = group_devices(s);
  job.tightest_stage = fill_analytic(s, job.placement, job.devices, job.analytic);
  return job;
}

std::string memory_problem(const JobPlan& job)
{
  const Report& r = job.analytic;
  if (r.fits_in_memory)
    return "";
  const int stage = job.tightest_stage;
  const int group = std::max(0, job.placement.group_of_stage[static_cast<size_t>(stage)]);
  constexpr double GiB = 1024.0 * 1024 * 1024;
  const auto& m        = r.memory;
  return fmt::format("platform.node_groups[{}].gpu: does not fit in memory: pipeline stage {} needs {:.2f} GiB per GPU "
                     "(weights {:.2f}, gradients {:.2f}, optimizer {:.2f}, activations {:.2f}, buffers {:.2f} GiB) "
                     "but {} has {:.2f} GiB for it (its memory less the {} profile's CUDA context)",
                     group, stage, r.memory_peak_bytes / GiB, m.weights / GiB, m.gradients / GiB, m.optimizer / GiB,
                     m.activations / GiB, m.buffers / GiB, r.stages[static_cast<size_t>(stage)].device,
                     r.memory_capacity_bytes / GiB, r.framework);
}

Report analytic_report(const Scenario& s)
{
  return plan_job(s).analytic;
}

std::string memory_problem(const Scenario& s)
{
  if (s.training.federated.enabled) // no platform of its own: each client device's local step
    return federated_memory_problem(s);
  return memory_problem(plan_job(s));
}

} // namespace stepsim

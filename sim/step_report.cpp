// The last stage of the road: the report's figures from what the replay measured (the metric
// definitions of the design notes: per stage, the simulated rank with the most exposed
// communication; throughput, MFU, energy).
#include "sim/stages.hpp"

#include "workloads/lower.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace stepsim {

Report step_report(const Scenario& s, const JobPlan& job, const Workload& workload, const StepReplay& step,
                   int link_count)
{
  Report r      = job.analytic;
  // The train loop's host time between steps (DeviceCalibration::step_host_s) is added to the
  // replayed step: every GPU idles while it runs, and the slowest host holds back the others at
  // the step's first collective. It is not a pipeline bubble, so the bubbles are measured on the
  // replayed step.
  for (size_t rank = 0; rank < job.placement.group_of_rank.size(); ++rank)
    r.step_host_s = std::max(r.step_host_s, job.device_of_rank(static_cast<int>(rank)).calibration.step_host_s);
  r.step_time_s = step.step_time_s + r.step_host_s;
  r.simulated_ranks = static_cast<long long>(workload.ranks.size());
  r.activities      = step.result.activities;
  if (!step.full_fidelity_reason.empty()) {
    r.fidelity             = "full";
    r.full_fidelity_reason = step.full_fidelity_reason;
  }
  r.shadows         = {step.result.shadows.short_changed_links, step.result.shadows.groups,
                       step.result.shadows.transfers, step.result.shadows.flows, workload.copies_left_out};
  for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::ReduceScatter,
                          CollectiveOp::AllToAll, CollectiveOp::Broadcast, CollectiveOp::Reduce}) {
    auto it = step.result.collective_algorithms.find(collective_name(op));
    r.collective_algorithms[collective_name(op)] = it == step.result.collective_algorithms.end() ? "" : it->second;
  }
  r.network_fidelity = s.simulation.network_fidelity;
  for (const auto& program : workload.ranks)
    r.comm_compute_interference = std::max(r.comm_compute_interference, program.comm_compute_interference);
  for (size_t i = 0; i < step.result.links.size() && i < static_cast<size_t>(std::max(0, link_count)); ++i)
    r.links.push_back(LinkReport{step.result.links[i].name, step.result.links[i].bytes, step.result.links[i].busy_s,
                                 step.result.links[i].busy_s / r.step_time_s});
  const bool what_if = !s.simulation.stragglers.empty() || s.simulation.jitter_sigma > 0;
  for (const auto& w : step.result.waits)
    if (what_if || link_count > 0)
      r.waits.push_back(WaitReport{w.rank, w.peer, w.group >= 0 ? workload.groups[static_cast<size_t>(w.group)].name : "",
                                   w.seconds});

  // Per stage: the simulated rank of that stage with the most exposed communication.
  std::vector<bool> seen(r.stages.size(), false);
  for (size_t i = 0; i < workload.ranks.size(); ++i) {
    RankMetrics m   = rank_metrics(workload.ranks[i], step.result.ranks[i], step.windows[i]);
    StageReport& st = r.stages[static_cast<size_t>(workload.ranks[i].stage)];
    if (seen[static_cast<size_t>(st.stage)] && m.exposed_comm_s <= st.exposed_comm_s)
      continue;
    seen[static_cast<size_t>(st.stage)] = true;
    st.rank            = workload.ranks[i].rank;
    st.compute_s       = m.compute_s;
    st.comm_s          = m.comm_s;
    st.exposed_comm_s  = m.exposed_comm_s;
    st.host_wait_s     = m.host_wait_s;
    st.bubble_s        = std::max(0.0, step.step_time_s - m.busy_s);
    st.bubble_fraction = st.bubble_s / r.step_time_s;
  }
  for (const auto& st : r.stages) {
    r.bubble_fraction = std::max(r.bubble_fraction, st.bubble_fraction);
    if (st.exposed_comm_s >= r.exposed_comm_s && st.comm_s > 0) {
      r.exposed_comm_s = st.exposed_comm_s;
      r.comm_s         = st.comm_s;
    }
  }
  r.overlap = r.comm_s > 0 ? 1.0 - r.exposed_comm_s / r.comm_s : 1.0;

  const double gpus          = r.gpus;
  r.samples_per_s            = double(s.training.global_batch_size) / r.step_time_s;
  r.tokens_per_s             = r.samples_per_s * s.model.seq_length;
  r.model_tflops_per_gpu     = r.model_flops_per_step / r.step_time_s / gpus / 1e12;
  r.hardware_tflops_per_gpu  = hardware_flops_per_step(s) / r.step_time_s / gpus / 1e12;
  // Over the peak of the GPUs used: with mixed types, their mean peak.
  double peak_sum = 0;
  for (size_t rank = 0; rank < job.placement.group_of_rank.size(); ++rank)
    peak_sum += job.device_of_rank(static_cast<int>(rank)).peak(s.training.precision);
  const double peak = peak_sum / gpus;
  r.mfu             = r.model_tflops_per_gpu * 1e12 / peak;
  r.hfu             = r.hardware_tflops_per_gpu * 1e12 / peak;
  // Every GPU of a stage behaves like the stage's reported rank (the stages are its
  // representatives), at its own device's power.
  for (size_t rank = 0; rank < job.placement.group_of_rank.size(); ++rank) {
    const StageReport& st = r.stages[static_cast<size_t>(job.placement.stage_of_rank[rank])];
    const Device& device  = job.device_of_rank(static_cast<int>(rank));
    // The GPU waiting for its host idles.
    const double working = st.compute_s - st.host_wait_s;
    r.energy_j_per_step += working * device.tdp_w + (r.step_time_s - working) * device.idle_w;
  }
  const double tokens   = r.tokens_per_s * r.step_time_s; // none for a CNN, which has images
  r.energy_j_per_token  = tokens > 0 ? r.energy_j_per_step / tokens : 0;
  // A report never carries a NaN or an infinity: that would be a wrong answer, not a figure.
  for (double figure : {r.samples_per_s, r.tokens_per_s, r.model_tflops_per_gpu, r.hardware_tflops_per_gpu, r.mfu,
                        r.hfu, r.bubble_fraction, r.comm_s, r.exposed_comm_s, r.overlap, r.energy_j_per_step,
                        r.energy_j_per_token, r.memory_peak_bytes})
    if (!std::isfinite(figure))
      throw std::runtime_error(fmt::format("the simulation of {} produced a non-finite figure", s.name));
  return r;
}

} // namespace stepsim

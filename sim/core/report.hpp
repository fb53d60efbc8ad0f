// The report of one simulated step: the contract of the design notes (top-level keys are fixed;
// fields may be added). Plain data; to_json and to_table render it.
#pragma once

#include "sim/core/federated_report.hpp"
#include "sim/core/host_side_report.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace stepsim {

struct StageReport {
  int stage = 0;
  int rank  = 0;           // the rank whose timeline this is
  double compute_s = 0;    // union of compute-stream intervals
  double comm_s    = 0;    // union of communication-stream intervals
  double exposed_comm_s = 0;
  // Of compute_s, the time the GPU waited for the host to issue its kernels (the device
  // calibration's host_launch_overhead, sim/engine/compute.cpp); 0 where the host keeps ahead.
  double host_wait_s = 0;
  double bubble_s  = 0;    // neither computing nor communicating
  double bubble_fraction = 0;
  double textbook_bubble_fraction = 0;
  double memory_bytes = 0;
  std::string device;      // the GPU type the stage runs on (node groups may differ)
  int layers = 0;          // transformer layers on the stage, over its chunks (0 for a CNN)
};

// Traffic of one SimGrid link over the step (`stepsim run --links`): the bytes the simulated
// transfers put on it and the time it carried at least one of them.
struct LinkReport {
  std::string name;
  double bytes  = 0;
  double busy_s = 0;
  double busy_fraction = 0; // of the step time
};

// Time a simulated rank spent waiting for a peer: a receive posted before the matching send, or a
// collective posted before its last member (the peer) posted it.
struct WaitReport {
  int rank = 0;
  int peer = 0;
  std::string group; // the communicator's name for a collective, "" for point to point
  double seconds = 0;
};

struct MemoryBreakdown {
  double weights = 0, gradients = 0, optimizer = 0, activations = 0, buffers = 0;
  // The gradients are allocated as backward frees the activations, and freed after the optimizer
  // step (PyTorch's zero_grad(set_to_none=True) with one micro-batch a step): at the peak one or
  // the other is held, not both.
  bool gradients_replace_activations = false;
  double total() const
  {
    if (gradients_replace_activations)
      return weights + optimizer + std::max(gradients, activations) + buffers;
    return weights + gradients + optimizer + activations + buffers;
  }
};

struct Report {
  std::string name;
  int gpus = 0;
  std::string device;
  std::string schedule;
  std::string framework; // the profile of sim/core/framework.hpp that filled in the defaults
  std::string fidelity;
  int micro_batches = 0;
  double step_time_s = 0;
  double tokens_per_s = 0;
  double samples_per_s = 0;
  double model_flops_per_step = 0;
  // The whole model's parameters, and those one token goes through (a mixture of experts' top_k
  // routed experts, its shared experts and the rest; equal for a dense model), as its kind counts
  // them (workloads/models/model_kind.hpp, ParameterCounts).
  double parameters        = 0;
  double active_parameters = 0;
  double model_tflops_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
  double bubble_fraction = 0; // the largest over stages
  double comm_s = 0;          // the rank with the most exposed communication
  double exposed_comm_s = 0;
  double overlap = 0;
  // Energy of the whole job over one step: each GPU at its board power (TDP) while it computes
  // and at its idle power otherwise (NCCL's copy kernels and waiting draw little); joules.
  double energy_j_per_step  = 0;
  double energy_j_per_token = 0;
  double memory_peak_bytes = 0;
  double memory_capacity_bytes = 0;
  // Where the peak is: the stage closest to (or furthest over) its device's capacity, and that
  // device, which on mixed platforms need not be the first node group's.
  int memory_peak_stage = 0;
  std::string memory_peak_device;
  bool fits_in_memory = true;
  MemoryBreakdown memory; // of the rank with the peak
  std::vector<StageReport> stages;
  long long simulated_ranks = 0;
  long long activities = 0;
  // Why a scenario asked at reduced fidelity ran at full fidelity: its simulated ranks could not
  // stand for their peers on this platform (sim/engine/shadows.hpp). "" when it ran as asked.
  std::string full_fidelity_reason;
  // Reduced fidelity: where the peers a simulated rank stands for would take bandwidth from its
  // flows, their flows were replayed beside them (sim/engine/shadows.hpp): on how many links,
  // for how many collective groups and transfers, and how many shadow transfers ran. All 0: none.
  struct Shadows {
    int short_changed_links = 0, groups = 0, transfers = 0;
    long long flows = 0;
    // Above kShadowedWorld GPUs only the simulated ranks' own groups are checked and replayed.
    bool copies_left_out = false;
  } shadows;
  std::string network_fidelity = "flow"; // flow | analytic
  // The communication/compute interference factor f the replay applied (compute at 1 - f of its
  // speed beside a collective); the largest over the simulated ranks' devices, 0 when off.
  double comm_compute_interference = 0;
  // The framework's host time between steps, in step_time_s (DeviceCalibration::step_host_s): the
  // GPUs idle while it runs; 0 where none is fitted or given.
  double step_host_s = 0;
  // Collective type -> the algorithm that ran it ("ring", "tree+ring" when "auto" picked by size;
  // "" when the step has none of that type). Every type is listed, so sweep CSVs keep their columns.
  std::map<std::string, std::string> collective_algorithms;
  std::vector<LinkReport> links;  // busiest first; filled when asked (simulate's link_count)
  std::vector<WaitReport> waits;  // largest first; only where several members of a group are simulated
  // training.input and training.checkpoint (sim/core/host_side_report.hpp); absent when not asked for.
  std::optional<InputReport> input;
  std::optional<CheckpointReport> checkpoint;
  // training.federated: the round (sim/core/federated_report.hpp); absent for any other scenario.
  std::optional<FederatedReport> federated;
};

// A figure rounded to 9 significant digits, as every report writes its figures, so that a report
// does not change with the last bits of a floating-point sum and stays byte-identical across
// runs and machines.
double tidy(double v);

nlohmann::json to_json(const Report& r);
// The inverse of to_json (reports cross process boundaries in sweeps and tests).
Report report_from_json(const nlohmann::json& j);
std::string to_table(const Report& r);

} // namespace stepsim

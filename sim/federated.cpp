// One federated round: each client device's local step is costed by the step's own road (a
// one-device job of the scenario's model, precision and local batch: plan_job, cost_workload,
// replay_step, step_report through simulate_isolated), nothing re-derived; the round itself is
// replayed by sim/engine/federated_round.cpp; the report gets the round (Report::federated).
#include "sim/federated.hpp"

#include "models/compute/compute_model.hpp"
#include "models/device.hpp"
#include "sim/core/scenario_check.hpp"
#include "sim/engine/federated_round.hpp"
#include "sim/simulate.hpp"
#include "topologies/nodes/node_type.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace stepsim {
namespace {

std::string client_path(size_t group) { return fmt::format("training.federated.clients[{}]", group); }

// The scenario's job on one `device` alone: its model, precision and optimizer, one local batch
// (training.micro_batch_size) per step, on a one-GPU node.
Scenario one_device_job(const Scenario& s, const std::string& device)
{
  Scenario one            = s;
  one.name                = s.name + "/" + device;
  one.training.federated.enabled = false;
  one.training.global_batch_size = s.training.micro_batch_size;
  NodeGroupSpec node;
  node.count            = 1;
  node.gpu              = device;
  node.gpus_per_node    = 1;
  node.intra_node.type  = "pcie"; // no peer to reach: the node type only has to exist
  node.intra_node.bandwidth_Bps = 0; // the type's rated PCIe link, not the spec's NVSwitch default
  node.nic.count        = 1;
  one.platform          = PlatformSpec{};
  one.platform.node_groups = {node};
  apply_rated_bandwidths(one.platform);
  return one;
}

// The step of each client device, by device name.
std::map<std::string, Report> local_steps(const Scenario& s)
{
  std::map<std::string, Report> steps;
  const auto& groups = s.training.federated.clients;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (steps.count(groups[g].device) != 0)
      continue;
    try {
      const Scenario one = one_device_job(s, groups[g].device);
      validate(one);
      steps[groups[g].device] = simulate_isolated(one);
    } catch (const InputError& e) {
      std::vector<std::string> problems;
      for (std::string p : e.problems()) {
        // The one-GPU job's own path means nothing to the user: the client's device is where it is.
        const std::string own = "platform.node_groups[0].gpu: ";
        if (p.rfind(own, 0) == 0)
          p = p.substr(own.size());
        problems.push_back(fmt::format("{}.device: one local step of a {} alone (local batch "
                                       "training.micro_batch_size {}): {}",
                                       client_path(g), groups[g].device, s.training.micro_batch_size, p));
      }
      throw InputError(problems);
    }
  }
  return steps;
}

// SGD updates in a round: u_k = E·ceil(n_k / B) (FedAvg's E·n_k/B, the last batch of an epoch
// counted whole: it is costed at the full batch), or local_steps as given.
double updates_of(const FederatedSpec& f, const FederatedClientGroup& g, long long batch)
{
  if (f.local_steps > 0)
    return double(f.local_steps);
  return double(f.local_epochs) * std::ceil(double(g.samples) / double(batch));
}

std::string link_words(const FederatedLinkSpec& l)
{
  return fmt::format("{} {:g} Mb/s, {:g} ms", l.kind, l.bandwidth_Bps * 8 / 1e6, l.latency_s * 1e3);
}

// FedAvg's weighted average of k updates, w = Σ (n_k / n) w_k, as one bandwidth-bound kernel on
// `device` costed by the scenario's compute model: it reads the k updates and writes the model once
// ((k + 1) · model bytes), as a fused weighted sum over the stacked updates does. Index k = 0..n.
std::vector<double> aggregation_times(const Scenario& s, const Device& device, double model_bytes, int n)
{
  const ComputeModel& model = ComputeModelRegistry::get(s.simulation.compute_model, "simulation.compute_model");
  std::vector<double> seconds(static_cast<size_t>(n) + 1, 0.0);
  for (int k = 1; k <= n; ++k)
    seconds[static_cast<size_t>(k)] =
        model.kernel_seconds(memory_kernel("fedavg", (k + 1) * model_bytes), device, s.training.precision);
  return seconds;
}

// Every client device is in the catalogue and runs the training precision; the servers' devices
// are in it (they only average, at their memory bandwidth).
void check_federated_devices(const Scenario& s)
{
  const auto& f = s.training.federated;
  if (!f.enabled)
    return;
  Problems problems;
  const auto known = [&](const std::string& name, const std::string& path) {
    try {
      return std::optional<Device>(load_device(name, path));
    } catch (const InputError& e) {
      for (const auto& p : e.problems())
        problems.add("", p);
      return std::optional<Device>();
    }
  };
  for (size_t g = 0; g < f.clients.size(); ++g) {
    const auto device = known(f.clients[g].device, client_path(g) + ".device");
    if (device && !device->runs(s.training.precision))
      problems.add("training.precision", fmt::format("{} ({}.device) does not run \"{}\"; it runs {}", device->name,
                                                     client_path(g), s.training.precision, device->precisions_run()));
  }
  known(f.server_device, "training.federated.server.device");
  if (f.aggregation == "hierarchical")
    known(f.edge_device, "training.federated.aggregation.device");
  problems.throw_if_any();
}

const bool checked = ScenarioCheckRegistry::add(
    "federated", "training.federated: every client and server device is known, the clients run the precision",
    ScenarioCheck{check_federated_devices});

} // namespace

std::string federated_memory_problem(const Scenario& s)
{
  const auto& groups = s.training.federated.clients;
  for (size_t g = 0; g < groups.size(); ++g)
    if (std::string oom = memory_problem(one_device_job(s, groups[g].device)); !oom.empty()) {
      // The one-GPU job's own path means nothing to the user, as in local_steps.
      if (const std::string own = "platform.node_groups[0].gpu: "; oom.rfind(own, 0) == 0)
        oom = oom.substr(own.size());
      return fmt::format("{}.device: one local step of a {} alone (local batch training.micro_batch_size {}): {}",
                         client_path(g), groups[g].device, s.training.micro_batch_size, oom);
    }
  return "";
}

Report simulate_federated(const Scenario& s)
{
  const FederatedSpec& f = s.training.federated;
  const auto steps       = local_steps(s); // before the round's engine: each runs in a forked child
  const Report& first    = steps.begin()->second;
  // The model travels as the client holds its weights (the one-device job's weight memory, at
  // the training precision); the update as the compressed fraction of it.
  const double model_bytes = first.memory.weights;

  RoundPlan plan;
  plan.server_link  = f.server_link;
  plan.edge_servers = f.aggregation == "hierarchical" ? f.edge_servers : 0;
  plan.edge_link    = f.edge_link;
  plan.model_bytes  = model_bytes;
  plan.update_bytes = model_bytes * f.compression;
  plan.deadline_s   = f.deadline_s;
  std::vector<size_t> group_of_client;
  std::vector<double> updates;
  for (size_t g = 0; g < f.clients.size(); ++g)
    for (int k = 0; k < f.clients[g].count; ++k) {
      RoundClient c;
      c.name        = fmt::format("{}-{}", f.clients[g].name, k);
      c.link        = f.clients[g].link;
      c.edge_server = plan.edge_servers > 0 ? static_cast<int>(plan.clients.size()) % plan.edge_servers : -1;
      updates.push_back(updates_of(f, f.clients[g], s.training.micro_batch_size));
      c.compute_s = updates.back() * steps.at(f.clients[g].device).step_time_s;
      plan.clients.push_back(c);
      group_of_client.push_back(g);
    }
  const int n                = static_cast<int>(plan.clients.size());
  const std::vector<bool> in = choose_participants(n, f.participation, f.seed);
  for (int i = 0; i < n; ++i)
    plan.clients[static_cast<size_t>(i)].selected = in[static_cast<size_t>(i)];
  plan.server_aggregation_s = aggregation_times(s, load_device(f.server_device, "training.federated.server.device"),
                                                model_bytes, std::max(n, plan.edge_servers));
  if (plan.edge_servers > 0)
    plan.edge_aggregation_s =
        aggregation_times(s, load_device(f.edge_device, "training.federated.aggregation.device"), model_bytes, n);

  const RoundResult round = replay_round(plan);

  FederatedReport fr;
  fr.aggregation   = f.aggregation;
  fr.clients       = n;
  fr.round_time_s  = round.round_time_s;
  fr.aggregation_s = round.aggregation_s;
  fr.deadline_s    = f.deadline_s;
  fr.model_bytes   = plan.model_bytes;
  fr.update_bytes  = plan.update_bytes;
  fr.bytes_down    = round.bytes_down;
  fr.bytes_up      = round.bytes_up;
  double samples = 0, flops = 0;
  for (size_t i = 0; i < plan.clients.size(); ++i) {
    const auto& c = plan.clients[i];
    const auto& r = round.clients[i];
    const auto& g = f.clients[group_of_client[i]];
    FederatedClientReport row;
    row.name        = c.name;
    row.device      = g.device;
    row.link        = link_words(c.link);
    row.edge_server = c.edge_server;
    row.selected    = c.selected;
    row.dropped     = c.selected && r.dropped;
    row.local_steps = c.selected ? updates[i] : 0;
    row.download_s  = r.download_s;
    row.compute_s   = r.compute_s;
    row.upload_s    = r.upload_s;
    row.finish_s    = r.finish_s;
    row.idle_s      = std::max(0.0, round.round_time_s - r.download_s - r.compute_s - r.upload_s);
    fr.selected += c.selected ? 1 : 0;
    fr.dropped += row.dropped ? 1 : 0;
    if (c.selected && !r.dropped) {
      samples += updates[i] * double(s.training.micro_batch_size);
      flops += updates[i] * steps.at(g.device).model_flops_per_step;
    }
    fr.client_rows.push_back(row);
  }

  // The step report's fields where they mean something for a round: the round is the "step",
  // the samples trained by the clients whose updates were kept its throughput, the client device
  // that needs the most memory its memory.
  Report r;
  r.name             = s.name;
  r.gpus             = n;
  std::set<std::string> devices;
  for (const auto& g : f.clients)
    devices.insert(g.device);
  for (const auto& d : devices)
    r.device += (r.device.empty() ? "" : ", ") + d;
  r.schedule             = "federated";
  r.framework            = first.framework;
  r.fidelity             = "full";
  r.network_fidelity     = "flow";
  r.step_time_s          = round.round_time_s;
  r.samples_per_s        = samples / round.round_time_s;
  r.tokens_per_s         = first.samples_per_s > 0 ? r.samples_per_s * first.tokens_per_s / first.samples_per_s : 0;
  r.model_flops_per_step = flops;
  r.simulated_ranks      = fr.selected; // the clients replayed
  // What the replay ran: each selected client's download, compute and upload, and each edge
  // server's model in and average out.
  std::set<int> edges_used;
  for (const auto& c : plan.clients)
    if (c.selected && c.edge_server >= 0)
      edges_used.insert(c.edge_server);
  r.activities = 3LL * fr.selected + 2LL * static_cast<long long>(edges_used.size());
  for (const auto& [name, step] : steps) {
    if (step.memory_peak_bytes / step.memory_capacity_bytes >= r.memory_peak_bytes / std::max(r.memory_capacity_bytes, 1.0)) {
      r.memory_peak_bytes     = step.memory_peak_bytes;
      r.memory_capacity_bytes = step.memory_capacity_bytes;
      r.memory_peak_stage     = step.memory_peak_stage;
      r.memory_peak_device    = step.memory_peak_device;
      r.memory                = step.memory;
    }
    r.fits_in_memory = r.fits_in_memory && step.fits_in_memory;
  }
  r.federated = fr;
  return r;
}

} // namespace stepsim

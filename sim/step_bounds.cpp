// The last check of the road: a step that no training run could have. The bounds on each input
// (bandwidth from 1 Mbit/s, latency to 60 s, model sizes) are each sane alone, yet together they
// can make a step of months: a 175B model's gradients over 1 Mbit/s take 32 days. No published
// training step lasts more than minutes (the longest of configs/validation/, MT-NLG 530B, is
// 60 s), so a step beyond a week comes from a figure off by orders of magnitude (bit/s written
// for byte/s, FLOPs in the wrong unit), and a report of it would be read as a prediction. The
// error names the input the step's time goes to.
#include "sim/stages.hpp"

#include "sim/core/input_error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace stepsim {

namespace {

constexpr double kLongestStep_s = 7 * 24 * 3600.0;

struct GivenBandwidth {
  std::string path;
  double Bps = 0;
};

// Every bandwidth the platform was given, with its JSON path (the expanded preset's paths for a
// preset), for naming the slowest.
std::vector<GivenBandwidth> given_bandwidths(const PlatformSpec& p)
{
  std::vector<GivenBandwidth> all;
  for (size_t i = 0; i < p.node_groups.size(); ++i) {
    const auto& g     = p.node_groups[i];
    // Paths by fmt::format: GCC 12 at -O3 warns falsely (-Warray-bounds) on prefix + "..." here.
    const auto prefix = fmt::format("platform.node_groups[{}]", i);
    if (g.gpus_per_node > 1)
      all.push_back({fmt::format("{}.intra_node.bandwidth", prefix), g.intra_node.bandwidth_Bps});
    if (p.total_gpus() > g.gpus_per_node)
      all.push_back({fmt::format("{}.nic.bandwidth", prefix), g.nic.bandwidth_Bps});
    if (g.host.link_bandwidth_Bps > 0)
      all.push_back({fmt::format("{}.host.link_bandwidth", prefix), g.host.link_bandwidth_Bps});
  }
  const auto& n = p.network;
  if (n.topology == "torus" && n.torus.link.bandwidth_Bps > 0)
    all.push_back({"platform.network.torus.link.bandwidth", n.torus.link.bandwidth_Bps});
  if (n.topology == "dragonfly" && n.dragonfly.link.bandwidth_Bps > 0)
    all.push_back({"platform.network.dragonfly.link.bandwidth", n.dragonfly.link.bandwidth_Bps});
  for (size_t j = 0; j < n.links.size(); ++j)
    all.push_back({fmt::format("platform.network.links[{}].bandwidth", j), n.links[j].bandwidth_Bps});
  if (n.topology == "wifi" && n.wifi.rate_Bps > 0)
    all.push_back({"platform.network.wifi.rate", n.wifi.rate_Bps});
  return all;
}

std::string duration(double seconds)
{
  if (seconds >= 365.25 * 86400)
    return fmt::format("{:.3g} years", seconds / (365.25 * 86400));
  return fmt::format("{:.3g} days", seconds / 86400);
}

} // namespace

void check_step_bounds(const Scenario& s, const Report& r)
{
  const bool no_throughput = !(r.samples_per_s > 0) || !std::isfinite(r.samples_per_s);
  if (r.step_time_s <= kLongestStep_s && !no_throughput)
    return;
  double compute = 0, exposed = 0;
  for (const auto& st : r.stages) {
    compute = std::max(compute, st.compute_s);
    exposed = std::max(exposed, st.exposed_comm_s);
  }
  // The error starts with the path of what the time goes to: the slowest link where exposed
  // communication dominates, else the model.
  std::string path = "model", cause;
  const auto bandwidths = given_bandwidths(s.platform);
  if (r.input && r.input->stall_s >= std::max(compute, exposed)) {
    path  = "training.input";
    cause = fmt::format("{:.0f}% of it is waiting for the data loader, which is limited by {}",
                        100 * r.input->stall_s / r.step_time_s, r.input->limited_by);
  } else if (exposed >= compute && !bandwidths.empty()) {
    const auto slowest = *std::min_element(bandwidths.begin(), bandwidths.end(),
                                           [](const auto& a, const auto& b) { return a.Bps < b.Bps; });
    path  = slowest.path;
    cause = fmt::format("{:.0f}% of it is communication that no compute hides, and the slowest link given is {} "
                        "at {:.4g} Mbit/s",
                        100 * exposed / r.step_time_s, slowest.path, slowest.Bps * 8 / 1e6);
  } else {
    cause = fmt::format("{:.0f}% of it is the compute of one stage, for {:.3g} model FLOPs per step on {}",
                        100 * compute / r.step_time_s, r.model_flops_per_step, r.device);
  }
  if (no_throughput)
    throw InputError({fmt::format("{}: the step has no throughput ({} samples per second); {}", path,
                                  r.samples_per_s, cause)});
  throw InputError({fmt::format("{}: the step would last {} ({:.3g} s), beyond any training run (a week at most "
                                "here); {}",
                                path, duration(r.step_time_s), r.step_time_s, cause)});
}

} // namespace stepsim

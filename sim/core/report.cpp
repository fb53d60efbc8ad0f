#include "sim/core/report.hpp"

#include "sim/core/task_graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <cmath>
#include <limits>

namespace stepsim {

double tidy(double v)
{
  if (v == 0 || !std::isfinite(v))
    return v;
  return std::stod(fmt::format("{:.9g}", v));
}

namespace {

// An integer field of a report read back (a baseline, a sweep journal or shard): a number of
// another kind, or one beyond T, is an error of the JSON library's own kind, which the readers
// turn into a message naming the file; a plain get<int>() would convert 1e65 with undefined
// behaviour (found by the fuzzer of sweep results, tests/fuzz/fuzz_results.cpp).
template <class T>
T whole(const nlohmann::json& v)
{
  if (!v.is_number_integer())
    throw nlohmann::json::type_error::create(302, fmt::format("expected an integer, got {}", v.dump()), &v);
  if ((v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(std::numeric_limits<T>::max())) ||
      (!v.is_number_unsigned() && (v.get<long long>() < static_cast<long long>(std::numeric_limits<T>::min()) ||
                                   v.get<long long>() > static_cast<long long>(std::numeric_limits<T>::max()))))
    throw nlohmann::json::out_of_range::create(406, fmt::format("{} is out of range", v.dump()), &v);
  return v.get<T>();
}

std::string human_bytes(double b) { return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024)); }

// An energy in the unit that fits, the number right-aligned in `width`: a step of a small job on
// one device takes joules, and "0.000 MJ" told its user nothing.
std::string human_energy(double joules, int width = 0)
{
  const auto [value, unit] = joules >= 1e6   ? std::pair{joules / 1e6, "MJ"}
                             : joules >= 1e3 ? std::pair{joules / 1e3, "kJ"}
                             : joules >= 1   ? std::pair{joules, "J"}
                                             : std::pair{joules * 1e3, "mJ"};
  return fmt::format("{:>{}.3f} {}", value, width, unit);
}

// A parameter count in billions, millions or thousands (decimal, as model cards write them).
std::string human_count(double n)
{
  if (n >= 1e9)
    return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1e6)
    return fmt::format("{:.2f} M", n / 1e6);
  return fmt::format("{:.2f} K", n / 1e3);
}
} // namespace

nlohmann::json to_json(const Report& r)
{
  nlohmann::json j;
  j["name"]                    = r.name;
  j["gpus"]                    = r.gpus;
  j["device"]                  = r.device;
  j["schedule"]                = r.schedule;
  j["framework"]               = r.framework;
  j["fidelity"]                = r.fidelity;
  j["micro_batches"]           = r.micro_batches;
  j["step_time_s"]             = tidy(r.step_time_s);
  j["tokens_per_s"]            = tidy(r.tokens_per_s);
  j["samples_per_s"]           = tidy(r.samples_per_s);
  j["model_flops_per_step"]    = tidy(r.model_flops_per_step);
  j["parameters"]              = tidy(r.parameters);
  j["active_parameters"]       = tidy(r.active_parameters);
  j["model_tflops_per_gpu"]    = tidy(r.model_tflops_per_gpu);
  j["hardware_tflops_per_gpu"] = tidy(r.hardware_tflops_per_gpu);
  j["mfu"]                     = tidy(r.mfu);
  j["hfu"]                     = tidy(r.hfu);
  j["bubble_fraction"]         = tidy(r.bubble_fraction);
  j["comm_s"]                  = tidy(r.comm_s);
  j["exposed_comm_s"]          = tidy(r.exposed_comm_s);
  j["overlap"]                 = tidy(r.overlap);
  j["energy_j_per_step"]       = tidy(r.energy_j_per_step);
  j["energy_j_per_token"]      = tidy(r.energy_j_per_token);
  j["memory_peak_bytes"]       = tidy(r.memory_peak_bytes);
  j["memory_capacity_bytes"]   = tidy(r.memory_capacity_bytes);
  j["memory_peak_stage"]       = r.memory_peak_stage;
  j["memory_peak_device"]      = r.memory_peak_device;
  j["fits_in_memory"]          = r.fits_in_memory;
  j["memory"] = {{"weights_bytes", tidy(r.memory.weights)},         {"gradients_bytes", tidy(r.memory.gradients)},
                 {"optimizer_bytes", tidy(r.memory.optimizer)},     {"activations_bytes", tidy(r.memory.activations)},
                 {"buffers_bytes", tidy(r.memory.buffers)},         {"total_bytes", tidy(r.memory.total())}};
  j["stages"] = nlohmann::json::array();
  for (const auto& s : r.stages) {
    j["stages"].push_back({{"stage", s.stage},
                           {"rank", s.rank},
                           {"compute_s", tidy(s.compute_s)},
                           {"comm_s", tidy(s.comm_s)},
                           {"exposed_comm_s", tidy(s.exposed_comm_s)},
                           {"bubble_s", tidy(s.bubble_s)},
                           {"bubble_fraction", tidy(s.bubble_fraction)},
                           {"textbook_bubble_fraction", tidy(s.textbook_bubble_fraction)},
                           {"memory_bytes", tidy(s.memory_bytes)},
                           {"device", s.device},
                           {"layers", s.layers}});
    if (s.host_wait_s > 0) // only where a host launch cost is calibrated and binds
      j["stages"].back()["host_wait_s"] = tidy(s.host_wait_s);
  }
  j["simulated_ranks"] = r.simulated_ranks;
  j["activities"]      = r.activities;
  j["network_fidelity"] = r.network_fidelity;
  j["comm_compute_interference"] = tidy(r.comm_compute_interference);
  if (r.step_host_s > 0) // only where the framework's calibration or the scenario gives one
    j["step_host_overhead_s"] = tidy(r.step_host_s);
  if (!r.collective_algorithms.empty())
    j["collective_algorithms"] = r.collective_algorithms;
  // Present only when there is something to say, so that reports of plain runs keep their keys.
  if (!r.links.empty()) {
    j["links"] = nlohmann::json::array();
    for (const auto& l : r.links)
      j["links"].push_back({{"name", l.name}, {"bytes", tidy(l.bytes)}, {"busy_s", tidy(l.busy_s)},
                            {"busy_fraction", tidy(l.busy_fraction)}});
  }
  if (!r.full_fidelity_reason.empty())
    j["full_fidelity_reason"] = r.full_fidelity_reason;
  if (r.shadows.copies_left_out)
    j["shadow_copies_left_out"] = true;
  if (r.shadows.short_changed_links > 0)
    j["shadows"] = {{"short_changed_links", r.shadows.short_changed_links},
                    {"groups", r.shadows.groups},
                    {"transfers", r.shadows.transfers},
                    {"flows", r.shadows.flows}};
  if (!r.waits.empty()) {
    j["waits"] = nlohmann::json::array();
    for (const auto& w : r.waits)
      j["waits"].push_back({{"rank", w.rank}, {"peer", w.peer}, {"group", w.group}, {"seconds", tidy(w.seconds)}});
  }
  if (r.input)
    j["input"] = input_to_json(*r.input);
  if (r.checkpoint)
    j["checkpoint"] = checkpoint_to_json(*r.checkpoint);
  if (r.federated)
    j["federated"] = federated_to_json(*r.federated);
  return j;
}

Report report_from_json(const nlohmann::json& j)
{
  Report r;
  r.name                    = j.at("name").get<std::string>();
  r.gpus                    = whole<int>(j.at("gpus"));
  r.device                  = j.at("device").get<std::string>();
  r.schedule                = j.at("schedule").get<std::string>();
  r.framework               = j.value("framework", std::string());
  r.fidelity                = j.at("fidelity").get<std::string>();
  r.micro_batches           = whole<int>(j.at("micro_batches"));
  r.step_time_s             = j.at("step_time_s").get<double>();
  r.tokens_per_s            = j.at("tokens_per_s").get<double>();
  r.samples_per_s           = j.at("samples_per_s").get<double>();
  r.model_flops_per_step    = j.at("model_flops_per_step").get<double>();
  r.parameters              = j.value("parameters", 0.0); // reports from before the counts have none
  r.active_parameters       = j.value("active_parameters", 0.0);
  r.model_tflops_per_gpu    = j.at("model_tflops_per_gpu").get<double>();
  r.hardware_tflops_per_gpu = j.at("hardware_tflops_per_gpu").get<double>();
  r.mfu                     = j.at("mfu").get<double>();
  r.hfu                     = j.at("hfu").get<double>();
  r.bubble_fraction         = j.at("bubble_fraction").get<double>();
  r.comm_s                  = j.at("comm_s").get<double>();
  r.exposed_comm_s          = j.at("exposed_comm_s").get<double>();
  r.overlap                 = j.at("overlap").get<double>();
  r.energy_j_per_step       = j.value("energy_j_per_step", 0.0);
  r.energy_j_per_token      = j.value("energy_j_per_token", 0.0);
  r.memory_peak_bytes       = j.at("memory_peak_bytes").get<double>();
  r.memory_capacity_bytes   = j.at("memory_capacity_bytes").get<double>();
  r.memory_peak_stage       = j.value("memory_peak_stage", 0);
  r.memory_peak_device      = j.value("memory_peak_device", std::string());
  r.fits_in_memory          = j.at("fits_in_memory").get<bool>();
  const auto& m             = j.at("memory");
  r.memory.weights          = m.at("weights_bytes").get<double>();
  r.memory.gradients        = m.at("gradients_bytes").get<double>();
  r.memory.optimizer        = m.at("optimizer_bytes").get<double>();
  r.memory.activations      = m.at("activations_bytes").get<double>();
  r.memory.buffers          = m.at("buffers_bytes").get<double>();
  for (const auto& s : j.at("stages")) {
    StageReport st;
    st.stage                    = whole<int>(s.at("stage"));
    st.rank                     = whole<int>(s.at("rank"));
    st.compute_s                = s.at("compute_s").get<double>();
    st.comm_s                   = s.at("comm_s").get<double>();
    st.exposed_comm_s           = s.at("exposed_comm_s").get<double>();
    st.host_wait_s              = s.value("host_wait_s", 0.0);
    st.bubble_s                 = s.at("bubble_s").get<double>();
    st.bubble_fraction          = s.at("bubble_fraction").get<double>();
    st.textbook_bubble_fraction = s.at("textbook_bubble_fraction").get<double>();
    st.memory_bytes             = s.at("memory_bytes").get<double>();
    st.device                   = s.value("device", std::string());
    st.layers                   = s.contains("layers") ? whole<int>(s["layers"]) : 0;
    r.stages.push_back(st);
  }
  r.simulated_ranks = whole<long long>(j.at("simulated_ranks"));
  r.activities      = whole<long long>(j.at("activities"));
  r.network_fidelity = j.value("network_fidelity", std::string("flow"));
  r.comm_compute_interference = j.value("comm_compute_interference", 0.0);
  r.step_host_s               = j.value("step_host_overhead_s", 0.0);
  r.collective_algorithms = j.value("collective_algorithms", std::map<std::string, std::string>{});
  for (const auto& l : j.value("links", nlohmann::json::array()))
    r.links.push_back(LinkReport{l.at("name").get<std::string>(), l.at("bytes").get<double>(),
                                 l.at("busy_s").get<double>(), l.at("busy_fraction").get<double>()});
  r.full_fidelity_reason      = j.value("full_fidelity_reason", std::string());
  r.shadows.copies_left_out   = j.value("shadow_copies_left_out", false);
  if (j.contains("shadows")) {
    const auto& sh                = j["shadows"];
    r.shadows.short_changed_links = whole<int>(sh.at("short_changed_links"));
    r.shadows.groups              = whole<int>(sh.at("groups"));
    r.shadows.transfers           = whole<int>(sh.at("transfers"));
    r.shadows.flows               = whole<long long>(sh.at("flows"));
  }
  for (const auto& w : j.value("waits", nlohmann::json::array()))
    r.waits.push_back(WaitReport{whole<int>(w.at("rank")), whole<int>(w.at("peer")), w.at("group").get<std::string>(),
                                 w.at("seconds").get<double>()});
  if (j.contains("input"))
    r.input = input_from_json(j["input"]);
  if (j.contains("checkpoint"))
    r.checkpoint = checkpoint_from_json(j["checkpoint"]);
  if (j.contains("federated"))
    r.federated = federated_from_json(j["federated"]);
  return r;
}

std::string to_table(const Report& r)
{
  if (r.federated) // a round, not a step: its own table
    return federated_table(r);
  std::string out;
  out += fmt::format("{}: {} GPUs ({}), schedule {}, {} micro-batches per replica, {} fidelity, {} network, "
                     "framework {}\n\n",
                     r.name, r.gpus, r.device, r.schedule, r.micro_batches, r.fidelity, r.network_fidelity, r.framework);
  if (!r.full_fidelity_reason.empty())
    out += fmt::format("Ran at full fidelity: {}.\n\n", r.full_fidelity_reason);
  if (r.shadows.copies_left_out)
    out += fmt::format("Above {} GPUs the replay checks only the simulated ranks' own groups for links shared with "
                       "the peers they stand for; the traffic of other replicas on an oversubscribed fabric is not "
                       "replayed.\n\n",
                       kShadowedWorld);
  if (r.shadows.short_changed_links > 0)
    out += fmt::format("Peers' traffic replayed as shadows: {} transfers, for the links that the simulated ranks "
                       "share with the peers they stand for: {} (collective groups: {}, point-to-point transfers: "
                       "{}).\n\n",
                       r.shadows.flows, r.shadows.short_changed_links, r.shadows.groups, r.shadows.transfers);
  out += fmt::format("  {:<24}{:>14.4f} s\n", "step time", r.step_time_s);
  out += fmt::format("  {:<24}{:>14.0f}\n", "tokens/s", r.tokens_per_s);
  out += fmt::format("  {:<24}{:>14.2f}\n", "samples/s", r.samples_per_s);
  if (r.parameters > 0) // a mixture of experts also says how many a token goes through
    out += fmt::format("  {:<24}{:>14}{}\n", "parameters", human_count(r.parameters),
                       r.active_parameters < r.parameters ? fmt::format("  ({} active)", human_count(r.active_parameters))
                                                          : "");
  out += fmt::format("  {:<24}{:>14.1f}\n", "model TFLOP/s per GPU", r.model_tflops_per_gpu);
  out += fmt::format("  {:<24}{:>14.1f}\n", "hardware TFLOP/s per GPU", r.hardware_tflops_per_gpu);
  out += fmt::format("  {:<24}{:>13.1f}%\n", "MFU", 100 * r.mfu);
  out += fmt::format("  {:<24}{:>13.1f}%\n", "bubble (worst stage)", 100 * r.bubble_fraction);
  out += fmt::format("  {:<24}{:>14.4f} s\n", "communication", r.comm_s);
  out += fmt::format("  {:<24}{:>14.4f} s\n", "exposed communication", r.exposed_comm_s);
  out += fmt::format("  {:<24}{:>13.1f}%\n", "overlap", 100 * r.overlap);
  double host_wait = 0;
  for (const auto& s : r.stages)
    host_wait = std::max(host_wait, s.host_wait_s);
  if (host_wait >= 0.5e-4) // shown where it is not 0 at the table's precision (the JSON has it all)
    out += fmt::format("  {:<24}{:>14.4f} s  the GPU waited for the host to issue its kernels (worst stage)\n",
                       "waiting for the host", host_wait);
  if (r.step_host_s > 0)
    out += fmt::format("  {:<24}{:>14.4f} s  the framework's host time each step, which every GPU waits for "
                       "(in the step time)\n",
                       "host between steps", r.step_host_s);
  if (r.comm_compute_interference > 0)
    out += fmt::format("  {:<24}{:>14}  compute at {:.0f}% of its speed beside a collective\n", "interference",
                       fmt::format("f = {:.3g}", r.comm_compute_interference), 100 * (1 - r.comm_compute_interference));
  else
    out += fmt::format("  {:<24}{:>14}\n", "interference", "off");
  std::string algorithms;
  for (const auto& [op, name] : r.collective_algorithms)
    if (!name.empty())
      algorithms += fmt::format("{}{} {}", algorithms.empty() ? "" : ", ", op, name);
  if (!algorithms.empty())
    out += fmt::format("  {:<24}{}\n", "collective algorithms", algorithms);
  if (r.energy_j_per_step > 0)
    out += fmt::format("  {:<24}{}{}\n", "energy per step", human_energy(r.energy_j_per_step, 14),
                       r.energy_j_per_token > 0 ? fmt::format(" ({} per token)", human_energy(r.energy_j_per_token)) : "");
  if (r.input)
    out += input_table(*r.input);
  if (r.checkpoint)
    out += checkpoint_table(*r.checkpoint);
  // The capacity is that of the device holding the peak, so the line names it (and its stage when
  // there are several).
  out += fmt::format("  {:<24}{:>14} of {} ({}) on {}{}\n", "memory peak per GPU", human_bytes(r.memory_peak_bytes),
                     human_bytes(r.memory_capacity_bytes), r.fits_in_memory ? "fits" : "DOES NOT FIT",
                     r.memory_peak_device.empty() ? r.device : r.memory_peak_device,
                     r.stages.size() > 1 ? fmt::format(", stage {}", r.memory_peak_stage) : "");
  out += fmt::format("  {:<24}weights {}, gradients {}, optimizer {}, activations {}, buffers {}\n", "",
                     human_bytes(r.memory.weights), human_bytes(r.memory.gradients), human_bytes(r.memory.optimizer),
                     human_bytes(r.memory.activations), human_bytes(r.memory.buffers));
  // Mixed GPU types get a column saying which stage runs where.
  bool mixed = false;
  for (const auto& s : r.stages)
    mixed = mixed || s.device != r.stages.front().device;
  out += fmt::format("\n  {:>5} {:>6} {:>11} {:>11} {:>11} {:>9} {:>9} {:>10}{}\n", "stage", "layers", "compute s",
                     "comm s", "exposed s", "bubble", "textbook", "memory", mixed ? "  device" : "");
  for (const auto& s : r.stages)
    out += fmt::format("  {:>5} {:>6} {:>11.4f} {:>11.4f} {:>11.4f} {:>8.1f}% {:>8.1f}% {:>10}{}\n", s.stage, s.layers,
                       s.compute_s, s.comm_s, s.exposed_comm_s, 100 * s.bubble_fraction,
                       100 * s.textbook_bubble_fraction, human_bytes(s.memory_bytes), mixed ? "  " + s.device : "");
  if (!r.waits.empty()) {
    out += fmt::format("\n  who waited for whom (the {} longest)\n  {:>6} {:>8}  {:<16} {:>12}\n",
                       std::min<size_t>(r.waits.size(), 10), "rank", "on rank", "group", "waited s");
    for (size_t i = 0; i < r.waits.size() && i < 10; ++i)
      out += fmt::format("  {:>6} {:>8}  {:<16} {:>12.6f}\n", r.waits[i].rank, r.waits[i].peer,
                         r.waits[i].group.empty() ? "(send/recv)" : r.waits[i].group, r.waits[i].seconds);
  }
  if (!r.links.empty()) {
    out += fmt::format("\n  busiest links\n  {:<34} {:>14} {:>12} {:>7}\n", "link", "GB carried", "busy s", "busy");
    for (const auto& l : r.links)
      out += fmt::format("  {:<34} {:>14.3f} {:>12.6f} {:>6.1f}%\n", l.name, l.bytes / 1e9, l.busy_s,
                         100 * l.busy_fraction);
  }
  return out;
}

} // namespace stepsim

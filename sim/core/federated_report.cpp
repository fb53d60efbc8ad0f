#include "sim/core/federated_report.hpp"

#include "sim/core/report.hpp"

#include <fmt/format.h>

#include <cmath>

namespace stepsim {
namespace {

std::string megabytes(double b) { return fmt::format("{:.2f} MB", b / 1e6); }

} // namespace

nlohmann::json federated_to_json(const FederatedReport& f)
{
  nlohmann::json j = {{"aggregation", f.aggregation},
                      {"clients", f.clients},
                      {"selected", f.selected},
                      {"dropped", f.dropped},
                      {"round_time_s", tidy(f.round_time_s)},
                      {"aggregation_s", tidy(f.aggregation_s)},
                      {"deadline_s", tidy(f.deadline_s)},
                      {"model_bytes", tidy(f.model_bytes)},
                      {"update_bytes", tidy(f.update_bytes)},
                      {"bytes_down", tidy(f.bytes_down)},
                      {"bytes_up", tidy(f.bytes_up)}};
  j["client_rows"] = nlohmann::json::array();
  for (const auto& c : f.client_rows)
    j["client_rows"].push_back({{"name", c.name},
                                {"device", c.device},
                                {"link", c.link},
                                {"edge_server", c.edge_server},
                                {"selected", c.selected},
                                {"dropped", c.dropped},
                                {"local_steps", tidy(c.local_steps)},
                                {"download_s", tidy(c.download_s)},
                                {"compute_s", tidy(c.compute_s)},
                                {"upload_s", tidy(c.upload_s)},
                                {"finish_s", tidy(c.finish_s)},
                                {"idle_s", tidy(c.idle_s)}});
  return j;
}

FederatedReport federated_from_json(const nlohmann::json& j)
{
  FederatedReport f;
  f.aggregation   = j.at("aggregation").get<std::string>();
  f.clients       = j.at("clients").get<int>();
  f.selected      = j.at("selected").get<int>();
  f.dropped       = j.at("dropped").get<int>();
  f.round_time_s  = j.at("round_time_s").get<double>();
  f.aggregation_s = j.at("aggregation_s").get<double>();
  f.deadline_s    = j.at("deadline_s").get<double>();
  f.model_bytes   = j.at("model_bytes").get<double>();
  f.update_bytes  = j.at("update_bytes").get<double>();
  f.bytes_down    = j.at("bytes_down").get<double>();
  f.bytes_up      = j.at("bytes_up").get<double>();
  for (const auto& c : j.at("client_rows")) {
    FederatedClientReport row;
    row.name        = c.at("name").get<std::string>();
    row.device      = c.at("device").get<std::string>();
    row.link        = c.at("link").get<std::string>();
    row.edge_server = c.at("edge_server").get<int>();
    row.selected    = c.at("selected").get<bool>();
    row.dropped     = c.at("dropped").get<bool>();
    row.local_steps = c.at("local_steps").get<double>();
    row.download_s  = c.at("download_s").get<double>();
    row.compute_s   = c.at("compute_s").get<double>();
    row.upload_s    = c.at("upload_s").get<double>();
    row.finish_s    = c.at("finish_s").get<double>();
    row.idle_s      = c.at("idle_s").get<double>();
    f.client_rows.push_back(row);
  }
  return f;
}

std::string federated_table(const Report& r)
{
  const FederatedReport& f = *r.federated;
  std::string out;
  out += fmt::format("{}: federated round ({}), {} clients, {} selected, framework {}\n\n", r.name, f.aggregation,
                     f.clients, f.selected, r.framework);
  out += fmt::format("  {:<24}{:>14.4f} s\n", "round time", f.round_time_s);
  out += fmt::format("  {:<24}{:>14.4f} s\n", "aggregation", f.aggregation_s);
  if (f.deadline_s > 0)
    out += fmt::format("  {:<24}{:>14.4f} s\n", "deadline", f.deadline_s);
  out += fmt::format("  {:<24}{:>14}\n", "clients dropped", f.dropped);
  out += fmt::format("  {:<24}{:>14.2f}\n", "samples/s", r.samples_per_s);
  out += fmt::format("  {:<24}{:>14}\n", "model down", megabytes(f.model_bytes));
  out += fmt::format("  {:<24}{:>14}\n", "update up", megabytes(f.update_bytes));
  out += fmt::format("  {:<24}{:>14}  down, {} up\n", "bytes moved", megabytes(f.bytes_down), megabytes(f.bytes_up));
  out += fmt::format("  {:<24}{:>14} of {} ({}) on {}\n", "memory peak per client",
                     fmt::format("{:.2f} GiB", r.memory_peak_bytes / (1024.0 * 1024 * 1024)),
                     fmt::format("{:.2f} GiB", r.memory_capacity_bytes / (1024.0 * 1024 * 1024)),
                     r.fits_in_memory ? "fits" : "DOES NOT FIT", r.memory_peak_device);
  const bool edges = f.aggregation == "hierarchical";
  out += fmt::format("\n  {:<22} {:<16} {:<26}{} {:>8} {:>10} {:>10} {:>10} {:>10}  {}\n", "client", "device", "link",
                     edges ? "  edge" : "", "steps", "down s", "compute s", "up s", "idle s", "");
  for (const auto& c : f.client_rows)
    out += fmt::format("  {:<22} {:<16} {:<26}{} {:>8.0f} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f}  {}\n", c.name,
                       c.device, c.link, edges ? fmt::format("  {:>4}", c.edge_server) : "", c.local_steps,
                       c.download_s, c.compute_s, c.upload_s, c.idle_s,
                       !c.selected ? "not selected" : c.dropped ? "DROPPED" : "");
  return out;
}

} // namespace stepsim

#include "sim/core/host_side_report.hpp"

#include "sim/core/report.hpp"

#include <fmt/format.h>

#include <cmath>

namespace stepsim {

nlohmann::json input_to_json(const InputReport& r)
{
  return {{"step_without_input_s", tidy(r.step_without_input_s)},
          {"input_path_s", tidy(r.input_path_s)},
          {"stall_s", tidy(r.stall_s)},
          {"input_bound", r.input_bound},
          {"limited_by", r.limited_by},
          {"loaders", r.loaders},
          {"workers", r.workers}};
}

InputReport input_from_json(const nlohmann::json& j)
{
  InputReport r;
  r.step_without_input_s = j.at("step_without_input_s").get<double>();
  r.input_path_s         = j.at("input_path_s").get<double>();
  r.stall_s              = j.at("stall_s").get<double>();
  r.input_bound          = j.at("input_bound").get<bool>();
  r.limited_by           = j.at("limited_by").get<std::string>();
  r.loaders              = j.at("loaders").get<int>();
  r.workers              = j.at("workers").get<int>();
  return r;
}

std::string input_table(const InputReport& r)
{
  std::string out = fmt::format("  {:<24}{:>14.4f} s  per step, {} loaders of {} workers, limited by {}\n",
                                "input pipeline", r.input_path_s, r.loaders, r.workers, r.limited_by);
  if (r.input_bound)
    out += fmt::format("  {:<24}{:>14.4f} s  waiting for data: the step is input-bound ({:.4f} s without)\n",
                       "input stall", r.stall_s, r.step_without_input_s);
  else
    out += fmt::format("  {:<24}{:>14}\n", "input stall", r.stall_s > 0 ? fmt::format("{:.4f} s", r.stall_s) : "none");
  return out;
}

nlohmann::json checkpoint_to_json(const CheckpointReport& r)
{
  return {{"every_steps", r.every_steps}, {"mode", r.mode},
          {"layout", r.layout},           {"bytes", tidy(r.bytes)},
          {"gather_s", tidy(r.gather_s)}, {"snapshot_s", tidy(r.snapshot_s)},
          {"write_s", tidy(r.write_s)},   {"stall_s", tidy(r.stall_s)},
          {"step_s", tidy(r.step_s)},     {"amortized_s", tidy(r.amortized_s)}};
}

CheckpointReport checkpoint_from_json(const nlohmann::json& j)
{
  CheckpointReport r;
  r.every_steps = j.at("every_steps").get<int>();
  r.mode        = j.at("mode").get<std::string>();
  r.layout      = j.at("layout").get<std::string>();
  r.bytes       = j.at("bytes").get<double>();
  r.gather_s    = j.at("gather_s").get<double>();
  r.snapshot_s  = j.at("snapshot_s").get<double>();
  r.write_s     = j.at("write_s").get<double>();
  r.stall_s     = j.at("stall_s").get<double>();
  r.step_s      = j.at("step_s").get<double>();
  r.amortized_s = j.at("amortized_s").get<double>();
  return r;
}

std::string checkpoint_table(const CheckpointReport& r)
{
  std::string out = fmt::format("  {:<24}{:>14.4f} s  every {} steps, {} {}: {:.2f} GB", "checkpoint step",
                                r.step_s, r.every_steps, r.mode, r.layout, r.bytes / 1e9);
  if (r.gather_s > 0)
    out += fmt::format(", gather {:.3f} s", r.gather_s);
  out += fmt::format(", to host memory {:.3f} s, to storage {:.3f} s{}\n", r.snapshot_s, r.write_s,
                     r.stall_s > 0 ? fmt::format(", waits {:.3f} s for the previous write", r.stall_s) : "");
  out += fmt::format("  {:<24}{:>14.6f} s  per step\n", "checkpoint amortized", r.amortized_s);
  return out;
}

} // namespace stepsim

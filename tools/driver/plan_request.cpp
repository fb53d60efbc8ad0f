#include "tools/driver/plan_request.hpp"

#include "sim/core/input_error.hpp"
#include "sim/core/units.hpp"

#include <fmt/format.h>

#include <cmath>

namespace stepsim {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string degrees(const nlohmann::json& s)
{
  return fmt::format("t{} c{} e{} p{} d{}", s["parallelism.tensor"].get<int>(), context_degree(s),
                     s["parallelism.expert"].get<int>(), s["parallelism.pipeline"].get<int>(),
                     s["parallelism.data"].get<int>());
}

// Nothing fits or divides: one message that says what is short, and by how much.
[[noreturn]] void refuse(const std::string& label, const PlanOptions& o, const PlanResult& r)
{
  // Headroom that takes a whole GPU's usable memory leaves nothing for any plan: no count of GPUs
  // helps, so none is suggested.
  if (r.too_big > 0 && !r.closest_settings.is_null() && o.headroom_bytes >= r.closest_capacity_bytes)
    throw InputError({fmt::format("--headroom {:.2f} GiB: no less than the {:.2f} GiB a GPU has usable, so no "
                                  "configuration fits on any number of GPUs; expected headroom below that",
                                  o.headroom_bytes / kGiB, r.closest_capacity_bytes / kGiB)});
  if (r.too_big > 0 && !r.closest_settings.is_null()) {
    const double short_by = r.closest_need_bytes - r.closest_capacity_bytes;
    // Model state and activations shrink about as 1/GPUs when every degree can grow with them.
    const double gpus_needed = std::ceil(r.gpus * r.closest_need_bytes / r.closest_capacity_bytes);
    throw InputError({fmt::format(
        "{}: no configuration fits in memory on {} GPUs: the closest ({}, micro-batch {}, {}, ZeRO {}, recompute {}) "
        "needs {:.2f} GiB per GPU{} where {:.2f} GiB are usable: {:.2f} GiB short. About {:.0f} GPUs of this kind "
        "would hold it ({} configurations tried: {} do not divide or are not valid, {} do not fit)",
        label, r.gpus, degrees(r.closest_settings), r.closest_settings["training.micro_batch_size"].get<int>(),
        r.closest_settings["parallelism.schedule"].get<std::string>(),
        r.closest_settings["parallelism.zero_stage"].get<int>(),
        r.closest_settings["training.recompute"].get<std::string>(), r.closest_need_bytes / kGiB,
        o.headroom_bytes > 0 ? fmt::format(" (with {:.2f} GiB of headroom)", o.headroom_bytes / kGiB) : "",
        r.closest_capacity_bytes / kGiB, short_by / kGiB, gpus_needed, r.enumerated, r.invalid, r.too_big)});
  }
  throw InputError({fmt::format("{}: none of the {} configurations for {} GPUs can run: none divides the model, "
                                "batch and GPUs ({} are not valid)",
                                label, r.enumerated, r.gpus, r.invalid)});
}

} // namespace

std::string context_degree(const nlohmann::json& s)
{
  const int c                 = s["parallelism.context"].get<int>();
  const std::string attention = s.value("parallelism.context_attention", std::string("ring"));
  if (attention == "ulysses")
    return fmt::format("{}u", c);
  if (attention == "usp")
    return fmt::format("{}u{}", c, s["parallelism.ulysses_degree"].get<int>());
  return std::to_string(c);
}

PlanOptions with_text_options(PlanOptions options, const std::string& headroom, const std::string& objective,
                              const std::string& schedules)
{
  if (!headroom.empty()) {
    const auto bytes = units::parse_bytes(headroom);
    if (!bytes || *bytes < 0)
      throw InputError({fmt::format("--headroom {}: expected memory per GPU with a unit, e.g. 4GiB or 2GB", headroom)});
    options.headroom_bytes = *bytes;
  }
  if (objective == "cost")
    options.objective = PlanObjective::Cost;
  else if (objective == "energy")
    options.objective = PlanObjective::Energy;
  else if (objective == "throughput")
    options.objective = PlanObjective::Throughput;
  else
    throw InputError({fmt::format("--objective {}: expected throughput, cost or energy", objective)});
  for (size_t at = 0; !schedules.empty() && at != std::string::npos;) {
    const size_t comma = schedules.find(',', at);
    options.schedules.push_back(schedules.substr(at, comma == std::string::npos ? comma : comma - at));
    at = comma == std::string::npos ? comma : comma + 1;
  }
  return options;
}

PlanResult plan_or_refuse(const nlohmann::json& base, const std::string& base_dir, const PlanOptions& options,
                          const std::string& label)
{
  PlanResult r = plan(base, base_dir, options);
  if (r.candidates.empty()) // a property of the input, not a failed simulation
    refuse(label, options, r);
  return r;
}

} // namespace stepsim

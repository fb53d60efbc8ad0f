// What a user asks the planner in words, from the command line (`stepsim plan`) or the Python
// module (stepsim.plan): the options given as text, and the refusal when nothing can run. Both
// come through here so that they read the options and refuse alike.
#pragma once

#include "tools/driver/plan.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace stepsim {

// `options` with the text options read into it: `headroom` memory per GPU with a unit ("4GiB";
// "" for none), `objective` "throughput", "cost" or "energy", `schedules` comma-separated names
// ("" for the default set). An InputError names the option that does not read.
PlanOptions with_text_options(PlanOptions options, const std::string& headroom, const std::string& objective,
                              const std::string& schedules);

// plan(), or when no candidate is left the InputError that says why: what is short in memory and
// by how much, or that nothing divides. `label` names the scenario (its file) in the message.
PlanResult plan_or_refuse(const nlohmann::json& base, const std::string& base_dir, const PlanOptions& options,
                          const std::string& label);

// The context degree of a candidate's settings and how attention runs over it: "4" ring
// attention, "4u" Ulysses, "8u2" USP (Ulysses over 2 ranks, ring attention across 4 such groups).
std::string context_degree(const nlohmann::json& settings);

} // namespace stepsim

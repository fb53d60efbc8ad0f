// Scenario files and documents in, checked scenarios out: the parser (sim/input/) with the
// registered model kinds, the platform presets, the validation pass and the automatic stage split.
#include "sim/simulate.hpp"

#include "sim/input/json_reader.hpp"
#include "sim/input/scenario_parse.hpp"
#include "topologies/nodes/node_type.hpp"
#include "topologies/placement.hpp"
#include "topologies/preset.hpp"
#include "workloads/models/model_kind.hpp"

#include "sim/input/limits.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>

namespace stepsim {

Scenario parse_scenario(const nlohmann::json& document, const std::string& base_dir)
{
  Scenario s = parse_scenario(document, base_dir, model_hooks());
  apply_rated_bandwidths(s.platform); // the node types' datasheet figures where none was given
  return s;
}

Scenario scenario_from_json(const nlohmann::json& document, const std::string& base_dir)
{
  Scenario s = parse_scenario(expand_platform_preset(document), base_dir);
  validate(s);
  balance_stage_layers(s);
  return s;
}

long long platform_gpus(const nlohmann::json& platform)
{
  const nlohmann::json expanded = expand_platform_preset(nlohmann::json{{"platform", platform}});
  const auto integer = [](const nlohmann::json& g, const char* key, long long fallback) {
    return g.contains(key) && g[key].is_number_integer() ? g[key].get<long long>() : fallback; // else the parser says
  };
  long long gpus = 0;
  const nlohmann::json& groups = expanded["platform"].value("node_groups", nlohmann::json());
  if (groups.is_array())
    for (const auto& g : groups)
      if (g.is_object())
        gpus += std::clamp(integer(g, "count", 1), 0LL, limits::kMaxGpus) *
                std::clamp(integer(g, "gpus_per_node", 8), 0LL, limits::kMaxGpusPerNode);
  return gpus;
}

nlohmann::json platform_carrier(const std::string& name, const nlohmann::json& platform)
{
  const long long gpus = std::clamp(platform_gpus(platform), 1LL, static_cast<long long>(std::numeric_limits<int>::max()));
  return {{"name", name},
          {"model", {{"num_layers", 1}, {"hidden_size", 64}, {"num_attention_heads", 1}, {"seq_length", 8}, {"vocab_size", 64}}},
          {"training", {{"global_batch_size", gpus}}},
          {"parallelism", {{"data", gpus}}},
          // No step of this job is replayed, so no rank need stand for others: a platform of
          // several node groups (a mixed one) carries as well as one of a single group.
          {"simulation", {{"fidelity", "full"}}},
          {"platform", platform}};
}

Scenario load_scenario(const std::string& file, const std::vector<std::string>& assignments)
{
  nlohmann::json document = read_json_file(file);
  for (const auto& a : assignments)
    set_by_path(document, a);
  return scenario_from_json(document, std::filesystem::path(file).parent_path().string());
}

} // namespace stepsim

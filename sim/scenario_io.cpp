// Scenario files and documents in, checked scenarios out: the parser (sim/input/) with the
// registered model kinds, the platform presets, the validation pass and the automatic stage split.
#include "sim/simulate.hpp"

#include "sim/input/json_reader.hpp"
#include "sim/input/scenario_parse.hpp"
#include "topologies/nodes/node_type.hpp"
#include "topologies/placement.hpp"
#include "topologies/preset.hpp"
#include "workloads/models/model_kind.hpp"

#include <filesystem>

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

Scenario load_scenario(const std::string& file, const std::vector<std::string>& assignments)
{
  nlohmann::json document = read_json_file(file);
  for (const auto& a : assignments)
    set_by_path(document, a);
  return scenario_from_json(document, std::filesystem::path(file).parent_path().string());
}

} // namespace stepsim

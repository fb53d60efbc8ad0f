// Platform presets: `"platform": {"preset": "dgx-a100-superpod", "nodes": 128, ...}` names a file
// configs/platforms/NAME.json holding `{"platform": {...}}` (node_groups and network, each number
// with its source). Expansion happens on the JSON document, before parse_scenario, so that a
// preset is exactly the fields a user could have written:
// - the preset's platform object is the base;
// - `nodes` sets the count of its first node group;
// - every other field the user gives overrides the preset's: objects merge key by key (RFC 7386
//   merge patch), `node_groups` element by element (node_groups[0].nic.bandwidth changes one
//   field of the first group), other arrays are replaced;
// - `preset` stays in the document, so the report says where the platform came from.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace stepsim {

// The names of configs/platforms/*.json, sorted.
std::vector<std::string> platform_preset_names();
// The first sentence of a preset's "description" (empty where the file has none or is unreadable):
// what `stepsim list` prints beside its name.
std::string platform_preset_summary(const std::string& name);
// The document with platform.preset expanded (unchanged when there is none). Throws InputError
// naming platform.preset or platform.nodes.
nlohmann::json expand_platform_preset(const nlohmann::json& document);

} // namespace stepsim

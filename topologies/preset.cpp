#include "topologies/preset.hpp"

#include "models/device.hpp"
#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace stepsim {

std::vector<std::string> platform_preset_names()
{
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(config_dir() + "/platforms", ec))
    if (entry.path().extension() == ".json")
      names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string platform_preset_summary(const std::string& name)
{
  try {
    const nlohmann::json doc = read_json_file(config_dir() + "/platforms/" + name + ".json");
    if (!doc.is_object() || !doc.contains("description") || !doc["description"].is_string())
      return "";
    std::string text = doc["description"].get<std::string>();
    if (const auto end = text.find(". "); end != std::string::npos)
      text.resize(end);
    return text;
  } catch (const std::exception&) { // a broken preset is named when a scenario asks for it
    return "";
  }
}

nlohmann::json expand_platform_preset(const nlohmann::json& document)
{
  if (!document.is_object() || !document.contains("platform") || !document["platform"].is_object() ||
      !document["platform"].contains("preset"))
    return document;
  const nlohmann::json& given = document["platform"];
  const nlohmann::json& name  = given["preset"];
  const auto names            = platform_preset_names();
  if (!name.is_string() || std::find(names.begin(), names.end(), name.get<std::string>()) == names.end()) {
    std::string near = name.is_string() ? closest_name(name.get<std::string>(), names) : "";
    std::string list;
    for (const auto& n : names)
      list += (list.empty() ? "" : ", ") + fmt::format("\"{}\"", n);
    throw InputError({fmt::format("platform.preset: unknown preset {}{}; the presets in {}/platforms are: {}",
                                  name.dump(), near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near),
                                  config_dir(), list)});
  }
  const std::string file = config_dir() + "/platforms/" + name.get<std::string>() + ".json";
  nlohmann::json preset  = read_json_file(file);
  if (!preset.is_object() || !preset.contains("platform") || !preset["platform"].is_object() ||
      !preset["platform"].contains("node_groups") || !preset["platform"]["node_groups"].is_array() ||
      preset["platform"]["node_groups"].empty())
    throw InputError({fmt::format("platform.preset: {} is not of the form {{\"platform\": {{\"node_groups\": [...], "
                                  "...}}}}", file)});
  nlohmann::json platform = preset["platform"];
  // Merged by index into the preset's groups, so it must be a list; an object would replace the
  // list and leave nothing for platform.nodes to count. The one object taken is the one
  // `--set platform.node_groups.0.gpu=...` builds on a scenario that names a preset: keys that
  // are indices of the preset's groups, each a patch of its group.
  auto indexed = [&platform](const nlohmann::json& groups) {
    if (!groups.is_object() || groups.empty())
      return false;
    for (const auto& [key, value] : groups.items()) {
      const bool digits = std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (key.empty() || key.size() > 6 || !digits)
        return false;
      if (std::stoul(key) >= platform["node_groups"].size())
        return false;
    }
    return true;
  };
  if (given.contains("node_groups") && !given["node_groups"].is_array() && !indexed(given["node_groups"]))
    throw InputError({fmt::format("platform.node_groups: expected an array of node groups, each merged into the "
                                  "preset's group of the same index (or, as --set platform.node_groups.0.gpu=... "
                                  "gives it, an object keyed by the indices of the preset's {} group{}), got {}",
                                  platform["node_groups"].size(), platform["node_groups"].size() == 1 ? "" : "s",
                                  given["node_groups"].is_object() ? "an object" : given["node_groups"].dump())});
  for (const auto& [key, value] : given.items()) {
    if (key == "preset" || key == "nodes")
      continue;
    if (key == "node_groups" && value.is_object()) { // by index, as checked above
      auto& groups = platform["node_groups"];
      for (const auto& [index, patch] : value.items()) {
        auto& group = groups[std::stoul(index)];
        if (group.is_object() && patch.is_object())
          group.merge_patch(patch);
        else
          group = patch; // not an object: the parser names the problem
      }
      continue;
    }
    if (key == "node_groups" && value.is_array()) {
      auto& groups = platform["node_groups"];
      for (size_t i = 0; i < value.size(); ++i) {
        if (i < groups.size() && value[i].is_object())
          groups[i].merge_patch(value[i]);
        else if (i < groups.size())
          groups[i] = value[i]; // not an object: the parser names the problem
        else
          groups.push_back(value[i]);
      }
      continue;
    }
    nlohmann::json patch = nlohmann::json::object();
    patch[key]           = value;
    platform.merge_patch(patch);
  }
  if (given.contains("nodes")) {
    const auto& nodes = given["nodes"];
    if (!nodes.is_number_integer() || nodes.get<long long>() < 1 || nodes.get<long long>() > (1LL << 20))
      throw InputError({fmt::format("platform.nodes: expected the number of nodes of the preset's first node group, "
                                    "an integer from 1 to {}, got {}", 1LL << 20, nodes.dump())});
    if (platform["node_groups"][0].is_object()) // else the parser names what node_groups[0] is
      platform["node_groups"][0]["count"] = nodes;
  }
  platform["preset"]   = name;
  nlohmann::json out   = document;
  out["platform"]      = platform;
  return out;
}

} // namespace stepsim

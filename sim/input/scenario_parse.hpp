// parse_scenario: the JSON contract of the design notes, read through JsonReader so that every
// problem names its path. The model kinds (workloads/models/) live in a later layer and read their
// own fields, so the parser takes what it needs of them as plain functions (sim/scenario_io.hpp
// passes the registered kinds).
#pragma once

#include "sim/core/scenario.hpp"
#include "sim/input/json_reader.hpp"

#include <functional>
#include <string>

namespace stepsim {

struct ModelHooks {
  // Reads the `model` object into the spec, problems into the reader.
  std::function<void(JsonReader& model, ModelSpec& m, const std::string& base_dir)> read;
  // Layers one micro-batch passes through (bounds what the scenario may lower).
  std::function<double(const ModelSpec& m)> layer_count;
  // What the model's kind cannot run of this scenario, each problem with its JSON path.
  std::function<void(const Scenario& s, Problems& problems)> check;
};

Scenario parse_scenario(const nlohmann::json& document, const std::string& base_dir, const ModelHooks& model);

} // namespace stepsim

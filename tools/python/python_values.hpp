// Python values to and from the JSON the simulator reads and writes, and CSV tables to what
// Python users read them with (pandas, or plain lists of dicts).
#pragma once

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

#include <string>

namespace stepsim {

// A Python value as JSON: None, bool, int, float, str, and dicts (with str keys), lists and tuples
// of them, nested at most as deep as a scenario file may be. `path` names the value in errors
// (TypeError for what JSON cannot hold, InputError for nesting too deep).
nlohmann::json to_json_value(pybind11::handle value, const std::string& path, int depth = 0);

// JSON as Python values: dicts, lists, str, int, float, bool and None.
pybind11::object to_python(const nlohmann::json& value);

// A table in CSV as a pandas DataFrame when pandas imports (read by pandas.read_csv, so that it
// equals the DataFrame of the same file), else as a list of dicts, one per row, each cell typed as
// read_csv would type it alone: int, float, bool, str, or None when empty.
pybind11::object table(const std::string& csv);

} // namespace stepsim

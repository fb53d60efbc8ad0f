#include "tools/python/python_values.hpp"

#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"

#include <pybind11/stl.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <vector>

namespace py = pybind11;
using nlohmann::json;

namespace stepsim {

// A Python value as JSON: what json.dumps accepts, bounded in depth as a scenario file is (a
// dict that holds itself would otherwise recurse without end).
json to_json_value(py::handle value, const std::string& path, int depth)
{
  if (depth > kMaxJsonDepth)
    throw InputError({fmt::format("{}: nests deeper than the {} levels a scenario may have", path, kMaxJsonDepth)});
  if (value.is_none())
    return nullptr;
  if (py::isinstance<py::bool_>(value)) // before int: bool is an int in Python
    return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) {
    const long long v = value.cast<long long>();
    return v;
  }
  if (py::isinstance<py::float_>(value))
    return value.cast<double>();
  if (py::isinstance<py::str>(value))
    return value.cast<std::string>();
  if (py::isinstance<py::dict>(value)) {
    json object = json::object();
    for (auto [key, item] : value.cast<py::dict>()) {
      if (!py::isinstance<py::str>(key))
        throw py::type_error(fmt::format("{}: keys must be strings, got {}", path.empty() ? "scenario" : path,
                                         py::repr(key).cast<std::string>()));
      const std::string name = key.cast<std::string>();
      object[name]           = to_json_value(item, path.empty() ? name : path + "." + name, depth + 1);
    }
    return object;
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    json array   = json::array();
    size_t index = 0;
    for (py::handle item : value)
      array.push_back(to_json_value(item, fmt::format("{}[{}]", path, index++), depth + 1));
    return array;
  }
  throw py::type_error(fmt::format("{}: cannot be written as JSON: {}", path.empty() ? "scenario" : path,
                                   py::repr(value).cast<std::string>()));
}

py::object to_python(const json& value)
{
  switch (value.type()) {
  case json::value_t::null: return py::none();
  case json::value_t::boolean: return py::bool_(value.get<bool>());
  case json::value_t::number_integer: return py::int_(value.get<long long>());
  case json::value_t::number_unsigned: return py::int_(value.get<unsigned long long>());
  case json::value_t::number_float: return py::float_(value.get<double>());
  case json::value_t::string: return py::str(value.get<std::string>());
  case json::value_t::array: {
    py::list list;
    for (const auto& item : value)
      list.append(to_python(item));
    return list;
  }
  case json::value_t::object: {
    py::dict dict;
    for (const auto& [key, item] : value.items())
      dict[py::str(key)] = to_python(item);
    return dict;
  }
  default: return py::none(); // binary and discarded values: JSON text never holds them
  }
}

namespace {

// A CSV cell as pandas' read_csv would type it, for the list of dicts given without pandas.
py::object typed_cell(const std::string& cell)
{
  if (cell.empty())
    return py::none();
  if (cell == "True" || cell == "true" || cell == "TRUE")
    return py::bool_(true);
  if (cell == "False" || cell == "false" || cell == "FALSE")
    return py::bool_(false);
  const size_t sign = cell[0] == '-' || cell[0] == '+' ? 1 : 0;
  const bool digits = cell.size() > sign && std::all_of(cell.begin() + static_cast<long>(sign), cell.end(),
                                                        [](char c) { return c >= '0' && c <= '9'; });
  char* end = nullptr;
  errno     = 0;
  if (digits) {
    const long long v = std::strtoll(cell.c_str(), &end, 10);
    if (errno == 0 && *end == '\0')
      return py::int_(v);
  }
  if (!std::isspace(static_cast<unsigned char>(cell[0]))) {
    const double v = std::strtod(cell.c_str(), &end);
    if (*end == '\0')
      return py::float_(v);
  }
  return py::str(cell);
}

} // namespace

// read_csv rather than a DataFrame built from the rows: the column types pandas infers from the
// text are then those a user reading the command line's CSV file gets.
py::object table(const std::string& csv)
{
  py::object io = py::module_::import("io");
  try {
    return py::module_::import("pandas").attr("read_csv")(io.attr("StringIO")(csv));
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_ImportError))
      throw;
  }
  py::list records;
  std::vector<py::str> header;
  for (py::handle row : py::module_::import("csv").attr("reader")(io.attr("StringIO")(csv))) {
    std::vector<std::string> cells = row.cast<std::vector<std::string>>();
    if (header.empty()) {
      for (const auto& c : cells)
        header.emplace_back(c);
      continue;
    }
    py::dict record;
    for (size_t i = 0; i < header.size(); ++i)
      record[header[i]] = i < cells.size() ? typed_cell(cells[i]) : py::none();
    records.append(record);
  }
  return records;
}

} // namespace stepsim

#include "tools/driver/sweep.hpp"

#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/output/report_csv.hpp"
#include "sim/simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

namespace stepsim {

namespace {

// An object of path → values: one dimension per path (grid), or one dimension of all (zip).
void read_axes(const nlohmann::json& node, const std::string& path, bool zipped, Problems& problems,
               std::vector<SweepDimension>& dimensions)
{
  if (!node.is_object() || node.empty()) {
    problems.add(path, "expected an object of JSON path → list of values");
    return;
  }
  SweepDimension group;
  for (const auto& [axis, values] : node.items()) {
    if (!values.is_array() || values.empty()) {
      problems.add(path + "." + axis, "expected a non-empty list of values");
      continue;
    }
    if (zipped && !group.empty() && values.size() != group.front().values.size()) {
      problems.add(path + "." + axis, fmt::format("has {} values but {} has {}; zipped lists go together, one row "
                                                  "at a time, so they need one length",
                                                  values.size(), group.front().path, group.front().values.size()));
      continue;
    }
    SweepAxis a{axis, values.get<std::vector<nlohmann::json>>()};
    if (zipped)
      group.push_back(std::move(a));
    else
      dimensions.push_back({std::move(a)});
  }
  if (zipped && !group.empty())
    dimensions.push_back(std::move(group));
}

void apply(nlohmann::json& document, const std::string& path, const nlohmann::json& value)
{
  set_by_path(document, path + "=" + value.dump());
}

} // namespace

size_t Sweep::points() const
{
  size_t n = 1;
  for (const auto& d : dimensions)
    n *= d.front().values.size();
  return n;
}

std::vector<std::string> Sweep::columns() const
{
  std::vector<std::string> out;
  for (const auto& d : dimensions)
    for (const auto& a : d)
      out.push_back(a.path);
  // By name, as the parameters of a result line are, so a merge of shards finds the same order.
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<std::string, nlohmann::json>> Sweep::parameters(size_t index) const
{
  std::vector<std::pair<std::string, nlohmann::json>> out;
  std::vector<size_t> picks(dimensions.size());
  for (size_t d = dimensions.size(); d-- > 0;) {
    const size_t size = dimensions[d].front().values.size();
    picks[d]          = index % size;
    index /= size;
  }
  for (size_t d = 0; d < dimensions.size(); ++d)
    for (const auto& a : dimensions[d])
      out.emplace_back(a.path, a.values[picks[d]]);
  return out;
}

nlohmann::json Sweep::parameter_object(size_t index) const
{
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [path, value] : parameters(index))
    out[path] = value;
  return out;
}

Sweep load_sweep(const std::string& file)
{
  nlohmann::json document = read_json_file(file);
  const std::string dir   = std::filesystem::path(file).parent_path().string();
  Problems problems;
  if (!document.is_object())
    throw InputError({fmt::format("{}: expected a sweep object with \"base\" and \"grid\" or \"zip\"", file)});
  JsonReader r(document, "", problems);
  Sweep sweep;
  sweep.name = r.text("name", std::filesystem::path(file).stem().string());
  if (const nlohmann::json* base = r.raw("base")) {
    if (base->is_string()) {
      std::filesystem::path path = std::filesystem::path(dir.empty() ? "." : dir) / base->get<std::string>();
      sweep.base     = read_json_file(path.string());
      sweep.base_dir = path.parent_path().string();
    } else if (base->is_object()) {
      sweep.base     = *base;
      sweep.base_dir = dir.empty() ? "." : dir;
    } else {
      problems.add("base", "expected a scenario file name or a scenario object");
    }
  } else {
    problems.add("base", "missing: the scenario every point starts from (a file name or an object)");
  }
  if (const nlohmann::json* set = r.raw("set")) {
    if (!set->is_object())
      problems.add("set", "expected an object of JSON path → value");
    else if (sweep.base.is_object())
      for (const auto& [path, value] : set->items())
        apply(sweep.base, path, value);
  }
  if (const nlohmann::json* grid = r.raw("grid"))
    read_axes(*grid, "grid", false, problems, sweep.dimensions);
  if (const nlohmann::json* zip = r.raw("zip")) {
    if (zip->is_array())
      for (size_t i = 0; i < zip->size(); ++i)
        read_axes((*zip)[i], fmt::format("zip[{}]", i), true, problems, sweep.dimensions);
    else
      read_axes(*zip, "zip", true, problems, sweep.dimensions);
  }
  r.raw("description");
  r.reject_unknown_keys();
  if (problems.empty() && sweep.dimensions.empty())
    problems.add("grid", "a sweep needs at least one axis in \"grid\" or \"zip\"");
  problems.throw_if_any();
  return sweep;
}

nlohmann::json evaluate_point(const Sweep& sweep, size_t index, bool allow_oom)
{
  nlohmann::json result = {{"point", index}, {"of", sweep.points()}};
  nlohmann::json parameters = sweep.parameter_object(index);
  nlohmann::json document   = sweep.base;
  try {
    for (const auto& [path, value] : sweep.parameters(index))
      apply(document, path, value);
    if (allow_oom)
      set_by_path(document, "simulation.allow_oom=true");
    result["parameters"] = parameters;
    Scenario s           = scenario_from_json(document, sweep.base_dir);
    result["report"]     = to_json(simulate(s));
    result["status"]     = "ok";
    result["reason"]     = "";
  } catch (const InputError& e) {
    std::string reason;
    for (const auto& p : e.problems())
      reason += (reason.empty() ? "" : "; ") + p;
    result["parameters"] = parameters;
    result["status"]     = "infeasible";
    result["reason"]     = reason;
  } catch (const std::exception& e) {
    result["parameters"] = parameters;
    result["status"]     = "error";
    result["reason"]     = e.what();
  }
  return result;
}

std::string sweep_csv(const std::vector<std::string>& axes, const std::vector<nlohmann::json>& results)
{
  std::vector<std::string> report_columns;
  std::map<std::string, bool> seen;
  std::vector<std::map<std::string, std::string>> rows(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].contains("report"))
      continue;
    for (auto& [column, value] : csv_columns(report_from_json(results[i]["report"]))) {
      if (!seen[column]) {
        seen[column] = true;
        report_columns.push_back(column);
      }
      rows[i][column] = value;
    }
  }
  // Fields are appended one by one (GCC 12 warns falsely on "," + std::string temporaries).
  std::string out = "point";
  auto field      = [&out](const std::string& text) {
    out += ',';
    out += text;
  };
  for (const auto& a : axes)
    field(csv_escape(a));
  field("status");
  field("reason");
  for (const auto& c : report_columns)
    field(c);
  out += '\n';
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    out += std::to_string(r["point"].get<size_t>());
    for (const auto& a : axes) {
      const auto& v = r["parameters"].contains(a) ? r["parameters"][a] : nlohmann::json();
      field(csv_escape(v.is_string() ? v.get<std::string>() : v.dump()));
    }
    field(csv_escape(r["status"].get<std::string>()));
    field(csv_escape(r["reason"].get<std::string>()));
    for (const auto& c : report_columns) {
      auto it = rows[i].find(c);
      field(it == rows[i].end() ? std::string() : it->second);
    }
    out += '\n';
  }
  return out;
}

std::string sweep_jsonl(const std::vector<nlohmann::json>& results)
{
  std::string out;
  for (const auto& r : results)
    out += r.dump() + "\n";
  return out;
}

} // namespace stepsim

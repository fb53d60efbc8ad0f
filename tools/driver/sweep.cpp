#include "tools/driver/sweep.hpp"

#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/input/limits.hpp"
#include "sim/output/report_csv.hpp"
#include "sim/simulate.hpp"
#include "tools/driver/process_pool.hpp"
#include "topologies/preset.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <sstream>

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
    SweepAxis a{axis, values.get<std::vector<nlohmann::json>>(), path + "." + axis};
    if (zipped)
      group.push_back(std::move(a));
    else
      dimensions.push_back({std::move(a)});
  }
  if (zipped && !group.empty())
    dimensions.push_back(std::move(group));
}

// FNV-1a, 64 bits: a change of the inputs, not an attacker, is what the digest must notice.
std::string text_digest(const std::string& text)
{
  uint64_t hash = 14695981039346656037ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", hash);
}

void apply(nlohmann::json& document, const std::string& path, const nlohmann::json& value)
{
  set_by_path(document, path + "=" + value.dump());
}

// An axis path as the parser names it in its messages: "platform.node_groups.0.gpu" is
// "platform.node_groups[0].gpu".
std::string as_reported(const std::string& path)
{
  std::string out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot       = std::min(path.find('.', start), path.size());
    std::string part = path.substr(start, dot - start);
    const bool index = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    out += index ? "[" + part + "]" : (out.empty() ? "" : ".") + part;
    start = dot + 1;
  }
  return out;
}

// A misspelt axis path ("parallelism.tensr") makes every point infeasible with one and the same
// reason, and the sweep would end "successfully" with nothing simulated: the parser's unknown
// keys of point 0 that an axis path runs through are refused here, naming the axis.
void check_axis_paths(const Sweep& sweep, Problems& problems)
{
  nlohmann::json document = sweep.base;
  std::vector<std::string> unknown; // the paths the parser called unknown keys
  try {
    for (const auto& [path, value] : sweep.parameters(0))
      apply(document, path, value);
    scenario_from_json(document, sweep.base_dir);
  } catch (const InputError& e) {
    for (const auto& p : e.problems())
      if (auto colon = p.find(": unknown key"); colon != std::string::npos)
        unknown.push_back(p);
  } catch (const std::exception&) {
    return; // the points report it
  }
  for (const auto& d : sweep.dimensions)
    for (const auto& a : d) {
      const std::string reported = as_reported(a.path);
      for (const auto& p : unknown) {
        const std::string key = p.substr(0, p.find(": unknown key"));
        if (reported == key || reported.rfind(key + ".", 0) == 0 || reported.rfind(key + "[", 0) == 0)
          problems.add(a.where, fmt::format("not a field of the scenario ({})", p));
      }
    }
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
  return sweep_from_json(read_json_file(file), std::filesystem::path(file).parent_path().string(), file);
}

Sweep sweep_from_json(const nlohmann::json& document, const std::string& dir, const std::string& label)
{
  Problems problems;
  if (!document.is_object())
    throw InputError({fmt::format("{}: expected a sweep object with \"base\" and \"grid\" or \"zip\"", label)});
  JsonReader r(document, "", problems);
  Sweep sweep;
  sweep.name = r.text("name", std::filesystem::path(label).stem().string());
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
  // One field on two axes (grid and zip, or two zip groups, in either path spelling): the later
  // axis would overwrite the earlier in every point, so half the points would be duplicates
  // labelled with values they did not run.
  // So does an axis on a field inside another axis's object ("training" and
  // "training.micro_batch_size"): the inner one wins, and the rows name both.
  {
    std::map<std::string, std::string> seen; // field as the parser names it → the axis that varies it
    for (const auto& d : sweep.dimensions)
      for (const auto& a : d) {
        const std::string field = as_reported(a.path);
        const auto [at, fresh]  = seen.emplace(field, a.where);
        if (!fresh) {
          problems.add(a.where, fmt::format("varies {} again, which {} already varies; each field may be on one "
                                            "axis only",
                                            field, at->second));
          continue;
        }
        for (const auto& [other, where] : seen) {
          const auto inside = [](const std::string& inner, const std::string& outer) {
            return inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
                   (inner[outer.size()] == '.' || inner[outer.size()] == '[');
          };
          if (inside(field, other) || inside(other, field))
            problems.add(a.where, fmt::format("varies {}, which overlaps {} that {} varies; each field may be on one "
                                              "axis only",
                                              field, other, where));
        }
      }
  }
  r.raw("description");
  r.reject_unknown_keys();
  if (problems.empty() && sweep.dimensions.empty())
    problems.add("grid", "a sweep needs at least one axis in \"grid\" or \"zip\"");
  // In doubles, which cannot wrap: 256 values on each of 8 axes is 2^64 points, 0 in a size_t.
  double points = 1;
  std::string sizes;
  for (const auto& d : sweep.dimensions) {
    points *= static_cast<double>(d.front().values.size());
    sizes += fmt::format("{}{}", sizes.empty() ? "" : " × ", d.front().values.size());
  }
  if (points > limits::kMaxSweepPoints)
    problems.add(r.raw("grid") != nullptr ? "grid" : "zip",
                 fmt::format("{} = {:.4g} points, more than the {:.0f} a sweep may have; split it into several sweeps",
                             sizes, points, limits::kMaxSweepPoints));
  if (problems.empty())
    check_axis_paths(sweep, problems);
  problems.throw_if_any();
  // The preset expanded, since a preset file that changed changes every point. A preset that does
  // not expand fails each point with its reason, and the base as given stands for it here.
  nlohmann::json resolved = sweep.base;
  try {
    resolved = expand_platform_preset(sweep.base);
  } catch (const InputError&) {
  }
  sweep.digest = text_digest(document.dump() + "\n" + resolved.dump());
  return sweep;
}

std::string result_line_problem(const nlohmann::json& line)
{
  if (!line.is_object())
    return "expected a sweep result line, a JSON object";
  for (const char* key : {"point", "of"})
    if (!line.contains(key) || !line[key].is_number_unsigned())
      return fmt::format("{}: expected a point number (an integer >= 0), got {}", key,
                         line.contains(key) ? line[key].dump() : "nothing");
  if (line["of"].get<size_t>() == 0 || line["point"].get<size_t>() >= line["of"].get<size_t>())
    return fmt::format("point: {} is not a point of a sweep of {} points", line["point"].get<size_t>(),
                       line["of"].get<size_t>());
  if (!line.contains("sweep_digest") || !line["sweep_digest"].is_string())
    return fmt::format("sweep_digest: expected the digest of the sweep that wrote the line (a string), got {}",
                       line.contains("sweep_digest") ? line["sweep_digest"].dump() : "nothing");
  if (!line.contains("parameters") || !line["parameters"].is_object())
    return "parameters: expected an object of JSON path → value";
  const std::vector<std::string> statuses = {"ok", "infeasible", "error"};
  if (!line.contains("status") || !line["status"].is_string() ||
      std::find(statuses.begin(), statuses.end(), line["status"].get<std::string>()) == statuses.end())
    return fmt::format("status: expected \"ok\", \"infeasible\" or \"error\", got {}",
                       line.contains("status") ? line["status"].dump() : "nothing");
  if (!line.contains("reason") || !line["reason"].is_string())
    return "reason: expected a string";
  if (line["status"] == "ok" && !line.contains("report"))
    return "report: missing from a point whose status is \"ok\"";
  // A report is read back whatever the status (the CSV takes its columns from every row that has
  // one): a malformed report beside "infeasible" escaped as the JSON library's exception (found
  // by tests/fuzz/fuzz_results.cpp).
  if (line.contains("report")) {
    if (!line["report"].is_object())
      return fmt::format("report: expected the report object stepsim writes, got {}", line["report"].type_name());
    try {
      const Report r = report_from_json(line["report"]);
      // A time or a rate no simulation gives: the line was edited, and a merge would pass it on.
      if (!(r.step_time_s > 0) || !std::isfinite(r.step_time_s) || !(r.tokens_per_s >= 0) || !std::isfinite(r.tokens_per_s))
        return fmt::format("report: step_time_s {} and tokens_per_s {}: expected a positive step time and a rate >= 0",
                           r.step_time_s, r.tokens_per_s);
    } catch (const nlohmann::json::exception& e) {
      // In the report's own terms, not the JSON library's: "key 'name' not found" is a missing
      // field, "type must be number" a field of another type.
      std::string reason = e.what();
      auto bracket       = reason.find("] ");
      reason             = bracket == std::string::npos ? reason : reason.substr(bracket + 2);
      if (auto key = reason.find("key '"); key != std::string::npos) {
        const auto end = reason.find('\'', key + 5);
        return fmt::format("report.{}: missing (expected the report stepsim writes)", reason.substr(key + 5, end - key - 5));
      }
      if (reason.rfind("type must be ", 0) == 0)
        return fmt::format("report: a field of another type than stepsim writes ({})", reason);
      return "report: " + reason;
    }
  }
  return "";
}

nlohmann::json evaluate_point(const Sweep& sweep, size_t index, bool allow_oom)
{
  nlohmann::json result = {{"point", index}, {"of", sweep.points()}, {"sweep_digest", sweep.digest}};
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

void evaluate_points(const Sweep& sweep, const std::vector<size_t>& points, int jobs, bool allow_oom,
                     const std::function<void(size_t, nlohmann::json)>& done)
{
  run_in_processes(
      points, jobs, [&](size_t point) { return evaluate_point(sweep, point, allow_oom).dump(); },
      [&](size_t point, std::string text) {
        auto j = nlohmann::json::parse(text, nullptr, false);
        if (text.empty() || j.is_discarded())
          j = {{"point", point},  {"of", sweep.points()}, {"sweep_digest", sweep.digest}, {"parameters", sweep.parameter_object(point)},
               {"status", "error"}, {"reason", "the worker process died"}};
        done(point, std::move(j));
      });
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

std::vector<nlohmann::json> result_lines(const std::string& text, const std::string& file, std::string digest)
{
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (line.empty())
      continue;
    auto j              = nlohmann::json::parse(line, nullptr, false);
    std::string problem = j.is_discarded() ? "expected a sweep result line, got malformed JSON" : result_line_problem(j);
    if (!problem.empty())
      throw InputError({fmt::format("{}:{}: {}", file, number, problem)});
    if (digest.empty())
      digest = j["sweep_digest"];
    if (j["sweep_digest"] != digest)
      throw InputError({fmt::format("{}:{}: written by another sweep, or by this one before its sweep file or base "
                                    "scenario changed (digest {}, expected {})",
                                    file, number, j["sweep_digest"].get<std::string>(), digest)});
    out.push_back(std::move(j));
  }
  return out;
}

} // namespace stepsim

// `import stepsim`: the command line's run, sweep and plan as Python functions (README, "Python").
//
// The module calls the code the commands call (sim/simulate.hpp, tools/driver/sweep.hpp,
// tools/driver/plan_request.hpp) and hands back what they write: run() the JSON report as a dict,
// sweep() the sweep's CSV and plan() a table of the configurations `stepsim plan` prints, each
// read by pandas when it imports and as a list of dicts otherwise.
//
// SimGrid allows one engine per process, and the Python process must outlive many simulations,
// so every simulation runs in a forked child, as in the command line's sweeps; the GIL is
// released while the C++ side works, so other Python threads run on meanwhile.
#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/input/limits.hpp"
#include "sim/output/report_csv.hpp"
#include "sim/simulate.hpp"
#include "tools/driver/plan_request.hpp"
#include "tools/driver/sweep.hpp"
#include "tools/python/python_values.hpp"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>

namespace py = pybind11;
using nlohmann::json;

namespace stepsim {
namespace {

// stepsim.InputError, created once with the module and never freed (it lives as long as Python).
PyObject* input_error_class = nullptr;

// A scenario or sweep as the functions take it: a file name (str or os.PathLike), read as the
// command line reads it, or a dict, whose relative paths resolve from the current directory.
struct Input {
  std::optional<std::string> file;
  json document;
};

Input read_input(py::handle value, const char* what)
{
  if (py::isinstance<py::dict>(value))
    return {std::nullopt, to_json_value(value, "")};
  if (py::isinstance<py::str>(value) || py::hasattr(value, "__fspath__"))
    return {py::module_::import("os").attr("fspath")(value).cast<std::string>(), json()};
  throw py::type_error(fmt::format("{}: expected a file name or a dict, got {}", what,
                                   py::str(py::type::of(value).attr("__name__")).cast<std::string>()));
}

// `set=`: a dict {path: value} or a list of "path=value", as --set takes them.
std::vector<std::string> assignments(py::handle set)
{
  std::vector<std::string> out;
  if (set.is_none())
    return out;
  if (py::isinstance<py::dict>(set)) {
    for (auto [path, value] : set.cast<py::dict>())
      out.push_back(py::str(path).cast<std::string>() + "=" +
                    to_json_value(value, py::str(path).cast<std::string>()).dump());
    return out;
  }
  if (py::isinstance<py::str>(set))
    return {set.cast<std::string>()};
  for (py::handle item : set) {
    if (!py::isinstance<py::str>(item))
      throw py::type_error("set: expected a dict {path: value} or a list of \"path=value\" strings");
    out.push_back(item.cast<std::string>());
  }
  return out;
}

void check_range(const char* name, long long value, long long low, long long high)
{
  if (value < low || value > high)
    throw InputError({fmt::format("{}: {} is not in [{} - {}]", name, value, low, high)});
}

// ---- stepsim.run ------------------------------------------------------------------------------

py::object run_function(py::object scenario, py::object set, bool allow_oom, int links)
{
  check_range("links", links, 0, 100000);
  Input input                   = read_input(scenario, "scenario");
  std::vector<std::string> sets = assignments(set);
  if (allow_oom)
    sets.push_back("simulation.allow_oom=true");
  json out;
  {
    py::gil_scoped_release release;
    Scenario s = [&] {
      if (input.file)
        return load_scenario(*input.file, sets);
      for (const auto& a : sets)
        set_by_path(input.document, a);
      return scenario_from_json(input.document, ".");
    }();
    // The report as the child wrote it (to_json, as `run --json` writes it), not read back.
    out = simulate_isolated_json(s, links);
  }
  return to_python(out);
}

// ---- stepsim.sweep ----------------------------------------------------------------------------

py::object sweep_function(py::object sweep_input, int jobs, bool allow_oom)
{
  check_range("jobs", jobs, 1, 1024);
  Input input = read_input(sweep_input, "sweep");
  std::optional<Sweep> sweep;
  {
    py::gil_scoped_release release;
    sweep = input.file ? load_sweep(*input.file) : sweep_from_json(input.document, ".", "sweep");
  }
  // The points go to the workers in chunks of a few per worker: Python's Ctrl-C handler only sets
  // a flag, which is looked at between chunks (with the GIL), so that Ctrl-C stops a long sweep
  // within a chunk rather than at its end.
  std::map<size_t, json> results;
  const size_t chunk = static_cast<size_t>(jobs) * 8;
  for (size_t first = 0; first < sweep->points(); first += chunk) {
    if (PyErr_CheckSignals() != 0)
      throw py::error_already_set();
    std::vector<size_t> points(std::min(chunk, sweep->points() - first));
    std::iota(points.begin(), points.end(), first);
    py::gil_scoped_release release;
    evaluate_points(*sweep, points, jobs, allow_oom,
                    [&](size_t point, json line) { results.emplace(point, std::move(line)); });
  }
  std::vector<json> ordered;
  for (auto& [point, line] : results)
    ordered.push_back(std::move(line));
  return table(sweep_csv(sweep->columns(), ordered));
}

// ---- stepsim.plan -----------------------------------------------------------------------------

// The configurations `plan` prints, as CSV: rank, the settings, cost_per_token when priced, then
// the report columns a sweep's CSV has (sim/output/report_csv.hpp).
std::string plan_csv(const PlanResult& r, int top)
{
  const bool priced =
      std::any_of(r.candidates.begin(), r.candidates.end(), [](const auto& c) { return c.cost_per_token > 0; });
  std::vector<const PlanCandidate*> shown;
  for (const auto& c : r.candidates)
    if (c.simulated && static_cast<int>(shown.size()) < top)
      shown.push_back(&c);
  std::vector<std::string> settings, report_columns;
  std::vector<std::map<std::string, std::string>> rows(shown.size());
  auto add = [](std::vector<std::string>& columns, const std::string& column) {
    if (std::find(columns.begin(), columns.end(), column) == columns.end())
      columns.push_back(column);
  };
  for (size_t i = 0; i < shown.size(); ++i) {
    for (const auto& [path, value] : shown[i]->settings.items()) {
      add(settings, path);
      rows[i][path] = csv_escape(value.is_string() ? value.get<std::string>() : value.dump());
    }
    if (priced)
      rows[i]["cost_per_token"] = json(shown[i]->cost_per_token).dump();
    for (auto& [column, value] : csv_columns(shown[i]->report)) {
      add(report_columns, column);
      rows[i][column] = value;
    }
  }
  std::vector<std::string> columns = settings;
  if (priced)
    columns.push_back("cost_per_token");
  columns.insert(columns.end(), report_columns.begin(), report_columns.end());
  std::string out = "rank";
  for (const auto& c : columns) {
    out += ',';
    out += csv_escape(c);
  }
  out += '\n';
  for (size_t i = 0; i < rows.size(); ++i) {
    out += std::to_string(i + 1);
    for (const auto& c : columns) {
      out += ',';
      auto it = rows[i].find(c);
      if (it != rows[i].end())
        out += it->second;
    }
    out += '\n';
  }
  return out;
}

py::object plan_function(py::object scenario, py::object set, int gpus, int top, int simulate, int jobs,
                const std::string& objective, py::object headroom, double price_per_gpu_hour, py::object schedules,
                bool quiet)
{
  if (gpus != 0)
    check_range("gpus", gpus, 1, limits::kMaxPlatformGpus);
  check_range("top", top, 1, 1000);
  check_range("simulate", simulate, 0, 1 << 20);
  check_range("jobs", jobs, 1, 1024);
  if (!(price_per_gpu_hour >= 0 && price_per_gpu_hour <= limits::kMaxPricePerGpuHour))
    throw InputError({fmt::format("price_per_gpu_hour: {} is not in [0 - {}]", price_per_gpu_hour,
                                  limits::kMaxPricePerGpuHour)});
  Input input                   = read_input(scenario, "scenario");
  std::vector<std::string> sets = assignments(set);
  PlanOptions options;
  options.gpus               = gpus;
  options.simulate           = simulate;
  options.jobs               = jobs;
  options.quiet              = quiet;
  options.price_per_gpu_hour = price_per_gpu_hour;
  // Headroom as the command line's text ("4GiB") or as a number of bytes.
  std::string headroom_text;
  if (py::isinstance<py::str>(headroom))
    headroom_text = headroom.cast<std::string>();
  else if (!headroom.is_none()) {
    options.headroom_bytes = headroom.cast<double>();
    if (!(options.headroom_bytes >= 0))
      throw InputError({fmt::format("headroom: expected bytes >= 0 or a text with a unit such as \"4GiB\"")});
  }
  std::string schedule_text;
  if (py::isinstance<py::str>(schedules))
    schedule_text = schedules.cast<std::string>();
  else if (!schedules.is_none())
    for (py::handle name : schedules)
      schedule_text += (schedule_text.empty() ? "" : ",") + py::str(name).cast<std::string>();
  std::string csv;
  {
    py::gil_scoped_release release;
    json document         = input.file ? read_json_file(*input.file) : input.document;
    const std::string dir = input.file ? std::filesystem::path(*input.file).parent_path().string() : ".";
    for (const auto& a : sets)
      set_by_path(document, a);
    options            = with_text_options(options, headroom_text, objective, schedule_text);
    const PlanResult r = plan_or_refuse(document, dir, options, input.file ? *input.file : "scenario");
    if (std::none_of(r.candidates.begin(), r.candidates.end(), [](const auto& c) { return c.simulated; }))
      throw std::runtime_error(fmt::format("{} simulations failed; the first: {}", r.failed, r.first_failure));
    csv = plan_csv(r, top);
  }
  return table(csv);
}

} // namespace
} // namespace stepsim

PYBIND11_MODULE(stepsim, m)
{
  using namespace stepsim;
  namespace py = pybind11;
  m.doc() = "stepsim: predicts one training step of a distributed deep-learning job (see README.md, \"Python\")";

  input_error_class = PyErr_NewExceptionWithDoc(
      "stepsim.InputError",
      "Bad input: the message holds one line per problem, each naming its JSON path, as the command line prints "
      "them; .problems is the list of those lines.",
      PyExc_ValueError, nullptr);
  m.attr("InputError") = py::handle(input_error_class);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const InputError& e) {
      std::string message;
      for (const auto& line : e.problems())
        message += (message.empty() ? "" : "\n") + line;
      py::object error = py::reinterpret_steal<py::object>(
          PyObject_CallFunctionObjArgs(input_error_class, py::str(message).ptr(), nullptr));
      if (!error)
        return; // the call set its own error
      error.attr("problems") = py::cast(e.problems());
      PyErr_SetObject(input_error_class, error.ptr());
    }
  });

  m.def("run", &run_function, py::arg("scenario"), py::arg("set") = py::none(), py::arg("allow_oom") = false,
        py::arg("links") = 0,
        R"(Simulates one training step; returns the report as a dict (what `stepsim run FILE --json OUT` writes).

scenario: a scenario file name (its relative paths resolve from its folder) or a dict (from the
          current directory).
set:      overrides, as --set: a dict {"parallelism.tensor": 4} or a list ["parallelism.tensor=4"].
allow_oom: simulate even when a stage does not fit in device memory.
links:    report that many of the busiest links (run --links N).
Raises stepsim.InputError (a ValueError) on bad input.)");
  m.def("sweep", &sweep_function, py::arg("sweep"), py::arg("jobs") = 1, py::arg("allow_oom") = false,
        R"(Simulates every point of a sweep (a sweep file name or a dict, see tools/driver/sweep.hpp) in `jobs`
worker processes; returns one row per point, the CSV `stepsim sweep FILE` writes: a pandas DataFrame
when pandas is installed, else a list of dicts.)");
  m.def("plan", &plan_function, py::arg("scenario"), py::arg("set") = py::none(), py::arg("gpus") = 0, py::arg("top") = 10,
        py::arg("simulate") = 32, py::arg("jobs") = 1, py::arg("objective") = "throughput",
        py::arg("headroom") = py::none(), py::arg("price_per_gpu_hour") = 0.0, py::arg("schedules") = py::none(),
        py::arg("quiet") = true,
        R"(Ranks the parallel configurations of a scenario's model on its platform, as `stepsim plan` does
(its options: gpus, top, simulate, jobs, objective "throughput" | "cost" | "energy", headroom "4GiB"
or bytes, price_per_gpu_hour, schedules "1f1b,gpipe" or a list; quiet=False shows progress).
Returns the `top` configurations it prints, best first: rank, the settings (JSON path columns),
cost_per_token when priced, and the report's columns; a DataFrame with pandas, else a list of dicts.)");
}

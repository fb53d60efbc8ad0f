// Parameter sweeps: a base scenario and axes over any JSON paths, expanded into points, each
// simulated in a worker process, written as one CSV row and one JSON line per point.
//
//   {
//     "base": "../scenarios/default.json",          a scenario file (relative to this file) or object
//     "set":  { "training.micro_batch_size": 2 },   fixed overrides of the base
//     "grid": { "parallelism.pipeline": [8, 16],    every combination of these values...
//               "parallelism.schedule": ["1f1b", "gpipe"] },
//     "zip":  { "parallelism.tensor": [4, 8],       ...with each row of these lists, taken together
//               "parallelism.data":   [16, 8] }     (or a list of such groups, each crossed with
//   }                                                the others)
//
// Points are numbered in a fixed order (grid axes by path, then zip groups, the last varying
// fastest), so a point's number, its row and its JSON line do not depend on -j or on sharding.
// A point that does not validate or does not fit in memory is kept as a row with its reason.
// Axis columns come in the order of their paths' names.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace stepsim {

struct SweepAxis {
  std::string path;
  std::vector<nlohmann::json> values;
  std::string where; // its place in the sweep file: "grid.PATH", "zip[1].PATH"
};

// One dimension of the sweep: a grid axis, or a zip group of axes of one length that vary together.
using SweepDimension = std::vector<SweepAxis>;

struct Sweep {
  std::string name;
  nlohmann::json base; // the base scenario with "set" applied
  std::string base_dir; // where paths inside the base scenario are relative to
  std::vector<SweepDimension> dimensions;
  // Of the sweep file and the base scenario with "set" applied and its platform preset expanded:
  // every result line carries it, so that a journal or a shard of another sweep, or of this one
  // before its base changed, is refused rather than mixed in.
  std::string digest;
  size_t points() const;
  // The (path, value) pairs of point `index`, in column order.
  std::vector<std::pair<std::string, nlohmann::json>> parameters(size_t index) const;
  nlohmann::json parameter_object(size_t index) const; // the same as {path: value}
  std::vector<std::string> columns() const; // the axis paths, in column order (by name)
};

// Reads and checks a sweep file; throws InputError naming the JSON path of each problem.
Sweep load_sweep(const std::string& file);
// The same for a sweep document (the Python module's dict): `dir` resolves a base scenario given
// by file name, `label` names the document in messages and, without "name", names the sweep.
Sweep sweep_from_json(const nlohmann::json& document, const std::string& dir, const std::string& label);

// The result of one point as one JSON line's object: point, of, sweep_digest, parameters, status
// ("ok", "infeasible", "error"), reason, report.
nlohmann::json evaluate_point(const Sweep& sweep, size_t index, bool allow_oom);

// Simulates `points` of the sweep in up to `jobs` worker processes (tools/driver/process_pool.hpp)
// and hands each result line to done(point, line) in the parent as it finishes; a worker that
// dies without answering gives a line of status "error".
void evaluate_points(const Sweep& sweep, const std::vector<size_t>& points, int jobs, bool allow_oom,
                     const std::function<void(size_t, nlohmann::json)>& done);

// What is wrong with `line` as a result line (the fields above, of the right types, the point
// inside the sweep, a report that reads back); "" when nothing is.
std::string result_line_problem(const nlohmann::json& line);

// The result lines of `text` (one per line), each checked: a line that is not one, or one of
// another sweep than `digest` (any sweep's when empty, then the first line's), is an InputError
// naming FILE:LINE. Journals and shards are read through it.
std::vector<nlohmann::json> result_lines(const std::string& text, const std::string& file, std::string digest);

// CSV of results in point order: point, the axes, status, reason, then every report column that
// any row has (in the order rows first show them). Equal inputs give equal bytes.
std::string sweep_csv(const std::vector<std::string>& axes, const std::vector<nlohmann::json>& results);
// One JSON line per result, in point order.
std::string sweep_jsonl(const std::vector<nlohmann::json>& results);

} // namespace stepsim

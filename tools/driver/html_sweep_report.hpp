// A sweep's results as a self-contained HTML page (`stepsim sweep --html OUT`): a Pareto plot
// of throughput against memory per GPU, or against energy per token (a toggle), with the front
// marked; the points that were not plotted (infeasible, failed) with their reasons; and every
// point as a table of the CSV's rows and columns (sweep_csv, sweep.hpp), sorted by a click on a
// header (numerically where a column holds only numbers). Built from the same result objects as
// the CSV and JSONL; the same results give the same bytes.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace stepsim {

// `axes` and `results` as sweep_csv takes them (results in point order).
std::string html_sweep_report(const std::string& name, const std::vector<std::string>& axes,
                              const std::vector<nlohmann::json>& results);

} // namespace stepsim

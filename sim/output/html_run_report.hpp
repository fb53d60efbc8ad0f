// One simulated step as a self-contained HTML page (`stepsim run --html OUT`): the headline
// figures the table prints, the per-stage table, the Gantt chart of gantt_svg.hpp inline, the
// memory per GPU (the peak GPU's parts stacked, each stage's total) against the device's
// capacity, and the busiest links and longest waits the report lists. The report itself is
// embedded as JSON (<script type="application/json" id="stepsim-report">, to_json's form) for
// whoever wants to script against the page. Same report and timeline, same bytes.
#pragma once

#include "sim/core/report.hpp"
#include "sim/output/timeline.hpp"

#include <string>

namespace stepsim {

// `timeline` may be null: the page then says the Gantt chart was not recorded.
std::string html_run_report(const Report& report, const Timeline* timeline);

} // namespace stepsim

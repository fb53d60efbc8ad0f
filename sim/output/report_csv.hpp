// The report as one CSV row: every scalar figure of the JSON report, the memory breakdown as
// memory_<part>, and each stage's figures as stage<N>_<figure>. Numbers are written exactly as
// to_json writes them (9 significant digits), so the CSV and the JSON of one run agree and both
// are byte-identical across runs. A sweep writes csv_header once and csv_row per point.
#pragma once

#include "sim/core/report.hpp"

#include <string>
#include <utility>
#include <vector>

namespace stepsim {

// Ordered (column, value) pairs; values are already CSV-escaped.
std::vector<std::pair<std::string, std::string>> csv_columns(const Report& r);
// The header line and the row line, each ending with a newline.
std::string csv_header(const Report& r);
std::string csv_row(const Report& r);
// Quotes a field when it holds a comma, a quote or a line break (RFC 4180).
std::string csv_escape(const std::string& field);

} // namespace stepsim

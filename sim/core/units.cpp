#include "sim/core/units.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

namespace stepsim::units {

namespace {
struct NumberAndSuffix {
  double number;
  std::string suffix;
};

std::optional<NumberAndSuffix> split(const std::string& text)
{
  if (text.empty() || text.find('\0') != std::string::npos) // "200Gbps\u0000x" is not "200Gbps"
    return std::nullopt;
  const char* begin = text.c_str();
  char* end         = nullptr;
  double number     = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(number))
    return std::nullopt;
  // A decimal number only: strtod also reads hexadecimal ("0x10", "0x1p3") and skips leading space.
  for (const char* c = begin; c != end; ++c)
    if (!std::isdigit(static_cast<unsigned char>(*c)) && *c != '.' && *c != 'e' && *c != 'E' && *c != '+' && *c != '-')
      return std::nullopt;
  std::string suffix(end);
  while (!suffix.empty() && std::isspace(static_cast<unsigned char>(suffix.front())))
    suffix.erase(suffix.begin());
  return NumberAndSuffix{number, suffix};
}

// Each kind's units in the order the error messages list them.
using Units = std::vector<std::pair<std::string, double>>;

const Units& bandwidth_factors()
{
  static const Units units = {
      {"bps", 1.0 / 8}, {"kbps", 1e3 / 8},  {"Kbps", 1e3 / 8},       {"Mbps", 1e6 / 8},
      {"Gbps", 1e9 / 8}, {"Tbps", 1e12 / 8}, {"Bps", 1.0},            {"kBps", 1e3},
      {"KBps", 1e3},     {"MBps", 1e6},      {"GBps", 1e9},           {"TBps", 1e12},
      {"KiBps", 1024.0}, {"MiBps", 1048576.0}, {"GiBps", 1073741824.0}, {"TiBps", 1099511627776.0},
  };
  return units;
}

const Units& time_factors()
{
  static const Units units = {{"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {"ps", 1e-12}};
  return units;
}

const Units& bytes_factors()
{
  static const Units units = {
      {"B", 1.0},  {"kB", 1e3},  {"KB", 1e3},      {"MB", 1e6},       {"GB", 1e9},
      {"TB", 1e12}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
  };
  return units;
}

std::optional<double> with_factor(const std::string& text, const Units& units)
{
  auto parts = split(text);
  if (!parts)
    return std::nullopt;
  for (const auto& [suffix, factor] : units)
    if (suffix == parts->suffix)
      return parts->number * factor;
  return std::nullopt;
}

std::string names(const Units& units)
{
  std::string out;
  for (const auto& [suffix, factor] : units)
    out += (out.empty() ? "" : ", ") + suffix;
  return out;
}
} // namespace

std::optional<double> parse_bandwidth(const std::string& text) { return with_factor(text, bandwidth_factors()); }
std::optional<double> parse_time(const std::string& text) { return with_factor(text, time_factors()); }
std::optional<double> parse_bytes(const std::string& text) { return with_factor(text, bytes_factors()); }

std::string bandwidth_units() { return names(bandwidth_factors()); }
std::string time_units() { return names(time_factors()); }
std::string bytes_units() { return names(bytes_factors()); }

} // namespace stepsim::units

#include "sim/core/units.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>

namespace stepsim::units {

namespace {
struct NumberAndSuffix {
  double number;
  std::string suffix;
};

std::optional<NumberAndSuffix> split(const std::string& text)
{
  if (text.empty())
    return std::nullopt;
  const char* begin = text.c_str();
  char* end         = nullptr;
  double number     = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(number))
    return std::nullopt;
  std::string suffix(end);
  while (!suffix.empty() && std::isspace(static_cast<unsigned char>(suffix.front())))
    suffix.erase(suffix.begin());
  return NumberAndSuffix{number, suffix};
}

std::optional<double> scaled(const std::string& text, const std::map<std::string, double>& factors)
{
  auto parts = split(text);
  if (!parts)
    return std::nullopt;
  auto it = factors.find(parts->suffix);
  if (it == factors.end())
    return std::nullopt;
  return parts->number * it->second;
}
} // namespace

std::optional<double> parse_bandwidth(const std::string& text)
{
  static const std::map<std::string, double> factors = {
      {"Bps", 1.0},          {"kBps", 1e3},         {"KBps", 1e3},        {"MBps", 1e6},
      {"GBps", 1e9},         {"TBps", 1e12},        {"KiBps", 1024.0},    {"MiBps", 1048576.0},
      {"GiBps", 1073741824.0}, {"TiBps", 1099511627776.0}, {"bps", 1.0 / 8}, {"kbps", 1e3 / 8},
      {"Kbps", 1e3 / 8},     {"Mbps", 1e6 / 8},     {"Gbps", 1e9 / 8},    {"Tbps", 1e12 / 8},
  };
  return scaled(text, factors);
}

std::optional<double> parse_time(const std::string& text)
{
  static const std::map<std::string, double> factors = {
      {"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {"ps", 1e-12},
  };
  return scaled(text, factors);
}

std::optional<double> parse_bytes(const std::string& text)
{
  static const std::map<std::string, double> factors = {
      {"B", 1.0},      {"kB", 1e3},        {"KB", 1e3},           {"MB", 1e6},
      {"GB", 1e9},     {"TB", 1e12},       {"KiB", 1024.0},       {"MiB", 1048576.0},
      {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
  };
  return scaled(text, factors);
}

} // namespace stepsim::units

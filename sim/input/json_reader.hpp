// The one parameter reader: every number, string and unit read from a scenario, sweep or baseline
// file passes through here. It names the JSON path of each problem, says what was expected,
// collects independent problems instead of stopping at the first, and reports unknown keys with
// the closest valid name.
#pragma once

#include "sim/core/input_error.hpp"

#include <nlohmann/json.hpp>

#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace stepsim {

class JsonReader {
public:
  JsonReader(const nlohmann::json& node, std::string path, Problems& problems);

  bool has(const std::string& key) const;
  const std::string& path() const { return path_; }
  std::string path_of(const std::string& key) const;
  const nlohmann::json* raw(const std::string& key); // marks the key known

  // Integers in [minimum, maximum]. A missing key gives `fallback` if there is one, else a
  // problem. The default maximum keeps every value inside an int, which the scenario holds.
  long long integer(const std::string& key, std::optional<long long> fallback = std::nullopt,
                    long long minimum = 1, long long maximum = std::numeric_limits<int>::max());
  // Finite numbers >= minimum (strictly above it when `exclusive`).
  double number(const std::string& key, std::optional<double> fallback = std::nullopt, double minimum = 0,
                bool exclusive = false);
  std::string text(const std::string& key, std::optional<std::string> fallback = std::nullopt,
                   const std::vector<std::string>& choices = {});
  bool boolean(const std::string& key, std::optional<bool> fallback = std::nullopt);
  // Quantities are strings with their unit (units.hpp); a bare number is refused unless it is 0
  // or the key ends in the unit's name ("_seconds", "_bytes").
  // A string with a unit ("200Gbps"). Returns bytes per second.
  double bandwidth(const std::string& key, std::optional<double> fallback = std::nullopt);
  // A string with a unit ("1.5us"). Returns seconds.
  double time(const std::string& key, std::optional<double> fallback = std::nullopt);
  // A string with a unit ("25MB"). Returns bytes.
  double bytes(const std::string& key, std::optional<double> fallback = std::nullopt);

  // A nested object; an absent key gives an empty object when `required` is false.
  JsonReader object(const std::string& key, bool required = false);
  // Each element of an array of objects; an absent key gives none when `required` is false.
  std::vector<JsonReader> array_of_objects(const std::string& key, bool required = false);

  // Reports every key of this object that no getter asked for.
  void reject_unknown_keys();
  Problems& problems() { return *problems_; }

private:
  const nlohmann::json* lookup(const std::string& key, bool required, const char* expected);
  // A quantity written as a string with its unit (units.hpp). A bare number is refused unless it
  // is 0 or the key names its unit (`unit_key_suffix`, as "activation_bytes"): "bandwidth": 200
  // could mean bits, bytes or gigabits a second, and taking it as bytes once gave a
  // 10-million-second step with no warning.
  double with_unit(const std::string& key, std::optional<double> fallback, const char* kind, const char* example,
                   const std::string& units, const char* unit_key_suffix,
                   std::optional<double> (*parse)(const std::string&));

  const nlohmann::json* node_;
  std::string path_;
  Problems* problems_;
  std::set<std::string> known_;
  static const nlohmann::json empty_object_;
};

// Parses text as JSON; a syntax error becomes an InputError naming `what`, the line and the column.
// Nesting deeper than kMaxJsonDepth is refused the same way (copying or printing such a document
// would recurse that deep).
inline constexpr int kMaxJsonDepth = 64;
nlohmann::json parse_json_text(const std::string& text, const std::string& what);
// Reads a regular file of at most kMaxJsonFileBytes and parses it.
inline constexpr long long kMaxJsonFileBytes = 64LL << 20;
nlohmann::json read_json_file(const std::string& file);
// The whole of `file`, which must be a regular file (a directory, a FIFO or /dev/zero would hang
// or read without end) of at most `max_bytes`; else an InputError naming the file and `what` it
// is ("a scenario file").
std::string read_bounded_file(const std::string& file, unsigned long long max_bytes, const std::string& what);

// Sets the value at a dotted path ("parallelism.tensor=4"), creating objects on the way. The value
// is parsed as JSON when it is valid JSON and taken as a string otherwise, so `--set
// training.precision=bf16` and `--set parallelism.data=8` both do what a user means.
void set_by_path(nlohmann::json& document, const std::string& assignment);

} // namespace stepsim

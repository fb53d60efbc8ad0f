#include "sim/input/json_reader.hpp"

#include "sim/core/units.hpp"
#include "sim/input/limits.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace stepsim {

const nlohmann::json JsonReader::empty_object_ = nlohmann::json::object();

namespace {
std::string type_name(const nlohmann::json& v)
{
  if (v.is_null())
    return "null";
  if (v.is_boolean())
    return "a boolean";
  if (v.is_number())
    return fmt::format("the number {}", v.dump());
  if (v.is_string())
    return fmt::format("the string {}", v.dump());
  if (v.is_array())
    return "an array";
  return "an object";
}

std::string choices_text(const std::vector<std::string>& choices)
{
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i)
    out += (i == 0 ? "" : ", ") + fmt::format("\"{}\"", choices[i]);
  return out;
}
} // namespace

JsonReader::JsonReader(const nlohmann::json& node, std::string path, Problems& problems)
    : node_(&node), path_(std::move(path)), problems_(&problems)
{
  if (!node_->is_object()) {
    problems_->add(path_.empty() ? "(top level)" : path_, "expected an object, got " + type_name(*node_));
    node_ = &empty_object_;
  }
}

bool JsonReader::has(const std::string& key) const { return node_->contains(key); }

std::string JsonReader::path_of(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

const nlohmann::json* JsonReader::raw(const std::string& key)
{
  known_.insert(key);
  auto it = node_->find(key);
  return it == node_->end() ? nullptr : &*it;
}

const nlohmann::json* JsonReader::lookup(const std::string& key, bool required, const char* expected)
{
  const nlohmann::json* v = raw(key);
  if (v == nullptr && required)
    problems_->add(path_of(key), fmt::format("required field is missing (expected {})", expected));
  return v;
}

long long JsonReader::integer(const std::string& key, std::optional<long long> fallback, long long minimum,
                              long long maximum)
{
  const char* expected = minimum == 1 ? "a positive integer" : "an integer";
  const nlohmann::json* v = lookup(key, !fallback.has_value(), expected);
  if (v == nullptr)
    return fallback.value_or(minimum);
  if (!v->is_number_integer() && !(v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
                                   std::fabs(v->get<double>()) < 9e15)) {
    problems_->add(path_of(key), fmt::format("expected {}, got {}", expected, type_name(*v)));
    return fallback.value_or(minimum);
  }
  // An unsigned value past a long long (2^63 and up) would wrap negative: it is above any maximum.
  if (v->is_number_unsigned() && v->get<unsigned long long>() > static_cast<unsigned long long>(maximum)) {
    problems_->add(path_of(key), fmt::format("expected an integer <= {}, got {}", maximum, v->get<unsigned long long>()));
    return fallback.value_or(minimum);
  }
  long long value = v->is_number_integer() ? v->get<long long>() : static_cast<long long>(v->get<double>());
  if (value < minimum) {
    problems_->add(path_of(key), fmt::format("expected an integer >= {}, got {}", minimum, value));
    return fallback.value_or(minimum);
  }
  if (value > maximum) {
    problems_->add(path_of(key), fmt::format("expected an integer <= {}, got {}", maximum, value));
    return fallback.value_or(minimum);
  }
  return value;
}

double JsonReader::number(const std::string& key, std::optional<double> fallback, double minimum, bool exclusive)
{
  const nlohmann::json* v = lookup(key, !fallback.has_value(), "a number");
  if (v == nullptr)
    return fallback.value_or(minimum);
  if (!v->is_number()) {
    problems_->add(path_of(key), fmt::format("expected a number, got {}", type_name(*v)));
    return fallback.value_or(minimum);
  }
  double value = v->get<double>();
  if (!std::isfinite(value) || value < minimum || (exclusive && value == minimum)) {
    problems_->add(path_of(key),
                   fmt::format("expected a number {} {}, got {}", exclusive ? ">" : ">=", minimum, v->dump()));
    return fallback.value_or(minimum);
  }
  return value;
}

std::string JsonReader::text(const std::string& key, std::optional<std::string> fallback,
                             const std::vector<std::string>& choices)
{
  std::string expected = choices.empty() ? "a string" : "one of " + choices_text(choices);
  const nlohmann::json* v = lookup(key, !fallback.has_value(), expected.c_str());
  if (v == nullptr)
    return fallback.value_or("");
  if (!v->is_string()) {
    problems_->add(path_of(key), fmt::format("expected {}, got {}", expected, type_name(*v)));
    return fallback.value_or(choices.empty() ? "" : choices.front());
  }
  std::string value = v->get<std::string>();
  if (!choices.empty() && std::find(choices.begin(), choices.end(), value) == choices.end()) {
    std::string near = closest_name(value, choices);
    problems_->add(path_of(key), fmt::format("unknown value \"{}\"{}; expected {}", value,
                                             near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near),
                                             expected));
    return fallback.value_or(choices.front());
  }
  return value;
}

bool JsonReader::boolean(const std::string& key, std::optional<bool> fallback)
{
  const nlohmann::json* v = lookup(key, !fallback.has_value(), "true or false");
  if (v == nullptr)
    return fallback.value_or(false);
  if (!v->is_boolean()) {
    problems_->add(path_of(key), fmt::format("expected true or false, got {}", type_name(*v)));
    return fallback.value_or(false);
  }
  return v->get<bool>();
}

double JsonReader::with_unit(const std::string& key, std::optional<double> fallback, const char* kind,
                             const char* example, const std::string& units, const char* unit_key_suffix,
                             std::optional<double> (*parse)(const std::string&))
{
  const std::string expected = fmt::format("{} such as \"{}\"", kind, example);
  const nlohmann::json* v    = lookup(key, !fallback.has_value(), expected.c_str());
  if (v == nullptr)
    return fallback.value_or(0.0);
  const std::string suffix(unit_key_suffix);
  const bool unit_in_key = key.size() > suffix.size() && key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0;
  if (v->is_number() && v->get<double>() != 0 && !unit_in_key) {
    problems_->add(path_of(key), fmt::format("expected {} with its unit, such as \"{}\" (units: {}), got the number "
                                             "{}, which has no unit",
                                             kind, example, units, v->dump()));
    return fallback.value_or(0.0);
  }
  std::optional<double> value;
  if (v->is_number())
    value = v->get<double>();
  else if (v->is_string())
    value = parse(v->get<std::string>());
  if (!value || !std::isfinite(*value) || *value < 0) {
    problems_->add(path_of(key),
                   fmt::format("expected {} (units: {}), got {}", expected, units, type_name(*v)));
    return fallback.value_or(0.0);
  }
  return *value;
}

double JsonReader::bandwidth(const std::string& key, std::optional<double> fallback)
{
  const size_t before = problems_->list().size();
  double value = with_unit(key, fallback, "a bandwidth", "200Gbps", units::bandwidth_units(), "_Bps", units::parse_bandwidth);
  if (problems_->list().size() != before)
    return fallback.value_or(1.0);
  if (value <= 0 && has(key)) {
    problems_->add(path_of(key), "expected a bandwidth above zero");
    return fallback.value_or(1.0);
  }
  if (value < limits::kMinBandwidthBps && has(key) && problems_->list().size() == before) {
    problems_->add(path_of(key), fmt::format("expected a bandwidth of at least 1Mbps ({} bytes/s), got {}",
                                             limits::kMinBandwidthBps, raw(key)->dump()));
    return fallback.value_or(limits::kMinBandwidthBps);
  }
  if (value > limits::kMaxBandwidthBps && has(key)) {
    problems_->add(path_of(key), fmt::format("expected a bandwidth of at most 1000000TBps ({:g} bytes/s), got {}",
                                             limits::kMaxBandwidthBps, raw(key)->dump()));
    return fallback.value_or(limits::kMaxBandwidthBps);
  }
  return value;
}

double JsonReader::time(const std::string& key, std::optional<double> fallback)
{
  double value = with_unit(key, fallback, "a time", "1.5us", units::time_units(), "_seconds", units::parse_time);
  if (value > limits::kMaxLatencySeconds && has(key)) {
    problems_->add(path_of(key), fmt::format("expected a time of at most {} s, got {}", limits::kMaxLatencySeconds,
                                             raw(key)->dump()));
    return fallback.value_or(0.0);
  }
  return value;
}

double JsonReader::bytes(const std::string& key, std::optional<double> fallback)
{
  return with_unit(key, fallback, "a size", "25MB", units::bytes_units(), "_bytes", units::parse_bytes);
}

JsonReader JsonReader::object(const std::string& key, bool required)
{
  const nlohmann::json* v = lookup(key, required, "an object");
  if (v == nullptr)
    return JsonReader(empty_object_, path_of(key), *problems_);
  return JsonReader(*v, path_of(key), *problems_);
}

std::vector<JsonReader> JsonReader::array_of_objects(const std::string& key, bool required)
{
  std::vector<JsonReader> out;
  const nlohmann::json* v = lookup(key, required, "an array of objects");
  if (v == nullptr)
    return out;
  if (!v->is_array() || v->empty()) {
    problems_->add(path_of(key), fmt::format("expected a non-empty array of objects, got {}", type_name(*v)));
    return out;
  }
  for (size_t i = 0; i < v->size(); ++i)
    out.emplace_back((*v)[i], fmt::format("{}[{}]", path_of(key), i), *problems_);
  return out;
}

namespace {
// A key that holds `word` as a whole part of its name, or is such a part of it ("layers" in
// "num_layers", "hidden" in "hidden_size"): the shortest, else "".
std::string key_with_part(const std::string& word, const std::vector<std::string>& keys)
{
  auto has_part = [](const std::string& whole, const std::string& part) {
    if (part.size() < 3 || part.size() >= whole.size())
      return false;
    for (size_t at = whole.find(part); at != std::string::npos; at = whole.find(part, at + 1)) {
      const bool starts = at == 0 || whole[at - 1] == '_';
      const bool ends   = at + part.size() == whole.size() || whole[at + part.size()] == '_';
      if (starts && ends)
        return true;
    }
    return false;
  };
  std::string best;
  for (const auto& k : keys)
    if ((has_part(k, word) || has_part(word, k)) && (best.empty() || k.size() < best.size()))
      best = k;
  return best;
}
} // namespace

void JsonReader::reject_unknown_keys()
{
  std::vector<std::string> valid(known_.begin(), known_.end());
  for (const auto& [key, value] : node_->items()) {
    if (known_.count(key) != 0)
      continue;
    std::string near = closest_name(key, valid);
    if (near.empty())
      near = key_with_part(key, valid);
    if (!near.empty())
      problems_->add(path_of(key), fmt::format("unknown key (did you mean \"{}\"?)", near));
    else // nothing alike: say what the object takes
      problems_->add(path_of(key), fmt::format("unknown key; expected one of {}", fmt::join(valid, ", ")));
  }
}

namespace {
// Line and column (from 1) of byte `offset` of `text`.
std::pair<size_t, size_t> line_and_column(const std::string& text, size_t offset)
{
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// Where the nesting of arrays and objects first goes deeper than `limit`, if it does.
std::optional<size_t> too_deep_at(const std::string& text, int limit = kMaxJsonDepth)
{
  int depth      = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit)
        return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}
} // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& what)
{
  if (auto at = too_deep_at(text)) {
    auto [line, column] = line_and_column(text, *at);
    throw InputError({fmt::format("{}: malformed JSON at line {}, column {}: arrays and objects nested deeper than {}",
                                  what, line, column, kMaxJsonDepth)});
  }
  // nlohmann's parser ends its input at a NUL byte, so what follows one would go unread.
  if (auto nul = text.find('\0'); nul != std::string::npos) {
    auto [line, column] = line_and_column(text, nul);
    throw InputError({fmt::format("{}: malformed JSON at line {}, column {}: a NUL byte (expected text)", what, line,
                                  column)});
  }
  // A key twice in one object: the parser keeps the last, so the first would be silently dropped.
  std::vector<std::set<std::string>> keys;  // per open object
  std::vector<std::string> named{"(top level)"}; // the key each open object was read under
  std::string duplicate, duplicated_key;
  auto callback = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      keys.emplace_back();
    } else if (event == E::object_end) {
      keys.pop_back();
      if (named.size() > keys.size() + 1)
        named.resize(keys.size() + 1);
    } else if (event == E::key && !keys.empty()) {
      const auto key = parsed.get<std::string>();
      if (!keys.back().insert(key).second && duplicate.empty()) {
        duplicate      = fmt::format("the key \"{}\" a second time in the object under \"{}\"", key, named[keys.size() - 1]);
        duplicated_key = key;
      }
      named.resize(keys.size() + 1);
      named[keys.size()] = key;
    }
    return true;
  };
  try {
    nlohmann::json parsed = nlohmann::json::parse(text, callback);
    if (!duplicate.empty()) {
      // The parser's callback knows no position: the key's second appearance as a key in the text
      // (its first where the text spells it once, with escapes) stands for it.
      const std::string quoted = "\"" + duplicated_key + "\"";
      std::vector<size_t> found;
      for (size_t at = text.find(quoted); at != std::string::npos && found.size() < 2; at = text.find(quoted, at + 1)) {
        size_t after = at + quoted.size();
        while (after < text.size() && std::isspace(static_cast<unsigned char>(text[after])))
          ++after;
        if (after < text.size() && text[after] == ':')
          found.push_back(at);
      }
      auto [line, column] = line_and_column(text, found.empty() ? 0 : found.back());
      throw InputError({fmt::format("{}: malformed JSON at line {}, column {}: {} (a JSON object names each key once)",
                                    what, line, column, duplicate)});
    }
    return parsed;
  } catch (const nlohmann::json::parse_error& e) {
    // Turn the byte offset (1-based, at the offending character) into a line and column.
    const size_t at     = e.byte > 0 ? e.byte - 1 : 0;
    auto [line, column] = line_and_column(text, at);
    std::string reason = e.what();
    auto colon         = reason.rfind(": ");
    if (colon != std::string::npos)
      reason = reason.substr(colon + 2);
    if (at < text.size() && text[at] == '/' && at + 1 < text.size() && (text[at + 1] == '/' || text[at + 1] == '*'))
      reason = "a comment: JSON has none (put notes in a \"description\" or \"sources\" string)";
    throw InputError({fmt::format("{}: malformed JSON at line {}, column {}: {}", what, line, column, reason)});
  } catch (const nlohmann::json::exception& e) {
    // A number beyond a double ("1e999") is out_of_range, which carries no position: find the
    // number the message quotes.
    std::string reason = e.what();
    auto open          = reason.find('\'');
    auto close         = open == std::string::npos ? open : reason.find('\'', open + 1);
    size_t at          = 0;
    if (close != std::string::npos) {
      size_t found = text.find(reason.substr(open + 1, close - open - 1));
      at           = found == std::string::npos ? 0 : found;
    }
    auto [line, column] = line_and_column(text, at);
    auto colon          = reason.find("] ");
    if (colon != std::string::npos)
      reason = reason.substr(colon + 2);
    throw InputError({fmt::format("{}: malformed JSON at line {}, column {}: {}", what, line, column, reason)});
  }
}

std::string read_bounded_file(const std::string& file, unsigned long long max_bytes, const std::string& what)
{
  std::error_code error;
  auto status = std::filesystem::status(file, error);
  if (error || !std::filesystem::exists(status))
    throw InputError({fmt::format("{}: cannot open the file", file)});
  if (!std::filesystem::is_regular_file(status))
    throw InputError({fmt::format("{}: not a regular file", file)});
  auto size = std::filesystem::file_size(file, error);
  if (!error && size > max_bytes)
    throw InputError({fmt::format("{}: {} bytes, more than the {} {} may have", file, size, max_bytes, what)});
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw InputError({fmt::format("{}: cannot open the file", file)});
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

nlohmann::json read_json_file(const std::string& file)
{
  return parse_json_text(read_bounded_file(file, kMaxJsonFileBytes, "a scenario file"), file);
}

void set_by_path(nlohmann::json& document, const std::string& assignment)
{
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError({fmt::format("--set {}: expected path=value, e.g. parallelism.tensor=4", assignment)});
  std::string path  = assignment.substr(0, eq);
  std::string value = assignment.substr(eq + 1);
  // Error messages write array elements as node_groups[0]; accept that spelling beside node_groups.0.
  for (size_t open = path.find('['); open != std::string::npos; open = path.find('[', open)) {
    size_t close = path.find(']', open);
    if (close == std::string::npos)
      throw InputError({fmt::format("--set {}: a '[' without its ']'", path)});
    path = path.substr(0, open) + "." + path.substr(open + 1, close - open - 1) + path.substr(close + 1);
  }
  // A --set value goes into the document as a file's would, under the same depth bound: the path
  // nests one level per name, the value its own levels below that.
  const int path_depth = static_cast<int>(std::count(path.begin(), path.end(), '.')) + 1;
  if (path_depth > kMaxJsonDepth)
    throw InputError({fmt::format("--set {}...: a path of {} names, deeper than the {} levels a scenario may nest",
                                  path.substr(0, 40), path_depth, kMaxJsonDepth)});
  if (too_deep_at(value, kMaxJsonDepth - path_depth))
    throw InputError({fmt::format("--set {}: the value nests arrays and objects deeper than the {} levels a "
                                  "scenario may have",
                                  path, kMaxJsonDepth)});
  nlohmann::json* node   = &document;
  nlohmann::json* parent = nullptr; // the object that holds `node` under `key`, if any
  std::string key;
  bool existed = false; // `key` was in `parent` before this assignment
  size_t start = 0;
  while (true) {
    size_t dot       = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty())
      throw InputError({fmt::format("--set {}: empty name in the path", path)});
    if (node->is_array()) {
      char* end   = nullptr;
      long  index = std::strtol(part.c_str(), &end, 10);
      if (*end != '\0' || index < 0 || static_cast<size_t>(index) >= node->size())
        throw InputError({fmt::format("--set {}: \"{}\" is not an index of that array", path, part)});
      node    = &(*node)[static_cast<size_t>(index)];
      parent  = nullptr; // an element, not an object's field
      existed = true;
    } else {
      if (!node->is_object() && !node->is_null())
        throw InputError({fmt::format("--set {}: \"{}\" is inside a value that is not an object", path, part)});
      parent  = node;
      key     = part;
      existed = node->is_object() && node->contains(part);
      node    = &(*node)[part];
    }
    if (dot == std::string::npos)
      break;
    start = dot + 1;
  }
  nlohmann::json parsed = nlohmann::json::parse(value, nullptr, false);
  // path=null takes the field away, so that it takes its default: the way to drop a preset's
  // field that another setting does not read (a rail fabric's leaf_radix under a torus).
  if (parsed.is_null() && parent == nullptr && path.find('.') != std::string::npos)
    throw InputError({fmt::format("--set {}=null: an element of an array cannot be removed; set the whole array "
                                  "(--set {}='[...]')",
                                  path, path.substr(0, path.rfind('.')))});
  if (parsed.is_null() && parent != nullptr && parent->is_object()) {
    parent->erase(key);
    // Removing what is not there (a misspelt path) would change nothing, silently.
    if (!existed)
      throw InputError({fmt::format("--set {}=null: there is no {} to remove (a misspelt path?)", path, path)});
    return;
  }
  *node = parsed.is_discarded() ? nlohmann::json(value) : parsed;
}

} // namespace stepsim

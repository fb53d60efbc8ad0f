#include "sim/output/report_csv.hpp"

#include <algorithm>

namespace stepsim {

namespace {

// Figures in the order a reader scans them; keys to_json adds later follow in alphabetical order,
// so a new report field shows up in the CSV without an edit here.
const std::vector<std::string> kTopOrder = {
    "name",           "gpus",           "device",  "schedule",          "fidelity",
    "micro_batches",  "step_time_s",    "tokens_per_s", "samples_per_s", "model_flops_per_step",
    "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu", "hfu",      "bubble_fraction",
    "comm_s",         "exposed_comm_s", "overlap", "memory_peak_bytes", "memory_capacity_bytes",
    "fits_in_memory", "memory",         "stages",  "simulated_ranks",   "activities"};
const std::vector<std::string> kMemoryOrder = {"weights_bytes",     "gradients_bytes", "optimizer_bytes",
                                               "activations_bytes", "buffers_bytes",   "total_bytes"};
const std::vector<std::string> kStageOrder  = {"stage",     "rank",     "compute_s",
                                               "comm_s",    "exposed_comm_s", "bubble_s",
                                               "bubble_fraction", "textbook_bubble_fraction", "memory_bytes"};

// The keys of `object` in `preferred` order, then the others alphabetically (nlohmann's objects
// iterate in key order).
std::vector<std::string> ordered_keys(const nlohmann::json& object, const std::vector<std::string>& preferred)
{
  std::vector<std::string> keys;
  for (const auto& k : preferred)
    if (object.contains(k))
      keys.push_back(k);
  for (const auto& item : object.items())
    if (std::find(preferred.begin(), preferred.end(), item.key()) == preferred.end())
      keys.push_back(item.key());
  return keys;
}

std::string cell(const nlohmann::json& v)
{
  if (v.is_string())
    return csv_escape(v.get<std::string>());
  return csv_escape(v.dump());
}

void flatten(const nlohmann::json& object, const std::string& prefix, const std::vector<std::string>& preferred,
             std::vector<std::pair<std::string, std::string>>& out)
{
  for (const auto& key : ordered_keys(object, preferred)) {
    const nlohmann::json& v = object.at(key);
    if (v.is_object()) {
      flatten(v, prefix + key + "_", key == "memory" ? kMemoryOrder : std::vector<std::string>{}, out);
    } else if (v.is_array()) {
      // stages[3].bubble_fraction → stage3_bubble_fraction
      std::string item = key.size() > 1 && key.back() == 's' ? key.substr(0, key.size() - 1) : key;
      for (size_t i = 0; i < v.size(); ++i) {
        std::string item_prefix = prefix + item + std::to_string(i) + "_";
        if (v[i].is_object()) {
          std::vector<std::pair<std::string, std::string>> fields;
          flatten(v[i], item_prefix, key == "stages" ? kStageOrder : std::vector<std::string>{}, fields);
          for (auto& f : fields)
            if (f.first != item_prefix + "stage") // the index is already in the column name
              out.push_back(std::move(f));
        } else {
          out.emplace_back(prefix + item + std::to_string(i), cell(v[i]));
        }
      }
    } else {
      out.emplace_back(prefix + key, cell(v));
    }
  }
}

std::string join(const std::vector<std::pair<std::string, std::string>>& columns, bool names)
{
  std::string line;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i > 0)
      line += ',';
    line += names ? csv_escape(columns[i].first) : columns[i].second;
  }
  return line + "\n";
}

} // namespace

std::string csv_escape(const std::string& field)
{
  if (field.find_first_of(",\"\r\n") == std::string::npos)
    return field;
  std::string quoted = "\"";
  for (char c : field) {
    if (c == '"')
      quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::vector<std::pair<std::string, std::string>> csv_columns(const Report& r)
{
  std::vector<std::pair<std::string, std::string>> out;
  flatten(to_json(r), "", kTopOrder, out);
  return out;
}

std::string csv_header(const Report& r) { return join(csv_columns(r), true); }
std::string csv_row(const Report& r) { return join(csv_columns(r), false); }

} // namespace stepsim

// `stepsim calibrate network`: fits a cluster's own link figures (configs/calibration/links.json's
// efficiency and step latency per link type, and a shift of every base latency) to its nccl-tests
// logs, by timing the logged collective with the network model (tools/driver/collective_bench.hpp)
// at a few of the logged sizes per candidate. Single-host logs fit the link inside a node
// (nvswitch or pcie, by the platform's node type), multi-host logs the NIC; the base latency
// shift comes from the single-host logs when there are any, else from the multi-host ones.
#pragma once

#include "models/link_calibration.hpp"
#include "tools/driver/nccl_tests_log.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace stepsim {

struct NetworkFitRequest {
  std::vector<std::string> logs;
  std::string preset, platform_file; // the machine: exactly one
  std::vector<std::string> sets;     // its platform.* fields that differ (path=value, as --set)
};

// One logged size: measured, and the model before and after the fit.
struct NetworkFitRow {
  double bytes = 0;
  double measured_us = 0, before_us = 0, after_us = 0;
  double measured_busbw = 0, before_busbw = 0, after_busbw = 0; // GB/s
};

// Mean absolute relative error of the time over the rows of a size band, in percent, and how many
// rows it covers (0: none logged; the MAPE is then 0).
struct Mape {
  double large_pct = 0, small_pct = 0;
  int large_rows = 0, small_rows = 0;
};

struct NetworkFitLog {
  NcclTestsLog log;
  std::string fitted_link; // nvswitch, pcie, nic (nic_kinds.<kind>), or "" when the log is only listed
  std::string note;        // why it is only listed, or what the fit could not reach
  std::vector<NetworkFitRow> rows;
  Mape before, after;
  int model_runs = 0;
};

struct NetworkFit {
  std::string machine; // the preset or platform file
  LinkEfficiency before, after;
  std::vector<NetworkFitLog> logs;
  Mape after_all, before_all; // over every fitted log's rows
  int model_runs = 0;
  nlohmann::json file; // the calibration file (models/link_calibration.hpp load_network_calibration)
};

// The size bands of the fit's error: >= 64 MiB (bandwidth-bound) and 8 KiB to 1 MiB (latency-bound).
inline constexpr double kLargeFrom = 64.0 * (1 << 20), kSmallFrom = 8192, kSmallTo = 1 << 20;

// Reads the logs, fits and times every logged size before and after. InputError for a malformed
// log (file and line), an unknown machine, or a log the machine cannot hold.
NetworkFit fit_network(const NetworkFitRequest& request);

} // namespace stepsim

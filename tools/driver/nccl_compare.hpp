// Published nccl-tests runs against `stepsim collective`: every case of a file such as
// configs/calibration/nccl_tests_published.json timed on its preset, as `stepsim collective
// --preset P --nodes N --gpus G --op OP --algorithm A` times it (time_collective), and the bus
// bandwidth's mean absolute percentage error per case and per family of sizes. Used by
// `stepsim collective --compare FILE` and tests/test_nccl_published.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace stepsim {

// The two families of sizes the error is reported for: bandwidth-bound rows (64 MiB and more)
// and latency-bound rows (8 KiB to 1 MiB). Other rows are not timed.
enum class SizeFamily { Large, Small, None };
SizeFamily size_family(double bytes);

struct ComparedRow {
  double bytes          = 0;
  double measured_GBps  = 0; // bus bandwidth: from the published time where there is one, else as printed
  double predicted_GBps = 0;
  std::string picked;        // the algorithm/protocol stepsim ran
  SizeFamily family = SizeFamily::None;
  double error() const { return predicted_GBps / measured_GBps - 1; }
};

struct FamilyError {
  int rows    = 0;
  double mape = 0; // mean of |predicted / measured - 1|, as a fraction
};

struct ComparedCase {
  std::string name, preset, op, algorithm;
  int nodes = 0, gpus = 0;
  int gpus_per_thread = 1; // nccl-tests -g: the case's "gpus_per_thread" (collective_bench.hpp nccl_tests_iteration_seconds)
  // The case's "set": fields of the preset's platform that this machine has otherwise (path=value,
  // as --set), e.g. fewer NICs or another NIC kind; empty: the preset as it is.
  std::vector<std::string> sets;
  std::string not_modelled; // why the case was not run (an algorithm not registered, a group it refuses); empty when run
  std::vector<ComparedRow> rows;
  FamilyError large, small;
  int closed_form_rows = 0; // rows timed by their closed form (a tree over many GPUs: collective_bench.hpp)
};

struct Comparison {
  std::vector<ComparedCase> cases;
  FamilyError large, small; // over every row of every case run
};

// Times every case of `file` (its "cases": name, preset, nodes, gpus, op, algorithm, optionally
// gpus_per_thread and set, rows of bytes, time_us and/or busbw_GBps). Throws InputError naming the file and case for a malformed
// one. `only`: run the cases whose name contains it (all when empty). `max_gpus` > 0 leaves out
// the cases of more GPUs (the 512- and 2048-GPU ones take minutes), marked "not run here".
// `jobs`: a case's sizes timed that many at a time (time_collectives); the rows do not depend on it.
Comparison compare_published(const std::string& file, bool analytic_network = false, const std::string& only = "",
                             int max_gpus = 0, int jobs = 1);

// The table `stepsim collective --compare` prints, and its JSON.
std::string comparison_table(const Comparison& c);
nlohmann::json comparison_json(const Comparison& c);

} // namespace stepsim

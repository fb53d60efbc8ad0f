// nccl-tests output as the tools print it (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
// alltoall_perf, sendrecv_perf; https://github.com/NVIDIA/nccl-tests src/common.cu): the
// "# Using devices" lines that name each rank's host and device, and the table of sizes with
// their out-of-place and in-place time, algorithm and bus bandwidth. Read by `stepsim calibrate
// network` (tools/driver/network_fit.hpp). Plain data; a malformed log is an InputError naming
// the file and line.
#pragma once

#include <string>
#include <vector>

namespace stepsim {

// `#  Rank  0 Group  0 Pid 1234 on host1 device  0 [0x07] NVIDIA A100-SXM4-80GB` (older
// nccl-tests print no Group).
struct NcclTestsRank {
  int rank   = 0;
  int group  = 0;
  long pid   = 0;
  std::string host;
  int device = 0;
  std::string bus_id; // what the brackets hold: [0x07], [0000:19:00]
  std::string device_name;
  int line = 0;
};

// One line of the table. Sizes in bytes, times in microseconds, bandwidths in GB/s (1e9 B/s) as
// printed; in-place figures are NaN where the table has none.
struct NcclTestsRow {
  double bytes = 0, count = 0;
  std::string type, redop;
  double time_us = 0, algbw_GBps = 0, busbw_GBps = 0;
  double in_place_time_us = 0, in_place_algbw_GBps = 0, in_place_busbw_GBps = 0;
  int line = 0;
};

struct NcclTestsLog {
  std::string path;
  // nccl-tests' name of the collective: all_reduce, all_gather, reduce_scatter, alltoall, sendrecv
  // (from the file name, else from the ratio busbw/algbw and the reduction column).
  std::string op;
  std::vector<NcclTestsRank> ranks; // in rank order
  std::vector<std::string> hosts;   // distinct, in order of first appearance
  std::vector<NcclTestsRow> rows;   // in the order printed
  // Rows of 0 bytes (nccl-tests prints them where a size holds less than one element per rank):
  // nothing to time, left out of `rows`; their lines.
  std::vector<int> empty_rows;
  // GPUs each host thread drives: the header's "nGpus" (nccl-tests -g; "# nThread 1 nGpus 8
  // minBytes ..."), 1 where the log has no such line. See collective_bench.hpp
  // nccl_tests_iteration_seconds.
  int gpus_per_thread = 1;
  int gpus_per_thread_line = 0; // where the header says so; 0 = not said
  int ranks_per_host() const;       // the same on every host (checked by the parser)
};

// The five collectives nccl-tests' binaries are named after (NAME_perf).
const std::vector<std::string>& nccl_tests_ops();

// Parses the text of one log; `path` names it in errors ("PATH:LINE: ..."). Throws InputError.
NcclTestsLog parse_nccl_tests_log(const std::string& text, const std::string& path);
// Reads and parses a file; a missing file is an InputError too.
NcclTestsLog read_nccl_tests_log(const std::string& path);

} // namespace stepsim

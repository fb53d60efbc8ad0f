#include "tools/driver/nccl_tests_log.hpp"

#include "sim/core/input_error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <regex>
#include <sstream>

namespace stepsim {

namespace {
constexpr double kMostLogBytes          = 1099511627776.0; // 1 TiB (see the rows' checks)
constexpr double kMostLogBytesPerSecond = 1e14;            // 100 TB/s
constexpr double kLongestLogTime_us     = 1e10;            // 10,000 s
} // namespace
namespace {

std::vector<std::string> tokens_of(const std::string& line)
{
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string t; in >> t;)
    out.push_back(t);
  return out;
}

std::optional<double> number(const std::string& text)
{
  if (text.empty())
    return std::nullopt;
  try {
    size_t used    = 0;
    const double v = std::stod(text, &used);
    if (used != text.size() || !std::isfinite(v))
      return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool is_integer(const std::string& text)
{
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// mpirun --tag-output writes "[1,0]<stdout>:" before every line (Open MPI); the Echo logs of
// tests/nccl_logs keep it.
std::string without_launcher_prefix(const std::string& line)
{
  static const std::regex prefix(R"(^\[\d+,\d+\]<std(out|err)>:)");
  std::smatch m;
  if (std::regex_search(line, m, prefix))
    return m.suffix().str();
  return line;
}

std::string op_from_file_name(const std::string& path)
{
  std::string name = std::filesystem::path(path).filename().string();
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  name.erase(std::remove_if(name.begin(), name.end(), [](char c) { return c == '_' || c == '-'; }), name.end());
  // nccl-tests' binaries: all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf,
  // sendrecv_perf; "allreduce" and the like once '_' and '-' are dropped.
  for (const auto& [key, op] : std::vector<std::pair<std::string, std::string>>{{"allreduce", "all_reduce"},
                                                                                {"allgather", "all_gather"},
                                                                                {"reducescatter", "reduce_scatter"},
                                                                                {"alltoall", "alltoall"},
                                                                                {"sendrecv", "sendrecv"}})
    if (name.find(key) != std::string::npos)
      return op;
  return "";
}

// nccl-tests' bus bandwidth factors (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
// all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; sendrecv 1.
std::string op_from_table(const NcclTestsLog& log)
{
  const double n = static_cast<double>(log.ranks.size());
  double ratio = 0;
  int rows     = 0;
  std::string redop;
  for (const auto& r : log.rows)
    if (r.algbw_GBps >= 1) { // two printed decimals: below 1 GB/s the ratio is noise
      ratio += r.busbw_GBps / r.algbw_GBps;
      ++rows;
      redop = r.redop;
    }
  if (rows == 0)
    return "";
  ratio /= rows;
  const auto near = [&](double factor) { return std::abs(ratio / factor - 1) < 0.02; };
  const bool reduces = redop != "none";
  std::vector<std::string> fits;
  if (near(2 * (n - 1) / n) && reduces)
    fits.push_back("all_reduce");
  if (near((n - 1) / n))
    for (const char* op : reduces ? std::vector<const char*>{"reduce_scatter"} : std::vector<const char*>{"all_gather", "alltoall"})
      fits.push_back(op);
  if (near(1.0) && reduces)
    fits.push_back("sendrecv");
  return fits.size() == 1 ? fits.front() : "";
}

} // namespace

int NcclTestsLog::ranks_per_host() const
{
  return hosts.empty() ? 0 : static_cast<int>(ranks.size() / hosts.size());
}

const std::vector<std::string>& nccl_tests_ops()
{
  static const std::vector<std::string> ops{"all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"};
  return ops;
}

NcclTestsLog parse_nccl_tests_log(const std::string& text, const std::string& path)
{
  NcclTestsLog log;
  log.path = path;
  // The device lines as nccl-tests' src/common.cu prints them:
  // "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s" (without "Group" before v2.13).
  static const std::regex rank_line(
      R"(^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*?)\s*$)");
  std::vector<std::string> columns; // the header's names, '#' dropped
  int header_line = 0, line_no = 0;
  std::istringstream in(text);
  auto where = [&](int line) { return fmt::format("{}:{}", path, line); };
  for (std::string raw; std::getline(in, raw);) {
    ++line_no;
    if (!raw.empty() && raw.back() == '\r')
      raw.pop_back();
    const std::string line = without_launcher_prefix(raw);
    const auto tokens      = tokens_of(line);
    if (tokens.empty())
      continue;
    if (tokens.front().rfind('#', 0) == 0) {
      std::smatch m;
      // "# nThread 1 nGpus 8 minBytes 8 maxBytes ..." (src/common.cu prints nThreads and nGpus,
      // the -t and -g options, first).
      static const std::regex threads_line(R"(^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\b.*$)");
      if (std::regex_match(line, m, threads_line)) {
        const double gpus = number(m[2].str()).value_or(0);
        if (gpus < 1 || gpus > 1024)
          throw InputError({fmt::format("{}: nGpus {}: expected 1 to 1024 GPUs per thread", where(line_no), m[2].str())});
        log.gpus_per_thread      = static_cast<int>(gpus);
        log.gpus_per_thread_line = line_no;
        continue;
      }
      if (std::regex_match(line, m, rank_line)) {
        // Each a run of digits (the pattern's \d+), but one too long for an int is the log's
        // error, not std::stoi's.
        auto whole = [&](const std::string& digits, const char* what, double most) {
          const double v = number(digits).value_or(most + 1);
          if (v > most)
            throw InputError({fmt::format("{}: {} {}: expected at most {:.0f}", where(line_no), what, digits, most)});
          return v;
        };
        NcclTestsRank r;
        r.rank        = static_cast<int>(whole(m[1].str(), "Rank", 1 << 24));
        r.group       = m[2].matched ? static_cast<int>(whole(m[2].str(), "Group", 1 << 24)) : 0;
        r.pid         = static_cast<long>(whole(m[3].str(), "Pid", 4294967295.0));
        r.host        = m[4].str();
        r.device      = static_cast<int>(whole(m[5].str(), "device", 1 << 16));
        r.bus_id      = m[6].str();
        r.device_name = m[7].str();
        r.line        = line_no;
        log.ranks.push_back(r);
        continue;
      }
      // The column names: "#       size         count      type   redop    root     time   algbw
      // busbw #wrong     time   algbw   busbw #wrong" (older: no root, "error" for "#wrong").
      std::vector<std::string> names = tokens;
      if (names.front() == "#")
        names.erase(names.begin());
      else
        names.front() = names.front().substr(1);
      if (!names.empty() && names.front() == "size" && std::find(names.begin(), names.end(), "busbw") != names.end()) {
        if (header_line != 0)
          throw InputError({fmt::format("{}: a second table (the first starts at line {}); expected one "
                                        "nccl-tests run per log: split the file",
                                        where(line_no), header_line)});
        columns     = names;
        header_line = line_no;
      }
      continue;
    }
    if (header_line == 0 || !is_integer(tokens.front()))
      continue; // NCCL's INFO and WARN lines, the launcher's own output
    // A row: as many fields as the header names.
    if (tokens.size() != columns.size())
      throw InputError({fmt::format("{}: expected {} columns ({}), got {}{}", where(line_no), columns.size(),
                                    fmt::join(columns, " "), tokens.size(),
                                    tokens.size() < columns.size() ? " (a truncated row?)" : "")});
    NcclTestsRow row;
    row.line             = line_no;
    row.in_place_time_us = row.in_place_algbw_GBps = row.in_place_busbw_GBps = std::numeric_limits<double>::quiet_NaN();
    int timed = 0; // 0 before the out-of-place time, 1 after it, 2 after the in-place one
    for (size_t i = 0; i < columns.size(); ++i) {
      const std::string& name = columns[i];
      const std::string& cell = tokens[i];
      if (name == "type") {
        row.type = cell;
        continue;
      }
      if (name == "redop") {
        row.redop = cell;
        continue;
      }
      // nccl-tests' count of wrong results (-c 1; "N/A" without the check): a row whose results
      // were wrong timed a broken run, not the network.
      if (name == "#wrong" && cell != "N/A" && cell != "0")
        throw InputError({fmt::format("{}: column {} (\"#wrong\"): {} wrong results in this row; the collective "
                                      "returned wrong data, so its time is not a measurement to fit (fix the run, or "
                                      "delete the row)",
                                      where(line_no), i + 1, cell)});
      if (name != "size" && name != "count" && name != "time" && name != "algbw" && name != "busbw")
        continue; // root, #wrong, error: not needed
      const auto v = number(cell);
      if (name == "time")
        ++timed; // the first time column is the out-of-place one, the second the in-place one
      if (!v || *v < 0)
        throw InputError({fmt::format("{}: column {} (\"{}\"{}): expected a number >= 0, got \"{}\"", where(line_no), i + 1,
                                      name, timed == 0 || name == "size" || name == "count" ? "" : timed == 1 ? ", out-of-place" : ", in-place",
                                      cell)});
      double* out = nullptr;
      if (name == "size")
        out = &row.bytes;
      else if (name == "count")
        out = &row.count;
      else if (name == "time")
        out = timed == 1 ? &row.time_us : &row.in_place_time_us;
      else if (name == "algbw")
        out = timed == 1 ? &row.algbw_GBps : &row.in_place_algbw_GBps;
      else
        out = timed == 1 ? &row.busbw_GBps : &row.in_place_busbw_GBps;
      *out = *v;
    }
    if (row.bytes == 0) { // a size of less than one element per rank: nothing moved, nothing to time
      log.empty_rows.push_back(line_no);
      continue;
    }
    if (!(row.time_us > 0))
      throw InputError({fmt::format("{}: expected a positive out-of-place time, got {}", where(line_no), row.time_us)});
    // nccl-tests sizes run to a few tens of GiB (-e 32G), and no GPU moves its buffer faster
    // than its memory: NVLink 5 is 1.8 TB/s both ways, HBM3e 8 TB/s. A row beyond 1 TiB, or one
    // whose algorithm bandwidth is above 100 TB/s, is a misprint, not a measurement.
    if (row.bytes > kMostLogBytes)
      throw InputError({fmt::format("{}: size {}: expected at most {:.0f} bytes (1 TiB)", where(line_no), row.bytes,
                                    kMostLogBytes)});
    // Nor does one collective take hours: 32 GiB over 1 GB/s Ethernet is half a minute.
    if (row.time_us > kLongestLogTime_us)
      throw InputError({fmt::format("{}: a time of {} us is over {:.0f} s for one collective; expected at most that (a "
                                    "time misprinted?)",
                                    where(line_no), row.time_us, kLongestLogTime_us * 1e-6)});
    if (row.bytes / (row.time_us * 1e-6) > kMostLogBytesPerSecond)
      throw InputError({fmt::format("{}: {} bytes in {} us is {:.3g} TB/s of algorithm bandwidth; expected at most "
                                    "100 TB/s (a time or a size misprinted?)",
                                    where(line_no), row.bytes, row.time_us, row.bytes / (row.time_us * 1e-6) / 1e12)});
    // The type and reduction as nccl-tests names them (src/common.cu: test_typenames, test_opnames;
    // "none" where the collective does not reduce).
    static const std::vector<std::string> types{"int8",   "uint8", "int32",  "uint32",   "int64",  "uint64",
                                                "half",   "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
    static const std::vector<std::string> redops{"sum", "prod", "max", "min", "avg", "mulsum", "none"};
    if (!row.type.empty() && std::find(types.begin(), types.end(), row.type) == types.end())
      throw InputError({fmt::format("{}: type \"{}\": expected one of nccl-tests' types ({})", where(line_no), row.type,
                                    fmt::join(types, ", "))});
    if (!row.redop.empty() && std::find(redops.begin(), redops.end(), row.redop) == redops.end())
      throw InputError({fmt::format("{}: redop \"{}\": expected one of nccl-tests' reductions ({})", where(line_no),
                                    row.redop, fmt::join(redops, ", "))});
    // The same size, type and reduction twice: two runs pasted into one table, each size to be
    // fitted twice.
    for (const auto& earlier : log.rows)
      if (earlier.bytes == row.bytes && earlier.type == row.type && earlier.redop == row.redop)
        throw InputError({fmt::format("{}: size {} ({} {}) again, as on line {}; expected one row per size (one run "
                                      "per log: split the file)",
                                      where(line_no), row.bytes, row.type, row.redop, earlier.line)});
    log.rows.push_back(row);
  }
  if (header_line == 0)
    throw InputError({fmt::format("{}: no nccl-tests table in the {} lines; expected the column header "
                                  "\"#  size  count  type  redop  ...  time  algbw  busbw ...\" and its rows",
                                  where(line_no), line_no)});
  if (log.rows.empty())
    throw InputError({fmt::format("{}: the table (header at line {}) has no rows", where(line_no), header_line)});
  if (log.ranks.empty())
    throw InputError({fmt::format("{}: no \"#  Rank  0 ... on HOST device  0 [...] GPU\" lines before the table "
                                  "(line {}); they give the ranks and hosts the log was measured on",
                                  where(header_line), header_line)});
  std::sort(log.ranks.begin(), log.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  for (size_t i = 0; i < log.ranks.size(); ++i)
    if (log.ranks[i].rank != static_cast<int>(i))
      throw InputError({fmt::format("{}: rank {} listed{}; expected ranks 0 to {} once each", where(log.ranks[i].line),
                                    log.ranks[i].rank, i > 0 && log.ranks[i].rank == log.ranks[i - 1].rank ? " twice" : "",
                                    log.ranks.size() - 1)});
  std::vector<int> per_host;
  for (const auto& r : log.ranks) {
    const auto it = std::find(log.hosts.begin(), log.hosts.end(), r.host);
    if (it == log.hosts.end()) {
      log.hosts.push_back(r.host);
      per_host.push_back(1);
    } else {
      ++per_host[static_cast<size_t>(it - log.hosts.begin())];
    }
  }
  for (size_t h = 1; h < per_host.size(); ++h)
    if (per_host[h] != per_host[0]) {
      // Named at the host's first "Rank" line, where its ranks are listed.
      const auto first = std::find_if(log.ranks.begin(), log.ranks.end(), [&](const auto& r) { return r.host == log.hosts[h]; });
      throw InputError({fmt::format("{}: host {} runs {} ranks but {} runs {}; expected the same number of GPUs on "
                                    "every host",
                                    where(first->line), log.hosts[h], per_host[h], log.hosts[0], per_host[0])});
    }
  // One GPU model per log: the fit is of one machine's links, and a preset has one GPU.
  for (const auto& r : log.ranks)
    if (r.device_name != log.ranks.front().device_name)
      throw InputError({fmt::format("{}: rank {} is a {} but rank {} (line {}) is a {}; expected one GPU model per "
                                    "log",
                                    where(r.line), r.rank, r.device_name, log.ranks.front().rank,
                                    log.ranks.front().line, log.ranks.front().device_name)});
  log.op = op_from_file_name(path);
  if (log.op.empty())
    log.op = op_from_table(log);
  // The file's name and the table's reduction column must tell the same collective: an
  // all_gather_perf table with "sum" rows (or an all-reduce with "none") was renamed or mixed up.
  if (!log.op.empty())
    for (const auto& r : log.rows) {
      const bool reduces = log.op == "all_reduce" || log.op == "reduce_scatter";
      const bool never   = log.op == "all_gather" || log.op == "alltoall";
      if (r.redop.empty() || (!reduces && !never))
        continue;
      if ((reduces && r.redop == "none") || (never && r.redop != "none"))
        throw InputError({fmt::format("{}: redop \"{}\" in a log of {} (named by {}); {} rows have {}", where(r.line),
                                      r.redop, log.op, op_from_file_name(path).empty() ? "its table" : "its file name",
                                      log.op, reduces ? "a reduction (sum, ...)" : "redop \"none\"")});
    }
  if (log.op.empty())
    throw InputError({fmt::format("{}: cannot tell which collective the table measured from its columns (busbw/algbw "
                                  "and redop); name the file after the nccl-tests binary (all_reduce_perf, "
                                  "all_gather_perf, reduce_scatter_perf, alltoall_perf, sendrecv_perf)",
                                  where(header_line))});
  return log;
}

NcclTestsLog read_nccl_tests_log(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError({fmt::format("{}: cannot read the nccl-tests log (no such file?)", path)});
  std::stringstream text;
  text << in.rdbuf();
  return parse_nccl_tests_log(text.str(), path);
}

} // namespace stepsim

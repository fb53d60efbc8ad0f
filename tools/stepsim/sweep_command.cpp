// `stepsim sweep SWEEP.json`: simulate every point of a parameter sweep in parallel worker
// processes; `stepsim merge`: join the outputs of sharded sweeps (see tools/driver/sweep.hpp).
//
// Completed points are appended to PREFIX.jsonl.partial as they finish, so an interrupted sweep
// resumes where it stopped; the final PREFIX.csv and PREFIX.jsonl are written in point order
// once every point is done, identical whatever -j and however the points were sharded.
#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/input/limits.hpp"
#include "tools/driver/html_sweep_report.hpp"
#include "tools/driver/process_pool.hpp"
#include "tools/driver/sweep.hpp"
#include "tools/stepsim/command.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <fcntl.h>
#include <unistd.h>

namespace stepsim {
namespace {

struct SweepOptions {
  std::string file, prefix, shard;
  std::string html; // --html OUT: the results as one page
  int jobs       = 1;
  bool allow_oom = false;
  bool quiet     = false;
};

// Progress on stderr: a bar redrawn in place on a terminal, a line per tenth otherwise.
class Progress {
public:
  Progress(size_t total, bool quiet) : total_(total), quiet_(quiet), terminal_(isatty(STDERR_FILENO) != 0) {}

  void advance(size_t done)
  {
    if (quiet_ || total_ == 0)
      return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double eta     = done > 0 ? elapsed / done * (total_ - done) : 0;
    const int width      = 30;
    const int filled     = static_cast<int>(width * done / total_);
    if (terminal_) {
      fmt::print(stderr, "\r  [{}{}] {}/{} points, {:.0f} s elapsed, ETA {:.0f} s ", std::string(filled, '#'),
                 std::string(width - filled, '.'), done, total_, elapsed, eta);
      if (done == total_)
        fmt::print(stderr, "\n");
    } else if (done * 10 / total_ != last_tenth_ || done == total_) {
      last_tenth_ = done * 10 / total_;
      fmt::print(stderr, "  {}/{} points, {:.0f} s elapsed, ETA {:.0f} s\n", done, total_, elapsed, eta);
    }
  }

private:
  size_t total_;
  bool quiet_, terminal_;
  size_t last_tenth_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

std::pair<size_t, size_t> parse_shard(const std::string& text)
{
  // Digits, a slash, digits, and nothing else ("1/3x" and "-1/3" are refused, not read as 1/3).
  const auto slash = text.find('/');
  auto digits      = [](const std::string& t) {
    return !t.empty() && t.size() <= 9 && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const std::string ks = slash == std::string::npos ? text : text.substr(0, slash);
  const std::string ns = slash == std::string::npos ? "" : text.substr(slash + 1);
  const size_t k = digits(ks) ? std::stoul(ks) : 0, n = digits(ns) ? std::stoul(ns) : 0;
  if (n == 0 || k == 0 || k > n)
    throw InputError({fmt::format("--shard {}: expected K/N with 1 <= K <= N, e.g. 2/8", text)});
  return {k, n};
}

// The journal of an earlier run of this sweep. What an interruption leaves after its last
// newline is a torn line: it is cut away, so that the lines appended next start on a line of
// their own instead of joining it into invalid JSON mid-file.
std::vector<nlohmann::json> read_journal(const std::string& journal, const Sweep& sweep)
{
  if (!std::filesystem::exists(journal))
    return {};
  std::string text  = read_bounded_file(journal, limits::kMaxResultFileBytes, "a sweep journal");
  const size_t keep = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  if (keep < text.size()) {
    text.resize(keep);
    std::error_code error;
    std::filesystem::resize_file(journal, keep, error);
    if (error)
      throw InputError({fmt::format("{}: cannot cut away its torn last line: {}", journal, error.message())});
  }
  try {
    return result_lines(text, journal, sweep.digest);
  } catch (const InputError& e) {
    auto problems = e.problems();
    problems.back() += "; delete the journal to start the sweep over, or give another -o";
    throw InputError(problems);
  }
}

// Appends each line with one write() of the whole line, so that a kill leaves whole lines and at
// most one torn last line; every failed write is an error.
class JournalWriter {
public:
  explicit JournalWriter(const std::string& path)
      : path_(path), fd_(open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644))
  {
    if (fd_ < 0)
      throw InputError({fmt::format("{}: cannot write the file", path)});
  }
  ~JournalWriter() { close(fd_); }
  JournalWriter(const JournalWriter&)            = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  void append(const std::string& line)
  {
    if (!write_all(fd_, line + "\n"))
      throw InputError({fmt::format("{}: could not append a result line (disk full?)", path_)});
  }

private:
  std::string path_;
  int fd_;
};

void write_results(const std::string& prefix, const std::vector<std::string>& axes,
                   const std::vector<nlohmann::json>& results)
{
  write_text_file(prefix + ".csv", sweep_csv(axes, results));
  write_text_file(prefix + ".jsonl", sweep_jsonl(results));
}

int run_sweep(const SweepOptions& o)
{
  Sweep sweep = load_sweep(o.file);
  const size_t total = sweep.points();
  auto [k, n]        = o.shard.empty() ? std::pair<size_t, size_t>{1, 1} : parse_shard(o.shard);
  std::string prefix = o.prefix;
  if (prefix.empty()) // shards of one sweep in one folder must not write over each other
    prefix = std::filesystem::path(o.file).stem().string() + (n > 1 ? fmt::format("-shard{}of{}", k, n) : "");
  const std::string journal = prefix + ".jsonl.partial";

  // Points of this shard, less those a previous run of the same sweep finished.
  // A point whose worker died (status "error") is run again.
  std::map<size_t, nlohmann::json> results;
  for (auto& r : read_journal(journal, sweep)) {
    size_t point = r["point"].get<size_t>();
    if (r["of"].get<size_t>() == total && point % n == k - 1 && r["status"] != "error" &&
        r["parameters"] == sweep.parameter_object(point))
      results.insert_or_assign(point, std::move(r));
  }
  std::vector<size_t> todo;
  for (size_t i = k - 1; i < total; i += n)
    if (!results.count(i))
      todo.push_back(i);
  const size_t shard_points = todo.size() + results.size();
  if (!o.quiet)
    fmt::print(stderr, "{}: {} points{}{}, {} worker{}\n", sweep.name, shard_points,
               n > 1 ? fmt::format(" (shard {}/{} of {})", k, n, total) : "",
               results.empty() ? "" : fmt::format(", {} already done", results.size()), o.jobs, o.jobs > 1 ? "s" : "");

  JournalWriter log(journal);
  Progress progress(shard_points, o.quiet);
  progress.advance(results.size());
  evaluate_points(sweep, todo, o.jobs, o.allow_oom, [&](size_t point, nlohmann::json j) {
    log.append(j.dump());
    results.emplace(point, std::move(j));
    progress.advance(results.size());
  });

  std::vector<nlohmann::json> ordered;
  size_t ok = 0, infeasible = 0, failed = 0;
  const nlohmann::json* best = nullptr;
  for (auto& [point, r] : results) {
    ordered.push_back(r);
    const std::string status = r["status"];
    ok += status == "ok";
    infeasible += status == "infeasible";
    failed += status == "error";
  }
  for (const auto& r : ordered)
    if (r["status"] == "ok" && (best == nullptr || r["report"]["tokens_per_s"] > (*best)["report"]["tokens_per_s"]))
      best = &r;
  write_results(prefix, sweep.columns(), ordered);
  if (!o.html.empty())
    write_text_file(o.html, html_sweep_report(sweep.name, sweep.columns(), ordered));
  std::filesystem::remove(journal);
  if (!o.quiet) {
    fmt::print("{}: {} simulated, {} infeasible, {} failed; wrote {}.csv and {}.jsonl\n", sweep.name, ok, infeasible,
               failed, prefix, prefix);
    if (best != nullptr)
      fmt::print("best: point {} ({}) at {:.0f} tokens/s, {:.4f} s per step\n", (*best)["point"].get<size_t>(),
                 (*best)["parameters"].dump(), (*best)["report"]["tokens_per_s"].get<double>(),
                 (*best)["report"]["step_time_s"].get<double>());
  }
  return failed > 0 ? 1 : 0;
}

struct MergeOptions {
  std::vector<std::string> files;
  std::string prefix = "merged";
};

int run_merge(const MergeOptions& o)
{
  std::map<size_t, nlohmann::json> results;
  size_t total = 0;
  std::vector<std::string> axes;
  std::string digest; // of the first line read: every shard must come from that sweep
  for (const auto& file : o.files) {
    for (auto& r : result_lines(read_bounded_file(file, limits::kMaxResultFileBytes, "a sweep's result file"), file, digest)) {
      digest       = r["sweep_digest"];
      size_t point = r["point"].get<size_t>(), of = r["of"].get<size_t>();
      if (total != 0 && of != total)
        throw InputError({fmt::format("{}: point {} belongs to a sweep of {} points, the others to one of {}", file,
                                      point, of, total)});
      total = of;
      // Every line of one sweep has the same parameters: a line with others was edited or comes
      // from another sweep whose digest was copied.
      std::vector<std::string> keys;
      for (const auto& [path, value] : r["parameters"].items())
        keys.push_back(path);
      if (axes.empty())
        axes = keys;
      else if (keys != axes)
        throw InputError({fmt::format("{}: point {}'s parameters are [{}], the other points' [{}]; expected one sweep's "
                                      "lines",
                                      file, point, fmt::join(keys, ", "), fmt::join(axes, ", "))});
      if (!results.emplace(point, std::move(r)).second)
        throw InputError({fmt::format("{}: point {} appears twice among the merged files", file, point)});
    }
  }
  // Files with no result lines (empty shards, or the wrong files): an empty "merged" output would
  // pass for a sweep of no points.
  if (results.empty())
    throw InputError({fmt::format("{}: no result lines to merge; give the PREFIX.jsonl files that `stepsim sweep "
                                  "--shard K/N` wrote",
                                  o.files.size() == 1 ? o.files.front() : fmt::format("the {} files", o.files.size()))});
  std::vector<size_t> missing;
  for (size_t i = 0; i < total; ++i)
    if (!results.count(i))
      missing.push_back(i);
  if (!missing.empty())
    throw InputError({fmt::format("the merged files lack {} of {} points (first missing: point {}); run the missing "
                                  "shards first",
                                  missing.size(), total, missing.front())});
  std::vector<nlohmann::json> ordered;
  for (auto& [point, r] : results)
    ordered.push_back(std::move(r));
  write_results(o.prefix, axes, ordered);
  fmt::print("merged {} points from {} files into {}.csv and {}.jsonl\n", total, o.files.size(), o.prefix, o.prefix);
  return 0;
}

std::function<int()> setup_sweep(CLI::App& sub)
{
  auto o = std::make_shared<SweepOptions>();
  sub.add_option("FILE", o->file, "sweep JSON file: a base scenario and grid/zip axes")->required();
  sub.add_option("-j,--jobs", o->jobs, "worker processes (default 1)")->check(CLI::Range(1, 1024));
  sub.add_option("-o,--output", o->prefix,
                 "write PREFIX.csv and PREFIX.jsonl (default: the sweep file's name, with -shardKofN when sharded)");
  sub.add_option("--shard", o->shard, "run only slice K of N (K/N, e.g. for Slurm array jobs); join with `merge`");
  sub.add_flag("--allow-oom", o->allow_oom, "simulate points that do not fit in memory instead of marking them");
  sub.add_flag("--quiet,-q", o->quiet, "no progress or summary");
  sub.add_option("--html", o->html,
                 "also write the results as one self-contained HTML page: a sortable table of the points and a "
                 "Pareto plot of tokens/s against memory per GPU or energy per token");
  sub.footer("Examples:\n  stepsim sweep configs/sweeps/gpt3-175b-1024.json -j 2\n"
             "  stepsim sweep configs/sweeps/gpt3-175b-1024.json --shard 3/8 -o part3   (then: stepsim merge part*.jsonl)\n"
             "  stepsim sweep configs/sweeps/gpt3-175b-1024.json -j 2 -o gpt3 --html gpt3.html   # sortable table, Pareto plot");
  return [o] { return run_sweep(*o); };
}

std::function<int()> setup_merge(CLI::App& sub)
{
  auto o = std::make_shared<MergeOptions>();
  sub.add_option("FILES", o->files, "PREFIX.jsonl files of the shards")->required();
  sub.add_option("-o,--output", o->prefix, "write PREFIX.csv and PREFIX.jsonl (default: merged)");
  return [o] { return run_merge(*o); };
}

const bool registered_sweep =
    CommandRegistry::add("sweep", "simulate every point of a parameter sweep, in parallel", Command{setup_sweep});
const bool registered_merge =
    CommandRegistry::add("merge", "join the outputs of sharded sweeps into one CSV and JSONL", Command{setup_merge});

} // namespace
} // namespace stepsim

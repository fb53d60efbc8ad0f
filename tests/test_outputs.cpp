// The outputs of `stepsim run` besides the table: CSV, Chrome/Perfetto trace and Gantt SVG; and
// `--json -` (standard output) of the commands that write JSON.
#include "support.hpp"

#include "sim/output/report_csv.hpp"
#include "sim/output/timeline.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace stepsim;

namespace {


std::vector<std::string> split(const std::string& line, char sep)
{
  std::vector<std::string> out;
  std::stringstream s(line);
  std::string item;
  while (std::getline(s, item, sep))
    out.push_back(item);
  return out;
}

size_t count(const std::string& text, const std::string& what)
{
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size()))
    ++n;
  return n;
}

struct Outputs {
  std::string json, csv, trace, svg;
};

// Runs one scenario with every output and returns the files' text.
Outputs run_with_outputs(const nlohmann::json& scenario, const std::string& tag, const std::string& extra = "")
{
  std::string file = testing::write_temp_file(tag + ".scenario.json", scenario.dump());
  Outputs paths{testing::write_temp_file(tag + ".report.json", ""), testing::write_temp_file(tag + ".csv", ""),
                testing::write_temp_file(tag + ".trace.json", ""), testing::write_temp_file(tag + ".svg", "")};
  auto r = testing::run_stepsim("run " + file + " -q " + extra + " --json " + paths.json + " --csv " + paths.csv +
                                " --trace " + paths.trace + " --svg " + paths.svg);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return {testing::read_text_file(paths.json), testing::read_text_file(paths.csv), testing::read_text_file(paths.trace), testing::read_text_file(paths.svg)};
}

} // namespace

TEST_CASE("run --csv: one header and one row, every report figure and each stage's", "[outputs]")
{
  const int stages = 4;
  Outputs o        = run_with_outputs(testing::small_scenario(stages, 1, 8), "csv");
  auto lines       = split(o.csv, '\n');
  REQUIRE(lines.size() == 2);
  auto header = split(lines[0], ','), row = split(lines[1], ',');
  CHECK(header.size() == row.size());
  std::map<std::string, std::string> cell;
  for (size_t i = 0; i < header.size() && i < row.size(); ++i)
    cell[header[i]] = row[i];
  CHECK(std::set<std::string>(header.begin(), header.end()).size() == header.size()); // no column twice

  // The CSV writes each number exactly as the JSON report does.
  auto report = nlohmann::json::parse(o.json);
  for (const char* key : {"step_time_s", "tokens_per_s", "mfu", "bubble_fraction", "exposed_comm_s",
                          "memory_peak_bytes", "fits_in_memory", "gpus"}) {
    INFO(key);
    REQUIRE(cell.count(key) == 1);
    CHECK(cell[key] == report[key].dump());
  }
  CHECK(cell["name"] == "small");
  CHECK(cell["memory_total_bytes"] == report["memory"]["total_bytes"].dump());
  for (int s = 0; s < stages; ++s)
    for (const char* figure : {"bubble_fraction", "textbook_bubble_fraction", "compute_s", "exposed_comm_s"}) {
      std::string column = "stage" + std::to_string(s) + "_" + figure;
      INFO(column);
      REQUIRE(cell.count(column) == 1);
      CHECK(cell[column] == report["stages"][s][figure].dump());
    }
  CHECK(cell.count("stage" + std::to_string(stages) + "_bubble_fraction") == 0);
}

TEST_CASE("csv_escape quotes what would break a row", "[outputs]")
{
  CHECK(csv_escape("plain") == "plain");
  CHECK(csv_escape("a,b") == "\"a,b\"");
  CHECK(csv_escape("say \"hi\"") == "\"say \"\"hi\"\"\"");
}

TEST_CASE("run --trace: one process per simulated rank, sane slices, paired flows", "[outputs]")
{
  const int stages = 4, data = 2, micro_batches = 8;
  Outputs o  = run_with_outputs(testing::small_scenario(stages, data, micro_batches), "trace",
                                "--set simulation.fidelity=full");
  auto trace = nlohmann::json::parse(o.trace);
  auto report = nlohmann::json::parse(o.json);
  REQUIRE(report["simulated_ranks"] == stages * data);

  std::map<int, std::string> processes;
  std::map<long long, int> flow_starts, flow_ends;
  std::set<std::string> names;
  size_t slices = 0;
  for (const auto& e : trace.at("traceEvents")) {
    std::string ph = e.at("ph");
    if (ph == "M" && e.at("name") == "process_name")
      processes[e.at("pid").get<int>()] = e.at("args").at("name");
    if (ph == "X") {
      ++slices;
      CHECK(e.at("dur").get<double>() >= 0);
      CHECK(e.at("ts").get<double>() >= 0);
      CHECK(e.at("ts").get<double>() + e.at("dur").get<double>() <= report["step_time_s"].get<double>() * 1e6 + 1e-3);
      names.insert(e.at("name").get<std::string>());
    }
    if (ph == "s")
      ++flow_starts[e.at("id").get<long long>()];
    if (ph == "f")
      ++flow_ends[e.at("id").get<long long>()];
  }
  // Slices on one thread nest (a pass holds its tasks) and never overlap partly; compared in whole
  // nanoseconds, as the writer rounds them.
  std::map<std::pair<int, int>, std::vector<std::pair<long long, long long>>> threads;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") {
      long long start = std::llround(e.at("ts").get<double>() * 1000);
      threads[{e.at("pid").get<int>(), e.at("tid").get<int>()}].emplace_back(
          start, start + std::llround(e.at("dur").get<double>() * 1000));
    }
  size_t partial_overlaps = 0;
  for (auto& [thread, spans] : threads) {
    std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<long long> open_ends;
    for (const auto& [start, end] : spans) {
      while (!open_ends.empty() && open_ends.back() <= start)
        open_ends.pop_back();
      if (!open_ends.empty() && end > open_ends.back())
        ++partial_overlaps;
      open_ends.push_back(end);
    }
  }
  CHECK(partial_overlaps == 0);

  CHECK(processes.size() == static_cast<size_t>(stages * data));
  for (const auto& [pid, name] : processes)
    CHECK(name.rfind("rank " + std::to_string(pid) + " (stage ", 0) == 0);
  CHECK(slices > 0);
  CHECK(names.count("F mb0 chunk0") == 1);
  CHECK(names.count("B mb7 chunk0") == 1);
  // Every send between stages has its receive: per replica and micro-batch, (p-1) activations
  // forward and (p-1) gradients back.
  CHECK(flow_starts.size() == static_cast<size_t>(2 * (stages - 1) * micro_batches * data));
  CHECK(flow_starts == flow_ends);
  for (const auto& [id, n] : flow_starts)
    CHECK(n == 1);
}

TEST_CASE("run --svg: a Gantt chart with one group per stage", "[outputs]")
{
  const int stages = 4;
  Outputs o        = run_with_outputs(testing::small_scenario(stages, 2, 8), "svg", "--set simulation.fidelity=full");
  REQUIRE(o.svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(o.svg.size() > 7);
  CHECK(o.svg.substr(o.svg.size() - 7) == "</svg>\n");
  CHECK(count(o.svg, "<g class=\"stage\"") == static_cast<size_t>(stages));
  CHECK(count(o.svg, "<g") == count(o.svg, "</g>"));
  CHECK(count(o.svg, "<text") == count(o.svg, "</text>"));
  // Two ranks per stage at full fidelity (data 2), one row each.
  CHECK(count(o.svg, "rank ") >= static_cast<size_t>(2 * stages));
  CHECK(o.svg.find("small: step ") != std::string::npos);
  // Forward and backward bars, 8 micro-batches each on every row.
  CHECK(count(o.svg, "<title>forward mb") == static_cast<size_t>(2 * stages * 8));
  CHECK(count(o.svg, "<title>backward mb") == static_cast<size_t>(2 * stages * 8));
}

TEST_CASE("run outputs are byte-identical across runs", "[outputs]")
{
  auto scenario = testing::small_scenario(4, 1, 8);
  Outputs a     = run_with_outputs(scenario, "same-a");
  Outputs b     = run_with_outputs(scenario, "same-b");
  CHECK(a.csv == b.csv);
  CHECK(a.trace == b.trace);
  CHECK(a.svg == b.svg);
}

TEST_CASE("compute runs: a backward holds its recompute, another pass starts a new run", "[outputs]")
{
  auto interval = [](Pass pass, int mb, double start, double end) {
    TimelineInterval i;
    i.pass        = pass;
    i.micro_batch = mb;
    i.start_s     = start;
    i.end_s       = end;
    return i;
  };
  TimelineRank rank;
  rank.intervals = {interval(Pass::Forward, 1, 0, 1),        interval(Pass::Recompute, 0, 1, 2),
                    interval(Pass::Backward, 0, 2, 4),       interval(Pass::Recompute, 0, 4, 5),
                    interval(Pass::Backward, 0, 5, 7),       interval(Pass::BackwardWeight, 0, 7, 8),
                    interval(Pass::Optimizer, -1, 9, 10)};
  auto runs = compute_runs(rank);
  REQUIRE(runs.size() == 4);
  CHECK(runs[0].pass == Pass::Forward);
  CHECK(runs[1].pass == Pass::Backward);
  CHECK(runs[1].start_s == 1);
  CHECK(runs[1].end_s == 7);
  CHECK(runs[1].recompute_s == 2);
  CHECK(runs[1].first == 1);
  CHECK(runs[1].last == 4);
  CHECK(runs[2].pass == Pass::BackwardWeight);
  CHECK(runs[3].pass == Pass::Optimizer);
}

TEST_CASE("run --json -: the report on standard output, the same JSON as the file, no table", "[outputs]")
{
  const nlohmann::json scenario = testing::small_scenario(2, 2, 4);
  const std::string file        = testing::write_temp_file("stdout.scenario.json", scenario.dump());
  const std::string to_file     = testing::write_temp_file("stdout.report.json", "");
  auto written = testing::run_stepsim("run " + file + " -q --json " + to_file);
  REQUIRE(written.exit_code == 0);
  auto printed = testing::run_stepsim("run " + file + " --json -");
  INFO(printed.output);
  REQUIRE(printed.exit_code == 0);
  CHECK(printed.output.find("step time") == std::string::npos); // the table is not mixed into the JSON
  CHECK(nlohmann::json::parse(printed.output) == nlohmann::json::parse(testing::read_text_file(to_file)));
}

TEST_CASE("accuracy, plan and platform --json -: the JSON on standard output, the same as the file, no table",
          "[outputs]")
{
  // Each command as run, graph, collective and replay take "-": no file named "-" is written.
  namespace fs                  = std::filesystem;
  const nlohmann::json scenario = testing::small_scenario(2, 2, 4);
  const std::string file        = testing::write_temp_file("stdout-plan.scenario.json", scenario.dump());
  const fs::path cases          = fs::path(testing::write_temp_file("stdout-accuracy.keep", "")).parent_path() /
                         "stdout-accuracy-cases";
  fs::create_directories(cases);
  const fs::path one = fs::path(STEPSIM_SOURCE_DIR) / "configs" / "validation" / "nemo" /
                       "nemo2403_llama2_7b_seq16k_16xh100_fp8_tp2_pp1_cp1.json";
  fs::copy_file(one, cases / one.filename(), fs::copy_options::overwrite_existing);
  const std::pair<std::string, std::string> commands[] = {
      {"accuracy --quiet " + cases.string(), "accuracy --quiet " + cases.string()}, // progress goes to stderr
      {"plan " + file + " --top 2 --simulate 2 --quiet", "plan " + file + " --top 2 --simulate 2 --quiet"},
      {"platform " + file + " --quiet", "platform " + file}};
  for (const auto& [to_file_args, stdout_args] : commands) {
    const std::string to_file = testing::write_temp_file("stdout-command.json", "");
    auto written              = testing::run_stepsim(to_file_args + " --json " + to_file);
    INFO(to_file_args << "\n" << written.output);
    REQUIRE(written.exit_code == 0);
    auto printed = testing::run_stepsim(stdout_args + " --json -");
    INFO(printed.output);
    REQUIRE(printed.exit_code == 0);
    CHECK(nlohmann::json::parse(printed.output) == nlohmann::json::parse(testing::read_text_file(to_file)));
    CHECK_FALSE(fs::exists("-"));
  }
}

TEST_CASE("stepsim run refuses to write a report over the scenario it reads", "[outputs][cli]")
{
  const std::string file = testing::write_temp_file("overwrite-me.json", testing::small_scenario(2, 1, 4).dump());
  const std::string before = testing::read_text_file(file);
  for (const char* option : {"--json", "--csv", "--html"}) {
    const auto r = testing::run_stepsim(std::string("run ") + file + " -q " + option + " " + file);
    INFO(option << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(std::string(option) + ": ") && Catch::Contains("is the scenario FILE itself"));
    CHECK(testing::read_text_file(file) == before);
  }
}

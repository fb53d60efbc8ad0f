// Sweeps: points, CSV shape, infeasible rows, -j and shard invariance, resumption, bad files.
#include "support.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

using namespace stepsim;
using testing::run_stepsim;
using testing::write_temp_file;

namespace {


std::vector<std::string> lines_of(const std::string& text)
{
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string line; std::getline(s, line);)
    out.push_back(line);
  return out;
}

// Fields of one CSV line (RFC 4180 quoting).
std::vector<std::string> csv_fields(const std::string& line)
{
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// 6 × 4 × 3 × 3 = 216 points over a small scenario; the ones with a schedule that needs
// virtual stages, or a micro-batch that does not divide the batch, are infeasible rows.
std::string sweep_file(const std::string& name)
{
  std::string base = write_temp_file(name + "-base.json", testing::small_scenario(2, 2, 8).dump());
  nlohmann::json sweep = {
      {"base", std::filesystem::path(base).filename().string()},
      {"grid",
       {{"training.micro_batch_size", {1, 2, 3, 4, 5, 8}},
        {"parallelism.schedule", {"1f1b", "gpipe", "zb_h1", "interleaved_1f1b"}},
        {"training.recompute", {"none", "selective", "full"}}}},
      {"zip", {{"parallelism.pipeline", {2, 1, 4}}, {"parallelism.data", {2, 4, 1}}}}};
  return write_temp_file(name + ".json", sweep.dump(2));
}

} // namespace

TEST_CASE("a sweep of 216 points runs on two workers and writes one CSV column per parameter and figure", "[sweep]")
{
  std::string file   = sweep_file("shape");
  std::string prefix = std::filesystem::path(file).replace_extension("").string();
  auto result        = run_stepsim("sweep " + file + " -j 2 -o " + prefix);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK(result.output.find("216/216 points") != std::string::npos); // progress was shown

  auto rows = lines_of(testing::read_text_file(prefix + ".csv"));
  REQUIRE(rows.size() == 217);
  auto header = csv_fields(rows[0]);
  for (const char* column : {"point", "training.micro_batch_size", "parallelism.schedule", "training.recompute",
                             "parallelism.pipeline", "parallelism.data", "status", "reason", "step_time_s",
                             "tokens_per_s", "mfu", "bubble_fraction", "memory_peak_bytes", "stage0_bubble_fraction"})
    CHECK(std::find(header.begin(), header.end(), column) != header.end());
  std::set<std::string> names(header.begin(), header.end());
  CHECK(names.size() == header.size()); // no column twice

  size_t ok = 0, infeasible = 0;
  const size_t status = std::find(header.begin(), header.end(), "status") - header.begin();
  const size_t step   = std::find(header.begin(), header.end(), "step_time_s") - header.begin();
  for (size_t i = 1; i < rows.size(); ++i) {
    auto fields = csv_fields(rows[i]);
    REQUIRE(fields.size() == header.size());
    CHECK(fields[0] == std::to_string(i - 1));
    if (fields[status] == "ok") {
      ++ok;
      CHECK(std::stod(fields[step]) > 0);
    } else {
      ++infeasible;
      CHECK(fields[status] == "infeasible");
      CHECK(fields[step].empty());
      CHECK(!fields[status + 1].empty()); // the reason
    }
  }
  CHECK(ok > 50);
  CHECK(infeasible > 50);
  CHECK(lines_of(testing::read_text_file(prefix + ".jsonl")).size() == 216);
}

TEST_CASE("sweep outputs do not depend on -j, and merged shards equal the whole run byte for byte", "[sweep]")
{
  std::string file = sweep_file("shards");
  std::string dir  = std::filesystem::path(file).parent_path().string();
  REQUIRE(run_stepsim("sweep " + file + " -j 1 -q -o " + dir + "/whole-j1").exit_code == 0);
  REQUIRE(run_stepsim("sweep " + file + " -j 2 -q -o " + dir + "/whole-j2").exit_code == 0);
  for (int k = 1; k <= 3; ++k)
    REQUIRE(run_stepsim(fmt::format("sweep {} -j 2 -q --shard {}/3 -o {}/part{}", file, k, dir, k)).exit_code == 0);
  auto merged = run_stepsim(fmt::format("merge {0}/part3.jsonl {0}/part1.jsonl {0}/part2.jsonl -o {0}/merged", dir));
  INFO(merged.output);
  REQUIRE(merged.exit_code == 0);
  const std::string whole = testing::read_text_file(dir + "/whole-j1.csv");
  CHECK(whole.size() > 1000);
  CHECK(testing::read_text_file(dir + "/whole-j2.csv") == whole);
  CHECK(testing::read_text_file(dir + "/merged.csv") == whole);
  CHECK(testing::read_text_file(dir + "/merged.jsonl") == testing::read_text_file(dir + "/whole-j1.jsonl"));
  CHECK(lines_of(testing::read_text_file(dir + "/part2.jsonl")).size() == 72);

  auto incomplete = run_stepsim(fmt::format("merge {0}/part1.jsonl {0}/part2.jsonl -o {0}/bad", dir));
  CHECK(incomplete.exit_code == 2);
  CHECK(incomplete.output.find("lack 72 of 216 points") != std::string::npos);
}

TEST_CASE("an interrupted sweep resumes from its journal and ends with the same output", "[sweep]")
{
  std::string file = sweep_file("resume");
  std::string dir  = std::filesystem::path(file).parent_path().string();
  REQUIRE(run_stepsim("sweep " + file + " -q -o " + dir + "/full").exit_code == 0);
  // What an interruption leaves: some finished points, in completion order, and a torn line.
  auto done = lines_of(testing::read_text_file(dir + "/full.jsonl"));
  std::ofstream journal(dir + "/again.jsonl.partial");
  for (size_t i : {5, 0, 17, 3})
    journal << done[i] << "\n";
  journal << done[9].substr(0, 40);
  journal.close();
  auto result = run_stepsim("sweep " + file + " -o " + dir + "/again");
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK(result.output.find("4 already done") != std::string::npos);
  CHECK(testing::read_text_file(dir + "/again.csv") == testing::read_text_file(dir + "/full.csv"));
  CHECK(!std::filesystem::exists(dir + "/again.jsonl.partial"));
}

TEST_CASE("a bad sweep file is refused with the JSON path of each problem", "[sweep]")
{
  std::string base = write_temp_file("bad-base.json", testing::small_scenario(2, 2, 8).dump());
  nlohmann::json sweep = {{"base", std::filesystem::path(base).filename().string()},
                          {"grid", {{"parallelism.pipeline", nlohmann::json::array()}}},
                          {"zip", {{"parallelism.data", {1, 2}}, {"parallelism.tensor", {1}}}},
                          {"gird", 1}};
  auto result = run_stepsim("sweep " + write_temp_file("bad-sweep.json", sweep.dump()));
  INFO(result.output);
  CHECK(result.exit_code == 2);
  CHECK(result.output.find("grid.parallelism.pipeline: expected a non-empty list") != std::string::npos);
  CHECK(result.output.find("zip.parallelism.tensor: has 1 values but parallelism.data has 2") != std::string::npos);
  CHECK(result.output.find("gird: unknown key (did you mean \"grid\"?)") != std::string::npos);
  CHECK(run_stepsim("sweep " + write_temp_file("no-sweep.json", "{\"base\": 3}")).exit_code == 2);
  // One field on two axes, in the two spellings of an index: each point would run the later value.
  nlohmann::json twice = {{"base", std::filesystem::path(base).filename().string()},
                          {"grid", {{"platform.node_groups.0.count", {1, 2}}}},
                          {"zip", {{"platform.node_groups[0].count", {2, 4}}, {"parallelism.data", {1, 2}}}}};
  auto again = run_stepsim("sweep " + write_temp_file("twice-sweep.json", twice.dump()));
  INFO(again.output);
  CHECK(again.exit_code == 2);
  CHECK(again.output.find("zip.platform.node_groups[0].count: varies platform.node_groups[0].count again, which "
                          "grid.platform.node_groups.0.count already varies") != std::string::npos);
  // An axis on a field inside another axis's object.
  nlohmann::json nested = {{"base", std::filesystem::path(base).filename().string()},
                           {"grid", {{"training.micro_batch_size", {1, 2}}, {"training", {{{"micro_batch_size", 1}}}}}}};
  auto overlap = run_stepsim("sweep " + write_temp_file("nested-sweep.json", nested.dump()));
  INFO(overlap.output);
  CHECK(overlap.exit_code == 2);
  CHECK(overlap.output.find("overlaps") != std::string::npos);
  // merge of files with no result lines: nothing to merge is an error, not an empty output.
  auto empty = run_stepsim("merge " + write_temp_file("empty-shard.jsonl", "") + " -o " +
                           std::filesystem::path(base).parent_path().string() + "/empty-merged");
  INFO(empty.output);
  CHECK(empty.exit_code == 2);
  CHECK(empty.output.find("empty-shard.jsonl: no result lines to merge") != std::string::npos);
  CHECK(run_stepsim("sweep /nonexistent/sweep.json").exit_code == 2);
}

namespace {

// A 4-point sweep of the small scenario, run whole: its file and its result lines.
std::pair<std::string, std::vector<std::string>> four_point_sweep(const std::string& name)
{
  std::string base = write_temp_file(name + "-base.json", testing::small_scenario(2, 2, 8).dump());
  nlohmann::json sweep = {{"base", std::filesystem::path(base).filename().string()},
                          {"grid", {{"parallelism.schedule", {"1f1b", "gpipe"}}, {"training.micro_batch_size", {1, 2}}}}};
  std::string file = write_temp_file(name + ".json", sweep.dump());
  std::string dir  = std::filesystem::path(file).parent_path().string();
  REQUIRE(run_stepsim("sweep " + file + " -q -o " + dir + "/" + name + "-whole").exit_code == 0);
  auto lines = lines_of(testing::read_text_file(dir + "/" + name + "-whole.jsonl"));
  REQUIRE(lines.size() == 4);
  return {file, lines};
}

std::string with_field(const std::string& line, const std::string& key, const nlohmann::json& value)
{
  auto j = nlohmann::json::parse(line);
  if (value.is_discarded())
    j.erase(key);
  else
    j[key] = value;
  return j.dump();
}

} // namespace

TEST_CASE("a torn journal line is cut away, so a second interruption cannot leave invalid JSON mid-file", "[sweep]")
{
  auto [file, lines] = four_point_sweep("torn");
  std::string dir    = std::filesystem::path(file).parent_path().string();
  // The first interruption tore point 1's line. The next run appends the other points, then
  // cannot write its CSV (a folder is in the way), so it stops with the journal kept, as a
  // second interruption would.
  write_temp_file("torn-again.jsonl.partial", lines[0] + "\n" + lines[1].substr(0, 30));
  std::filesystem::create_directories(dir + "/torn-again.csv");
  auto stopped = run_stepsim("sweep " + file + " -q -o " + dir + "/torn-again");
  CHECK(stopped.exit_code == 2);
  auto journal = lines_of(testing::read_text_file(dir + "/torn-again.jsonl.partial"));
  CHECK(journal.size() == 4);
  for (const auto& line : journal)
    CHECK_FALSE(nlohmann::json::parse(line, nullptr, false).is_discarded());
  std::filesystem::remove(dir + "/torn-again.csv");
  auto resumed = run_stepsim("sweep " + file + " -o " + dir + "/torn-again");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.output.find("4 already done") != std::string::npos);
  CHECK(testing::read_text_file(dir + "/torn-again.jsonl") == testing::read_text_file(dir + "/torn-whole.jsonl"));
}

TEST_CASE("a journal of another sweep, or of a base scenario since changed, is refused", "[sweep]")
{
  auto [file, lines] = four_point_sweep("stale");
  std::string dir    = std::filesystem::path(file).parent_path().string();
  testing::write_temp_file("stale-again.jsonl.partial", with_field(lines[0], "sweep_digest", "0123456789abcdef") + "\n");
  auto stale = run_stepsim("sweep " + file + " -q -o " + dir + "/stale-again");
  CHECK(stale.exit_code == 2);
  CHECK(stale.output.find("stale-again.jsonl.partial:1: written by another sweep") != std::string::npos);
  // The same journal line, but the base scenario changed under it.
  testing::write_temp_file("stale-again.jsonl.partial", lines[0] + "\n");
  auto base = testing::small_scenario(2, 2, 8);
  base["training"]["precision"] = "fp16";
  write_temp_file("stale-base.json", base.dump());
  auto changed = run_stepsim("sweep " + file + " -q -o " + dir + "/stale-again");
  CHECK(changed.exit_code == 2);
  CHECK(changed.output.find("before its sweep file or base scenario changed") != std::string::npos);
}

TEST_CASE("journal and shard lines of the wrong shape are refused with the file and line", "[sweep]")
{
  auto [file, lines] = four_point_sweep("shape-check");
  std::string dir    = std::filesystem::path(file).parent_path().string();
  const std::pair<std::string, std::string> cases[] = {
      {with_field(lines[0], "point", "0"), "point: expected a point number"},
      {with_field(lines[0], "point", -1), "point: expected a point number"},
      {with_field(lines[0], "point", 9), "point: 9 is not a point of a sweep of 4 points"},
      {with_field(lines[0], "status", nlohmann::json(nlohmann::json::value_t::discarded)), "status: expected"},
      {with_field(lines[0], "report", nlohmann::json::object()), "report.name: missing"},
      {with_field(lines[0], "report", nlohmann::json::array({1, 2})), "report: expected the report object stepsim writes, got array"},
      {with_field(lines[0], "report", [&] {
         auto report           = nlohmann::json::parse(lines[0])["report"];
         report["step_time_s"] = -5;
         return report;
       }()),
       "report: step_time_s -5 and tokens_per_s"},
      // An integer field of the report beyond an int, or no integer (found by fuzz_results: the
      // conversion of 1.5e65 to int was undefined behaviour).
      {with_field(lines[0], "report", [&] {
         auto report    = nlohmann::json::parse(lines[0])["report"];
         report["gpus"] = 1.5e65;
         return report;
       }()),
       "report: expected an integer, got 1.5e+65"},
      {with_field(lines[0], "report", [&] {
         auto report                  = nlohmann::json::parse(lines[0])["report"];
         report["stages"][0]["stage"] = 4294967296LL;
         return report;
       }()),
       "report: 4294967296 is out of range"},
      // A report beside another status is read back too (the CSV takes its columns from it).
      {with_field(with_field(lines[0], "status", "infeasible"), "report", nlohmann::json::object()), "report.name: missing"}};
  for (const auto& [line, expected] : cases) {
    INFO(line);
    auto shard = write_temp_file("shape-check-bad.jsonl", lines[1] + "\n" + line + "\n");
    auto merge = run_stepsim("merge " + shard + " -o " + dir + "/shape-check-merged");
    CHECK(merge.exit_code == 2);
    CHECK(merge.output.find("shape-check-bad.jsonl:2: " + expected) != std::string::npos);
    write_temp_file("shape-check-again.jsonl.partial", line + "\n");
    auto resume = run_stepsim("sweep " + file + " -q -o " + dir + "/shape-check-again");
    CHECK(resume.exit_code == 2);
    CHECK(resume.output.find("shape-check-again.jsonl.partial:1: " + expected) != std::string::npos);
  }
  auto zero = run_stepsim("merge /dev/zero");
  CHECK(zero.exit_code == 2);
  CHECK(zero.output.find("/dev/zero: not a regular file") != std::string::npos);
}

TEST_CASE("merge refuses shards of different sweeps with the same point count", "[sweep]")
{
  auto [file, lines] = four_point_sweep("mixed");
  std::string other  = write_temp_file("mixed-other.jsonl", with_field(lines[0], "sweep_digest", "0123456789abcdef") + "\n" +
                                                               with_field(lines[1], "sweep_digest", "0123456789abcdef") + "\n");
  std::string mine   = write_temp_file("mixed-mine.jsonl", lines[2] + "\n" + lines[3] + "\n");
  auto merge         = run_stepsim("merge " + other + " " + mine + " -o " + std::filesystem::path(mine).parent_path().string() + "/mixed-m");
  CHECK(merge.exit_code == 2);
  CHECK(merge.output.find("mixed-mine.jsonl:1: written by another sweep") != std::string::npos);
}

TEST_CASE("merge refuses a line whose parameters are not the other lines'", "[sweep]")
{
  auto [file, lines] = four_point_sweep("params");
  auto edited        = nlohmann::json::parse(lines[1]);
  edited["parameters"] = {{"foo", 1}};
  std::string shard = write_temp_file("params-edited.jsonl", lines[0] + "\n" + edited.dump() + "\n" + lines[2] + "\n" +
                                                                 lines[3] + "\n");
  auto merge = run_stepsim("merge " + shard + " -o " + std::filesystem::path(shard).parent_path().string() + "/params-m");
  INFO(merge.output);
  CHECK(merge.exit_code == 2);
  CHECK(merge.output.find("params-edited.jsonl: point 1's parameters are [foo], the other points'") != std::string::npos);
}

TEST_CASE("a point whose worker died is run again on resume", "[sweep]")
{
  auto [file, lines] = four_point_sweep("retry");
  std::string dir    = std::filesystem::path(file).parent_path().string();
  auto died          = nlohmann::json::parse(lines[2]);
  died.erase("report");
  died["status"] = "error";
  died["reason"] = "the worker process died";
  write_temp_file("retry-again.jsonl.partial", lines[0] + "\n" + died.dump() + "\n");
  auto resumed = run_stepsim("sweep " + file + " -o " + dir + "/retry-again");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.output.find("1 already done") != std::string::npos);
  CHECK(testing::read_text_file(dir + "/retry-again.jsonl") == testing::read_text_file(dir + "/retry-whole.jsonl"));
}

TEST_CASE("sweeps whose point count is beyond the bound, shards that do not parse, and misspelt axes are refused",
          "[sweep]")
{
  std::string base = write_temp_file("bounds-base.json", testing::small_scenario(2, 2, 8).dump());
  nlohmann::json grid = nlohmann::json::object();
  for (int axis = 0; axis < 8; ++axis) // 256^8 = 2^64 points, 0 in a size_t
    grid[fmt::format("model.x{}", axis)] = std::vector<int>(256, 1);
  auto huge = run_stepsim("sweep " + write_temp_file("bounds-huge.json", nlohmann::json{{"base", "bounds-base.json"}, {"grid", grid}}.dump()));
  CHECK(huge.exit_code == 2);
  CHECK(huge.output.find("error: grid: 256 × 256") != std::string::npos);
  auto typo = run_stepsim("sweep " + write_temp_file("bounds-typo.json", nlohmann::json{{"base", "bounds-base.json"}, {"grid", {{"parallelism.tensr", {1, 2}}}}}.dump()));
  CHECK(typo.exit_code == 2);
  CHECK(typo.output.find("grid.parallelism.tensr: not a field of the scenario") != std::string::npos);
  for (const char* shard : {"1/3x", "-1/3", "0/3", "4/3", "1/"}) {
    auto r = run_stepsim(fmt::format("sweep {} --shard {}", write_temp_file("bounds-ok.json", nlohmann::json{{"base", "bounds-base.json"}, {"grid", {{"training.micro_batch_size", {1}}}}}.dump()), shard));
    INFO(shard);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("expected K/N") != std::string::npos);
  }
}

TEST_CASE("stepsim validate refuses a sweep none of whose points can run, with their reasons")
{
  const nlohmann::json sweep = {{"base", {{"name", "x"}}}, {"grid", {{"training.micro_batch_size", {1, 2}}}}};
  const auto r = testing::run_stepsim("validate " + testing::write_temp_file("nothing-runs.json", sweep.dump()));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("model: required field is missing") &&
                           Catch::Contains("none of the sweep's 2 points can run"));
}

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
  CHECK(run_stepsim("sweep /nonexistent/sweep.json").exit_code == 2);
}

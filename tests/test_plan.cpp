// The planner: what it prints divides, fits and is simulated; its pruning (simulating only the
// best-estimated candidates) finds what simulating every valid candidate finds.
#include "support.hpp"

#include <catch2/catch.hpp>

#include "workloads/schedules/schedule.hpp"

#include <fstream>
#include <set>

using namespace stepsim;
using testing::run_stepsim;
using testing::write_temp_file;

namespace {

nlohmann::json planning_scenario()
{
  nlohmann::json doc = testing::small_scenario(1, 1, 64);
  doc["model"]["num_layers"]                          = 8;
  doc["training"]["global_batch_size"]                = 64;
  doc["platform"]["node_groups"][0]["count"]          = 2;
  doc["platform"]["node_groups"][0]["gpus_per_node"]  = 8;
  doc["platform"]["node_groups"][0]["intra_node"]     = {{"type", "nvswitch"}, {"bandwidth", "300GBps"}, {"latency", "1us"}};
  doc["platform"]["node_groups"][0]["nic"]            = {{"count", 8}, {"bandwidth", "100Gbps"}, {"latency", "2us"}};
  return doc;
}

nlohmann::json read_json(const std::string& file)
{
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

} // namespace

TEST_CASE("plan: the pruned search finds a configuration within 3% of the exhaustive best", "[plan]")
{
  std::string file = write_temp_file("plan.json", planning_scenario().dump());
  std::string all = file + ".all.json", pruned = file + ".pruned.json";
  auto exhaustive = run_stepsim("plan " + file + " --simulate 0 --top 1000 -j 2 -q --json " + all);
  INFO(exhaustive.output);
  REQUIRE(exhaustive.exit_code == 0);
  auto quick = run_stepsim("plan " + file + " --simulate 8 --top 5 -j 2 -q --json " + pruned);
  INFO(quick.output);
  REQUIRE(quick.exit_code == 0);

  nlohmann::json every = read_json(all), top = read_json(pruned);
  REQUIRE(every.size() > 20); // many valid configurations
  REQUIRE(top.size() == 5);
  double best = 0;
  for (const auto& c : every) {
    best = std::max(best, c["report"]["tokens_per_s"].get<double>());
    const auto& s = c["settings"];
    CHECK(s["parallelism.tensor"].get<int>() * s["parallelism.pipeline"].get<int>() * s["parallelism.data"].get<int>() ==
          16);
    CHECK(c["report"]["fits_in_memory"].get<bool>());
  }
  double best_of_top = 0;
  for (const auto& c : top)
    best_of_top = std::max(best_of_top, c["report"]["tokens_per_s"].get<double>());
  CHECK(best_of_top >= 0.97 * best);
  // Ranked by predicted throughput.
  for (size_t i = 1; i < every.size(); ++i)
    CHECK(every[i - 1]["report"]["tokens_per_s"].get<double>() >= every[i]["report"]["tokens_per_s"].get<double>());
}

TEST_CASE("plan refuses a GPU count that is not whole nodes", "[plan]")
{
  std::string file = write_temp_file("plan-bad.json", planning_scenario().dump());
  auto result      = run_stepsim("plan " + file + " --gpus 12");
  CHECK(result.exit_code == 2);
  CHECK(result.output.find("--gpus 12: not a whole number of 8-GPU nodes") != std::string::npos);
}

namespace {

// Runs `stepsim plan` on a document and returns the JSON of the printed configurations.
nlohmann::json plan_rows(const nlohmann::json& doc, const std::string& name, const std::string& options)
{
  std::string file = write_temp_file(name + ".json", doc.dump());
  std::string out  = file + ".rows.json";
  auto result      = run_stepsim("plan " + file + " -q -j 2 --json " + out + " " + options);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  return read_json(out);
}

// The values one setting takes over the printed configurations.
std::set<std::string> settings_seen(const nlohmann::json& rows, const std::string& setting)
{
  std::set<std::string> seen;
  for (const auto& r : rows)
    seen.insert(r["settings"][setting].get<std::string>());
  return seen;
}

double best_tokens(const nlohmann::json& rows)
{
  double best = 0;
  for (const auto& r : rows)
    best = std::max(best, r["report"]["tokens_per_s"].get<double>());
  return best;
}

} // namespace

TEST_CASE("plan on a platform of two GPU types ranks plans, the top within 3% of every valid one simulated",
          "[plan][mixed]")
{
  nlohmann::json doc = planning_scenario();
  doc["platform"]["node_groups"][0]["count"] = 1;
  auto v100                                  = doc["platform"]["node_groups"][0];
  v100["gpu"]                                = "V100-SXM2-32GB";
  v100["intra_node"]["bandwidth"]            = "150GBps";
  doc["platform"]["node_groups"].push_back(v100);
  const auto every = plan_rows(doc, "plan-mixed-all", "--simulate 0 --top 1000");
  const auto top   = plan_rows(doc, "plan-mixed-top", "--top 5");
  REQUIRE(every.size() > 20);
  REQUIRE(top.size() == 5);
  CHECK(top[0]["report"]["tokens_per_s"].get<double>() >= 0.97 * best_tokens(every));
  for (const auto& r : every) // every plan spans both groups: 16 GPUs
    CHECK(r["settings"]["parallelism.tensor"].get<int>() * r["settings"]["parallelism.pipeline"].get<int>() *
              r["settings"]["parallelism.data"].get<int>() * r["settings"]["parallelism.context"].get<int>() ==
          16);
  // Some pipelines put their stages on the two GPU types, with the layers split by speed.
  bool split = false;
  for (const auto& r : every)
    split = split || (r["settings"]["parallelism.pipeline"].get<int>() > 1 &&
                      r["settings"].value("parallelism.stage_layers", nlohmann::json()) == "auto");
  CHECK(split);
}

TEST_CASE("plan takes its schedules from the registry; the asynchronous ones only when asked for", "[plan][schedules]")
{
  auto schedules = [](const nlohmann::json& rows) { return settings_seen(rows, "parallelism.schedule"); };
  nlohmann::json doc                         = planning_scenario(); // one node of 8, few candidates
  doc["training"]["global_batch_size"]       = 16;
  doc["platform"]["node_groups"][0]["count"] = 1;
  const auto flushing = schedules(plan_rows(doc, "plan-schedules", "--simulate 0 --top 1000"));
  for (const auto& [name, item] : ScheduleRegistry::all()) {
    INFO(name);
    CHECK(flushing.count(name) == (item.entry.flushes ? 1u : 0u));
  }
  const auto every = schedules(plan_rows(doc, "plan-schedules-all", "--simulate 0 --top 1000 --schedules all"));
  CHECK(every.size() == ScheduleRegistry::all().size());
  const auto one = schedules(plan_rows(doc, "plan-schedules-one", "--simulate 0 --top 1000 --schedules gpipe"));
  CHECK(one == std::set<std::string>{"gpipe"});
}

TEST_CASE("plan splits long sequences over context ranks and experts over expert ranks", "[plan][degrees]")
{
  SECTION("a 64K-token sequence: the top plans use context parallelism; a 1K one is planned without")
  {
    nlohmann::json doc = planning_scenario();
    doc["model"]       = {{"num_layers", 16},      {"hidden_size", 4096}, {"num_attention_heads", 32},
                          {"seq_length", 65536},   {"vocab_size", 32000}, {"mlp", "swiglu"},
                          {"norm", "rmsnorm"},     {"ffn_hidden_size", 11008}};
    doc["training"]["global_batch_size"] = 8;
    doc["training"]["attention"]         = "flash";
    auto& group                          = doc["platform"]["node_groups"][0];
    group["gpu"]                         = "H100-SXM";
    group["intra_node"]["bandwidth"]     = "450GBps";
    group["nic"]["bandwidth"]            = "400Gbps";
    const auto rows = plan_rows(doc, "plan-context", "--top 3");
    for (const auto& r : rows)
      CHECK(r["settings"]["parallelism.context"].get<int>() > 1);
    for (const auto& r : plan_rows(planning_scenario(), "plan-short", "--simulate 0 --top 1000"))
      CHECK(r["settings"]["parallelism.context"].get<int>() == 1);
  }
  SECTION("a mixture of experts: the top plans spread the experts")
  {
    nlohmann::json doc             = planning_scenario();
    doc["model"]["num_experts"]    = 16;
    doc["model"]["moe_top_k"]      = 2;
    doc["model"]["hidden_size"]    = 2048;
    doc["model"]["num_attention_heads"] = 16;
    const auto rows = plan_rows(doc, "plan-experts", "--top 3");
    for (const auto& r : rows)
      CHECK(r["settings"]["parallelism.expert"].get<int>() > 1);
  }
}

TEST_CASE("plan keeps the headroom asked for, ranks by energy or cost, and writes the best as a scenario",
          "[plan][objective]")
{
  nlohmann::json doc = planning_scenario();
  constexpr double GiB = 1024.0 * 1024 * 1024;
  SECTION("headroom")
  {
    // The small model needs 0.2 to 3.6 GiB of the A100's 79.3: 77 GiB of headroom leaves some.
    const auto rows = plan_rows(doc, "plan-headroom", "--simulate 0 --top 1000 --headroom 77GiB");
    REQUIRE(!rows.empty());
    for (const auto& r : rows)
      CHECK(r["report"]["memory_peak_bytes"].get<double>() + 77 * GiB <= r["report"]["memory_capacity_bytes"].get<double>());
    CHECK(rows.size() < plan_rows(doc, "plan-no-headroom", "--simulate 0 --top 1000").size());
    // Headroom beyond a GPU's usable memory: no count of GPUs would help, and none is suggested.
    const auto all = run_stepsim("plan " + write_temp_file("plan-all-headroom.json", doc.dump()) +
                                 " --simulate 0 --headroom 100GiB -q");
    INFO(all.output);
    CHECK(all.exit_code == 2);
    CHECK(all.output.find("--headroom 100.00 GiB: no less than the") != std::string::npos);
    CHECK(all.output.find("GPUs of this kind would hold it") == std::string::npos);
  }
  SECTION("energy and cost")
  {
    const auto energy = plan_rows(doc, "plan-energy", "--objective energy --top 5");
    for (size_t i = 1; i < energy.size(); ++i)
      CHECK(energy[i - 1]["report"]["energy_j_per_token"].get<double>() <=
            energy[i]["report"]["energy_j_per_token"].get<double>());
    const auto cost = plan_rows(doc, "plan-cost", "--objective cost --price-per-gpu-hour 2 --top 3");
    for (const auto& r : cost) // 16 GPUs at 2 an hour
      CHECK(r["cost_per_token"].get<double>() ==
            Approx(16 * 2.0 / 3600 / r["report"]["tokens_per_s"].get<double>()).epsilon(1e-9));
    std::string file = write_temp_file("plan-cost-bad.json", doc.dump());
    auto refused     = run_stepsim("plan " + file + " --objective cost -q");
    CHECK(refused.exit_code == 2);
    CHECK(refused.output.find("--objective cost: needs a price per GPU-hour") != std::string::npos);
    auto free_gpus = run_stepsim("plan " + file + " --objective cost --price-per-gpu-hour 0 -q");
    CHECK(free_gpus.exit_code == 2);
    CHECK(free_gpus.output.find("expected a price above 0") != std::string::npos);
  }
  SECTION("--write-best")
  {
    std::string file = write_temp_file("plan-best.json", doc.dump()), best = file + ".best.json";
    auto planned     = run_stepsim("plan " + file + " -q -j 2 --top 1 --json " + file + ".top.json --write-best " + best);
    INFO(planned.output);
    REQUIRE(planned.exit_code == 0);
    auto ran = run_stepsim("run " + best + " -q --json " + best + ".report.json");
    INFO(ran.output);
    REQUIRE(ran.exit_code == 0);
    CHECK(read_json(best + ".report.json")["tokens_per_s"] == read_json(file + ".top.json")[0]["report"]["tokens_per_s"]);
  }
}

TEST_CASE("plan says what is short when no configuration fits", "[plan][bad_input]")
{
  nlohmann::json doc             = planning_scenario();
  doc["model"]["num_layers"]     = 96;
  doc["model"]["hidden_size"]    = 12288;
  doc["model"]["num_attention_heads"] = 96;
  std::string file = write_temp_file("plan-too-big.json", doc.dump());
  auto result      = run_stepsim("plan " + file + " -q");
  INFO(result.output);
  CHECK(result.exit_code == 2);
  CHECK(result.output.find("no configuration fits in memory on 16 GPUs") != std::string::npos);
  CHECK(result.output.find("GiB short") != std::string::npos);
  CHECK(result.output.find("GPUs of this kind would hold it") != std::string::npos);
}

// A base that names which layers a full recompute rebuilds (recompute_method, recompute_every)
// keeps that for its full-recompute candidates; the others recompute none or selectively.
TEST_CASE("plan keeps a partial or grouped full recompute for its full-recompute candidates only", "[plan]")
{
  auto recomputes = [](const nlohmann::json& rows) { return settings_seen(rows, "training.recompute"); };
  nlohmann::json doc                         = planning_scenario();
  doc["training"]["global_batch_size"]       = 16;
  doc["platform"]["node_groups"][0]["count"] = 1;
  doc["training"]["recompute"]               = "full";
  const auto plain = recomputes(plan_rows(doc, "plan-recompute-plain", "--simulate 0 --top 1000"));
  CHECK(plain == std::set<std::string>{"none", "selective", "full"});
  doc["training"]["recompute_method"]     = "uniform";
  doc["training"]["recompute_num_layers"] = 2;
  CHECK(recomputes(plan_rows(doc, "plan-recompute-uniform", "--simulate 0 --top 1000")) == plain);
  doc["training"].erase("recompute_method");
  doc["training"].erase("recompute_num_layers");
  doc["training"]["recompute_every"] = 2;
  CHECK(recomputes(plan_rows(doc, "plan-recompute-every", "--simulate 0 --top 1000")) == plain);
}

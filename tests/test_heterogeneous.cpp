// Mixed GPU types in one job (issue 5): ranks placed on node groups, each rank's compute timed on
// its own device, and parallelism.stage_layers "auto" balancing layers by device speed.
#include "support.hpp"

#include "sim/core/input_error.hpp"
#include "topologies/placement.hpp"
#include "sim/simulate.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <vector>
#include <limits>

using namespace stepsim;
using namespace stepsim::testing;

namespace {

// One A100 node and one V100 node of one GPU each, joined by a fast NIC: a two-stage pipeline of a
// small GPT whose stages differ only in their GPU.
nlohmann::json a100_v100_pipeline(int layers)
{
  nlohmann::json j                       = small_scenario(2, 1, 8);
  j["model"]["num_layers"]               = layers;
  j["training"]["precision"]             = "fp16";
  nlohmann::json a100                    = j["platform"]["node_groups"][0];
  a100["count"]                          = 1;
  nlohmann::json v100                    = a100;
  v100["gpu"]                            = "V100-SXM2-32GB";
  j["platform"]["node_groups"]           = {a100, v100};
  j["platform"]["node_groups"][1]["nic"]["bandwidth"] = "100GBps";
  j["platform"]["node_groups"][0]["nic"]["bandwidth"] = "100GBps";
  return j;
}

double step_time(const nlohmann::json& j) { return simulate_isolated(scenario_from_json(j)).step_time_s; }

} // namespace

TEST_CASE("ranks fill node groups in order unless stages are placed", "[heterogeneous]")
{
  nlohmann::json j = a100_v100_pipeline(8);
  Placement in_order = place_ranks(scenario_from_json(j));
  CHECK(in_order.gpu_of_rank == std::vector<int>{0, 1});
  CHECK(in_order.group_of_stage == std::vector<int>{0, 1});

  j["platform"]["placement"]["stages"] = {1, 0};
  Placement swapped = place_ranks(scenario_from_json(j));
  CHECK(swapped.gpu_of_rank == std::vector<int>{1, 0});
  CHECK(swapped.group_of_rank == std::vector<int>{1, 0});
  Report r = analytic_report(scenario_from_json(j));
  CHECK(r.stages[0].device == "V100-SXM2-32GB");
  CHECK(r.stages[1].device == "A100-SXM4-80GB");
  CHECK(r.device == "A100-SXM4-80GB + V100-SXM2-32GB");
}

TEST_CASE("each stage computes at its own device's speed", "[heterogeneous]")
{
  nlohmann::json j = a100_v100_pipeline(8);
  Report r         = simulate_isolated(scenario_from_json(j));
  REQUIRE(r.stages.size() == 2);
  // Same layers, same kernels: the V100 stage (125 TFLOP/s fp16 against 312) takes longer. The
  // last stage also runs the head, so the ratio is at least the layers' ratio.
  CHECK(r.stages[1].compute_s > 1.5 * r.stages[0].compute_s);

  // Swapping which group runs which stage swaps where the time goes.
  j["platform"]["placement"]["stages"] = {1, 0};
  Report swapped = simulate_isolated(scenario_from_json(j));
  CHECK(swapped.stages[0].compute_s > swapped.stages[1].compute_s);
  CHECK(std::isfinite(swapped.mfu));
  CHECK(swapped.mfu > 0);
}

TEST_CASE("stage_layers auto is within 5% of the best split found by trying every split", "[heterogeneous]")
{
  const int layers = 12;
  nlohmann::json j = a100_v100_pipeline(layers);
  j["training"]["global_batch_size"] = 16;
  double best   = std::numeric_limits<double>::infinity();
  int best_head = 0;
  for (int first = 1; first < layers; ++first) {
    j["parallelism"]["stage_layers"] = {first, layers - first};
    double t                         = step_time(j);
    if (t < best) {
      best      = t;
      best_head = first;
    }
  }
  j["parallelism"]["stage_layers"] = "auto";
  Scenario s                       = scenario_from_json(j);
  REQUIRE(s.parallelism.stage_layers.size() == 2);
  CHECK(s.parallelism.stage_layers[0] + s.parallelism.stage_layers[1] == layers);
  CHECK(s.parallelism.stage_layers[0] > s.parallelism.stage_layers[1]); // the A100 takes more
  const double automatic = simulate_isolated(s).step_time_s;
  INFO("auto " << s.parallelism.stage_layers[0] << "+" << s.parallelism.stage_layers[1] << ": " << automatic
               << " s; best " << best_head << "+" << layers - best_head << ": " << best << " s");
  CHECK(automatic <= 1.05 * best);
  // And it beats the even split, which leaves the A100 waiting for the V100.
  j["parallelism"].erase("stage_layers");
  CHECK(automatic < step_time(j));
}

TEST_CASE("stage_layers auto keeps a stage within its device's memory", "[heterogeneous]")
{
  // Layers heavy in memory on an A100-40GB and a V100-32GB: by speed alone the A100 would take
  // more layers than its 40 GB hold, so auto gives the rest to the V100.
  nlohmann::json j                  = a100_v100_pipeline(16);
  j["model"]["hidden_size"]         = 4096;
  j["model"]["num_attention_heads"] = 32;
  j["platform"]["node_groups"][0]["gpu"] = "A100-SXM4-40GB";
  j["parallelism"]["stage_layers"]  = "auto";
  Scenario s                        = scenario_from_json(j);
  CHECK(analytic_report(s).fits_in_memory);
  // Memory was what bound: one more layer on the A100 stage would not fit.
  Scenario more = s;
  ++more.parallelism.stage_layers[0];
  --more.parallelism.stage_layers[1];
  CHECK_FALSE(analytic_report(more).fits_in_memory);
  CHECK(memory_problem(more).find("platform.node_groups[0].gpu: does not fit in memory: pipeline stage 0") !=
        std::string::npos);
}

TEST_CASE("mixed node groups: bad placements are input errors naming the path", "[heterogeneous]")
{
  nlohmann::json j = a100_v100_pipeline(8);
  j["platform"]["placement"]["stages"] = {0};
  CHECK_THROWS_WITH(scenario_from_json(j), Catch::Contains("platform.placement.stages: expected 2 entries"));
  j["platform"]["placement"]["stages"] = {0, 0};
  CHECK_THROWS_WITH(scenario_from_json(j), Catch::Contains("the stages placed on node group 0 need 2 GPUs, but it has 1"));
  j["platform"]["placement"]["stages"] = {0, 2};
  CHECK_THROWS_WITH(scenario_from_json(j), Catch::Contains("platform.placement.stages: expected an array"));

  // Data parallel across the two groups: a stage spans both, which reduced fidelity cannot stand for.
  nlohmann::json dp                   = a100_v100_pipeline(8);
  dp["parallelism"]["pipeline"]       = 1;
  dp["parallelism"]["data"]           = 2;
  dp["training"]["global_batch_size"] = 16;
  CHECK_THROWS_WITH(scenario_from_json(dp), Catch::Contains("simulation.fidelity: pipeline stage 0 runs on GPUs of "
                                                            "several node groups"));
  // Full fidelity simulates both replicas; the step waits for the slower one.
  dp["simulation"]["fidelity"] = "full";
  Report mixed                 = simulate_isolated(scenario_from_json(dp));
  dp["platform"]["node_groups"][1]["gpu"] = "A100-SXM4-80GB";
  Report a100s = simulate_isolated(scenario_from_json(dp));
  CHECK(mixed.step_time_s > 1.5 * a100s.step_time_s);

  nlohmann::json bad                 = a100_v100_pipeline(8);
  bad["parallelism"]["stage_layers"] = "even";
  CHECK_THROWS_WITH(scenario_from_json(bad), Catch::Contains("parallelism.stage_layers: expected \"auto\" or an array"));
}

namespace {

// One 8-GPU node per entry of `nodes` (GPU type, node type), tensor 8, a stage per node: a
// pipeline over node types whose tensor collectives run at very different speeds.
nlohmann::json node_pipeline(const std::vector<std::pair<std::string, std::string>>& nodes, int layers)
{
  nlohmann::json j                     = small_scenario(static_cast<int>(nodes.size()), 1, 8);
  j["model"]["num_layers"]             = layers;
  j["model"]["hidden_size"]            = 2560;
  j["model"]["num_attention_heads"]    = 32;
  j["model"]["seq_length"]             = 2048;
  j["training"]["precision"]           = "fp16";
  j["training"]["micro_batch_size"]    = 2;
  j["training"]["global_batch_size"]   = 16;
  j["parallelism"]["tensor"]           = 8;
  j["platform"]["node_groups"]         = nlohmann::json::array();
  for (const auto& [gpu, type] : nodes)
    j["platform"]["node_groups"].push_back({{"count", 1},
                                            {"gpu", gpu},
                                            {"gpus_per_node", 8},
                                            {"intra_node", {{"type", type}}},
                                            {"nic", {{"count", 8}, {"bandwidth", "200Gbps"}, {"latency", "2us"}}}});
  return j;
}

// Every split of `layers` over `stages` stages, each with one layer at least.
void each_split(int layers, int stages, std::vector<int>& split, const std::function<void(const std::vector<int>&)>& f)
{
  if (static_cast<int>(split.size()) == stages - 1) {
    int used = 0;
    for (int l : split)
      used += l;
    if (layers - used >= 1) {
      split.push_back(layers - used);
      f(split);
      split.pop_back();
    }
    return;
  }
  int used = 0;
  for (int l : split)
    used += l;
  for (int l = 1; used + l + (stages - 1 - static_cast<int>(split.size())) <= layers; ++l) {
    split.push_back(l);
    each_split(layers, stages, split, f);
    split.pop_back();
  }
}

} // namespace

TEST_CASE("stage_layers auto counts each node's tensor collectives: within 2% of the best of every split",
          "[heterogeneous][split]")
{
  struct Case {
    const char* name;
    std::vector<std::pair<std::string, std::string>> nodes;
    int layers;
  };
  const Case cases[] = {
      {"DGX A100 + DGX-1 (V100, cube mesh)", {{"A100-SXM4-80GB", "nvswitch"}, {"V100-SXM2-32GB", "dgx1_cube_mesh"}}, 24},
      {"DGX H100 + DGX A100", {{"H100-SXM", "nvswitch"}, {"A100-SXM4-80GB", "nvswitch"}}, 24},
      {"H100, A100, A100, V100 (cube mesh)",
       {{"H100-SXM", "nvswitch"}, {"A100-SXM4-80GB", "nvswitch"}, {"A100-SXM4-80GB", "nvswitch"},
        {"V100-SXM2-32GB", "dgx1_cube_mesh"}},
       12},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    nlohmann::json j = node_pipeline(c.nodes, c.layers);
    double best      = std::numeric_limits<double>::infinity();
    std::vector<int> split, best_split;
    each_split(c.layers, static_cast<int>(c.nodes.size()), split, [&](const std::vector<int>& layers) {
      j["parallelism"]["stage_layers"] = layers;
      const double t                   = step_time(j);
      if (t < best) {
        best       = t;
        best_split = layers;
      }
    });
    j["parallelism"]["stage_layers"] = "auto";
    const Scenario refined           = with_refined_stage_split(scenario_from_json(j));
    const double automatic           = simulate_isolated(refined).step_time_s;
    INFO("auto " << nlohmann::json(refined.parallelism.stage_layers).dump() << ": " << automatic << " s; best "
                 << nlohmann::json(best_split).dump() << ": " << best << " s");
    CHECK(automatic <= 1.02 * best);
  }
}

// The host side of kernel launches (sim/engine/compute.cpp wait_for_host): the host issues a rank's
// kernels one after another at simulation.host_launch_overhead each (or the device calibration's
// host_launch_overhead) and runs ahead of the GPU; no kernel ends before it is issued.
#include "support.hpp"
#include "sim/core/framework.hpp"
#include "sim/core/input_error.hpp"
#include "sim/core/report.hpp"
#include "sim/simulate.hpp"
#include "workloads/lower.hpp"

#include <catch2/catch.hpp>

using namespace stepsim;

namespace {

// The generic profile with one behaviour of `FrameworkProfile` set, registered as `name` on first
// use (the profiles register at static initialisation, in an order across files that is not known).
const char* generic_with(const char* name, bool FrameworkProfile::*behaviour)
{
  if (FrameworkRegistry::find(name) == nullptr) {
    FrameworkProfile p = FrameworkRegistry::get("generic", "test");
    p.*behaviour       = true;
    FrameworkRegistry::add(name, "test only", p);
  }
  return name;
}

// The host waits for the GPU after each pipeline send or receive, as Megatron's
// batch_isend_irecv with torch.cuda.synchronize.
const char* synchronizing_profile()
{
  return generic_with("test-p2p-sync", &FrameworkProfile::pipeline_transfer_synchronizes_host);
}

// Kernel launches of simulated rank `index`'s compute tasks, as lowered.
double launches_of(const nlohmann::json& doc, size_t index = 0)
{
  const Workload w = lower(scenario_from_json(doc));
  double launches  = 0;
  const auto& g    = w.ranks.at(index).graph;
  for (TaskId v = 0; v < boost::num_vertices(g); ++v)
    if (g[v].kind == TaskKind::Compute && g[v].work >= 0)
      for (const Kernel& k : w.works[static_cast<size_t>(g[v].work)].kernels)
        launches += k.launches;
  return launches;
}

Report run_with(nlohmann::json doc, const char* overhead)
{
  if (overhead != nullptr)
    doc["simulation"]["host_launch_overhead"] = overhead;
  return simulate_isolated(scenario_from_json(doc));
}

} // namespace

TEST_CASE("a host that issues kernels more slowly than the GPU runs them sets the step's pace, and the report says so")
{
  const nlohmann::json doc = testing::small_scenario(1, 1, 4); // one GPU, four micro-batches
  const Report plain       = run_with(doc, nullptr);
  const Report zero        = run_with(doc, "0us");
  CHECK(zero.step_time_s == plain.step_time_s); // 0: the host always keeps ahead
  CHECK(zero.stages.at(0).host_wait_s == 0);
  CHECK_FALSE(to_json(zero)["stages"][0].contains("host_wait_s"));

  // 1 ms a launch is far above any kernel of this model: the step is the host's issue time,
  // plus at most the last kernel's run after it.
  const double launches = launches_of(doc);
  REQUIRE(launches > 100);
  const Report slow = run_with(doc, "1ms");
  CHECK(slow.step_time_s >= launches * 1e-3);
  CHECK(slow.step_time_s <= launches * 1e-3 + plain.step_time_s);
  // What the GPU waited: the host's time less the GPU's own work, within the optimizer's (its
  // step's kernels run after the last launch).
  CHECK(slow.stages.at(0).host_wait_s >= launches * 1e-3 - plain.step_time_s);
  CHECK(slow.stages.at(0).host_wait_s <= launches * 1e-3);
  CHECK(to_json(slow)["stages"][0]["host_wait_s"].get<double>() == Approx(slow.stages.at(0).host_wait_s));
  CHECK(to_table(slow).find("waiting for the host") != std::string::npos);
  CHECK(to_table(plain).find("waiting for the host") == std::string::npos);
  // The waiting GPU idles: less energy per step than computing for as long.
  CHECK(slow.energy_j_per_step < slow.step_time_s * plain.energy_j_per_step / plain.step_time_s);
}

TEST_CASE("the host runs ahead of the GPU: its launches cost the step only what the GPU cannot hide")
{
  const nlohmann::json doc = testing::small_scenario(1, 1, 4);
  const Report plain       = run_with(doc, nullptr);
  const double launches    = launches_of(doc);
  // Half the GPU's time in all: some kernels are issued more slowly than they run (each launch
  // costs as much whatever the kernel), but the host's lead over the long ones covers them.
  const double half = 0.5 * plain.step_time_s / launches;
  const Report some = run_with(doc, fmt::format("{}us", half * 1e6).c_str());
  CHECK(some.step_time_s >= plain.step_time_s);
  CHECK(some.step_time_s < plain.step_time_s + 0.5 * plain.step_time_s * 0.5);
  // Twice the GPU's time: the host's total, not the GPU's plus the host's.
  const double twice = 2 * plain.step_time_s / launches;
  const Report slow  = run_with(doc, fmt::format("{}us", twice * 1e6).c_str());
  CHECK(slow.step_time_s >= 2 * plain.step_time_s);
  CHECK(slow.step_time_s < 2.5 * plain.step_time_s);
}

TEST_CASE("a host that waits for the GPU after each pipeline transfer loses its lead there")
{
  nlohmann::json doc                  = testing::small_scenario(2, 1, 8);
  doc["training"]["framework"]         = "generic";
  const Report plain                   = run_with(doc, nullptr);
  const double launches                = launches_of(doc);
  // The host issues each of its stage's kernels more slowly than they run.
  const std::string per_launch         = fmt::format("{}us", 2 * plain.step_time_s / launches * 1e6);
  const Report ahead                   = run_with(doc, per_launch.c_str());
  doc["training"]["framework"]         = synchronizing_profile();
  const Report synchronized_host       = run_with(doc, per_launch.c_str());
  doc["simulation"]["host_launch_overhead"] = "0us";
  CHECK(simulate_isolated(scenario_from_json(doc)).step_time_s == plain.step_time_s);
  // Without launch costs the synchronisation changes nothing; with them it costs the lead the
  // host built while the GPU waited for the other stage.
  CHECK(synchronized_host.step_time_s > ahead.step_time_s);
  CHECK(ahead.step_time_s >= plain.step_time_s);
}

TEST_CASE("simulation.host_launch_overhead is a time from 0 to 10 ms")
{
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  for (const nlohmann::json& bad : {nlohmann::json("-5us"), nlohmann::json("20ms"), nlohmann::json("fast"),
                                    nlohmann::json(true)}) {
    INFO(bad.dump());
    doc["simulation"]["host_launch_overhead"] = bad;
    CHECK_THROWS_WITH(scenario_from_json(doc), Catch::Contains("simulation.host_launch_overhead"));
  }
  doc["simulation"]["host_launch_overhead"] = "25us";
  CHECK(scenario_from_json(doc).simulation.host_launch_overhead_s == Approx(25e-6));
}

namespace {

// The host waits for the GPU in every MoE layer's token dispatch, as Megatron-Core's dropless
// alltoall dispatcher does.
const char* moe_synchronizing_profile()
{
  return generic_with("test-moe-sync", &FrameworkProfile::moe_dispatch_synchronizes_host);
}

// Four MoE layers (8 experts, top 2) on one GPU, four micro-batches.
nlohmann::json moe_on_one_gpu(const char* framework)
{
  nlohmann::json doc = testing::small_scenario(1, 1, 4);
  doc["model"]       = {{"num_layers", 4},       {"hidden_size", 1024}, {"num_attention_heads", 16},
                        {"num_query_groups", 4}, {"seq_length", 1024},  {"vocab_size", 32000},
                        {"mlp", "swiglu"},       {"norm", "rmsnorm"},   {"num_experts", 8},
                        {"moe_top_k", 2}};
  doc["training"]["framework"] = framework;
  return doc;
}

} // namespace

TEST_CASE("a host that waits for the GPU in each MoE layer's token dispatch loses its lead there")
{
  // The lowering marks the routers' forward, and nothing else, as what the host waits for.
  for (const char* framework : {"generic", "megatron-core", moe_synchronizing_profile()}) {
    const Workload w = lower(scenario_from_json(moe_on_one_gpu(framework)));
    int marked = 0, routers = 0;
    for (const Work& work : w.works) {
      marked += work.synchronizes_host ? 1 : 0;
      routers += work.name == "moe_router_forward" ? 1 : 0;
      if (work.synchronizes_host)
        CHECK(work.name == "moe_router_forward");
    }
    REQUIRE(routers > 0);
    CHECK(marked == (std::string(framework) == "generic" ? 0 : routers));
  }
  // Launches at half the GPU's time in all: the host's lead over the long kernels hides its slow
  // ones, unless it has to wait for the GPU in every layer and so starts each layer's later
  // kernels from behind.
  nlohmann::json doc          = moe_on_one_gpu("generic");
  const Report plain          = run_with(doc, nullptr);
  const double launches       = launches_of(doc);
  const std::string half      = fmt::format("{}us", 0.5 * plain.step_time_s / launches * 1e6);
  const Report ahead          = run_with(doc, half.c_str());
  doc["training"]["framework"] = moe_synchronizing_profile();
  CHECK(run_with(doc, "0us").step_time_s == plain.step_time_s); // nothing to lose without launch costs
  const Report waiting = run_with(doc, half.c_str());
  CHECK(waiting.step_time_s > ahead.step_time_s);
  CHECK(waiting.stages.at(0).host_wait_s > ahead.stages.at(0).host_wait_s);
  // It cannot cost more than issuing every kernel one after the other on the GPU's time.
  CHECK(waiting.step_time_s <= plain.step_time_s + 0.5 * plain.step_time_s);
}

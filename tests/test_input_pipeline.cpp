// The host side of a step (sim/host_side.cpp): a data loader that the step must wait for, and
// checkpoints written to shared storage, each against its closed form on a platform built so that
// one resource limits it.
#include "support.hpp"

#include "sim/simulate.hpp"

#include <catch2/catch.hpp>

using namespace stepsim;
using Catch::Matchers::WithinRel;

namespace {

// 4 one-GPU nodes, data parallel, 8 micro-batches of one sample per replica; each node with
// `cores` CPU cores and fast local disks.
nlohmann::json with_loader(int cores, int workers, double decode_s)
{
  nlohmann::json j = testing::small_scenario(1, 4, 8);
  auto& group      = j["platform"]["node_groups"][0];
  group["host"]    = {{"cpu_cores", cores}, {"nvme_bandwidth", "1000TBps"}, {"nvme_latency", 0}};
  j["training"]["input"] = {{"workers", workers},
                            {"sample_bytes", "1KB"},
                            {"decode_cpu_seconds", decode_s},
                            {"device_bytes", "1KB"}};
  return j;
}

double step_of(const nlohmann::json& j) { return simulate_isolated(scenario_from_json(j)).step_time_s; }

} // namespace

TEST_CASE("a step waits for its data loader exactly when the loader is the slower path", "[input]")
{
  const double compute = step_of(testing::small_scenario(1, 4, 8));
  const int micro_batches = 8;
  // Two cores, two workers: the loader supplies 8 samples in 8·d / 2.
  auto input_path = [&](double d, int cores, int workers) { return micro_batches * d / std::min(cores, workers); };

  SECTION("compute-bound: the loader keeps ahead, the step is the compute path")
  {
    const double d = 0.3 * compute / 4;
    const Report r = simulate_isolated(scenario_from_json(with_loader(2, 2, d)));
    REQUIRE(r.input);
    CHECK_THAT(r.step_time_s, WithinRel(std::max(compute, input_path(d, 2, 2)), 0.02));
    CHECK_THAT(r.input->input_path_s, WithinRel(input_path(d, 2, 2), 0.02));
    CHECK_FALSE(r.input->input_bound);
    CHECK(r.input->stall_s < 0.02 * compute);
    CHECK(r.input->limited_by == "CPU");
  }
  SECTION("input-bound: the step is the loader's path, and halving the workers doubles it")
  {
    const double d = 3 * compute / 4;
    const Report two = simulate_isolated(scenario_from_json(with_loader(2, 2, d)));
    REQUIRE(two.input);
    CHECK(two.input->input_bound);
    CHECK_THAT(two.step_time_s, WithinRel(std::max(compute, input_path(d, 2, 2)), 0.02));
    CHECK_THAT(two.input->step_without_input_s, WithinRel(compute, 1e-9));
    // Throughput follows the step the loader allows.
    CHECK_THAT(two.samples_per_s, WithinRel(4.0 * micro_batches / two.step_time_s, 1e-6));
    const Report one = simulate_isolated(scenario_from_json(with_loader(2, 1, d)));
    CHECK_THAT(one.step_time_s, WithinRel(std::max(compute, input_path(d, 2, 1)), 0.02));
    CHECK_THAT(one.step_time_s / two.step_time_s, WithinRel(2.0, 0.02));
    // More workers than cores: the cores are the limit.
    const Report eight = simulate_isolated(scenario_from_json(with_loader(2, 8, d)));
    CHECK_THAT(eight.step_time_s, WithinRel(std::max(compute, input_path(d, 2, 8)), 0.02));
  }
  SECTION("a shared file system: every node's reads share its bandwidth")
  {
    nlohmann::json j                         = with_loader(64, 8, 1e-9);
    j["training"]["input"]["source"]         = "storage";
    j["training"]["input"]["sample_bytes"]   = "10MB";
    // 4 replicas × 8 samples × 10 MB through the shared link in three compute steps.
    const double bandwidth                   = 4 * micro_batches * 10e6 / (3 * compute);
    j["platform"]["storage"]                 = {{"bandwidth", fmt::format("{}Bps", bandwidth)}, {"latency", 0}};
    const Report r                           = simulate_isolated(scenario_from_json(j));
    REQUIRE(r.input);
    CHECK(r.input->limited_by == "storage");
    CHECK_THAT(r.step_time_s, WithinRel(3 * compute, 0.02));
  }
}

TEST_CASE("a pipeline's first stage paces its loader by the forwards it runs", "[input]")
{
  nlohmann::json plain = testing::small_scenario(2, 2, 8);
  const double compute = step_of(plain);
  nlohmann::json j     = plain;
  j["platform"]["node_groups"][0]["host"] = {{"cpu_cores", 1}, {"nvme_bandwidth", "1000TBps"}, {"nvme_latency", 0}};
  j["training"]["input"] = {{"workers", 1}, {"sample_bytes", "1KB"}, {"device_bytes", "1KB"}};
  // Just below the step: 1F1B's first stage runs its forwards in a burst of warm-up and then one
  // per cycle, so the loader keeps up; well above it, the step is the loader's.
  j["training"]["input"]["decode_cpu_seconds"] = 0.5 * compute / 8;
  CHECK_THAT(step_of(j), WithinRel(compute, 0.02));
  j["training"]["input"]["decode_cpu_seconds"] = 2 * compute / 8;
  CHECK_THAT(step_of(j), WithinRel(2 * compute, 0.02));
}

TEST_CASE("a checkpoint writes the model and optimizer state at the storage's bandwidth", "[input][checkpoint]")
{
  nlohmann::json j = testing::small_scenario(1, 4, 8);
  const Report plain = simulate_isolated(scenario_from_json(j));
  // Mixed-precision Adam without ZeRO: each rank holds the whole state; one copy is written.
  const double state     = plain.memory.weights + plain.memory.optimizer;
  const double storage   = 2e9;
  j["platform"]["storage"] = {{"bandwidth", "2GBps"}, {"latency", 0}};
  j["training"]["checkpoint"] = {{"every_steps", 100}, {"mode", "sync"}, {"layout", "sharded"}};
  const Report sync = simulate_isolated(scenario_from_json(j));
  REQUIRE(sync.checkpoint);
  CHECK_THAT(sync.checkpoint->bytes, WithinRel(state, 1e-6));
  CHECK_THAT(sync.checkpoint->write_s, WithinRel(state / storage, 0.02));
  CHECK(sync.checkpoint->gather_s == 0);
  CHECK_THAT(sync.checkpoint->step_s,
             WithinRel(sync.step_time_s + sync.checkpoint->snapshot_s + sync.checkpoint->write_s, 1e-9));
  CHECK_THAT(sync.checkpoint->amortized_s, WithinRel((sync.checkpoint->step_s - sync.step_time_s) / 100, 1e-6));
  CHECK(sync.step_time_s == plain.step_time_s); // a checkpoint step is reported apart

  SECTION("ZeRO shards the state, not what is written")
  {
    j["parallelism"]["zero_stage"] = 1;
    const Report zero = simulate_isolated(scenario_from_json(j));
    REQUIRE(zero.checkpoint);
    CHECK_THAT(zero.checkpoint->bytes, WithinRel(state, 1e-6));
  }
  SECTION("gathered: the same bytes, through one node after a gather")
  {
    j["training"]["checkpoint"]["layout"] = "gathered";
    const Report gathered                 = simulate_isolated(scenario_from_json(j));
    REQUIRE(gathered.checkpoint);
    CHECK_THAT(gathered.checkpoint->bytes, WithinRel(state, 1e-6));
    CHECK(gathered.checkpoint->gather_s > 0);
    CHECK_THAT(gathered.checkpoint->write_s, WithinRel(state / storage, 0.02));
  }
  SECTION("async: training waits for the copy to host memory only, unless the write outlasts the steps between")
  {
    j["training"]["checkpoint"]["mode"] = "async";
    const Report async                  = simulate_isolated(scenario_from_json(j));
    REQUIRE(async.checkpoint);
    const auto& c = *async.checkpoint;
    const double stall = std::max(0.0, c.write_s - 100 * async.step_time_s);
    CHECK_THAT(c.stall_s + 1, WithinRel(stall + 1, 1e-9));
    CHECK_THAT(c.step_s, WithinRel(async.step_time_s + c.snapshot_s + stall, 1e-9));
    CHECK(c.step_s < sync.checkpoint->step_s);
  }
}

TEST_CASE("every context-parallel rank of the first stage loads the whole micro-batch", "[input]")
{
  // Context 2 × data 2 on one node of 4 GPUs: 4 loaders share the node's cores (Megatron's
  // get_batch_on_this_cp_rank slices a batch every context rank loaded whole).
  nlohmann::json j = testing::small_scenario(1, 2, 8);
  j["parallelism"]["context"]                 = 2;
  j["model"]["seq_length"]                    = 2048;
  auto& group                                 = j["platform"]["node_groups"][0];
  group["count"]                              = 1;
  group["gpus_per_node"]                      = 4;
  group["nic"]["count"]                       = 4;
  const double compute                        = step_of(j);
  group["host"] = {{"cpu_cores", 2}, {"nvme_bandwidth", "1000TBps"}, {"nvme_latency", 0}};
  const double d                              = compute; // a whole step of CPU per sample
  j["training"]["input"] = {{"workers", 4}, {"sample_bytes", "1KB"}, {"decode_cpu_seconds", d}, {"device_bytes", "1KB"}};
  const Report r = simulate_isolated(scenario_from_json(j));
  REQUIRE(r.input);
  CHECK(r.input->loaders == 4);
  // 4 loaders × 8 samples on 2 cores.
  CHECK_THAT(r.step_time_s, WithinRel(4 * 8 * d / 2, 0.02));
}

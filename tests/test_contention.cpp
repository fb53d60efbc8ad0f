// Reduced fidelity where the peers a simulated rank stands for share links with it: their flows
// are replayed as shadows (sim/engine/shadows.hpp), or, where the peers are not alike, every rank
// is (the report says why). Each scenario of the matrix runs at both fidelities.
#include "support.hpp"

#include "sim/simulate.hpp"
#include "workloads/lower.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace stepsim;

namespace {

nlohmann::json dense(int tensor, int pipeline, int data, int micro_batches, int layers)
{
  nlohmann::json doc = testing::small_scenario(pipeline, data, micro_batches);
  doc["model"]["num_layers"]            = layers;
  doc["parallelism"]["tensor"]          = tensor;
  doc["parallelism"]["bucket_size"]     = "8MB";
  doc["platform"]["node_groups"][0]["gpus_per_node"] = tensor;
  doc["platform"]["node_groups"][0]["nic"]["count"]  = tensor;
  return doc;
}

nlohmann::json nodes(int count, int gpus, int nics, const std::string& nic_bandwidth = "100Gbps")
{
  return {{"count", count},
          {"gpu", "A100-SXM4-80GB"},
          {"gpus_per_node", gpus},
          {"intra_node", {{"type", "nvswitch"}, {"bandwidth", "300GBps"}, {"latency", "1us"}}},
          {"nic", {{"count", nics}, {"bandwidth", nic_bandwidth}, {"latency", "2us"}}}};
}

// Split learning over one Wi-Fi access point: `devices` Jetson boards run stage 0 and average
// their weights over the air, an edge server with one GPU per device runs stage 1.
nlohmann::json wifi(int devices)
{
  nlohmann::json doc = nlohmann::json::parse(
      testing::read_text_file(std::string(STEPSIM_SOURCE_DIR) + "/configs/scenarios/edge-split-learning-wifi.json"));
  doc["platform"] = {{"preset", "jetson-wifi-edge"},
                     {"node_groups", {{{"count", devices}}, {{"gpus_per_node", devices}}}}};
  doc["parallelism"]["data"]            = devices;
  doc["training"]["global_batch_size"]  = 8 * devices;
  return doc;
}

// Expert all-to-alls over one package of 16 chiplets on a mesh of `rows` x `columns`.
nlohmann::json chiplet(int rows, int columns)
{
  nlohmann::json doc = dense(1, 1, 16, 2, 4);
  doc["model"]["num_experts"]  = 16;
  doc["model"]["moe_top_k"]    = 2;
  doc["parallelism"]["expert"] = 16;
  doc["platform"]              = {
      {"node_groups",
       {{{"count", 1},
         {"gpu", "Chiplet-Die"},
         {"gpus_per_node", 16},
         {"intra_node", {{"type", "chiplet_mesh"}, {"mesh", {rows, columns}}, {"bandwidth", "256GBps"}, {"latency", "2ns"}}},
         {"nic", {{"count", 4}, {"bandwidth", "400Gbps"}, {"latency", "2us"}}}}}},
      {"network", {{"topology", "fat_tree"}}}};
  return doc;
}

// Tensor 8 inside each node, data 4 across four nodes, one leaf per node with its uplink
// oversubscribed: the eight data-parallel rings of a node share it.
nlohmann::json fat_tree(int oversubscription)
{
  nlohmann::json doc = dense(8, 1, 4, 4, 8);
  doc["platform"]    = {{"node_groups", {nodes(4, 8, 8)}},
                        {"network", {{"topology", "fat_tree"}, {"leaf_radix", 8}, {"oversubscription", oversubscription}}}};
  return doc;
}

// Data 16 over four 4-GPU nodes, two a leaf at 4:1: the ring's four lanes cross each uplink
// together, and it carries one NIC's worth. No other group runs beside it; its lone member times
// its lanes on the hop across the uplink (CollectiveTiming::ring_lanes). Timed on their NICs
// alone, the reduced step was 19 % short of the full one (0.0460 against 0.0569 s).
nlohmann::json own_lanes_across_uplink()
{
  nlohmann::json doc = dense(1, 1, 16, 4, 8);
  doc["platform"]    = {{"node_groups", {nodes(4, 4, 4)}},
                        {"network", {{"topology", "fat_tree"}, {"leaf_radix", 8}, {"oversubscription", 4}}}};
  return doc;
}

// Tensor 4 x pipeline 2 x data 8 on eight 8-GPU nodes, 32 NICs a leaf at 2:1: stage 0 fills the
// first leaf and stage 1 the second, so the 32 pipeline sends of a stage share one uplink that
// carries half of them at full speed. Each rank's data-parallel ring leaves by the NIC its
// pipeline send takes: with every flow counted at once, that ring already halves the send's
// share and hides the uplink (the check takes each collective and transfer on its own too).
nlohmann::json pipeline_across_uplink()
{
  nlohmann::json doc = dense(4, 2, 8, 4, 8);
  doc["platform"]    = {{"node_groups", {nodes(8, 8, 8)}},
                        {"network", {{"topology", "fat_tree"}, {"leaf_radix", 32}, {"oversubscription", 2}}}};
  return doc;
}

nlohmann::json moe_across_nodes()
{
  nlohmann::json doc = dense(2, 1, 8, 2, 4);
  doc["model"]["num_experts"]             = 8;
  doc["model"]["moe_top_k"]               = 2;
  doc["parallelism"]["expert"]            = 8;
  doc["parallelism"]["sequence_parallel"] = true;
  doc["platform"] = {{"node_groups", {nodes(4, 4, 4)}}, {"network", {{"topology", "fat_tree"}}}};
  return doc;
}

// Two scalable units of two nodes, the spine between them at 4:1.
nlohmann::json rail_optimized()
{
  nlohmann::json doc = dense(8, 2, 2, 4, 8);
  doc["platform"]    = {{"node_groups", {nodes(4, 8, 8)}},
                        {"network", {{"topology", "rail_optimized"}, {"leaf_radix", 2}, {"oversubscription", 4}}}};
  return doc;
}

nlohmann::json dragonfly()
{
  nlohmann::json doc = dense(1, 2, 8, 4, 8);
  doc["platform"]    = {{"node_groups", {nodes(16, 1, 1, "400Gbps")}},
                        {"network",
                         {{"topology", "dragonfly"},
                          {"dragonfly",
                           {{"groups", 2}, {"chassis", 2}, {"routers", 2}, {"nodes_per_router", 2},
                            {"link_bandwidth", "20GBps"}, {"link_latency", "0.5us"}}}}}};
  return doc;
}

// Eight GPUs on four NICs: each pipeline send shares its NIC with a peer's.
nlohmann::json shared_nic()
{
  nlohmann::json doc = dense(1, 2, 8, 4, 8);
  doc["platform"]    = {{"node_groups", {nodes(2, 8, 4)}}, {"network", {{"topology", "fat_tree"}}}};
  return doc;
}

enum class Expect { Shadows, Full, Either };

} // namespace

TEST_CASE("reduced fidelity within 2% of full where peers share links: Wi-Fi, chiplet meshes, oversubscribed "
          "fabrics, pipeline sends across an uplink, expert groups across nodes, rails, a dragonfly, a shared NIC",
          "[fidelity][contention]")
{
  auto [name, doc, expect] = GENERATE(table<std::string, nlohmann::json, Expect>({
      {"wifi 2 devices", wifi(2), Expect::Shadows},
      {"wifi 4 devices", wifi(4), Expect::Shadows},
      {"wifi 8 devices", wifi(8), Expect::Shadows},
      {"chiplet 4x4 all-to-all", chiplet(4, 4), Expect::Full},
      {"chiplet 2x8 all-to-all", chiplet(2, 8), Expect::Full},
      {"chiplet 1x16 all-to-all", chiplet(1, 16), Expect::Full},
      {"fat-tree 2:1, tensor 8 x data 4", fat_tree(2), Expect::Shadows},
      {"fat-tree 4:1, tensor 8 x data 4", fat_tree(4), Expect::Shadows},
      {"fat-tree 2:1, a stage's pipeline sends across one uplink", pipeline_across_uplink(), Expect::Shadows},
      {"fat-tree 4:1, a data-parallel ring's own lanes across the uplinks", own_lanes_across_uplink(), Expect::Either},
      {"expert groups across nodes", moe_across_nodes(), Expect::Either},
      {"rail-optimized, spine 4:1", rail_optimized(), Expect::Shadows},
      {"dragonfly", dragonfly(), Expect::Full},
      {"NIC shared by 2 GPUs", shared_nic(), Expect::Shadows},
  }));
  INFO(name);
  doc["simulation"]["fidelity"] = "full";
  const Report full             = simulate_isolated(scenario_from_json(doc));
  doc["simulation"]["fidelity"] = "reduced";
  const Report reduced          = simulate_isolated(scenario_from_json(doc));
  CAPTURE(reduced.step_time_s, full.step_time_s, reduced.exposed_comm_s, full.exposed_comm_s, reduced.bubble_fraction,
          full.bubble_fraction, reduced.shadows.flows, reduced.full_fidelity_reason);
  CHECK(reduced.step_time_s == Approx(full.step_time_s).epsilon(0.02));
  CHECK(reduced.exposed_comm_s == Approx(full.exposed_comm_s).epsilon(0.02).margin(1e-6));
  CHECK(reduced.bubble_fraction == Approx(full.bubble_fraction).epsilon(0.02).margin(1e-6));
  switch (expect) {
  case Expect::Shadows: // the peers' flows ran beside the representatives'
    CHECK(reduced.fidelity == "reduced");
    CHECK(reduced.simulated_ranks < full.simulated_ranks);
    CHECK(reduced.shadows.short_changed_links > 0);
    CHECK(reduced.shadows.flows > 0);
    break;
  case Expect::Full: // the peers are not alike: every rank ran, and the report says why
    CHECK(reduced.fidelity == "full");
    CHECK(reduced.simulated_ranks == full.simulated_ranks);
    CHECK(reduced.full_fidelity_reason.find("cannot stand for") != std::string::npos);
    break;
  case Expect::Either: break;
  }
}

TEST_CASE("where the peers take nothing from the representatives there are no shadows", "[fidelity][contention]")
{
  // Oversubscribed, but each node's data-parallel rings stay under its own leaf.
  nlohmann::json doc = fat_tree(4);
  doc["platform"]["network"]["leaf_radix"] = 32;
  const Report r     = simulate_isolated(scenario_from_json(doc));
  CHECK(r.fidelity == "reduced");
  CHECK(r.shadows.short_changed_links == 0);
  CHECK(r.shadows.flows == 0);
  CHECK(to_json(r).contains("shadows") == false);
}

TEST_CASE("a lone member's collectives whose own hops carry no other flow are timed by their closed form",
          "[fidelity][contention]")
{
  // Tensor 4 x pipeline 2 x data 8 on 8-GPU nodes: each node holds two tensor groups, and a
  // data-parallel ring runs from GPU 0 to GPU 4 over the NVSwitch ports the tensor rings use.
  // The simulated rank stands for its data-parallel group on the group's slowest hop, a NIC, so
  // no flow of the reduced replay crosses the tensor rings' ports: their collectives take their
  // closed form, one delay each instead of a launch, a transfer and a latency tail.
  nlohmann::json doc = nlohmann::json::parse(
      testing::read_text_file(std::string(STEPSIM_SOURCE_DIR) + "/configs/scenarios/gpt-7b-64.json"));
  doc["training"]["global_batch_size"] = 64;
  const Scenario s = scenario_from_json(doc);
  const Workload w = lower(s);
  long long tensor_collectives = 0;
  for (const auto& program : w.ranks)
    for (auto v : boost::make_iterator_range(boost::vertices(program.graph))) {
      const Task& t = program.graph[v];
      tensor_collectives += t.kind == TaskKind::Collective && t.stream == Stream::Tensor ? 1 : 0;
    }
  REQUIRE(tensor_collectives > 500);
  const Report reduced = simulate_isolated(s);
  doc["simulation"]["fidelity"] = "full";
  const Report full = simulate_isolated(scenario_from_json(doc));
  CAPTURE(reduced.activities, tensor_collectives, reduced.step_time_s, full.step_time_s);
  CHECK(reduced.fidelity == "reduced");
  CHECK(reduced.activities < 2 * tensor_collectives);
  CHECK(reduced.step_time_s == Approx(full.step_time_s).epsilon(0.002));
  CHECK(reduced.exposed_comm_s == Approx(full.exposed_comm_s).epsilon(0.01));
}

TEST_CASE("the report names the shared links and the shadow transfers", "[fidelity][contention]")
{
  const Report r = simulate_isolated(scenario_from_json(wifi(4)));
  REQUIRE(r.shadows.flows > 0);
  const auto j = to_json(r);
  CHECK(j.at("shadows").at("flows") == r.shadows.flows);
  CHECK(report_from_json(j).shadows.short_changed_links == r.shadows.short_changed_links);
  CHECK(to_table(r).find("Peers' traffic replayed as shadows") != std::string::npos);
}

TEST_CASE("lowering lists the groups and transfers a representative stands for where peers may contend",
          "[fidelity][contention]")
{
  // Tensor 2 x data 2 x pipeline 2: ranks 0-3 are stage 0 (tensor fastest), 4-7 stage 1.
  nlohmann::json doc = dense(2, 2, 2, 4, 4);
  CHECK(lower(scenario_from_json(doc)).transfer_copies.empty()); // non-blocking fat-tree, a NIC per GPU
  doc["platform"]["network"]["oversubscription"] = 2;
  const Workload w   = lower(scenario_from_json(doc));
  const auto group   = [&](const std::string& name) -> const Group& {
    for (const auto& g : w.groups)
      if (g.name == name)
        return g;
    FAIL("no group " << name);
    return w.groups.front();
  };
  CHECK(group("tensor/pp0/dp0/cp0").ranks == std::vector<int>{0, 1});
  CHECK(group("tensor/pp0/dp0/cp0").copies == std::vector<std::vector<int>>{{2, 3}});
  CHECK(group("data/pp0/tp0").ranks == std::vector<int>{0, 2});
  CHECK(group("data/pp0/tp0").copies == std::vector<std::vector<int>>{{1, 3}});
  // The pipeline send from stage 0 to stage 1, and its images between the other replicas.
  const std::vector<std::pair<int, int>> images{{1, 5}, {2, 6}, {3, 7}};
  CHECK(w.transfer_copies.at({0, 4}) == images);
  CHECK_FALSE(w.copies_left_out);

  doc["simulation"]["fidelity"] = "full";
  const Workload full           = lower(scenario_from_json(doc));
  CHECK(full.transfer_copies.empty());
  for (const auto& g : full.groups)
    CHECK(g.copies.empty());
}

TEST_CASE("above the shadowed world the lowering lists no copies and the report says so", "[fidelity][contention]")
{
  nlohmann::json doc = dense(8, 2, kShadowedWorld / 8, 1, 4);
  doc["platform"]["node_groups"][0]["count"]         = kShadowedWorld / 4;
  doc["platform"]["node_groups"][0]["gpus_per_node"] = 8;
  doc["platform"]["node_groups"][0]["nic"]["count"]  = 8;
  doc["platform"]["network"]["oversubscription"]     = 2;
  const Workload w = lower(scenario_from_json(doc));
  CHECK(w.world_size == 2 * kShadowedWorld);
  CHECK(w.copies_left_out);
  CHECK(w.transfer_copies.empty());
  for (const auto& g : w.groups)
    CHECK(g.copies.empty());
  Report r;
  r.shadows.copies_left_out = true;
  CHECK(to_table(r).find("checks only the simulated ranks' own groups") != std::string::npos);
  CHECK(report_from_json(to_json(r)).shadows.copies_left_out);
}

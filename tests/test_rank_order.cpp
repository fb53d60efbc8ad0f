// parallelism.rank_order (sim/core/rank_order.hpp): the groups the lowering forms under orders other
// than Megatron's default, checked against hand-written tables; an order that spreads tensor
// groups over nodes costs time; the expert layers' numbering; ZeRO-3 gathers and reduce-scatters
// the experts over their expert-data group.
#include "support.hpp"

#include "models/collectives/collective.hpp"
#include "sim/core/input_error.hpp"
#include "sim/core/rank_order.hpp"
#include "topologies/placement.hpp"
#include "sim/simulate.hpp"
#include "workloads/parallel/layout.hpp"
#include "workloads/lower.hpp"
#include "workloads/models/moe.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <set>

using namespace stepsim;

namespace {

using Groups = std::set<std::vector<int>>;

// Every group of the lowered workload whose name starts with `kind` ("tensor/", "data/", ...).
Groups groups_of(const Workload& w, const std::string& kind)
{
  Groups out;
  for (const Group& g : w.groups)
    if (g.name.rfind(kind, 0) == 0)
      out.insert(g.ranks);
  return out;
}

// The rank that `rank`'s forward sends its activations to (the next pipeline stage), -1 if none.
int next_stage_of(const Workload& w, int rank)
{
  for (const RankProgram& r : w.ranks)
    if (r.rank == rank)
      for (auto v : boost::make_iterator_range(boost::vertices(r.graph)))
        if (r.graph[v].kind == TaskKind::Send && r.graph[v].stream == Stream::SendNext)
          return r.graph[v].peer;
  return -1;
}

nlohmann::json ordered(int tensor, int context, int data, int pipeline, const std::string& order)
{
  nlohmann::json doc = testing::small_scenario(pipeline, data, 4);
  doc["parallelism"]["tensor"]               = tensor;
  doc["parallelism"]["context"]              = context;
  doc["parallelism"]["rank_order"]           = order;
  doc["platform"]["node_groups"][0]["count"] = tensor * context * data * pipeline;
  doc["simulation"]["fidelity"]              = "full";
  return doc;
}

nlohmann::json moe(int expert, int data, const std::string& order)
{
  nlohmann::json doc             = ordered(1, 1, data, 1, order);
  doc["model"]["num_experts"]    = 8;
  doc["model"]["moe_top_k"]      = 2;
  doc["parallelism"]["expert"]   = expert;
  return doc;
}

} // namespace

TEST_CASE("rank_order numbers the groups as Megatron's RankGenerator does", "[rank_order]")
{
  SECTION("default tp-cp-ep-dp-pp, t2 d2 p2: rank = t + 2d + 4p")
  {
    const Workload w = lower(scenario_from_json(ordered(2, 1, 2, 2, "tp-cp-ep-dp-pp")));
    CHECK(groups_of(w, "tensor/") == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
    CHECK(groups_of(w, "data/") == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
    CHECK(next_stage_of(w, 0) == 4);
    CHECK(next_stage_of(w, 3) == 7);
  }
  SECTION("dp-tp-pp, t2 d2 p2: rank = d + 2t + 4p")
  {
    const Workload w = lower(scenario_from_json(ordered(2, 1, 2, 2, "dp-tp-pp")));
    CHECK(groups_of(w, "tensor/") == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
    CHECK(groups_of(w, "data/") == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
    CHECK(next_stage_of(w, 0) == 4);
    CHECK(next_stage_of(w, 1) == 5);
  }
  SECTION("tp-pp-dp, t2 d2 p2: rank = t + 2p + 4d")
  {
    const Workload w = lower(scenario_from_json(ordered(2, 1, 2, 2, "tp-pp-dp")));
    CHECK(groups_of(w, "tensor/") == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
    CHECK(groups_of(w, "data/") == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
    CHECK(next_stage_of(w, 0) == 2);
    CHECK(next_stage_of(w, 5) == 7);
  }
  SECTION("tp-dp-pp-cp, t2 c2 d2 p2: rank = t + 2d + 4p + 8c; gradients over dp then cp")
  {
    const Workload w = lower(scenario_from_json(ordered(2, 2, 2, 2, "tp-dp-pp-cp")));
    CHECK(groups_of(w, "tensor/") ==
          Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
    CHECK(groups_of(w, "data/") == Groups{{0, 2, 8, 10}, {1, 3, 9, 11}, {4, 6, 12, 14}, {5, 7, 13, 15}});
    CHECK(next_stage_of(w, 0) == 4);
    CHECK(next_stage_of(w, 10) == 14);
    // The context ring of rank 0 passes K/V to rank 8 (context index 1).
    const RankProgram& r0 = w.ranks.front();
    REQUIRE(r0.rank == 0);
    std::set<int> ring_peers;
    for (auto v : boost::make_iterator_range(boost::vertices(r0.graph)))
      if (r0.graph[v].kind == TaskKind::Send && r0.graph[v].stream != Stream::SendNext &&
          r0.graph[v].stream != Stream::SendPrev)
        ring_peers.insert(r0.graph[v].peer);
    CHECK(ring_peers == std::set<int>{8});
  }
}

TEST_CASE("expert groups follow ep's place in the order, inside data × context", "[rank_order][moe]")
{
  // d4 ep2: default "tp-cp-ep-dp-pp" puts the expert index inside the expert-data index.
  {
    const Workload w = lower(scenario_from_json(moe(2, 4, "tp-cp-ep-dp-pp")));
    CHECK(groups_of(w, "expert/") == Groups{{0, 1}, {2, 3}});
    CHECK(groups_of(w, "expert_data/") == Groups{{0, 2}, {1, 3}});
  }
  // "tp-dp-ep-pp": expert outside expert-data.
  {
    const Workload w = lower(scenario_from_json(moe(2, 4, "tp-dp-ep-pp")));
    CHECK(groups_of(w, "expert/") == Groups{{0, 2}, {1, 3}});
    CHECK(groups_of(w, "expert_data/") == Groups{{0, 1}, {2, 3}});
  }
  // Without ep in the order it sits just inside dp, as in Megatron's orders.
  {
    const Workload w = lower(scenario_from_json(moe(2, 4, "tp-cp-dp-pp")));
    CHECK(groups_of(w, "expert/") == Groups{{0, 1}, {2, 3}});
  }
}

TEST_CASE("an order Megatron refuses for a MoE plan is bad input naming parallelism.rank_order", "[rank_order][moe]")
{
  // cp outside pp: the expert layers (numbered without cp) would see other pipeline groups.
  nlohmann::json doc                     = moe(2, 2, "tp-dp-pp-cp");
  doc["parallelism"]["context"]          = 2;
  doc["parallelism"]["pipeline"]         = 2;
  doc["model"]["num_layers"]             = 8;
  doc["platform"]["node_groups"][0]["count"] = 8;
  try {
    scenario_from_json(doc);
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("parallelism.rank_order") && Catch::Contains("pipeline group"));
  }
  // The same plan with cp inside pp is fine.
  doc["parallelism"]["rank_order"] = "tp-cp-dp-pp";
  CHECK_NOTHROW(scenario_from_json(doc));
}

TEST_CASE("rank_order_axes completes an order like Megatron and refuses bad ones", "[rank_order]")
{
  ParallelSpec p;
  p.tensor = 2;
  p.data   = 2;
  p.rank_order = "dp-tp";
  CHECK(rank_order_axes(p) == std::vector<Axis>{Axis::Expert, Axis::Data, Axis::Tensor, Axis::Context, Axis::Pipeline});
  p.pipeline = 2;
  CHECK_THROWS_WITH(rank_order_axes(p), Catch::Contains("\"pp\" is missing") && Catch::Contains("degree is 2"));
  p.rank_order = "tp-dp-xp-pp";
  CHECK_THROWS_WITH(rank_order_axes(p), Catch::Contains("unknown axis \"xp\""));
  p.rank_order = "tp-dp-tp-pp";
  CHECK_THROWS_WITH(rank_order_axes(p), Catch::Contains("\"tp\" appears twice"));
  p.rank_order = "";
  CHECK_THROWS_WITH(rank_order_axes(p), Catch::Contains("unknown axis \"\""));
}

TEST_CASE("an order that spreads tensor groups over nodes is slower than the default", "[rank_order][slow]")
{
  // d8 t2 on two 8-GPU nodes: by default each tensor pair shares a node and the gradient
  // all-reduce crosses the NIC; "dp-tp-pp" puts the 8 data ranks of a tensor index on one node,
  // so every tensor-parallel all-reduce (8bsh(t-1)/t per layer per micro-batch) crosses it; with
  // 16 micro-batches that outweighs the gradient all-reduce, which then stays inside a node.
  nlohmann::json doc               = testing::small_scenario(1, 8, 16);
  doc["parallelism"]["tensor"]     = 2;
  auto& group                      = doc["platform"]["node_groups"][0];
  group["count"]                   = 2;
  group["gpus_per_node"]           = 8;
  group["intra_node"]              = {{"type", "nvswitch"}, {"bandwidth", "300GBps"}, {"latency", "1us"}};
  group["nic"]                     = {{"count", 8}, {"bandwidth", "100Gbps"}, {"latency", "2us"}};
  const Report by_default          = simulate_isolated(scenario_from_json(doc));
  doc["parallelism"]["rank_order"] = "dp-tp-pp";
  const Scenario spread            = scenario_from_json(doc);
  const Workload w                 = lower(spread);
  CHECK(groups_of(w, "tensor/").count({0, 8}) == 1);
  const Report slower = simulate_isolated(spread);
  CAPTURE(by_default.step_time_s, slower.step_time_s);
  CHECK(slower.step_time_s > 1.2 * by_default.step_time_s);
}

TEST_CASE("ZeRO-3 with MoE gathers and reduce-scatters the experts over their expert-data group",
          "[rank_order][moe][data_parallel][bytes]")
{
  // d4 ep2: each rank holds 4 of the 8 experts, replicated on n = 2 ranks (its expert-data group).
  // Per layer and micro-batch: an all-gather of the experts before forward and again before
  // backward (reshard_after_forward), a reduce-scatter of their gradients after backward; a ring
  // member sends (n-1)/n of each buffer. No all-gather after the step: the weights stay sharded.
  const int m = GENERATE(1, 3);
  nlohmann::json doc                = moe(2, 4, "tp-cp-ep-dp-pp");
  doc["training"]["global_batch_size"] = 4 * m;
  doc["parallelism"]["zero_stage"]  = 3;
  doc["simulation"]["fidelity"]     = "reduced";
  const Scenario s                  = scenario_from_json(doc);
  const Workload w                  = lower(s);
  const RankProgram& r              = w.ranks.front();
  const auto& ring                  = CollectiveRegistry::get("ring", "test");
  const double n = 2, layers = 4, e = 2;
  const double experts = expert_parameters_per_rank(s.model, 1, 2);
  double gathered = 0, reduced = 0;
  int gathers = 0, reductions = 0;
  for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
    const Task& t = r.graph[v];
    if (t.kind != TaskKind::Collective)
      continue;
    const Group& g = w.groups[static_cast<size_t>(t.group)];
    if (g.name.rfind("expert_data/", 0) != 0)
      continue;
    REQUIRE(g.ranks == std::vector<int>{0, 2});
    const double sent = bytes_sent_per_member(ring, t.op, group_shape(static_cast<int>(g.ranks.size())), t.bytes);
    if (t.op == CollectiveOp::AllGather) {
      gathered += sent;
      ++gathers;
    } else {
      CHECK(t.op == CollectiveOp::ReduceScatter);
      reduced += sent;
      ++reductions;
    }
  }
  CAPTURE(m);
  CHECK(gathers == 2 * m * layers);
  CHECK(reductions == m * layers);
  CHECK(gathered == Approx(layers * 2 * m * experts * e * (n - 1) / n));
  CHECK(reduced == Approx(layers * m * experts * e * (n - 1) / n));
  // In all, 3m buffers of the experts per layer: 1.5x what plain data parallelism's all-reduce
  // (2 buffers per step) moves when m = 1.
  CHECK(gathered + reduced == Approx(3.0 * m * layers * experts * e * (n - 1) / n));
  // The experts' optimizer steps its shard only (1/n of them), as Megatron's distributed optimizer.
  bool stepped = false;
  for (const Work& work : w.works)
    if (work.name == "expert_optimizer_stage0")
      stepped = true;
  CHECK(stepped);
}

TEST_CASE("placement finds each stage's ranks under the order", "[rank_order][heterogeneous]")
{
  // t2 d2 p2 with "tp-pp-dp": stage 0 holds ranks 0, 1, 4, 5 and stage 1 ranks 2, 3, 6, 7.
  nlohmann::json doc = ordered(2, 1, 2, 2, "tp-pp-dp");
  auto a100          = doc["platform"]["node_groups"][0];
  a100["count"]        = 1;
  a100["gpus_per_node"] = 4;
  auto v100            = a100;
  v100["gpu"]          = "V100-SXM2-32GB";
  doc["platform"]["node_groups"] = {a100, v100};
  doc["training"]["precision"]   = "fp16";
  const Placement in_order       = place_ranks(scenario_from_json(doc));
  CHECK(in_order.stage_of_rank == std::vector<int>{0, 0, 1, 1, 0, 0, 1, 1});
  CHECK(in_order.group_of_stage == std::vector<int>{-1, -1}); // GPUs 0-3 hold both stages
  // Stage 1 on the A100 node, stage 0 on the V100 node: each stage's ranks take its group's GPUs.
  doc["platform"]["placement"]["stages"] = {1, 0};
  const Placement placed                 = place_ranks(scenario_from_json(doc));
  CHECK(placed.gpu_of_rank == std::vector<int>{4, 5, 0, 1, 6, 7, 2, 3});
  CHECK(placed.group_of_stage == std::vector<int>{1, 0});
  const Report r = analytic_report(scenario_from_json(doc));
  CHECK(r.stages[0].device == "V100-SXM2-32GB");
  CHECK(r.stages[1].device == "A100-SXM4-80GB");
}

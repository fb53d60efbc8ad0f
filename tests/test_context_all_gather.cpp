// All-gather context parallelism (parallelism.context_attention "all_gather"; Llama 3, arXiv:2407.21783,
// section 3.3.2; Transformer Engine's cp_comm_type "all_gather"): K and V all-gathered over the
// context ranks before attention, again in backward, dK and dV reduce-scattered after it; the
// attention waits for each. The ring's bytes and causal work, none of the transfers hidden.
#include "support.hpp"

#include "sim/core/input_error.hpp"
#include "sim/simulate.hpp"
#include "workloads/lower.hpp"
#include "workloads/parallel/context_parallel.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <set>

using namespace stepsim;
using testing::Traffic;
using testing::traffic;

namespace {

// Llama-style attention (16 heads of 64, 8 K/V heads), one GPU per node so that every context
// transfer crosses the network.
nlohmann::json llama_cp(int tensor, int context, const std::string& attention)
{
  nlohmann::json doc = testing::small_scenario(1, 1, 3);
  doc["model"]       = {{"num_layers", 4},       {"hidden_size", 1024}, {"num_attention_heads", 16},
                        {"num_query_groups", 8}, {"seq_length", 8192},  {"vocab_size", 32000},
                        {"mlp", "swiglu"},       {"norm", "rmsnorm"}};
  doc["training"]["attention"]  = "flash";
  doc["parallelism"]["tensor"]  = tensor;
  doc["parallelism"]["context"] = context;
  if (tensor > 1)
    doc["parallelism"]["sequence_parallel"] = true;
  doc["parallelism"]["context_attention"]   = attention;
  doc["platform"]["node_groups"][0]["count"] = tensor * context;
  return doc;
}

// The scenario's input problems, as `stepsim validate` lists them; empty where it is accepted.
std::string problems(const nlohmann::json& doc)
{
  try {
    validate(scenario_from_json(doc));
  } catch (const InputError& e) {
    return e.what();
  }
  return {};
}

} // namespace

TEST_CASE("all-gather context parallelism: K/V gathered forward and backward, dK/dV reduce-scattered, the ring's "
          "bytes on the context ranks",
          "[context]")
{
  const int cp = GENERATE(2, 4);
  const int t  = GENERATE(1, 2);
  const int m = 3, layers = 4;
  const Scenario s = scenario_from_json(llama_cp(t, cp, "all_gather"));
  const Workload w = lower(s);
  REQUIRE(w.ranks.size() == 1);
  const auto& r = w.ranks[0];
  CAPTURE(cp, t);
  // One K and V block: 2·b·(s/cp)·(query groups·head_dim)/t elements of 2 bytes; each collective's
  // buffer is the cp blocks of the group.
  const double block = 2.0 * (8192.0 / cp) * (8 * 64) / t * 2;
  CHECK(ring_kv_bytes(s) == Approx(block));
  const Traffic forward = traffic(r, TaskKind::Collective, Stream::Context, Pass::Forward);
  CHECK(forward.tasks == layers * m);
  CHECK(forward.bytes == Approx(layers * m * cp * block));
  const Traffic backward = traffic(r, TaskKind::Collective, Stream::Context, Pass::Backward);
  CHECK(backward.tasks == 2 * layers * m); // the gather again, and the reduce-scatter
  CHECK(backward.bytes == Approx(2 * layers * m * cp * block));
  // Nothing goes around a ring.
  CHECK(traffic(r, TaskKind::Send, Stream::Context, Pass::Forward).tasks == 0);
  CHECK(traffic(r, TaskKind::Send, Stream::Context, Pass::Backward).tasks == 0);
  // The group: the cp context ranks of the rank's tensor index (rank = tensor + t·context).
  std::set<int> groups;
  std::set<CollectiveOp> ops;
  for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
    const Task& task = r.graph[v];
    if (task.kind == TaskKind::Collective && task.stream == Stream::Context) {
      groups.insert(task.group);
      ops.insert(task.op);
    }
  }
  REQUIRE(groups.size() == 1);
  std::vector<int> expected;
  for (int c = 0; c < cp; ++c)
    expected.push_back(c * t);
  CHECK(w.groups[static_cast<size_t>(*groups.begin())].ranks == expected);
  CHECK(ops == std::set<CollectiveOp>{CollectiveOp::AllGather, CollectiveOp::ReduceScatter});
  // The same causal work as the ring: cp attention cores per layer, micro-batch and pass.
  const Workload ring = lower(scenario_from_json(llama_cp(t, cp, "ring")));
  auto cores          = [](const Workload& wl, Pass pass) {
    int n = 0;
    for (auto v : boost::make_iterator_range(boost::vertices(wl.ranks[0].graph))) {
      const Task& task = wl.ranks[0].graph[v];
      if (task.kind == TaskKind::Compute && task.pass == pass && task.work >= 0 &&
          wl.works[static_cast<size_t>(task.work)].name.rfind("attention_core", 0) == 0)
        ++n;
    }
    return n;
  };
  CHECK(cores(w, Pass::Forward) == cp * layers * m);
  CHECK(cores(w, Pass::Forward) == cores(ring, Pass::Forward));
  CHECK(cores(w, Pass::Backward) == cores(ring, Pass::Backward));
}

TEST_CASE("all-gather context parallelism waits for its transfers, which the ring hides behind the attention",
          "[context]")
{
  auto run = [](const std::string& attention) {
    nlohmann::json doc         = llama_cp(1, 4, attention);
    doc["model"]["seq_length"] = 32768;
    doc["model"]["num_layers"] = 2;
    return simulate_isolated(scenario_from_json(doc));
  };
  const Report ring = run("ring"), gathered = run("all_gather");
  CAPTURE(ring.step_time_s, gathered.step_time_s, gathered.comm_s, gathered.exposed_comm_s, ring.exposed_comm_s);
  REQUIRE(std::isfinite(gathered.step_time_s));
  CHECK(gathered.comm_s > 0);
  CHECK(gathered.exposed_comm_s > 0.9 * gathered.comm_s);
  CHECK(ring.exposed_comm_s < 0.5 * ring.comm_s);
  CHECK(gathered.step_time_s > ring.step_time_s);
}

TEST_CASE("all-gather context parallelism takes no ulysses_degree and keeps the ring's load-balanced cut", "[context]")
{
  nlohmann::json doc                   = llama_cp(1, 4, "all_gather");
  doc["parallelism"]["ulysses_degree"] = 2;
  CHECK_THAT(problems(doc), Catch::Contains("parallelism.ulysses_degree: is the all-to-all group size of "
                                                     "context_attention \"usp\", but context_attention is "
                                                     "\"all_gather\""));
  doc = llama_cp(1, 4, "all_gather");
  doc["model"]["seq_length"] = 8196;
  CHECK_THAT(problems(doc), Catch::Contains("is not divisible by 2 × context 4"));
  doc = llama_cp(1, 4, "all-gather");
  CHECK_THAT(problems(doc), Catch::Contains("parallelism.context_attention"));
}

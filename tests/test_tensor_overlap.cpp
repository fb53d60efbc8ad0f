// Tensor-parallel collectives that frameworks overlap with their GEMMs (workloads/lower.cpp,
// backward_block and overlapped_block): which of them a block waits for and which run beside its
// compute, per framework profile, on the lowered graphs; and what that hides in a replayed step.
#include "support.hpp"

#include "sim/simulate.hpp"
#include "workloads/lower.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <utility>

using namespace stepsim;

namespace {

constexpr int kTensor = 4;

nlohmann::json tensor_scenario(const std::string& framework, bool sequence_parallel)
{
  auto j                                           = testing::small_scenario(1, 1, 2);
  j["training"]["framework"]                       = framework;
  j["training"]["attention"]                       = "standard"; // the profiles compared differ in no other default
  j["parallelism"]["tensor"]                       = kTensor;
  j["parallelism"]["sequence_parallel"]            = sequence_parallel;
  j["platform"]["node_groups"][0]["gpus_per_node"] = kTensor;
  j["platform"]["node_groups"][0]["nic"]["count"]  = kTensor;
  return j;
}

// Bytes of rank 0's tensor-parallel collectives in one pass, by stream and operation, in units of
// one activation (micro-batch × sequence × hidden elements), per layer: the embedding and the head
// add their own, so this is the difference of two depths, halved.
std::map<std::string, double> tensor_collectives(nlohmann::json j, Pass pass)
{
  const double activation = 1.0 * 1024 * 1024 * 2; // small_scenario: sequence 1024, hidden 1024, bf16
  auto collect = [&](int layers, double sign, std::map<std::string, double>& out) {
    j["model"]["num_layers"] = layers;
    const Workload w         = lower(scenario_from_json(j));
    const auto& g            = w.ranks.front().graph;
    for (auto v : boost::make_iterator_range(boost::vertices(g))) {
      const Task& t = g[v];
      if (t.kind != TaskKind::Collective || t.pass != pass || t.micro_batch != 0)
        continue;
      if (t.stream != Stream::Tensor && t.stream != Stream::TensorOverlap)
        continue;
      out[std::string(t.stream == Stream::Tensor ? "waited " : "beside ") + collective_name(t.op)] +=
          sign * t.bytes / activation / 2;
    }
  };
  std::map<std::string, double> out;
  collect(4, 1, out);
  collect(2, -1, out);
  std::erase_if(out, [](const auto& kv) { return std::abs(kv.second) < 1e-9; });
  return out;
}

} // namespace

TEST_CASE("Megatron-LM 2022 runs a column-parallel backward's collectives beside its GEMMs; 2021 waits for them",
          "[tensor][overlap]")
{
  const int blocks = 2; // a layer's attention and MLP
  SECTION("sequence parallel: the output gradient's gather is waited for, the input's and the reduce-scatter are not")
  {
    const auto late = tensor_collectives(tensor_scenario("megatron-lm-2022", true), Pass::Backward);
    CHECK(late.at("waited all_gather") == Approx(blocks));
    CHECK(late.at("beside all_gather") == Approx(blocks)); // the input again, for the weight gradient
    CHECK(late.at("beside reduce_scatter") == Approx(blocks));
    CHECK(late.count("waited reduce_scatter") == 0);
    const auto early = tensor_collectives(tensor_scenario("megatron-lm-2021", true), Pass::Backward);
    CHECK(early.at("waited all_gather") == Approx(blocks));
    CHECK(early.at("waited reduce_scatter") == Approx(blocks));
    CHECK(early.count("beside all_gather") == 0);
  }
  SECTION("tensor parallel alone: the dgrad's all-reduce runs beside the wgrad")
  {
    const auto late = tensor_collectives(tensor_scenario("megatron-lm-2022", false), Pass::Backward);
    CHECK(late.at("beside all_reduce") == Approx(blocks));
    CHECK(late.count("waited all_reduce") == 0);
    const auto early = tensor_collectives(tensor_scenario("megatron-lm-2021", false), Pass::Backward);
    CHECK(early.at("waited all_reduce") == Approx(blocks));
  }
  SECTION("forward is the same in both: its all-reduces are waited for")
  {
    CHECK(tensor_collectives(tensor_scenario("megatron-lm-2022", false), Pass::Forward) ==
          tensor_collectives(tensor_scenario("megatron-lm-2021", false), Pass::Forward));
  }
}

TEST_CASE("Transformer Engine's ring exchange starts the GEMM on the local chunk: a forward waits only for the last "
          "reduce-scatter chunk",
          "[tensor][overlap]")
{
  const int blocks = 2; // a layer's attention and MLP
  const auto forward = tensor_collectives(tensor_scenario("megatron-core", true), Pass::Forward);
  CHECK(forward.count("waited all_gather") == 0);
  CHECK(forward.at("beside all_gather") == Approx(blocks));
  // megatron-core pipelines each reduce-scatter in 4 chunks: the last is waited for.
  CHECK(forward.at("waited reduce_scatter") == Approx(blocks * 0.25));
  CHECK(forward.at("beside reduce_scatter") == Approx(blocks * 0.75));
  const auto backward = tensor_collectives(tensor_scenario("megatron-core", true), Pass::Backward);
  CHECK(backward.count("waited all_gather") == 0);
  CHECK(backward.count("waited reduce_scatter") == 0);
  CHECK(backward.at("beside all_gather") == Approx(2 * blocks)); // the output gradient and the input
  CHECK(backward.at("beside reduce_scatter") == Approx(blocks));
}

TEST_CASE("parallelism.tensor_comm_overlap overrides the profile: Megatron-Core without --tp-comm-overlap waits for "
          "its forward collectives; torchtitan's async tensor parallelism cuts each reduce-scatter per tensor rank",
          "[tensor][overlap]")
{
  const int blocks = 2;
  auto off                                    = tensor_scenario("megatron-core", true);
  off["parallelism"]["tensor_comm_overlap"]   = false;
  const auto forward = tensor_collectives(off, Pass::Forward);
  CHECK(forward.at("waited all_gather") == Approx(blocks));
  CHECK(forward.at("waited reduce_scatter") == Approx(blocks));
  CHECK(forward.count("beside all_gather") == 0);
  CHECK(forward.count("beside reduce_scatter") == 0);

  auto async                                  = tensor_scenario("torchtitan", true);
  const auto blocking = tensor_collectives(async, Pass::Forward);
  CHECK(blocking.at("waited reduce_scatter") == Approx(blocks));
  async["parallelism"]["tensor_comm_overlap"] = true;
  const auto overlapped = tensor_collectives(async, Pass::Forward);
  CHECK(overlapped.count("waited all_gather") == 0);
  CHECK(overlapped.at("waited reduce_scatter") == Approx(blocks * 1.0 / kTensor));
  CHECK(overlapped.at("beside reduce_scatter") == Approx(blocks * (1 - 1.0 / kTensor)));

  // Asked for where there is nothing to overlap: refused, naming the field.
  auto bad                                  = tensor_scenario("torchtitan", false);
  bad["parallelism"]["tensor_comm_overlap"] = true;
  CHECK_THROWS_WITH(scenario_from_json(bad), Catch::Contains("parallelism.tensor_comm_overlap: overlaps the "
                                                             "sequence-parallel all-gathers and reduce-scatters"));
}

TEST_CASE("overlapping the backward's collectives with the wgrad hides communication and shortens the step",
          "[tensor][overlap][replay]")
{
  // Sequence parallelism carries the input's all-gather once more in backward (the weight gradient
  // reads the whole sequence): beside compute on a fast fabric, a cost on a slow one.
  for (const auto& [sp, fabric] : {std::pair{false, "20GBps"}, std::pair{true, "300GBps"}}) {
    INFO("sequence parallel " << sp << ", " << fabric);
    auto run = [&](const std::string& framework) {
      auto j = tensor_scenario(framework, sp);
      j["platform"]["node_groups"][0]["intra_node"]["bandwidth"] = fabric;
      return testing::in_child([&] {
        const Report r = simulate(scenario_from_json(j));
        return nlohmann::json{{"step", r.step_time_s}, {"exposed", r.exposed_comm_s}, {"comm", r.comm_s}};
      });
    };
    const auto waited = run("megatron-lm-2021"), beside = run("megatron-lm-2022");
    CHECK(beside["exposed"].get<double>() < 0.9 * waited["exposed"].get<double>());
    CHECK(beside["step"].get<double>() < waited["step"].get<double>());
    // Nothing is hidden for free: the collectives still run, only beside compute.
    CHECK(beside["comm"].get<double>() >= 0.95 * waited["comm"].get<double>());
  }
}

TEST_CASE("with ZeRO-3 under an overlapping profile, a layer's compute still waits for its parameters", "[tensor][overlap]")
{
  for (const char* framework : {"megatron-core", "megatron-lm-2022"}) {
    INFO(framework);
    auto j                                     = tensor_scenario(framework, true);
    j["parallelism"]["data"]                   = 2;
    j["parallelism"]["zero_stage"]             = 3;
    j["training"]["global_batch_size"]         = 4;
    j["platform"]["node_groups"][0]["count"]   = 2;
    const Workload w = lower(scenario_from_json(j));
    const auto& g    = w.ranks.front().graph;
    int gathers = 0, feeding_compute = 0;
    for (auto v : boost::make_iterator_range(boost::vertices(g))) {
      const Task& t = g[v];
      if (t.kind != TaskKind::Collective || t.stream != Stream::ParamGather || t.micro_batch != 0)
        continue;
      ++gathers;
      // The gather's own layer starts with its compute, or with a blocking all-gather before it.
      bool feeds = false;
      for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
        const auto next = boost::target(*e, g);
        feeds           = feeds || g[next].kind == TaskKind::Compute;
        if (g[next].stream == Stream::Tensor)
          for (auto [f, f_end] = boost::out_edges(next, g); f != f_end; ++f)
            feeds = feeds || g[boost::target(*f, g)].kind == TaskKind::Compute;
      }
      feeding_compute += feeds ? 1 : 0;
    }
    CHECK(gathers > 0);
    CHECK(feeding_compute == gathers);
  }
}

// The experts' own tensor-parallel size (parallelism.expert_tensor, Megatron-Core's
// --expert-tensor-parallel-size): the expert groups it carves, the experts' FFN split and token
// gathers, their parameters and optimizer shards, and that giving the dense size changes nothing.
#include "support.hpp"

#include "sim/simulate.hpp"
#include "workloads/lower.hpp"
#include "workloads/models/moe.hpp"
#include "workloads/models/transformer.hpp"
#include "workloads/stage_memory.hpp"

#include <boost/range/iterator_range.hpp>
#include <catch2/catch.hpp>


using namespace stepsim;
using testing::Traffic;
using testing::traffic;

namespace {

// A Llama-style MoE layer stack (8 experts of FFN 4096, top 2) at tensor t with sequence
// parallelism, data d, expert ep, on single-GPU nodes.
nlohmann::json moe_plan(int t, int d, int ep, int expert_tensor)
{
  nlohmann::json doc = testing::small_scenario(1, d, 2);
  doc["model"]       = {{"num_layers", 4},       {"hidden_size", 1024}, {"num_attention_heads", 16},
                        {"num_query_groups", 4}, {"seq_length", 2048},  {"vocab_size", 32000},
                        {"mlp", "swiglu"},       {"norm", "rmsnorm"},   {"num_experts", 8},
                        {"moe_top_k", 2}};
  doc["parallelism"]["tensor"] = t;
  doc["parallelism"]["expert"] = ep;
  if (t > 1)
    doc["parallelism"]["sequence_parallel"] = true;
  if (expert_tensor > 0)
    doc["parallelism"]["expert_tensor"] = expert_tensor;
  doc["platform"]["node_groups"][0]["count"] = t * d;
  return doc;
}

const Kernel& kernel_named(const Workload& w, const std::string& name)
{
  for (const Work& work : w.works)
    for (const Kernel& k : work.kernels)
      if (k.name == name)
        return k;
  FAIL("no kernel " << name);
  throw std::logic_error("unreachable");
}

} // namespace

TEST_CASE("expert_tensor 1 beside tensor 2: expert groups of consecutive ranks, no token gathers", "[moe][expert_tensor]")
{
  // tensor 2 × data 4 = 8 ranks a stage; experts 1 × expert 4, expert-data 8 / 4 = 2.
  const Scenario s = scenario_from_json(moe_plan(2, 4, 4, 1));
  CHECK(expert_tensor_size(s.parallelism) == 1);
  const Layout l(s.parallelism);
  CHECK(expert_group_ranks(l, 5) == std::vector<int>{4, 5, 6, 7});
  CHECK(expert_data_group_ranks(l, 5) == std::vector<int>{1, 5});
  CHECK(expert_tensor_group_ranks(l, 5) == std::vector<int>{5});
  // The dense tensor group stays two ranks.
  CHECK(l.group(5, {Axis::Tensor}) == std::vector<int>{4, 5});

  const Workload w = lower(s);
  // Each rank routes its sequence shard of 1,024 tokens, two copies each, over the expert group
  // and runs its two experts on 1,024 × 2 × 4 / 8 = 1,024 tokens each, whole (FFN 4,096).
  const Kernel& fc1 = kernel_named(w, "expert_fc1");
  CHECK(fc1.m == Approx(1024));
  CHECK(fc1.n == Approx(2 * 4096)); // gate and up
  CHECK(fc1.batch == Approx(2));
  // No collective runs on an expert tensor group: the only tensor-stream collectives are the
  // dense layers' (the attention's and the shared output's), over the dense tensor group.
  for (const auto& r : w.ranks)
    for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
      const Task& task = r.graph[v];
      if (task.kind == TaskKind::Collective && task.stream == Stream::Tensor)
        CHECK(w.groups[static_cast<size_t>(task.group)].ranks.size() == 2u);
      if (task.kind == TaskKind::Collective && task.stream == Stream::Expert)
        CHECK(w.groups[static_cast<size_t>(task.group)].ranks.size() == 4u);
    }
  // Against Megatron's default (the experts split over the tensor group as well): the MoE
  // layers' tensor all-gathers and reduce-scatters are gone, two a layer and micro-batch each pass.
  const Workload split = lower(scenario_from_json(moe_plan(2, 4, 4, 0)));
  for (Pass pass : {Pass::Forward, Pass::Backward}) {
    const Traffic own      = traffic(w.ranks[0], TaskKind::Collective, Stream::Tensor, pass);
    const Traffic default_ = traffic(split.ranks[0], TaskKind::Collective, Stream::Tensor, pass);
    CAPTURE(static_cast<int>(pass));
    CHECK(default_.tasks - own.tasks == 2 * 4 * 2);
  }
  const Kernel& split_fc1 = kernel_named(split, "expert_fc1");
  CHECK(split_fc1.m == Approx(2048)); // the tensor group's two shards gathered
  CHECK(split_fc1.n == Approx(4096)); // each expert's FFN halved
}

TEST_CASE("expert_tensor: experts' parameters whole on a rank, their optimizer states over expert-data ranks",
          "[moe][expert_tensor]")
{
  nlohmann::json doc              = moe_plan(2, 4, 4, 1);
  doc["parallelism"]["zero_stage"] = 1;
  const Scenario s                 = scenario_from_json(doc);
  const double per_expert          = 3.0 * 1024 * 4096; // SwiGLU, no biases
  CHECK(expert_parameters_per_rank(s.model, 1, 4) == Approx(2 * per_expert));
  CHECK(layer_parameters_per_rank(s.model, 2, 4, 1) - layer_parameters_per_rank(s.model, 2, 4) ==
        Approx(2 * per_expert / 2));
  // Adam's 12 bytes: the dense parameters over the 4 data ranks, the experts over their 2
  // expert-data ranks.
  const MemoryBreakdown m = stage_memory(s, 0, 1, 1);
  const double psi        = stage_parameters(s, 0);
  const double experts    = 4 * 2 * per_expert;
  CHECK(m.optimizer == Approx(12 * ((psi - experts) / 4 + experts / 2)));
  // Without expert parallelism the experts are still sharded apart: expert-data 8 ranks.
  nlohmann::json no_ep              = moe_plan(2, 4, 1, 1);
  no_ep["parallelism"]["zero_stage"] = 1;
  const Scenario one                 = scenario_from_json(no_ep);
  const double all_experts           = 4 * 8 * per_expert;
  CHECK(stage_memory(one, 0, 1, 1).optimizer ==
        Approx(12 * ((stage_parameters(one, 0) - all_experts) / 4 + all_experts / 8)));
}

TEST_CASE("expert_tensor equal to tensor is Megatron's default: the same report", "[moe][expert_tensor]")
{
  nlohmann::json implicit = moe_plan(2, 2, 2, 0);
  nlohmann::json given    = moe_plan(2, 2, 2, 2);
  // Each report written beside its scenario in the tests' temporary folder, not where the
  // tests run (the source tree).
  auto report_of = [](const std::string& name, const nlohmann::json& doc) {
    const std::string scenario = testing::write_temp_file(name + ".json", doc.dump());
    const std::string out      = testing::write_temp_file(name + ".out.json", "");
    const auto r               = testing::run_stepsim("run " + scenario + " -q --json " + out);
    REQUIRE(r.exit_code == 0);
    nlohmann::json j = nlohmann::json::parse(testing::read_text_file(out));
    j.erase("scenario");
    return j.dump();
  };
  CHECK(report_of("etp_implicit", implicit) == report_of("etp_given", given));
  // ... and a step with experts whole on each rank differs from it.
  CHECK(report_of("etp_implicit", implicit) != report_of("etp_whole", moe_plan(2, 2, 2, 1)));
}

TEST_CASE("expert_tensor 2 above tensor 1: the experts' own tensor group gathers the tokens", "[moe][expert_tensor]")
{
  // tensor 1 × data 8; experts split over 2 ranks, expert 2, expert-data 8 / 4 = 2.
  const Scenario s = scenario_from_json(moe_plan(1, 8, 2, 2));
  const Layout l(s.parallelism);
  CHECK(expert_tensor_group_ranks(l, 5) == std::vector<int>{4, 5});
  CHECK(expert_group_ranks(l, 5) == std::vector<int>{5, 7});
  CHECK(expert_data_group_ranks(l, 5) == std::vector<int>{1, 5});
  const Workload w = lower(s);
  const Kernel& fc1 = kernel_named(w, "expert_fc1");
  CHECK(fc1.m == Approx(2 * 2048 * 2 * 2 / 8.0)); // two ranks' tokens, top 2, expert 2 of 8 experts
  CHECK(fc1.n == Approx(4096));                   // each expert's FFN halved
  int gathers = 0;
  for (auto v : boost::make_iterator_range(boost::vertices(w.ranks[0].graph))) {
    const Task& task = w.ranks[0].graph[v];
    if (task.kind == TaskKind::Collective && task.stream == Stream::Tensor) {
      CHECK(w.groups[static_cast<size_t>(task.group)].ranks.size() == 2u);
      ++gathers;
    }
  }
  CHECK(gathers == 2 * 2 * 4 * 2); // a gather and a scatter per MoE layer and micro-batch, each pass
}

// MoE shared experts (DeepSeek-MoE and Qwen2-MoE style; workloads/models/moe.hpp) and the
// report's parameter counts: Qwen1.5-MoE-A2.7B and Mixtral 8x7B from their HuggingFace configs
// against their published totals and active counts, the shared experts' FLOPs, kernels, tensor
// collectives, gradients, memory and activations against their closed forms, and the import's
// refusal of a config that names its experts only in part.
#include "support.hpp"

#include "sim/core/input_error.hpp"
#include "sim/core/report.hpp"
#include "sim/input/hf_config.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/simulate.hpp"
#include "workloads/lower.hpp"
#include "workloads/models/cnn.hpp"
#include "workloads/models/model_kind.hpp"
#include "workloads/models/moe.hpp"
#include "workloads/models/transformer.hpp"
#include "workloads/stage_memory.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace stepsim;
using testing::Traffic;
using testing::traffic;

namespace {

const std::string kModels = std::string(STEPSIM_SOURCE_DIR) + "/configs/models/";

// A Llama-style MoE on single-GPU nodes: 4 layers, hidden 1024, 8 experts of width 512, top 2;
// `shared` shared experts (0: none) of the experts' width unless `width` is given.
nlohmann::json moe_scenario(int tensor, int data, int expert, int micro_batches, int shared, int width = 0,
                            bool gate = false)
{
  nlohmann::json doc = testing::small_scenario(1, data, micro_batches);
  doc["model"] = {{"num_layers", 4},       {"hidden_size", 1024}, {"num_attention_heads", 16},
                  {"num_query_groups", 4}, {"seq_length", 2048},  {"vocab_size", 32000},
                  {"mlp", "swiglu"},       {"norm", "rmsnorm"},   {"num_experts", 8},
                  {"moe_top_k", 2},        {"moe_ffn_hidden_size", 512}};
  if (shared > 0) {
    doc["model"]["moe_shared_experts"] = shared;
    if (width > 0)
      doc["model"]["moe_shared_expert_ffn_hidden_size"] = width;
    if (gate)
      doc["model"]["moe_shared_expert_gate"] = true;
  }
  doc["parallelism"]["tensor"] = tensor;
  doc["parallelism"]["expert"] = expert;
  if (tensor > 1)
    doc["parallelism"]["sequence_parallel"] = true;
  doc["platform"]["node_groups"][0]["count"] = tensor * data;
  return doc;
}

ParameterCounts counts_of(const Scenario& s) { return model_kind(s.model).parameter_counts(s); }


double work_flops(const Workload& w, const std::string& name)
{
  double flops = 0;
  for (const Work& work : w.works)
    if (work.name == name)
      for (const Kernel& k : work.kernels)
        flops += k.flops();
  return flops;
}

bool work_has_kernel(const Workload& w, const std::string& work_name, const std::string& kernel)
{
  for (const Work& work : w.works)
    if (work.name == work_name)
      for (const Kernel& k : work.kernels)
        if (k.name == kernel)
          return true;
  return false;
}

} // namespace

TEST_CASE("Qwen1.5-MoE-A2.7B from its HuggingFace config has 14.3 B parameters, 2.7 B active", "[moe][shared]")
{
  // configs/models/qwen1.5-moe-a2.7b.json is huggingface.co/Qwen/Qwen1.5-MoE-A2.7B's config.json;
  // its model card (README.md): "It has 14.3B parameters in total and 2.7B activated parameters".
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["model"]       = {{"hf_config", kModels + "qwen1.5-moe-a2.7b.json"}};
  const Scenario s   = scenario_from_json(doc);
  CHECK(s.model.num_experts == 60);
  CHECK(s.model.moe_top_k == 4);
  CHECK(s.model.moe_ffn_hidden_size == 1408);
  CHECK(s.model.moe_shared_experts == 1); // Qwen2MoeSparseMoeBlock's one shared_expert ...
  CHECK(s.model.moe_shared_expert_ffn_hidden_size == 5632);
  CHECK(s.model.moe_shared_expert_gate); // ... behind its sigmoid shared_expert_gate
  CHECK(shared_experts_ffn_hidden_size(s.model) == 5632);
  const ParameterCounts c = counts_of(s);
  CHECK(c.total == Approx(14.3e9).epsilon(0.01));
  CHECK(c.active == Approx(2.7e9).epsilon(0.01));
  CHECK(c.total == Approx(model_parameters(s.model)));
  // The active count's convention: the embedding and the output layer (untied: two 151936 × 2048
  // matrices) count. Without them 2.07 B remain, which is not the card's 2.7 B.
  const double vocabulary = 2.0 * 151936 * 2048;
  CHECK(c.active - vocabulary < 0.8 * 2.7e9);
  // Dropping the shared experts in the scenario takes their FFN (3 matrices of 2048 × 5632) and
  // gate (2048) out of each of the 24 layers, from both counts alike.
  doc["model"]["moe_shared_experts"] = 0;
  const ParameterCounts without      = counts_of(scenario_from_json(doc));
  const double shared                = 24 * (3.0 * 2048 * 5632 + 2048);
  CHECK(c.total - without.total == Approx(shared));
  CHECK(c.active - without.active == Approx(shared));
}

TEST_CASE("Mixtral 8x7B's report counts 46.7 B parameters, 12.9 B active", "[moe][shared]")
{
  // Mistral AI, "Mixtral of experts" (2023): "46.7B total parameters but only uses 12.9B
  // parameters per token". No shared experts: the same convention as Qwen's count above.
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["model"]       = {{"hf_config", kModels + "mixtral-8x7b.json"}};
  const Scenario s   = scenario_from_json(doc);
  CHECK(s.model.moe_shared_experts == 0);
  const ParameterCounts c = counts_of(s);
  CHECK(c.total == Approx(46.7e9).epsilon(0.01));
  CHECK(c.active == Approx(12.9e9).epsilon(0.01));
  // The report carries them (sim/job_plan.cpp), through JSON and back, and its table says both.
  const Report r = analytic_report(s);
  CHECK(r.parameters == Approx(c.total));
  CHECK(r.active_parameters == Approx(c.active));
  const Report back = report_from_json(to_json(r));
  CHECK(back.parameters == Approx(r.parameters));
  CHECK(back.active_parameters == Approx(r.active_parameters));
  CHECK_THAT(to_table(r), Catch::Contains("46.70 B  (12.88 B active)"));
}

TEST_CASE("dense models report every parameter as active", "[moe][shared]")
{
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["model"]       = {{"hf_config", kModels + "llama-2-7b.json"}};
  const Scenario llama = scenario_from_json(doc);
  const ParameterCounts c = counts_of(llama);
  CHECK(c.total == Approx(6.738e9).epsilon(0.005)); // Llama 2's model card: 7B (6.74 B as HuggingFace counts it)
  CHECK(c.active == c.total);
  const Report r = analytic_report(llama);
  CHECK(r.parameters == Approx(c.total));
  CHECK(r.active_parameters == Approx(c.total));
  CHECK_THAT(to_table(r), Catch::Contains("6.74 B\n")); // no "active" beside a dense count
  // The CNNs and layer lists count their own layers (torchvision's ResNet-50: 25.6 M).
  nlohmann::json cnn = testing::small_scenario(1, 1, 1);
  cnn["model"]       = {{"architecture", "resnet50"}};
  const Scenario resnet = scenario_from_json(cnn);
  CHECK(counts_of(resnet).total == Approx(cnn_parameters(resnet.model)));
  CHECK(counts_of(resnet).active == counts_of(resnet).total);
  CHECK(counts_of(resnet).total / 1e6 == Approx(25.557).epsilon(0.001));
}

TEST_CASE("shared experts: width defaults to the routed experts', count times width, gate whole", "[moe][shared]")
{
  const Scenario none     = scenario_from_json(moe_scenario(2, 2, 1, 1, 0));
  const Scenario two      = scenario_from_json(moe_scenario(2, 2, 1, 1, 2));
  const Scenario wide     = scenario_from_json(moe_scenario(2, 2, 1, 1, 1, 3000));
  const Scenario gated    = scenario_from_json(moe_scenario(2, 2, 1, 1, 1, 3000, true));
  const double h          = 1024;
  CHECK(shared_experts_ffn_hidden_size(none.model) == 0);
  CHECK(shared_experts_ffn_hidden_size(two.model) == 2 * 512);
  CHECK(shared_experts_ffn_hidden_size(wide.model) == 3000);
  // Per tensor rank: the SwiGLU FFN's three matrices split over tensor 2, the gate's h whole.
  CHECK(shared_expert_parameters_per_rank(two.model, 2) == Approx(3 * h * 1024 / 2));
  CHECK(shared_expert_parameters_per_rank(gated.model, 2) == Approx(3 * h * 3000 / 2 + h));
  CHECK(layer_parameters_per_rank(gated.model, 2, 1) - layer_parameters_per_rank(none.model, 2, 1) ==
        Approx(3 * h * 3000 / 2 + h));
  // Shared experts are active: the total and the active count grow alike.
  const ParameterCounts a = counts_of(none), b = counts_of(gated);
  CHECK(b.total - a.total == Approx(4 * (3 * h * 3000 + h)));
  CHECK(b.active - a.active == Approx(b.total - a.total));
  // Active: the attention and top 2 of the 8 experts (3·h·512 each) in each of the 4 layers.
  CHECK(a.total - a.active == Approx(4 * 6 * 3 * h * 512));
}

TEST_CASE("shared experts add a dense MLP's FLOPs on every token, whatever the capacity", "[moe][shared]")
{
  // Megatron's num_floating_point_operations (megatron/training/training.py): per MoE layer,
  // moe_shared_expert_intermediate_size × the gated-linear multiplier beside the routed experts.
  const double tokens = 2.0 * 2048, layers = 4, h = 1024, width = 2 * 512;
  for (double capacity : {0.5, 1.0, 1.5}) {
    nlohmann::json without = moe_scenario(1, 2, 1, 1, 0), with = moe_scenario(1, 2, 1, 1, 2);
    without["model"]["moe_capacity_factor"] = with["model"]["moe_capacity_factor"] = capacity;
    const Scenario a = scenario_from_json(without), b = scenario_from_json(with);
    CAPTURE(capacity);
    // Forward, input and weight gradients: 3 × 2 FLOPs per MAC × SwiGLU's 3 matrices.
    CHECK(model_flops_per_step(b) - model_flops_per_step(a) == Approx(3 * tokens * layers * 2 * 3 * h * width));
    CHECK(hardware_flops_per_step(b) - hardware_flops_per_step(a) ==
          Approx(3 * tokens * layers * 2 * 3 * h * width));
  }
}

TEST_CASE("shared experts lower to GEMMs on all the rank's tokens between the tensor group's collectives",
          "[moe][shared]")
{
  const int t = GENERATE(1, 2);
  const int m = 2, layers = 4;
  const double h = 1024, tokens = 2048, width = 3000, e = 2;
  const Scenario without = scenario_from_json(moe_scenario(t, 2, 2, m, 0));
  const Scenario with    = scenario_from_json(moe_scenario(t, 2, 2, m, 1, width, true));
  const Workload a = lower(without), b = lower(with);
  CAPTURE(t);
  // fc1 (gate and up, 2·width/t) and fc2 (width/t) over every token of the micro-batch; the gate a
  // GEMV over the rank's sequence shard of tokens/t.
  CHECK(work_flops(b, "moe_shared_experts_forward") ==
        Approx(2 * tokens * (2 * width / t) * h + 2 * tokens * h * (width / t) + 2 * (tokens / t) * h));
  // Backward: dgrads and wgrads, twice the forward's GEMMs; the split backward keeps the dgrads.
  CHECK(work_flops(b, "moe_shared_experts_backward") == Approx(2 * work_flops(b, "moe_shared_experts_forward")));
  CHECK(work_flops(b, "moe_shared_experts_backward_input") == Approx(work_flops(b, "moe_shared_experts_forward")));
  CHECK(work_flops(a, "moe_shared_experts_forward") == 0);
  for (Pass pass : {Pass::Forward, Pass::Backward}) {
    const Traffic ta = traffic(a.ranks[0], TaskKind::Compute, Stream::Compute, pass);
    const Traffic tb = traffic(b.ranks[0], TaskKind::Compute, Stream::Compute, pass);
    CHECK(tb.tasks - ta.tasks == layers * m); // one shared-expert task per layer and micro-batch
    const Traffic ca = traffic(a.ranks[0], TaskKind::Collective, Stream::Tensor, pass);
    const Traffic cb = traffic(b.ranks[0], TaskKind::Collective, Stream::Tensor, pass);
    // With tensor 2 an all-gather and a reduce-scatter of the layer's b·s·h activation each;
    // none at tensor 1. The expert all-to-alls are unchanged.
    CHECK(cb.tasks - ca.tasks == (t > 1 ? 2 * layers * m : 0));
    CHECK(cb.bytes - ca.bytes == Approx(t > 1 ? 2.0 * layers * m * tokens * h * e : 0.0));
    CHECK(traffic(b.ranks[0], TaskKind::Collective, Stream::Expert, pass).bytes ==
          Approx(traffic(a.ranks[0], TaskKind::Collective, Stream::Expert, pass).bytes));
  }
}

TEST_CASE("shared experts' weight gradients join the split backward's weight pass (ZB-H1)", "[moe][shared]")
{
  nlohmann::json doc = moe_scenario(1, 2, 2, 4, 1, 0, true);
  doc["parallelism"]["pipeline"]             = 2;
  doc["parallelism"]["schedule"]             = "zb_h1";
  doc["platform"]["node_groups"][0]["count"] = 4;
  doc["model"]["num_layers"]                 = 8;
  const Scenario s = scenario_from_json(doc);
  const Workload w = lower(s);
  for (const char* wgrad : {"shared_expert_fc1_wgrad", "shared_expert_fc2_wgrad", "shared_expert_gate_wgrad"}) {
    CAPTURE(wgrad);
    CHECK(work_has_kernel(w, "moe_backward_weight", wgrad));
    CHECK(work_has_kernel(w, "moe_shared_experts_backward", wgrad));
    CHECK_FALSE(work_has_kernel(w, "moe_shared_experts_backward_input", wgrad));
  }
  const Report r = simulate_isolated(s);
  CHECK(r.step_time_s > 0);
}

TEST_CASE("shared experts are dense parameters: reduced over all data ranks, sharded by ZeRO over them",
          "[moe][shared]")
{
  const double h = 1024, width = 2 * 512, layers = 4;
  const double shared = 3 * h * width; // per layer, tensor 1, no gate
  auto reduced_bytes = [](const Workload& w, bool experts) {
    double bytes = 0;
    const auto& r = w.ranks[0];
    for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
      const Task& task = r.graph[v];
      if (task.kind != TaskKind::Collective || task.stream != Stream::Data || task.op != CollectiveOp::AllReduce)
        continue;
      const bool expert_group = w.groups[static_cast<size_t>(task.group)].name.rfind("expert_data", 0) == 0;
      if (expert_group == experts)
        bytes += task.bytes;
    }
    return bytes;
  };
  const Scenario a = scenario_from_json(moe_scenario(1, 8, 4, 2, 0));
  const Scenario b = scenario_from_json(moe_scenario(1, 8, 4, 2, 2));
  const Workload wa = lower(a), wb = lower(b);
  // bf16 gradients (the generic profile reduces in the training precision).
  CHECK(reduced_bytes(wb, false) - reduced_bytes(wa, false) == Approx(layers * shared * 2).epsilon(0.001));
  CHECK(reduced_bytes(wb, true) == Approx(reduced_bytes(wa, true)));
  // ZeRO-1: Adam's 12 bytes per parameter of the shared experts over all 8 data ranks (the routed
  // experts' over the 2 that hold the same experts).
  nlohmann::json za = moe_scenario(1, 8, 4, 2, 0), zb = moe_scenario(1, 8, 4, 2, 2);
  za["parallelism"]["zero_stage"] = zb["parallelism"]["zero_stage"] = 1;
  const MemoryBreakdown ma = stage_memory(scenario_from_json(za), 0, 1, 1);
  const MemoryBreakdown mb = stage_memory(scenario_from_json(zb), 0, 1, 1);
  CHECK(mb.optimizer - ma.optimizer == Approx(12 * layers * shared / 8));
  CHECK(mb.weights - ma.weights == Approx(2 * layers * shared));
}

TEST_CASE("shared experts keep a dense MLP's activations at their width", "[moe][shared]")
{
  const int t = GENERATE(1, 2);
  const bool gate = GENERATE(false, true);
  const double sb = 2048, h = 1024, e = 2, width = 3000;
  const Scenario a = scenario_from_json(moe_scenario(t, 2, 1, 1, 0));
  const Scenario b = scenario_from_json(moe_scenario(t, 2, 1, 1, 1, width, gate));
  CAPTURE(t, gate);
  // fc1's input (a sequence shard with tensor 2's sequence parallelism), SwiGLU's two inputs and
  // fc2's input at width/t; with the gate, the shared output it scales, in sequence shards.
  const double expected = sb * e * (h / t + 2 * width / t + width / t) + (gate ? sb * h / t * e : 0);
  CHECK(layer_activation_bytes(b) - layer_activation_bytes(a) == Approx(expected));
}

TEST_CASE("a step with shared experts takes longer than one without", "[moe][shared]")
{
  const Report a = simulate_isolated(scenario_from_json(moe_scenario(2, 2, 2, 2, 0)));
  const Report b = simulate_isolated(scenario_from_json(moe_scenario(2, 2, 2, 2, 2, 2048, true)));
  CHECK(b.step_time_s > a.step_time_s);
  CHECK(b.model_flops_per_step > a.model_flops_per_step);
  CHECK(b.memory.weights > a.memory.weights);
}

TEST_CASE("an MoE HuggingFace config that names its experts only in part is refused, naming the field",
          "[moe][shared]")
{
  const nlohmann::json qwen2_moe = read_json_file(kModels + "qwen1.5-moe-a2.7b.json");
  auto problem = [](const nlohmann::json& c) {
    try {
      import_hf_config(c);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(problem(qwen2_moe).empty());
  for (const char* key : {"num_experts", "num_experts_per_tok", "moe_intermediate_size",
                          "shared_expert_intermediate_size"}) {
    nlohmann::json c = qwen2_moe;
    c.erase(key);
    CAPTURE(key);
    CHECK_THAT(problem(c), Catch::Contains(std::string(key) + ": missing in the HuggingFace config"));
  }
  // A Mixtral without its experts' count, or with the count but not the top k.
  const nlohmann::json mixtral = read_json_file(kModels + "mixtral-8x7b.json");
  CHECK(problem(mixtral).empty());
  nlohmann::json c = mixtral;
  c.erase("num_local_experts");
  CHECK_THAT(problem(c), Catch::Contains("num_local_experts: missing"));
  c = mixtral;
  c.erase("num_experts_per_tok");
  CHECK_THAT(problem(c), Catch::Contains("num_experts_per_tok: missing"));
  // Qwen3-MoE has no shared expert; the layers its config keeps dense must be layers of the model
  // (which ones stay dense: tests/test_moe_dense_layers.cpp).
  c = qwen2_moe;
  c["model_type"] = "qwen3_moe";
  CHECK_THAT(problem(c), Catch::Contains("shared_expert_intermediate_size: HuggingFace's qwen3_moe model does not "
                                         "read it"));
  c.erase("shared_expert_intermediate_size");
  CHECK(problem(c).empty());
  c["mlp_only_layers"] = {0, 1};
  CHECK(problem(c).empty());
  c["mlp_only_layers"] = {0, 1000};
  CHECK_THAT(problem(c), Catch::Contains("mlp_only_layers: 1000 is no layer index"));
}

// A mixture of experts whose layers are not all MoE layers (ModelSpec::first_dense_layers,
// moe_layer_freq; moe_layer() in sim/core/scenario.hpp): which layers stay dense, as Megatron-Core
// and DeepSeek pick them; Llama 4 Maverick's alternating layers against its published parameter
// counts; the FLOPs, the lowering (a stage of dense layers sends no token all-to-all and holds no
// experts) and the HuggingFace import of Qwen's dense layers.
#include "support.hpp"

#include "sim/core/report.hpp"
#include "sim/input/hf_config.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/simulate.hpp"
#include "workloads/lower.hpp"
#include "workloads/models/model_kind.hpp"
#include "workloads/models/moe.hpp"
#include "workloads/models/transformer.hpp"
#include "workloads/stage_memory.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace stepsim;
using testing::traffic;

namespace {

// A Llama-style MoE on single-GPU nodes: `layers` layers, hidden 1024, a dense FFN of 4096, 8
// experts of width 512, top 2.
nlohmann::json moe_scenario(int layers, int pipeline, int data, int expert, int micro_batches)
{
  nlohmann::json doc = testing::small_scenario(pipeline, data, micro_batches);
  doc["model"] = {{"num_layers", layers},  {"hidden_size", 1024}, {"num_attention_heads", 16},
                  {"num_query_groups", 4}, {"seq_length", 2048},  {"vocab_size", 32000},
                  {"mlp", "swiglu"},       {"norm", "rmsnorm"},   {"ffn_hidden_size", 4096},
                  {"num_experts", 8},      {"moe_top_k", 2},      {"moe_ffn_hidden_size", 512}};
  doc["parallelism"]["expert"]               = expert;
  doc["platform"]["node_groups"][0]["count"] = pipeline * data;
  return doc;
}

std::vector<bool> kinds(const ModelSpec& m)
{
  std::vector<bool> out;
  for (int i = 0; i < m.num_layers; ++i)
    out.push_back(moe_layer(m, i));
  return out;
}

} // namespace

TEST_CASE("a mixture of experts keeps the layers Megatron-Core and DeepSeek keep dense", "[moe][dense_layers]")
{
  // DeepSeek-V3 (config.json: first_k_dense_replace 3, moe_layer_freq 1): layers 0-2 dense.
  ModelSpec m;
  m.num_layers         = 6;
  m.num_experts        = 8;
  m.first_dense_layers = 3;
  CHECK(kinds(m) == std::vector<bool>{false, false, false, true, true, true});
  CHECK(moe_layer_count(m) == 3);
  // Megatron-Core's integer --moe-layer-freq 2: "1 if (i % config.moe_layer_freq == 0)".
  m.first_dense_layers = 0;
  m.moe_layer_freq     = 2;
  CHECK(kinds(m) == std::vector<bool>{true, false, true, false, true, false});
  // Both: DeepSeek's rule, layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq == 0.
  m.first_dense_layers = 1;
  CHECK(kinds(m) == std::vector<bool>{false, false, true, false, true, false});
  // The list form replaces both.
  m.moe_layer_pattern = {0, 1, 1, 0, 0, 1};
  CHECK(kinds(m) == std::vector<bool>{false, true, true, false, false, true});
  // A dense model has no MoE layer, whatever the fields say.
  m.num_experts = 0;
  CHECK(moe_layer_count(m) == 0);

  // As a scenario writes them.
  nlohmann::json doc                    = moe_scenario(4, 1, 1, 1, 1);
  doc["model"]["moe_layer_freq"]        = {0, 1, 0, 1};
  const Scenario listed                 = scenario_from_json(doc);
  CHECK(kinds(listed.model) == std::vector<bool>{false, true, false, true});
  doc["model"].erase("moe_layer_freq");
  doc["model"]["first_dense_layers"] = 1;
  CHECK(kinds(scenario_from_json(doc).model) == std::vector<bool>{false, true, true, true});
}

TEST_CASE("Llama 4 Maverick's alternating MoE layers: 400 B parameters, 17 B active", "[moe][dense_layers]")
{
  // Meta, "The Llama 4 herd" (ai.meta.com/blog/llama-4-multimodal-intelligence, April 2025):
  // "Llama 4 Maverick, a 17 billion active parameter model with 128 experts" and "400B total
  // parameters". Its HuggingFace config (meta-llama/Llama-4-Maverick-17B-128E, text_config):
  // 48 layers of hidden 5120, 40 query heads and 8 KV heads of head_dim 128, experts of
  // intermediate_size 8192 (one routed per token, num_experts_per_tok 1, and one shared,
  // Llama4TextMoe.shared_expert), dense layers of intermediate_size_mlp 16384, every second layer
  // a MoE layer (interleave_moe_layer_step 2), vocabulary 202048, untied. (HuggingFace makes the
  // odd layers the MoE ones, Megatron's moe_layer_freq 2 the even ones: the same counts.)
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["model"]       = {{"num_layers", 48},
                        {"hidden_size", 5120},
                        {"num_attention_heads", 40},
                        {"num_query_groups", 8},
                        {"head_dim", 128},
                        {"seq_length", 8192},
                        {"vocab_size", 202048},
                        {"mlp", "swiglu"},
                        {"norm", "rmsnorm"},
                        {"tied_embeddings", false},
                        {"ffn_hidden_size", 16384},
                        {"num_experts", 128},
                        {"moe_top_k", 1},
                        {"moe_ffn_hidden_size", 8192},
                        {"moe_shared_experts", 1},
                        {"moe_layer_freq", 2}};
  const Scenario s         = scenario_from_json(doc);
  const ParameterCounts c  = model_kind(s.model).parameter_counts(s);
  CHECK(moe_layer_count(s.model) == 24);
  CHECK(c.total == Approx(400e9).epsilon(0.01));
  CHECK(c.active == Approx(17e9).epsilon(0.02));
  CHECK(c.total == Approx(model_parameters(s.model)));
  // Every layer a MoE layer would be twice the experts: 789 B.
  doc["model"].erase("moe_layer_freq");
  CHECK(model_kind(s.model).parameter_counts(scenario_from_json(doc)).total > 1.9 * c.total);
}

TEST_CASE("a dense layer counts the dense MLP's FLOPs, a MoE layer its top_k experts'", "[moe][dense_layers]")
{
  const double tokens = 2.0 * 2048, h = 1024, ffn = 4096, expert = 512, top_k = 2;
  nlohmann::json all = moe_scenario(4, 1, 2, 1, 1), first = all;
  first["model"]["first_dense_layers"] = 1;
  const Scenario a = scenario_from_json(all), b = scenario_from_json(first);
  // Forward, input and weight gradients: 3 × 2 FLOPs per MAC × SwiGLU's 3 matrices, one layer.
  const double one_layer = 3 * tokens * 2 * 3 * h;
  CHECK(model_flops_per_step(b) - model_flops_per_step(a) == Approx(one_layer * (ffn - top_k * expert)));
  CHECK(hardware_flops_per_step(b) - hardware_flops_per_step(a) == Approx(one_layer * (ffn - top_k * expert)));
}

TEST_CASE("a stage of dense layers sends no token all-to-all and holds no experts", "[moe][dense_layers]")
{
  // 4 layers over 2 stages, the first 2 dense: stage 0 holds them, stage 1 the MoE layers.
  const int m        = 2;
  nlohmann::json doc = moe_scenario(4, 2, 2, 2, m);
  const Scenario all = scenario_from_json(doc);
  doc["model"]["first_dense_layers"] = 2;
  const Scenario s = scenario_from_json(doc);
  const Workload w = lower(s), wa = lower(all);
  const auto& stage0 = w.ranks[0];
  const auto& stage1 = w.ranks[w.ranks.size() - 1];
  REQUIRE(stage0.stage == 0);
  REQUIRE(stage1.stage == 1);
  for (Pass pass : {Pass::Forward, Pass::Backward}) {
    CAPTURE(static_cast<int>(pass));
    CHECK(traffic(stage0, TaskKind::Collective, Stream::Expert, pass).tasks == 0);
    CHECK(traffic(wa.ranks[0], TaskKind::Collective, Stream::Expert, pass).tasks > 0);
    CHECK(traffic(stage1, TaskKind::Collective, Stream::Expert, pass).tasks ==
          traffic(wa.ranks[wa.ranks.size() - 1], TaskKind::Collective, Stream::Expert, pass).tasks);
  }
  // Stage 0's weights: two dense layers (attention and a 4096-wide SwiGLU MLP) and the embedding;
  // no expert, no router.
  const ModelKind& kind = model_kind(s.model);
  const double attention = 1024.0 * (1024 + 2 * 256) + 1024.0 * 1024 + 2 * 1024;
  CHECK(kind.stage_parameters(s, 0) == Approx(2 * (attention + 3 * 1024.0 * 4096) + 32000.0 * 1024));
  CHECK(kind.footprint(s, 0, 1).expert_parameters == 0);
  CHECK(kind.footprint(s, 1, 1).expert_parameters == Approx(kind.footprint(all, 1, 1).expert_parameters));
  // The step runs, and its report counts the model's parameters by kind.
  const Report r = simulate_isolated(s);
  CHECK(r.step_time_s > 0);
  CHECK(r.model_flops_per_step == Approx(model_flops_per_step(s)));
  // The weights in memory follow the parameters: here the dense layers' 4096-wide MLP holds more
  // than the 4 local experts of 512 and the router.
  CHECK(stage_memory(s, 0, 1, 1).weights / stage_memory(all, 0, 1, 1).weights ==
        Approx(kind.stage_parameters(s, 0) / kind.stage_parameters(all, 0)));
  CHECK(kind.stage_parameters(s, 0) > kind.stage_parameters(all, 0));
}

TEST_CASE("dense layers among MoE ones under ZeRO-3 and full recompute", "[moe][dense_layers]")
{
  nlohmann::json doc                     = moe_scenario(4, 1, 4, 2, 2);
  doc["model"]["moe_layer_freq"]         = 2;
  doc["parallelism"]["zero_stage"]       = 3;
  doc["training"]["recompute"]           = "full";
  const Scenario s                       = scenario_from_json(doc);
  const Report r                         = simulate_isolated(s);
  CHECK(r.step_time_s > 0);
  // Full recompute keeps each layer's input alone; what one layer rebuilds is the widest layer's.
  doc["training"]["recompute"] = "none";
  CHECK(stage_memory(s, 0, 1, 1).activations < stage_memory(scenario_from_json(doc), 0, 1, 1).activations);
}

TEST_CASE("a Qwen MoE config's dense layers are imported as its model builds them", "[moe][dense_layers]")
{
  // Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer: a dense MLP where the index is in
  // mlp_only_layers or (index + 1) is not a multiple of decoder_sparse_step.
  nlohmann::json c = read_json_file(std::string(STEPSIM_SOURCE_DIR) + "/configs/models/qwen3-30b-a3b.json");
  c["num_hidden_layers"]   = 6;
  c["decoder_sparse_step"] = 2;
  c["mlp_only_layers"]     = {3};
  const ModelSpec m        = import_hf_config(c);
  CHECK(m.moe_layer_pattern == std::vector<int>{0, 1, 0, 0, 0, 1});
  // Every layer a MoE layer (step 1, no dense layer) writes no pattern.
  c["decoder_sparse_step"] = 1;
  c["mlp_only_layers"]     = nlohmann::json::array();
  CHECK(import_hf_config(c).moe_layer_pattern.empty());
}

// Multi-head latent attention (workloads/models/latent_attention.hpp): DeepSeek-V3's parameter
// counts against its report, the projections' kernels as Megatron-Core's MLASelfAttention runs them
// (the down projections on the rank's own tokens, the up projections over its heads), the FLOPs
// against Megatron's count, the activations the latents add, and the refusals.
#include "support.hpp"

#include "sim/core/report.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/simulate.hpp"
#include "workloads/lower.hpp"
#include "workloads/models/latent_attention.hpp"
#include "workloads/models/model_kind.hpp"
#include "workloads/models/transformer.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace stepsim;

namespace {

// A small MLA model on single-GPU nodes: 4 layers of hidden 1024, 16 heads of 64 + 32 (rotary)
// for queries and keys and 64 for values, latents of 384 (query) and 128 (key-value).
nlohmann::json mla_scenario(int tensor, int data)
{
  nlohmann::json doc = testing::small_scenario(1, data, 1);
  doc["model"] = {{"num_layers", 4},   {"hidden_size", 1024},    {"num_attention_heads", 16},
                  {"head_dim", 64},    {"qk_rope_head_dim", 32}, {"v_head_dim", 64},
                  {"q_lora_rank", 384}, {"kv_lora_rank", 128},   {"seq_length", 2048},
                  {"vocab_size", 32000}, {"mlp", "swiglu"},      {"norm", "rmsnorm"},
                  {"dropout", 0}};
  doc["training"]["attention"] = "flash";
  doc["parallelism"]["tensor"] = tensor;
  if (tensor > 1)
    doc["parallelism"]["sequence_parallel"] = true;
  doc["platform"]["node_groups"][0]["count"] = tensor * data;
  return doc;
}

const Kernel* find_kernel(const Workload& w, const std::string& work, const std::string& kernel)
{
  for (const Work& x : w.works)
    if (x.name == work)
      for (const Kernel& k : x.kernels)
        if (k.name == kernel)
          return &k;
  return nullptr;
}

} // namespace

TEST_CASE("DeepSeek-V3 counts 671 B parameters, 37 B active", "[mla]")
{
  // DeepSeek-AI, "DeepSeek-V3 Technical Report" (arXiv:2412.19437), abstract: "671B total
  // parameters with 37B activated for each token" (the main model; its multi-token prediction
  // module is not part of it). Its config.json: 61 layers of hidden 7168, 128 heads with
  // qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, q_lora_rank 1536, kv_lora_rank 512;
  // 256 routed experts of 2048 (8 per token) and one shared, first_k_dense_replace 3 with dense
  // layers of 18432; vocabulary 129280, untied.
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["model"]       = {{"num_layers", 61},         {"hidden_size", 7168},      {"num_attention_heads", 128},
                        {"head_dim", 128},          {"qk_rope_head_dim", 64},   {"v_head_dim", 128},
                        {"q_lora_rank", 1536},      {"kv_lora_rank", 512},      {"seq_length", 4096},
                        {"vocab_size", 129280},     {"mlp", "swiglu"},          {"norm", "rmsnorm"},
                        {"tied_embeddings", false}, {"dropout", 0},             {"ffn_hidden_size", 18432},
                        {"num_experts", 256},       {"moe_top_k", 8},           {"moe_ffn_hidden_size", 2048},
                        {"moe_shared_experts", 1},  {"first_dense_layers", 3}};
  const Scenario s        = scenario_from_json(doc);
  const ParameterCounts c = model_kind(s.model).parameter_counts(s);
  CHECK(c.total == Approx(671e9).epsilon(0.005));
  CHECK(c.active == Approx(37e9).epsilon(0.02));
  // The same from its HuggingFace config (configs/models/deepseek-v3.json).
  nlohmann::json imported  = testing::small_scenario(1, 1, 1);
  imported["model"]        = {{"hf_config", std::string(STEPSIM_SOURCE_DIR) + "/configs/models/deepseek-v3.json"},
                              {"seq_length", 4096}};
  const Scenario from_hf   = scenario_from_json(imported);
  const ModelSpec& m       = from_hf.model;
  CHECK(m.kv_lora_rank == 512);
  CHECK(m.q_lora_rank == 1536);
  CHECK(m.head_dim == 128);
  CHECK(m.qk_rope_head_dim == 64);
  CHECK(m.v_head_dim == 128);
  CHECK(m.num_experts == 256);
  CHECK(m.moe_top_k == 8);
  CHECK(m.moe_shared_experts == 1);
  CHECK(m.first_dense_layers == 3);
  CHECK(m.ffn_hidden_size == 18432);
  CHECK(moe_layer_count(m) == 58);
  const ParameterCounts ci = model_kind(m).parameter_counts(from_hf);
  CHECK(ci.total == Approx(c.total));
  CHECK(ci.active == Approx(c.active));
  // One layer's attention: q_down 7168 × 1536, q_norm, q_up 1536 × 128 × 192, kv_down 7168 × 576,
  // kv_norm, kv_up 512 × 128 × 256, output 128 × 128 × 7168.
  const double attention = 7168.0 * 1536 + 1536 + 1536.0 * 128 * 192 + 7168.0 * 576 + 512 + 512.0 * 128 * 256 +
                           128.0 * 128 * 7168;
  CHECK(latent_attention_parameters_per_rank(s.model, 1) == Approx(attention));
  // Over 8 tensor ranks the down projections and the latents' norms stay whole.
  const double whole = 7168.0 * 1536 + 1536 + 7168.0 * 576 + 512;
  CHECK(latent_attention_parameters_per_rank(s.model, 8) == Approx(whole + (attention - whole) / 8));
}

TEST_CASE("DeepSeek-V2-Lite, without a query latent, counts 15.7 B parameters", "[mla]")
{
  // huggingface.co/deepseek-ai/DeepSeek-V2-Lite, README: "DeepSeek-V2-Lite has 15.7B parameters";
  // its config.json: 27 layers of hidden 2048, 16 heads, q_lora_rank null (queries projected from
  // the hidden state), kv_lora_rank 512, 64 routed experts of 1408 (6 per token) and 2 shared,
  // first_k_dense_replace 1 with a dense layer of 10944, vocabulary 102400.
  nlohmann::json c = read_json_file(std::string(STEPSIM_SOURCE_DIR) + "/configs/models/deepseek-v3.json");
  c.update({{"model_type", "deepseek_v2"},        {"hidden_size", 2048},         {"num_hidden_layers", 27},
            {"num_attention_heads", 16},          {"num_key_value_heads", 16},   {"intermediate_size", 10944},
            {"moe_intermediate_size", 1408},      {"n_routed_experts", 64},      {"n_shared_experts", 2},
            {"num_experts_per_tok", 6},           {"first_k_dense_replace", 1},  {"q_lora_rank", nullptr},
            {"vocab_size", 102400}});
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["model"]       = {{"hf_config", testing::write_temp_file("deepseek_v2_lite.json", c.dump())}, {"seq_length", 4096}};
  const Scenario s   = scenario_from_json(doc);
  CHECK(s.model.q_lora_rank == 0);
  CHECK(model_kind(s.model).parameter_counts(s).total == Approx(15.7e9).epsilon(0.005));
}

TEST_CASE("latent attention's projections: down on the rank's own tokens, up over its heads", "[mla]")
{
  const int t = GENERATE(1, 2);
  CAPTURE(t);
  const Scenario s = scenario_from_json(mla_scenario(t, 2));
  const Workload w = lower(s);
  const double tokens = 2048, own = tokens / t, heads = 16.0 / t;
  const Kernel* q_down = find_kernel(w, "attention_forward", "q_down_proj");
  const Kernel* kv_down = find_kernel(w, "attention_forward", "kv_down_proj");
  const Kernel* q_up = find_kernel(w, "attention_forward", "q_up_proj");
  const Kernel* kv_up = find_kernel(w, "attention_forward", "kv_up_proj");
  const Kernel* out = find_kernel(w, "attention_forward", "attention_out");
  REQUIRE(q_down != nullptr);
  REQUIRE(kv_down != nullptr);
  REQUIRE(q_up != nullptr);
  REQUIRE(kv_up != nullptr);
  REQUIRE(out != nullptr);
  CHECK(q_down->m == own);
  CHECK(q_down->n == 384);
  CHECK(q_down->k == 1024);
  CHECK(kv_down->m == own);
  CHECK(kv_down->n == 128 + 32);
  CHECK(q_up->m == tokens);
  CHECK(q_up->n == heads * (64 + 32));
  CHECK(q_up->k == 384);
  CHECK(kv_up->n == heads * (64 + 64));
  CHECK(kv_up->k == 128);
  CHECK(out->n == 1024);
  CHECK(out->k == heads * 64);
  CHECK(find_kernel(w, "attention_forward", "qkv") == nullptr);
  // Backward: each projection's input gradient and weight gradient.
  for (const char* dgrad : {"q_up_proj_dgrad", "q_down_proj_dgrad", "kv_up_proj_dgrad", "kv_down_proj_dgrad"})
    CHECK(find_kernel(w, "attention_backward_input", dgrad) != nullptr);
  for (const char* wgrad : {"q_up_proj_wgrad", "q_down_proj_wgrad", "kv_up_proj_wgrad", "kv_down_proj_wgrad"})
    CHECK(find_kernel(w, "attention_backward_weight", wgrad) != nullptr);
  // The core: QKᵀ over heads of 96, PV over heads of 64, as heads of 80.
  const Kernel* core = find_kernel(w, "attention_forward", "flash_attention_fwd");
  REQUIRE(core != nullptr);
  CHECK(core->k == 80);
  CHECK(core->batch == heads);
  const Report r = simulate_isolated(s);
  CHECK(r.step_time_s > 0);
}

TEST_CASE("latent attention's FLOPs are Megatron's count", "[mla]")
{
  // megatron/training/training.py, num_floating_point_operations under multi_latent_attention, per
  // token and layer, forward: 2 × (q_lora × (h + heads × q_head_dim) + kv_lora × (h + heads ×
  // (qk_head_dim + v_head_dim)) + h × qk_pos_emb_head_dim + heads × v_head_dim × h) for the
  // projections (less the latents' norms), and the core's QKᵀ and PV over the sequence.
  const Scenario s = scenario_from_json(mla_scenario(1, 1));
  const double h = 1024, heads = 16, qk = 96, v = 64, rope = 32, q_lora = 384, kv_lora = 128, seq = 2048;
  const double projections = q_lora * (h + heads * qk) + kv_lora * (h + heads * (64 + v)) + h * rope + heads * v * h;
  const double core        = 2 * seq * heads * qk + 2 * seq * heads * v;
  const double mlp         = 3 * h * 4096;
  const double per_token   = 4 * (2 * (projections + mlp) + core) + 2 * h * 32000;
  CHECK(model_flops_per_step(s) == Approx(3 * s.training.global_batch_size * seq * per_token));
}

TEST_CASE("latent attention keeps its latents on the rank's own tokens", "[mla]")
{
  // Widening the key-value latent by 128 adds, per token, its norm's input and the up projection's
  // input (2 + 2 bytes each): on every token without sequence parallelism, on 1/t of them with it.
  const int t = GENERATE(1, 2);
  CAPTURE(t);
  nlohmann::json narrow = mla_scenario(t, 1), wide = narrow;
  wide["model"]["kv_lora_rank"] = 256;
  const double tokens = 2048;
  CHECK(layer_activation_bytes(scenario_from_json(wide)) - layer_activation_bytes(scenario_from_json(narrow)) ==
        Approx(tokens / t * 128 * 4));
}

TEST_CASE("latent attention's fields are refused where they cannot hold", "[mla]")
{
  auto problems = [](nlohmann::json doc) { return testing::input_problems([&] { scenario_from_json(doc); }); };
  nlohmann::json doc = mla_scenario(1, 1);
  doc["model"].erase("head_dim");
  CHECK_THAT(problems(doc), Catch::Contains("model.head_dim: expected with multi-head latent attention"));
  doc = mla_scenario(1, 1);
  doc["model"].erase("kv_lora_rank");
  CHECK_THAT(problems(doc), Catch::Contains("model.q_lora_rank: needs multi-head latent attention"));
  doc = mla_scenario(1, 1);
  doc["model"]["num_query_groups"] = 4;
  CHECK_THAT(problems(doc), Catch::Contains("model.num_query_groups: 4: multi-head latent attention projects"));
  doc = mla_scenario(1, 2);
  doc["parallelism"]["data"]    = 1;
  doc["parallelism"]["context"] = 2;
  CHECK_THAT(problems(doc), Catch::Contains("parallelism.context: 2: multi-head latent attention"));
}

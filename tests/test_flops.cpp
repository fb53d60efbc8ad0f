#include "support.hpp"

#include "sim/input/hf_config.hpp"

#include "sim/simulate.hpp"
#include "workloads/lower.hpp"
#include "workloads/models/transformer.hpp"

#include <catch2/catch.hpp>

#include <list>
#include <map>

using namespace stepsim;

TEST_CASE("model FLOPs per step equal Megatron's 72·B·s·l·h²·(1 + s/6h + V/12lh)")
{
  struct Case {
    int l, h, a, s, V, B;
  };
  auto c = GENERATE(Case{96, 12288, 96, 2048, 51200, 1536}, Case{24, 2304, 24, 2048, 51200, 512},
                    Case{42, 4096, 32, 1024, 51200, 16}, Case{128, 25600, 160, 2048, 51200, 3072});
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["model"]       = {{"num_layers", c.l}, {"hidden_size", c.h}, {"num_attention_heads", c.a},
                        {"seq_length", c.s}, {"vocab_size", c.V}};
  doc["training"]["global_batch_size"] = c.B;
  Scenario s      = scenario_from_json(doc);
  double B = c.B, seq = c.s, l = c.l, h = c.h, V = c.V;
  double megatron = 72.0 * B * seq * l * h * h * (1 + seq / (6 * h) + V / (12 * l * h));
  CHECK(model_flops_per_step(s) == Approx(megatron).epsilon(0.001));
  // Full recompute: Megatron's 96·B·s·l·h²(...) counts the recomputed forward (the head is not
  // recomputed, which the formula ignores).
  s.training.recompute = "full";
  double with_recompute = 96.0 * B * seq * l * h * h * (1 + seq / (6 * h) + V / (16 * l * h));
  CHECK(hardware_flops_per_step(s) == Approx(with_recompute).epsilon(0.001));
}

TEST_CASE("parameter count of GPT-3 175B")
{
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["model"] = {{"num_layers", 96}, {"hidden_size", 12288}, {"num_attention_heads", 96}, {"seq_length", 2048},
                  {"vocab_size", 51200}};
  Scenario s   = scenario_from_json(doc);
  CHECK(model_parameters(s.model) == Approx(174.6e9).epsilon(0.01));
}

TEST_CASE("HuggingFace import of Llama-2-7B gives 6.74 B parameters")
{
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["model"]       = {{"hf_config", std::string(STEPSIM_SOURCE_DIR) + "/configs/models/llama-2-7b.json"}};
  Scenario s         = scenario_from_json(doc);
  CHECK(s.model.num_layers == 32);
  CHECK(s.model.mlp == "swiglu");
  CHECK(model_parameters(s.model) == Approx(6.738e9).epsilon(0.005));
  // modeling_llama.py adds its residuals without dropout; a field next to hf_config overrides.
  CHECK(s.model.dropout == 0);
  doc["model"]["dropout"] = 0.1;
  CHECK(scenario_from_json(doc).model.dropout == Approx(0.1));
}

TEST_CASE("HuggingFace import of Qwen3-30B-A3B takes its head_dim: 30.5 B parameters, Megatron's FLOPs")
{
  // Qwen/Qwen3-30B-A3B's model card: 30.5 B parameters in all. Its 32 heads of
  // 128 (head_dim) make the query 4096 wide over a hidden size of 2048; with heads of 2048 / 32 =
  // 64 the attention would hold 9.4 M parameters a layer, not 18.9 M (0.45 B fewer in all).
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["model"]       = {{"hf_config", std::string(STEPSIM_SOURCE_DIR) + "/configs/models/qwen3-30b-a3b.json"}};
  Scenario s         = scenario_from_json(doc);
  CHECK(s.model.head_dim == 128);
  CHECK(attention_width(s.model) == 4096);
  CHECK(kv_width(s.model) == 512);
  CHECK(model_parameters(s.model) == Approx(30.53e9).epsilon(0.005));
  const double h = 2048, layers = 48, vocab = 151936;
  // Megatron's FLOPs (num_floating_point_operations: query_projection_size = kv_channels × heads)
  // per token and layer: 2·(h·(q + 2kv) + q·h) for the projections, 4·s·q for attention, the
  // experts' 2·3·h·ffn·top_k; a head of 64 would count 3.2 % fewer over a 4,096-token sequence.
  s.model.seq_length                 = 4096;
  s.training.global_batch_size       = 1;
  const double q = 4096, kv = 512, seq = 4096;
  const double per_token = layers * (2 * (h * (q + 2 * kv) + q * h + 3 * h * 768 * 8) + 4 * seq * q) + 2 * h * vocab;
  CHECK(model_flops_per_step(s) == Approx(3 * seq * per_token).epsilon(1e-9));
  // A scenario's own head_dim overrides the file's; without one the hidden size must divide.
  doc["model"]["head_dim"] = 64;
  CHECK(attention_width(scenario_from_json(doc).model) == 2048);
}

TEST_CASE("HuggingFace import of a GPT-2 config takes its residual dropout")
{
  const auto gpt2 = [](nlohmann::json extra) {
    nlohmann::json c = {{"model_type", "gpt2"}, {"n_layer", 12}, {"n_embd", 768}, {"n_head", 12}, {"vocab_size", 50257}};
    c.update(extra);
    return import_hf_config(c);
  };
  CHECK(gpt2(nlohmann::json::object()).dropout == Approx(0.1)); // GPT2Config's default resid_pdrop
  CHECK(gpt2({{"resid_pdrop", 0.0}}).dropout == 0);
  CHECK_THROWS_WITH(gpt2({{"resid_pdrop", 1.5}}), Catch::Contains("resid_pdrop"));
}

namespace {
// The works of the scenario's lowering by name; the lowering is kept in `kept`, which the map
// points into.
std::map<std::string, const Work*> works_by_name(const nlohmann::json& doc, std::list<Workload>& kept)
{
  std::map<std::string, const Work*> by_name;
  kept.push_back(lower(scenario_from_json(doc)));
  for (const Work& w : kept.back().works)
    by_name.emplace(w.name, &w);
  return by_name;
}
} // namespace

TEST_CASE("model.head_dim widens the query, the attention and the output projection, not the residual stream")
{
  // Qwen3-30B-A3B's attention (32 heads of 128, 4 key/value groups, hidden 2048) at tensor 2: the
  // QKV GEMM writes (4096 + 2·512) / 2 columns, attention runs 16 heads of 128 per rank, and the
  // output projection reads 4096 / 2 and writes the hidden size; without head_dim the heads are
  // 64 wide and the query 2048.
  nlohmann::json doc = testing::small_scenario(1, 2, 1);
  doc["parallelism"]["tensor"] = 2; // the two GPUs as one tensor group
  doc["parallelism"]["data"]   = 1;
  doc["model"]       = {{"num_layers", 2},   {"hidden_size", 2048}, {"num_attention_heads", 32}, {"num_query_groups", 4},
                        {"seq_length", 1024}, {"vocab_size", 32000}, {"mlp", "swiglu"},          {"norm", "rmsnorm"},
                        {"dropout", 0.0}};
  doc["parallelism"]["sequence_parallel"] = true;
  std::list<Workload> kept;
  auto find = [](const std::map<std::string, const Work*>& works, const std::string& name) {
    for (const auto& [work, w] : works)
      for (const Kernel& k : w->kernels)
        if (k.name == name)
          return k;
    FAIL("no kernel " << name);
    return Kernel{};
  };
  const auto plain = works_by_name(doc, kept);
  CHECK(find(plain, "qkv").n == (2048 + 2 * 256) / 2);
  CHECK(find(plain, "attention_out").k == 2048 / 2);
  CHECK(find(plain, "flash_attention_fwd").k == 64);
  doc["model"]["head_dim"] = 128;
  const auto wide = works_by_name(doc, kept);
  CHECK(find(wide, "qkv").n == (4096 + 2 * 512) / 2);
  CHECK(find(wide, "qkv").k == 2048);
  CHECK(find(wide, "attention_out").k == 4096 / 2);
  CHECK(find(wide, "attention_out").n == 2048);
  CHECK(find(wide, "flash_attention_fwd").k == 128);
  CHECK(find(wide, "fc1").k == 2048); // the MLP reads the hidden size as before
  // Its activations keep the wider Q and attention output: more per layer than with heads of 64.
  Scenario s_plain = scenario_from_json(doc);
  s_plain.model.head_dim = 0;
  CHECK(layer_activation_bytes(scenario_from_json(doc)) > layer_activation_bytes(s_plain));
}

TEST_CASE("pytorch-autocast adds autocast's casts and fp32 norms as bytes, never FLOPs, and nothing to an fp32 run")
{
  // FrameworkProfile::eager_autocast (workloads/frameworks/pytorch_autocast.cpp): the same GEMMs and
  // attention as the fused lowering, plus bandwidth-bound work: the weights cast down each forward
  // (4 + 2 bytes per parameter), LayerNorm in fp32, the cast after it, the gradients cast back up.
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["model"]       = {{"num_layers", 2},        {"hidden_size", 1024}, {"num_attention_heads", 16},
                        {"seq_length", 2048},     {"vocab_size", 50304}, {"norm", "layernorm"}};
  doc["training"]["micro_batch_size"]  = 4;
  doc["training"]["global_batch_size"] = 4;
  doc["training"]["precision"]         = "bf16";
  std::list<Workload> kept; // every lowering kept whole: the maps below point into it
  auto works = [&](const std::string& framework, const std::string& precision) {
    doc["training"]["framework"] = framework;
    doc["training"]["precision"] = precision;
    return works_by_name(doc, kept);
  };
  auto bytes = [](const Work& w, const std::string& kernel = "") {
    double sum = 0;
    for (const Kernel& k : w.kernels)
      if (k.kind == KernelKind::Memory && (kernel.empty() || k.name == kernel))
        sum += k.bytes;
    return sum;
  };
  const auto fused    = works("generic", "bf16");
  const auto autocast = works("pytorch-autocast", "bf16");
  for (const char* name : {"attention_forward", "mlp_forward", "attention_backward", "mlp_backward", "head_forward",
                           "head_backward"}) {
    INFO(name);
    REQUIRE(fused.count(name) == 1);
    REQUIRE(autocast.count(name) == 1);
    CHECK(autocast.at(name)->flops() == Approx(fused.at(name)->flops()));
    CHECK(bytes(*autocast.at(name)) > bytes(*fused.at(name)));
  }
  const double h = 1024, tokens = 4.0 * 2048;
  const double attention_weights = h * 3 * h + h * h + 3 * h + h; // QKV and projection, with biases
  CHECK(bytes(*autocast.at("attention_forward"), "attention_weight_cast") == Approx(attention_weights * 6));
  CHECK(bytes(*autocast.at("attention_forward"), "input_norm") == Approx(tokens * h * 2 * 4)); // fp32 in and out
  CHECK(bytes(*autocast.at("attention_forward"), "input_norm_cast") == Approx(tokens * h * 6));
  CHECK(bytes(*fused.at("attention_forward"), "input_norm") == Approx(tokens * h * 2 * 2));
  // Autocast does nothing to an fp32 run: the same kernels as the fused lowering.
  const auto fp32_fused = works("generic", "fp32"), fp32_autocast = works("pytorch-autocast", "fp32");
  for (const char* name : {"attention_forward", "mlp_backward", "head_backward"}) {
    INFO(name);
    CHECK(fp32_autocast.at(name)->kernels.size() == fp32_fused.at(name)->kernels.size());
    CHECK(bytes(*fp32_autocast.at(name)) == bytes(*fp32_fused.at(name)));
  }
}

TEST_CASE("torchtitan runs Llama's RMSNorm, rotary embedding and SwiGLU as eager PyTorch ops: bytes and launches, "
          "never FLOPs")
{
  // FrameworkProfile::eager_ops (workloads/frameworks/torchtitan.cpp): the GEMMs and the attention
  // of pytorch-fsdp's lowering, and each op of Meta's reference Llama as a kernel of its own.
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["model"] = {{"num_layers", 2},    {"hidden_size", 1024}, {"num_attention_heads", 16}, {"num_query_groups", 4},
                  {"seq_length", 2048}, {"vocab_size", 32000}, {"ffn_hidden_size", 2816},  {"mlp", "swiglu"},
                  {"norm", "rmsnorm"}};
  doc["training"]["micro_batch_size"]  = 2;
  doc["training"]["global_batch_size"] = 2;
  doc["training"]["precision"]         = "bf16";
  std::list<Workload> kept;
  auto works = [&](const std::string& framework) {
    doc["training"]["framework"] = framework;
    return works_by_name(doc, kept);
  };
  auto sum = [](const Work& w, const std::string& kernel, bool launches) {
    double total = 0;
    for (const Kernel& k : w.kernels)
      if (k.kind == KernelKind::Memory && (kernel.empty() || k.name == kernel))
        total += launches ? k.launches : k.bytes;
    return total;
  };
  const auto fused = works("pytorch-fsdp");
  const auto eager = works("torchtitan");
  for (const char* name : {"attention_forward", "mlp_forward", "attention_backward", "mlp_backward", "head_forward",
                           "head_backward"}) {
    INFO(name);
    CHECK(eager.at(name)->flops() == Approx(fused.at(name)->flops()));
    CHECK(sum(*eager.at(name), "", false) > sum(*fused.at(name), "", false));
    CHECK(sum(*eager.at(name), "", true) > sum(*fused.at(name), "", true));
  }
  const double h = 1024, kv = 256, ffn = 2816, tokens = 2.0 * 2048, a = 2;
  const auto& attention = *eager.at("attention_forward");
  CHECK(sum(attention, "input_norm", false) == Approx(tokens * h * (28 + 4 * a)));   // fused: 2a
  CHECK(sum(*fused.at("attention_forward"), "input_norm", false) == Approx(tokens * h * 2 * a));
  CHECK(sum(attention, "input_norm", true) == 8);
  CHECK(sum(attention, "rotary_embedding", false) == Approx(tokens * (h + kv) * (16 + 2 * a)));
  CHECK(sum(attention, "repeat_kv", false) == Approx(tokens * 2 * (kv + h) * a));  // grouped-query keys and values
  CHECK(sum(attention, "attention_output_copy", false) == Approx(tokens * h * 2 * a));
  CHECK(sum(*eager.at("mlp_forward"), "swiglu", false) == Approx(tokens * ffn * 5 * a)); // fused: 3a
  CHECK(sum(*fused.at("mlp_forward"), "swiglu", false) == Approx(tokens * ffn * 3 * a));
  CHECK(sum(*eager.at("attention_backward"), "input_norm_bwd", false) == Approx(tokens * h * (8 * a + 60)));
  CHECK(sum(*eager.at("mlp_backward"), "activation_bwd", false) == Approx(tokens * ffn * 9 * a));
  CHECK(fused.at("attention_forward")->kernels.size() < attention.kernels.size());
  // Multi-head attention repeats no keys and values.
  doc["model"]["num_query_groups"] = 16;
  CHECK(sum(*works("torchtitan").at("attention_forward"), "repeat_kv", false) == 0);
  // A GPT's nn.LayerNorm is one kernel eagerly too, and it has no rotary embedding.
  doc["model"]["norm"]  = "layernorm";
  const auto gpt        = works("torchtitan");
  CHECK(sum(*gpt.at("attention_forward"), "input_norm", false) == Approx(tokens * h * 2 * a));
  CHECK(sum(*gpt.at("attention_forward"), "rotary_embedding", false) == 0);
  CHECK(sum(*gpt.at("attention_forward"), "attention_output_copy", false) == Approx(tokens * h * 2 * a));
}

TEST_CASE("An fp8 run casts the linear layers' operands as Transformer Engine does and keeps the rest in bf16")
{
  // transformer.cpp stored_element_bytes: FP8 GEMM operands with bf16 results; norms, activation
  // functions, attention, the residual stream and the loss in bf16; a cast and transpose of every
  // linear layer's input a bf16 kernel wrote and of every output gradient; Megatron's output
  // layer (not a Transformer Engine module) in bf16.
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["model"] = {{"num_layers", 2},    {"hidden_size", 1024}, {"num_attention_heads", 16}, {"seq_length", 2048},
                  {"vocab_size", 50304}, {"norm", "rmsnorm"},  {"mlp", "swiglu"},          {"ffn_hidden_size", 2816},
                  {"dropout", 0}};
  doc["platform"]["node_groups"][0]["gpu"] = "H100-SXM";
  doc["training"]["framework"]             = "megatron-core";
  std::list<Workload> kept;
  auto works = [&](const std::string& precision) {
    doc["training"]["precision"] = precision;
    return works_by_name(doc, kept);
  };
  auto find = [](const Work& w, const std::string& name) -> const Kernel* {
    for (const Kernel& k : w.kernels)
      if (k.name == name)
        return &k;
    return nullptr;
  };
  auto kernel = [&](const Work& w, const std::string& name) -> const Kernel& {
    const Kernel* k = find(w, name);
    INFO(w.name << " has no kernel " << name);
    REQUIRE(k != nullptr);
    return *k;
  };
  const auto bf16 = works("bf16");
  const auto fp8  = works("fp8");
  const double h = 1024, tokens = 2048, ffn = 2816;
  for (const char* name : {"attention_forward", "mlp_forward", "attention_backward", "mlp_backward", "head_forward",
                           "head_backward"}) {
    INFO(name);
    CHECK(fp8.at(name)->flops() == Approx(bf16.at(name)->flops())); // casts are bytes, never FLOPs
  }
  // The residual stream and the loss in bf16, byte for byte as a bf16 run's.
  CHECK(kernel(*fp8.at("attention_forward"), "residual_add").bytes ==
        Approx(kernel(*bf16.at("attention_forward"), "residual_add").bytes));
  CHECK(kernel(*fp8.at("head_forward"), "cross_entropy").bytes ==
        Approx(kernel(*bf16.at("head_forward"), "cross_entropy").bytes));
  // The norm before QKV reads bf16 and writes FP8 (layernorm_fwd_fp8); the projection's bf16
  // input is cast and transposed: 2 bytes read, 1 + 1 written.
  CHECK(kernel(*fp8.at("attention_forward"), "input_norm").bytes == Approx(tokens * h * 3));
  CHECK(kernel(*fp8.at("attention_forward"), "attention_out_fp8_cast").bytes == Approx(tokens * h * 4));
  CHECK(find(*bf16.at("attention_forward"), "attention_out_fp8_cast") == nullptr);
  // Backward: output gradients cast before the dgrad, FP8 inputs transposed for the wgrad.
  CHECK(kernel(*fp8.at("mlp_backward"), "fc2_grad_fp8_cast").bytes == Approx(tokens * h * 4));
  CHECK(kernel(*fp8.at("mlp_backward"), "fc2_input_fp8_transpose").bytes == Approx(tokens * ffn * 2));
  CHECK(kernel(*fp8.at("attention_backward"), "qkv_grad_fp8_cast").bytes == Approx(tokens * 3 * h * 4));
  // The linear layers' GEMMs take FP8 operands at the run's precision; the output layer's run bf16.
  const Kernel& qkv = kernel(*fp8.at("attention_forward"), "qkv");
  CHECK(qkv.element_bytes == 1);
  CHECK(qkv.precision.empty());
  CHECK(qkv.bytes == Approx(tokens * h + h * 3 * h + tokens * 3 * h * 2)); // bf16 result
  const Kernel& logits = kernel(*fp8.at("head_forward"), "logits");
  CHECK(logits.precision == "bf16");
  CHECK(logits.element_bytes == 2);
  // What crosses a pipeline or tensor-parallel boundary is bf16 too.
  doc["training"]["precision"] = "fp8";
  CHECK(activation_bytes(scenario_from_json(doc)) == Approx(tokens * h * 2));
}

// torch.compile over torchtitan's eager Llama (training.compile) and torchao's float8 training
// (FrameworkProfile::fp8_dynamic_scaling, parallelism.fsdp.float8_all_gather): the kernels each
// lowers, the memory kept, the bytes gathered, and the inputs refused. The expected bytes are
// written out here from torchao's casts (torchao/float8/float8_linear.py), not taken from the code
// under test.
#include "support.hpp"

#include "sim/simulate.hpp"
#include "workloads/lower.hpp"
#include "workloads/models/transformer.hpp"
#include "workloads/stage_memory.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

using namespace stepsim;

namespace {

// A Llama-shaped model on small_scenario's GPUs, FSDP over 8 ranks, under torchtitan.
nlohmann::json llama()
{
  nlohmann::json doc = testing::small_scenario(1, 8, 1);
  doc["platform"]["node_groups"][0]["gpu"] = "H100-SXM"; // FP8 tensor cores
  doc["model"] = {{"num_layers", 4},       {"hidden_size", 1024}, {"num_attention_heads", 16},
                  {"num_query_groups", 4}, {"seq_length", 2048},  {"vocab_size", 32000},
                  {"ffn_hidden_size", 2816}, {"mlp", "swiglu"},   {"norm", "rmsnorm"},
                  {"dropout", 0.0}};
  doc["training"]["micro_batch_size"]  = 1;
  doc["training"]["global_batch_size"] = 8;
  doc["training"]["framework"]         = "torchtitan";
  doc["parallelism"]["zero_stage"]     = 3;
  return doc;
}

// The lowered scenario's work of that name.
const Work& work(const Workload& w, const std::string& name)
{
  const auto it = std::find_if(w.works.begin(), w.works.end(), [&](const Work& x) { return x.name == name; });
  REQUIRE(it != w.works.end());
  return *it;
}

double bytes_of(const Work& w, const std::string& kernel)
{
  double bytes = 0;
  for (const Kernel& k : w.kernels)
    if (k.name == kernel)
      bytes += k.bytes;
  return bytes;
}

double total_bytes(const Work& w)
{
  double bytes = 0;
  for (const Kernel& k : w.kernels)
    bytes += k.bytes;
  return bytes;
}

// The bytes of every parameter all-gather on the first simulated rank, in order.
std::vector<double> gathered_bytes(const nlohmann::json& doc)
{
  const Workload w = lower(scenario_from_json(doc));
  std::vector<double> out;
  const auto& r = w.ranks.front();
  for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
    const Task& t = r.graph[v];
    if (t.kind == TaskKind::Collective && t.op == CollectiveOp::AllGather && t.pass == Pass::Forward &&
        t.micro_batch == 0)
      out.push_back(t.bytes);
  }
  return out;
}

std::string run_json(const nlohmann::json& doc)
{
  const std::string path = testing::write_temp_file("compile.json", doc.dump());
  const auto r           = testing::run_stepsim("run " + path + " --json -");
  REQUIRE(r.exit_code == 0);
  return r.output;
}

} // namespace

TEST_CASE("torch.compile runs torchtitan's Llama as fused kernels: the bytes of a framework of fused kernels, a "
          "shorter step, and the report says so")
{
  nlohmann::json doc = llama();
  const auto eager = lower(scenario_from_json(doc));
  doc["training"]["compile"] = true;
  const auto compiled = lower(scenario_from_json(doc));
  nlohmann::json fused = llama();
  fused["training"]["framework"] = "generic";
  const auto generic = lower(scenario_from_json(fused));

  const double tokens = 2048, h = 1024;
  // Eagerly, RMSNorm is six PyTorch ops over fp32 copies (28 + 4·2 bytes per element); Inductor's
  // kernel reads the input and writes the output (2 · 2).
  CHECK(bytes_of(work(eager, "attention_forward"), "input_norm") == Approx(tokens * h * 36));
  CHECK(bytes_of(work(compiled, "attention_forward"), "input_norm") == Approx(tokens * h * 4));
  for (const char* name : {"rotary_embedding", "repeat_kv", "attention_output_copy"}) {
    INFO(name);
    CHECK(bytes_of(work(eager, "attention_forward"), name) > 0);
    CHECK(bytes_of(work(compiled, "attention_forward"), name) == 0);
  }
  for (const char* name : {"attention_forward", "mlp_forward", "attention_backward", "mlp_backward"}) {
    INFO(name);
    CHECK(total_bytes(work(compiled, name)) == Approx(total_bytes(work(generic, name))));
    CHECK(total_bytes(work(compiled, name)) < total_bytes(work(eager, name)));
    CHECK(work(compiled, name).flops() == Approx(work(eager, name).flops()));
  }

  doc["training"]["compile"] = false;
  const auto eager_report    = nlohmann::json::parse(run_json(doc));
  doc["training"]["compile"] = true;
  const auto compiled_report = nlohmann::json::parse(run_json(doc));
  CHECK(compiled_report.at("step_time_s").get<double>() < eager_report.at("step_time_s").get<double>());
  CHECK(compiled_report.at("framework").get<std::string>() == "torchtitan (torch.compile)");
  CHECK(eager_report.at("framework").get<std::string>() == "torchtitan");
}

TEST_CASE("torchao's float8 under torchtitan: bf16 inputs kept, each cast after a reduction for its scale, the "
          "weights cast every pass unless FSDP gathers them in float8")
{
  nlohmann::json doc            = llama();
  doc["training"]["compile"]    = true;
  const Scenario bf16           = scenario_from_json(doc);
  doc["training"]["precision"]  = "fp8";
  const Scenario torchao        = scenario_from_json(doc);
  nlohmann::json te             = doc;
  te["training"]["framework"]   = "generic";
  te["training"].erase("compile");
  const Scenario transformer_engine = scenario_from_json(te);
  // matmul_with_hp_or_float8_args saves the bf16 input; Transformer Engine saves its FP8 copy.
  CHECK(layer_activation_bytes(torchao) == Approx(layer_activation_bytes(bf16)));
  CHECK(layer_activation_bytes(transformer_engine) < layer_activation_bytes(bf16));

  const auto ao = lower(scenario_from_json(doc));
  const double tokens = 2048, h = 1024, kv = 256, ffn = 2816, a = 2;
  const double attention_weights = h * (h + 2 * kv) + h * h, mlp_weights = 3 * h * ffn;
  // A tensor just written: read once, written in FP8 (a + 1); an output gradient in both layouts
  // (a + 2); a saved input or a weight read for its maximum first (2a + 1).
  CHECK(bytes_of(work(ao, "attention_forward"), "input_norm_cast") == Approx(tokens * h * (a + 1)));
  CHECK(bytes_of(work(ao, "attention_forward"), "attention_out_fp8_cast") == Approx(tokens * h * (a + 1)));
  CHECK(bytes_of(work(ao, "mlp_forward"), "fc2_input_fp8_cast") == Approx(tokens * ffn * (a + 1)));
  CHECK(bytes_of(work(ao, "mlp_backward"), "fc1_grad_fp8_cast") == Approx(tokens * 2 * ffn * (a + 2)));
  CHECK(bytes_of(work(ao, "attention_backward"), "qkv_input_fp8_recast") == Approx(tokens * h * (2 * a + 1)));
  CHECK(bytes_of(work(ao, "mlp_backward"), "fc2_input_fp8_recast") == Approx(tokens * ffn * (2 * a + 1)));
  CHECK(bytes_of(work(ao, "attention_forward"), "attention_weight_fp8_cast") ==
        Approx(attention_weights * (2 * a + 1)));
  CHECK(bytes_of(work(ao, "mlp_backward"), "mlp_weight_fp8_cast_bwd") == Approx(mlp_weights * (2 * a + 1)));
  // Transformer Engine's norm writes FP8 itself and its weight gradients read FP8 transposes.
  const auto engine = lower(scenario_from_json(te));
  CHECK(bytes_of(work(engine, "attention_forward"), "input_norm_cast") == 0);
  CHECK(bytes_of(work(engine, "attention_backward"), "qkv_input_fp8_transpose") == Approx(tokens * h * 2));
  CHECK(total_bytes(work(ao, "mlp_backward")) > total_bytes(work(engine, "mlp_backward")));

  // Gathered in float8: no weight casts, and each block's all-gather carries a byte per
  // parameter where the embedding's carries two.
  const std::vector<double> bf16_gathers = gathered_bytes(doc);
  doc["parallelism"]["fsdp"]             = {{"float8_all_gather", true}};
  const auto gathered                    = lower(scenario_from_json(doc));
  CHECK(bytes_of(work(gathered, "attention_forward"), "attention_weight_fp8_cast") == 0);
  CHECK(bytes_of(work(gathered, "mlp_backward"), "mlp_weight_fp8_cast_bwd") == 0);
  const std::vector<double> fp8_gathers = gathered_bytes(doc);
  REQUIRE(fp8_gathers.size() == bf16_gathers.size());
  REQUIRE(fp8_gathers.size() >= 5); // the embedding, then the four blocks
  CHECK(fp8_gathers.front() == Approx(bf16_gathers.front()));
  for (size_t i = 1; i < 5; ++i)
    CHECK(fp8_gathers[i] == Approx(bf16_gathers[i] / 2));

  // At Llama 3 8B's width the GEMMs at the FP8 rate outrun the casts (at the small width above,
  // with every weight cast twice for one micro-batch, they do not).
  doc["parallelism"].erase("fsdp");
  doc["model"]["num_layers"]          = 2;
  doc["model"]["hidden_size"]         = 4096;
  doc["model"]["num_attention_heads"] = 32;
  doc["model"]["num_query_groups"]    = 8;
  doc["model"]["ffn_hidden_size"]     = 14336;
  doc["model"]["seq_length"]          = 8192;
  const double fp8_step      = nlohmann::json::parse(run_json(doc)).at("step_time_s").get<double>();
  doc["training"]["precision"] = "bf16";
  const double bf16_step     = nlohmann::json::parse(run_json(doc)).at("step_time_s").get<double>();
  CHECK(fp8_step < bf16_step);
}

TEST_CASE("torch.compile and torchao's float8 are refused where stepsim does not model them")
{
  nlohmann::json doc            = llama();
  doc["training"]["framework"]  = "megatron-core";
  doc["training"]["compile"]    = true;
  CHECK_THROWS_WITH(scenario_from_json(doc), Catch::Contains("training.compile: torch.compile is modelled for a "
                                                             "framework that runs the model op by op"));
  doc                           = llama();
  doc["training"]["precision"]  = "fp8";
  CHECK_THROWS_WITH(scenario_from_json(doc), Catch::Contains("training.precision: fp8 under torchtitan is torchao's "
                                                             "float8 training, which stepsim models compiled"));
  doc["training"]["compile"]    = true;
  CHECK_NOTHROW(scenario_from_json(doc));
  doc["model"]["num_experts"]   = 4;
  doc["model"]["moe_top_k"]     = 2;
  CHECK_THROWS_WITH(scenario_from_json(doc), Catch::Contains("lowers for a dense transformer's linear layers"));
  doc                           = llama();
  doc["parallelism"]["fsdp"]    = {{"float8_all_gather", true}};
  CHECK_THROWS_WITH(scenario_from_json(doc), Catch::Contains("parallelism.fsdp.float8_all_gather: gathers torchao's "
                                                             "float8 weights: needs training.precision \"fp8\""));
}

// torchao/float8/float8_tensor_parallel.py, which torchtitan applies with its tensorwise float8
// (parallelize_llama.py, enable_float8_tensorwise_tp): PrepareFloat8ModuleInput casts a block's
// input to FP8 before the sequence-parallel all-gather, and Float8RowwiseParallel's output casts
// the output gradient to e5m2 before the backward's all-gather; the row-parallel outputs are
// reduce-scattered in bf16. Transformer Engine's FP8 (Megatron) gathers bf16.
TEST_CASE("torchao's float8 tensor parallelism gathers FP8 and reduce-scatters bf16", "[tensor]")
{
  nlohmann::json doc                  = llama();
  doc["parallelism"]["zero_stage"]    = 0;
  doc["parallelism"]["data"]          = 4;
  doc["parallelism"]["tensor"]        = 2;
  doc["parallelism"]["sequence_parallel"] = true;
  doc["training"]["recompute"]        = "full";
  doc["training"]["compile"]          = true;
  // Per pass, the tensor-parallel collectives of micro-batch 0 by kind: bytes of each.
  auto tensor_collectives = [](const nlohmann::json& d, Pass pass, CollectiveOp c) {
    const Workload w = lower(scenario_from_json(d));
    std::vector<double> out;
    const auto& r = w.ranks.front();
    for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
      const Task& t = r.graph[v];
      if (t.kind == TaskKind::Collective && t.op == c && t.pass == pass && t.micro_batch == 0 &&
          (t.stream == Stream::Tensor || t.stream == Stream::TensorOverlap))
        out.push_back(t.bytes);
    }
    return out;
  };
  const double tokens_hidden = 2048.0 * 1024; // micro-batch 1: the activation a block gathers
  auto check = [&](const nlohmann::json& d, double gather_element, const char* what) {
    INFO(what);
    // The recomputed forward: 2 blocks a layer, 4 layers, 8 of each (the embedding, which the
    // forward runs first, is not recomputed).
    for (Pass pass : {Pass::Recompute}) {
      const auto gathers  = tensor_collectives(d, pass, CollectiveOp::AllGather);
      const auto scatters = tensor_collectives(d, pass, CollectiveOp::ReduceScatter);
      REQUIRE(gathers.size() == 8);
      for (double b : gathers)
        CHECK(b == Approx(tokens_hidden * gather_element));
      // An overlapped reduce-scatter leaves in chunks (the last one waited for): its bytes add up.
      double scattered = 0;
      for (double b : scatters)
        scattered += b;
      CHECK(scattered == Approx(8 * tokens_hidden * 2));
    }
    // The forward and the backward (each block's output gradient gathered, its input gradient
    // reduce-scattered) gather the same for the 8 blocks; the embedding's and the output layer's
    // collectives stay bf16 (torchtitan leaves them out of float8).
    for (Pass pass : {Pass::Forward, Pass::Backward}) {
      const auto gathers = tensor_collectives(d, pass, CollectiveOp::AllGather);
      CHECK(std::count_if(gathers.begin(), gathers.end(),
                          [&](double b) { return b == Approx(tokens_hidden * gather_element); }) >= 8);
    }
  };
  doc["training"]["precision"] = "fp8";
  check(doc, 1, "torchtitan fp8: FP8 gathers");
  doc["parallelism"]["tensor_comm_overlap"] = true; // async TP gathers the same FP8
  check(doc, 1, "torchtitan fp8, async TP");
  doc["parallelism"].erase("tensor_comm_overlap");
  doc["training"]["precision"] = "bf16";
  check(doc, 2, "torchtitan bf16");
  doc["training"]["precision"] = "fp8";
  doc["training"]["framework"] = "megatron-core";
  doc["training"].erase("compile");
  check(doc, 2, "Transformer Engine fp8: bf16 gathers");
}

// torchtitan/components/loss.py: cross_entropy_loss is F.cross_entropy(pred.flatten(0, 1).float(),
// labels): run eagerly, the logits are cast to fp32, log_softmax keeps its fp32 output, and its
// fp32 gradient joins it as backward begins (train.py frees the bf16 logits first); compiled with
// the model, one fused kernel keeps the bf16 logits and writes their bf16 gradient.
TEST_CASE("torchtitan's loss keeps 12 bytes a logit eagerly and 4 compiled")
{
  nlohmann::json doc = llama();
  auto activations   = [&](bool compiled) {
    doc["training"]["compile"] = compiled;
    return stage_memory(scenario_from_json(doc), 0, 1).activations;
  };
  const double logits = 2048.0 * 32000; // micro-batch 1: tokens x vocabulary
  CHECK(activations(false) - activations(true) == Approx(8 * logits));
  // The loss is on the last stage only: a first stage of two keeps the same either way.
  doc["parallelism"]["pipeline"] = 2;
  doc["parallelism"]["data"]     = 4;
  doc["training"]["compile"]     = false;
  const double eager_first       = stage_memory(scenario_from_json(doc), 0, 1).activations;
  doc["training"]["compile"]     = true;
  CHECK(stage_memory(scenario_from_json(doc), 0, 1).activations == Approx(eager_first));
}

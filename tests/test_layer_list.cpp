// The layer-list model (model.architecture "layers"): a list that describes the layers of a
// built-in model (from that model's own per-layer kernels or figures) predicts its step time;
// FLOPs, MFU and memory come from the figures given; `repeat` is the same as writing a layer out;
// the kernels form and the figures form agree when they carry the same work; every plan the CNNs
// take runs; bad plans are input errors naming the path.
#include "support.hpp"

#include "sim/simulate.hpp"
#include "workloads/models/cnn.hpp"
#include "workloads/models/layer_list.hpp"
#include "workloads/lower.hpp"
#include "workloads/models/transformer.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace stepsim;

namespace {

nlohmann::json kernel_json(const Kernel& k)
{
  switch (k.kind) {
  case KernelKind::Gemm: return {{"name", k.name}, {"gemm", {k.m, k.n, k.k, k.batch}}};
  case KernelKind::Memory: return {{"name", k.name}, {"memory_bytes", k.bytes}};
  case KernelKind::Attention:
    return {{"name", k.name},
            {"attention", {{"batch_heads", k.batch}, {"seq", k.m}, {"head_dim", k.k}, {"causal", k.causal}}}};
  case KernelKind::Opaque: break;
  }
  FAIL("a built-in model has no opaque kernel");
  return {};
}

nlohmann::json kernels_json(const std::vector<Kernel>& kernels)
{
  nlohmann::json out = nlohmann::json::array();
  for (const Kernel& k : kernels)
    out.push_back(kernel_json(k));
  return out;
}

double flops_of(const std::vector<Kernel>& kernels)
{
  double f = 0;
  for (const Kernel& k : kernels)
    f += k.flops();
  return f;
}

double memory_bytes_of(const std::vector<Kernel>& kernels)
{
  double b = 0;
  for (const Kernel& k : kernels)
    b += k.kind == KernelKind::Memory ? k.bytes : 0;
  return b;
}

// A built-in CNN's layer (for a micro-batch of `b`) as a layer-list entry: its kernels, or its
// figures per sample (the FLOPs of its kernels, and the bytes of its bandwidth-bound ones).
nlohmann::json cnn_layer_json(const CnnLayer& l, double b, bool by_kernels)
{
  nlohmann::json j = {{"name", l.name},
                      {"parameters", l.parameters},
                      {"activation_bytes", l.output_bytes / b},
                      {"saved_bytes", l.saved_bytes / b}};
  if (by_kernels && !l.forward.empty()) { // an identity is no kernels: figures of zero
    j["kernels"] = {{"micro_batch_size", b},
                    {"forward", kernels_json(l.forward)},
                    {"backward_input", kernels_json(l.backward_input)},
                    {"backward_weight", kernels_json(l.backward_weight)}};
    if (l.backward_input.empty())
      j["kernels"].erase("backward_input");
    if (l.backward_weight.empty())
      j["kernels"].erase("backward_weight");
    return j;
  }
  j["forward_flops"]                = flops_of(l.forward) / b;
  j["forward_memory_bytes"]         = memory_bytes_of(l.forward) / b;
  j["backward_input_flops"]         = flops_of(l.backward_input) / b;
  j["backward_input_memory_bytes"]  = memory_bytes_of(l.backward_input) / b;
  j["backward_weight_flops"]        = flops_of(l.backward_weight) / b;
  j["backward_weight_memory_bytes"] = memory_bytes_of(l.backward_weight) / b;
  return j;
}

nlohmann::json cnn_scenario(const std::string& architecture, int pipeline, int micro_batches, int micro_batch)
{
  nlohmann::json doc = testing::small_scenario(pipeline, 1, micro_batches);
  doc["model"]       = {{"architecture", architecture}, {"image_size", 224}, {"num_classes", 1000}};
  doc["training"]    = {{"global_batch_size", micro_batches * micro_batch},
                        {"micro_batch_size", micro_batch},
                        {"precision", "fp32"}, // as the ResNets train; at bf16 on an A100 the early
                                               // convolutions would be bandwidth-bound GEMMs
                        {"recompute", "none"},
                        {"optimizer", "adam"}};
  doc["parallelism"]["schedule"] = "gpipe";
  return doc;
}

// The same scenario with the CNN given as a layer list.
nlohmann::json as_layer_list(nlohmann::json doc, bool by_kernels)
{
  const Scenario s = scenario_from_json(doc);
  const double b   = double(s.training.micro_batch_size);
  nlohmann::json layers = nlohmann::json::array();
  for (const CnnLayer& l : cnn_layers(s.model, b, element_bytes(s.training.precision)))
    layers.push_back(cnn_layer_json(l, b, by_kernels));
  doc["model"] = {{"architecture", "layers"},
                  {"name", "listed"},
                  {"input_bytes", 3.0 * 224 * 224 * element_bytes(s.training.precision)},
                  {"layers", layers}};
  return doc;
}

// A small MLP by figures on `pipeline` × `data` single-GPU nodes.
nlohmann::json mlp_scenario(int pipeline, int data, int micro_batches)
{
  nlohmann::json doc = testing::small_scenario(pipeline, data, micro_batches);
  nlohmann::json block = {{"name", "block"},
                          {"repeat", 8},
                          {"forward_flops", 4e9},
                          {"backward_input_flops", 4e9},
                          {"backward_weight_flops", 4e9},
                          {"forward_memory_bytes", 2e6},
                          {"parameters", 16777216},
                          {"activation_bytes", 8192},
                          {"saved_bytes", 40960}};
  doc["model"] = {{"architecture", "layers"},
                  {"name", "mlp"},
                  {"seq_length", 1},
                  {"layers",
                   {{{"name", "input"},
                     {"forward_flops", 1e9},
                     {"backward_flops", 1e9},
                     {"parameters", 4194304},
                     {"activation_bytes", 8192}},
                    block,
                    {{"name", "head"},
                     {"forward_flops", 2e8},
                     {"backward_input_flops", 2e8},
                     {"backward_weight_flops", 2e8},
                     {"parameter_bytes", 2 * 1024000.0},
                     {"activation_bytes", 4000}}}}};
  doc["training"]["micro_batch_size"]  = 4;
  doc["training"]["global_batch_size"] = 4 * micro_batches * data;
  return doc;
}

} // namespace

TEST_CASE("a layer list of ResNet-50's own layers predicts the built-in model's step time", "[layer_list]")
{
  const nlohmann::json builtin = cnn_scenario("resnet50", 2, 4, 16);
  const Report expected        = simulate_isolated(scenario_from_json(builtin));
  REQUIRE(expected.step_time_s > 0);

  SECTION("by kernels, under the shape-aware kernel model")
  {
    const Scenario listed = scenario_from_json(as_layer_list(builtin, true));
    REQUIRE(cnn_layers(listed.model, 16, 4).size() == 183);
    const Report r = simulate_isolated(listed);
    CHECK(r.step_time_s == Approx(expected.step_time_s).epsilon(0.001));
    CHECK(r.memory_peak_bytes == Approx(expected.memory_peak_bytes).epsilon(0.001));
  }
  SECTION("by figures, under the roofline (which times the built-in's GEMMs by their FLOPs too)")
  {
    nlohmann::json roofline                   = builtin;
    roofline["simulation"]["compute_model"] = "roofline";
    const Report base                         = simulate_isolated(scenario_from_json(roofline));
    nlohmann::json listed                     = as_layer_list(builtin, false);
    listed["simulation"]["compute_model"]     = "roofline";
    const Report r                            = simulate_isolated(scenario_from_json(listed));
    CHECK(r.step_time_s == Approx(base.step_time_s).epsilon(0.01));
    CHECK(r.memory_peak_bytes == Approx(base.memory_peak_bytes).epsilon(0.001));
  }
}

TEST_CASE("a layer list of a transformer's own kernels predicts the built-in transformer's step time", "[layer_list]")
{
  // A GPT on 2 pipeline stages × 2 data-parallel ranks, untied embeddings (a tied pair would
  // add the embedding all-reduce between the first and last stage, which a list does not know).
  nlohmann::json builtin                    = testing::small_scenario(2, 2, 4);
  builtin["model"]["tied_embeddings"]       = false;
  builtin["training"]["micro_batch_size"]   = 2;
  builtin["training"]["global_batch_size"]  = 16;
  builtin["parallelism"]["bucket_size"]     = "25MB";
  const Scenario s = scenario_from_json(builtin);
  std::vector<Work> works;
  const TransformerWorks t = add_transformer_works(s, works);
  auto kernels_of = [&](std::initializer_list<int> ids) {
    std::vector<Kernel> all;
    for (int id : ids)
      all.insert(all.end(), works.at(static_cast<size_t>(id)).kernels.begin(), works.at(static_cast<size_t>(id)).kernels.end());
    return kernels_json(all);
  };
  const double b      = s.training.micro_batch_size;
  const double output = activation_bytes(s) / b;
  nlohmann::json embedding = {{"name", "embedding"},
                              {"parameters", embedding_parameters_per_rank(s.model, 1)},
                              {"activation_bytes", output},
                              {"kernels",
                               {{"micro_batch_size", b},
                                {"forward", kernels_of({t.embedding_forward})},
                                {"backward_input", kernels_of({t.embedding_backward})}}}};
  nlohmann::json layer = {{"name", "layer"},
                          {"repeat", s.model.num_layers},
                          {"parameters", layer_parameters_per_rank(s.model, 1)},
                          {"activation_bytes", output},
                          {"kernels",
                           {{"micro_batch_size", b},
                            {"forward", kernels_of({t.attention_forward, t.mlp_forward})},
                            {"backward_input", kernels_of({t.mlp_backward_input, t.attention_backward_input})},
                            {"backward_weight", kernels_of({t.mlp_backward_weight, t.attention_backward_weight})}}}};
  nlohmann::json head = {{"name", "head"},
                         {"parameters", double(s.model.vocab_size) * s.model.hidden_size},
                         {"activation_bytes", output},
                         {"kernels",
                          {{"micro_batch_size", b},
                           {"forward", kernels_of({t.head_forward})},
                           {"backward_input", kernels_of({t.head_backward})}}}};
  nlohmann::json listed = builtin;
  listed["model"] = {{"architecture", "layers"}, {"seq_length", s.model.seq_length}, {"layers", {embedding, layer, head}}};
  // The built-in puts the embedding before the first stage's layers and the head after the last's.
  const int half = s.model.num_layers / 2;
  listed["parallelism"]["stage_layers"] = {half + 1, half + 1};

  const Report expected = simulate_isolated(s);
  const Report r        = simulate_isolated(scenario_from_json(listed));
  REQUIRE(expected.step_time_s > 0);
  CHECK(r.step_time_s == Approx(expected.step_time_s).epsilon(0.001));
  CHECK(r.tokens_per_s == Approx(expected.tokens_per_s).epsilon(0.001));
}

TEST_CASE("layer-list FLOPs and MFU are the sums of the FLOPs given", "[layer_list]")
{
  nlohmann::json doc = mlp_scenario(2, 1, 4);
  Scenario s         = scenario_from_json(doc);
  // Per sample: input 1e9 + 1e9, 8 blocks of 4e9 + 8e9, head 2e8 + 4e8.
  const double per_sample = 2e9 + 8 * 12e9 + 6e8;
  const double samples    = double(s.training.global_batch_size);
  CHECK(model_flops_per_step(s) == Approx(samples * per_sample));
  CHECK(hardware_flops_per_step(s) == Approx(samples * per_sample));
  s.training.recompute = "full"; // every forward once more
  CHECK(hardware_flops_per_step(s) == Approx(samples * (per_sample + 1e9 + 8 * 4e9 + 2e8)));

  const Report r = simulate_isolated(scenario_from_json(doc));
  REQUIRE(r.step_time_s > 0);
  CHECK(r.model_flops_per_step == Approx(samples * per_sample));
  CHECK(r.model_tflops_per_gpu == Approx(samples * per_sample / r.step_time_s / 2 / 1e12));
  CHECK(r.mfu == Approx(r.model_tflops_per_gpu * 1e12 / 312e12)); // A100 bf16 dense peak
  CHECK(r.mfu < 1);
  CHECK(r.tokens_per_s == Approx(r.samples_per_s)); // seq_length 1: a token per sample
}

TEST_CASE("layer-list memory is the ZeRO accounting of the parameters given", "[layer_list]")
{
  // One stage, 4 data-parallel ranks, bf16 with Adam: 2Ψ weights + 2Ψ gradients + 12Ψ optimizer
  // states, sharded over the ranks from ZeRO stage 3, 2 and 1 on.
  nlohmann::json doc = mlp_scenario(1, 4, 8);
  const double psi   = 4194304 + 8 * 16777216.0 + 1024000;
  const double saved = 4 * (8192 + 8 * 40960 + 4000); // a micro-batch of 4, one in flight
  for (int zero = 0; zero <= 3; ++zero) {
    INFO("zero_stage " << zero);
    doc["parallelism"]["zero_stage"] = zero;
    const Report r                   = analytic_report(scenario_from_json(doc));
    CHECK(r.memory.weights == Approx(2 * psi / (zero >= 3 ? 4 : 1)));
    CHECK(r.memory.gradients == Approx(2 * psi / (zero >= 2 ? 4 : 1)));
    CHECK(r.memory.optimizer == Approx(12 * psi / (zero >= 1 ? 4 : 1)));
    CHECK(r.memory.activations == Approx(saved));
  }
  // parameter_bytes is the same as the count at the weights' precision.
  doc["parallelism"]["zero_stage"] = 0;
  nlohmann::json bytes             = doc;
  bytes["model"]["layers"][1].erase("parameters");
  bytes["model"]["layers"][1]["parameter_bytes"] = 2 * 16777216.0;
  CHECK(analytic_report(scenario_from_json(bytes)).memory.total() ==
        Approx(analytic_report(scenario_from_json(doc)).memory.total()));
  // Full recompute keeps the stage's input per micro-batch and one micro-batch's saved tensors.
  doc["training"]["recompute"] = "full";
  doc["model"]["input_bytes"]  = 1000;
  CHECK(analytic_report(scenario_from_json(doc)).memory.activations == Approx(4 * 1000 + saved));
}

TEST_CASE("repeat is the same as writing the layer out", "[layer_list]")
{
  nlohmann::json repeated = mlp_scenario(2, 1, 4);
  nlohmann::json written  = repeated;
  auto& layers            = written["model"]["layers"];
  nlohmann::json block    = layers[1];
  block.erase("repeat");
  layers.erase(1);
  for (int i = 0; i < 8; ++i)
    layers.insert(layers.begin() + 1, block);
  REQUIRE(layers.size() == 10);
  const Report a = simulate_isolated(scenario_from_json(repeated));
  const Report b = simulate_isolated(scenario_from_json(written));
  CHECK(a.step_time_s == Approx(b.step_time_s).epsilon(1e-9));
  CHECK(a.memory_peak_bytes == Approx(b.memory_peak_bytes).epsilon(1e-9));
  CHECK(a.model_flops_per_step == Approx(b.model_flops_per_step).epsilon(1e-9));
}

TEST_CASE("a layer given by kernels equals the same work given by figures", "[layer_list]")
{
  // A 4096 × 4096 linear layer on 8192 tokens per sample (a micro-batch of 2), then a
  // bandwidth-bound layer.
  const double m = 2 * 8192.0, n = 4096, k = 4096;
  nlohmann::json kernels = mlp_scenario(1, 1, 4);
  kernels["training"]["micro_batch_size"]  = 2;
  kernels["training"]["global_batch_size"] = 8;
  kernels["model"]["layers"] = {
      {{"name", "linear"},
       {"parameters", n * k},
       {"activation_bytes", 8192 * n * 2},
       {"kernels",
        {{"micro_batch_size", 2},
         {"forward", {{{"gemm", {m, n, k}}}}},
         {"backward_input", {{{"gemm", {m, k, n}}}}},
         {"backward_weight", {{{"gemm", {k, n, m}}}}}}}},
      {{"name", "norm"},
       {"parameters", 0},
       {"activation_bytes", 8192 * n * 2},
       {"kernels",
        {{"micro_batch_size", 2},
         {"forward", {{{"memory_bytes", 3 * m * n * 2}}}},
         {"backward_input", {{{"memory_bytes", 5 * m * n * 2}}}}}}}};
  nlohmann::json figures           = kernels;
  const double flops_per_sample    = 2 * m * n * k / 2;
  figures["model"]["layers"][0]    = {{"name", "linear"},
                                      {"parameters", n * k},
                                      {"activation_bytes", 8192 * n * 2},
                                      {"forward_flops", flops_per_sample},
                                      {"backward_input_flops", flops_per_sample},
                                      {"backward_weight_flops", flops_per_sample}};
  figures["model"]["layers"][1]    = {{"name", "norm"},
                                      {"parameters", 0},
                                      {"activation_bytes", 8192 * n * 2},
                                      {"forward_flops", 0},
                                      {"forward_memory_bytes", 3 * 8192 * n * 2},
                                      {"backward_flops", 0},
                                      {"backward_memory_bytes", 5 * 8192 * n * 2}};
  CHECK(model_flops_per_step(scenario_from_json(kernels)) == Approx(model_flops_per_step(scenario_from_json(figures))));
  SECTION("the roofline times both by their FLOPs and bytes: the same")
  {
    kernels["simulation"]["compute_model"] = figures["simulation"]["compute_model"] = "roofline";
    CHECK(simulate_isolated(scenario_from_json(kernels)).step_time_s ==
          Approx(simulate_isolated(scenario_from_json(figures)).step_time_s).epsilon(1e-6));
  }
  SECTION("the kernel model: a large GEMM runs close to the calibrated efficiency the figures assume")
  {
    // The shape costs the K loop's fill (gemm_half_k, about 6 % of K = 4096 on an A100) and a
    // partly filled last wave; the figures are the best case, without either.
    const double by_kernels = simulate_isolated(scenario_from_json(kernels)).step_time_s;
    const double by_figures = simulate_isolated(scenario_from_json(figures)).step_time_s;
    CHECK(by_kernels >= by_figures);
    CHECK(by_kernels <= 1.1 * by_figures);
  }
}

TEST_CASE("a layer list runs under every schedule, ZeRO stage and full recompute", "[layer_list]")
{
  struct Case {
    const char* schedule;
    int virtual_stages, zero;
    const char* recompute;
  };
  auto c = GENERATE(Case{"gpipe", 1, 0, "none"}, Case{"1f1b", 1, 1, "full"}, Case{"interleaved_1f1b", 2, 2, "none"},
                    Case{"pipedream_async", 1, 0, "none"}, Case{"pipedream_2bw", 1, 0, "none"},
                    Case{"zb_h1", 1, 3, "none"});
  INFO(c.schedule << " zero " << c.zero << " recompute " << c.recompute);
  nlohmann::json doc                    = mlp_scenario(2, 2, 4);
  doc["parallelism"]["schedule"]        = c.schedule;
  doc["parallelism"]["virtual_stages"]  = c.virtual_stages;
  doc["parallelism"]["zero_stage"]      = c.zero;
  doc["training"]["recompute"]          = c.recompute;
  doc["model"]["layers"][0].erase("backward_flops"); // zb_h1 needs every backward split
  doc["model"]["layers"][0]["backward_input_flops"]  = 0;
  doc["model"]["layers"][0]["backward_weight_flops"] = 1e9;
  const Report r = simulate_isolated(scenario_from_json(doc));
  CHECK(std::isfinite(r.step_time_s));
  CHECK(r.step_time_s > 0);
  CHECK(r.samples_per_s > 0);
  for (const auto& st : r.stages)
    CHECK(st.compute_s > 0);
}

TEST_CASE("zero-bubble ZB-H1 beats 1F1B on a layer list with split backward figures", "[layer_list]")
{
  nlohmann::json doc = mlp_scenario(4, 1, 8);
  doc["model"]["layers"][0].erase("backward_flops");
  doc["model"]["layers"][0]["backward_input_flops"]  = 5e8;
  doc["model"]["layers"][0]["backward_weight_flops"] = 5e8;
  const double one_f_one_b = simulate_isolated(scenario_from_json(doc)).step_time_s;
  doc["parallelism"]["schedule"] = "zb_h1";
  const double zero_bubble       = simulate_isolated(scenario_from_json(doc)).step_time_s;
  CHECK(zero_bubble < one_f_one_b * 0.97);
}

TEST_CASE("layer-list plans that cannot run are input errors naming the path", "[layer_list]")
{
  auto refused = [](const nlohmann::json& doc, const std::string& path, const std::string& words) {
    const auto result = testing::run_stepsim("validate " + testing::write_temp_file("layer-list-bad.json", doc.dump()));
    INFO(result.output);
    CHECK(result.exit_code == 2);
    CHECK(result.output.find(path) != std::string::npos);
    CHECK(result.output.find(words) != std::string::npos);
  };
  nlohmann::json doc = mlp_scenario(2, 1, 4);
  {
    nlohmann::json bad                   = doc;
    bad["parallelism"]["schedule"]       = "zb_h1";
    refused(bad, "model.layers[0].backward_flops", "backward_input_flops and backward_weight_flops");
  }
  {
    nlohmann::json bad                   = doc;
    bad["parallelism"]["stage_layers"]   = {4, 4};
    refused(bad, "parallelism.stage_layers", "model.layers has 10");
  }
  {
    nlohmann::json bad                   = doc;
    bad["training"]["recompute"]         = "selective";
    refused(bad, "training.recompute", "a layer list");
  }
  {
    nlohmann::json bad = doc;
    bad["model"]["layers"][2]["kernels"] = {{"forward", {{{"gemm", {1, 2, 3}}}}}};
    refused(bad, "model.layers[2].forward_flops", "either kernels or the figures");
  }
  {
    nlohmann::json bad = doc;
    bad["model"]["layers"][1]["repeat"] = 0;
    refused(bad, "model.layers[1].repeat", ">= 1");
  }
  {
    nlohmann::json bad = doc;
    bad["model"]["layers"][0]["kernels"] = {{"forward", {{{"attention", {{"batch_heads", 2}, {"seq", 64}}}}}}};
    for (const char* key : {"forward_flops", "backward_flops"})
      bad["model"]["layers"][0].erase(key);
    refused(bad, "model.layers[0].kernels.forward[0].attention.head_dim", "required");
  }
  {
    nlohmann::json bad = doc;
    bad["model"]["layers"][0]["kernels"] = {{"micro_batch_size", 3}, {"forward", {{{"memory_bytes", 1e6}}}}};
    for (const char* key : {"forward_flops", "backward_flops"})
      bad["model"]["layers"][0].erase(key);
    // Kernel shapes cannot be rescaled to another micro-batch: a sweep over the micro-batch
    // must not silently keep the kernels' own.
    refused(bad, "model.layers[0].kernels.micro_batch_size", "written for 3 samples");
  }
}

// The diffusion transformer kind (workloads/models/dit.cpp): parameters and forward FLOPs against
// the DiT paper, the attention of video blocks against closed forms, bad fields refused with
// their JSON paths, and a whole step under tensor, data and pipeline parallelism.
#include "support.hpp"

#include "sim/simulate.hpp"
#include "workloads/models/model_kind.hpp"
#include "workloads/stage_memory.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace stepsim;

namespace {

// A DiT on one GPU (the FLOP and parameter checks) or on the 8 A100 of one NVSwitch node.
nlohmann::json dit_scenario(const nlohmann::json& model, int tensor = 1, int data = 1, int pipeline = 1)
{
  nlohmann::json doc         = testing::small_scenario(1, 1, 1);
  doc["name"]                = "dit";
  doc["model"]               = model;
  doc["model"]["architecture"] = "dit";
  doc["training"]            = {{"global_batch_size", 4 * data},
                                {"micro_batch_size", 1},
                                {"precision", "bf16"},
                                {"recompute", "none"}};
  doc["parallelism"]         = {{"tensor", tensor}, {"pipeline", pipeline}, {"data", data}, {"schedule", "1f1b"}};
  const int gpus             = tensor * data * pipeline;
  auto& group                = doc["platform"]["node_groups"][0];
  group["count"]             = 1;
  group["gpus_per_node"]     = gpus;
  group["nic"]               = {{"count", gpus}, {"bandwidth", "25GBps"}, {"latency", "2us"}};
  return doc;
}

// DiT's configurations (facebookresearch/DiT models.py: DiT_B_2, DiT_L_2, DiT_XL_2).
nlohmann::json dit_image(int layers, int hidden, int heads)
{
  return {{"num_layers", layers}, {"hidden_size", hidden}, {"num_attention_heads", heads}, {"image_size", 256},
          {"patch_size", 2}};
}

// Latte-XL/2 (Vchitect/Latte): DiT-XL/2's blocks over 16 latent frames, spatial and temporal in turn.
nlohmann::json latte(int frames, const std::string& attention = "spatial_temporal")
{
  nlohmann::json m = dit_image(28, 1152, 16);
  m["frames"]      = frames;
  m["patch_size"]  = {1, 2, 2};
  m["attention"]   = attention;
  m["num_classes"] = 0;
  return m;
}

double forward_per_sample(const Scenario& s)
{
  return model_kind(s.model).model_flops_per_step(s) / 3 / double(s.training.global_batch_size);
}

// FLOPs of the kernels of work `name` whose names contain `part`.
double work_flops(const Scenario& s, const std::string& name, const std::string& part)
{
  std::vector<Work> works;
  model_kind(s.model).plan(s, works);
  double flops = 0;
  for (const auto& w : works)
    if (w.name == name)
      for (const auto& k : w.kernels)
        if (k.name.find(part) != std::string::npos)
          flops += k.flops();
  return flops;
}

} // namespace

TEST_CASE("DiT parameters and forward Gflops match the DiT paper's Table 4", "[dit]")
{
  struct Case {
    const char* name;
    int layers, hidden, heads;
    double million_parameters, gflops;
  };
  // Peebles and Xie 2023, Table 4 (ImageNet 256×256, patch 2). The paper counts "Gflops" as
  // multiply-adds, one per fused multiply-add (W. Peebles in facebookresearch/DiT issue #14: "we use
  // the representation learning literature's convention of counting flops effectively as MACs"),
  // so the model's forward FLOPs are compared at half their count.
  auto c = GENERATE(Case{"DiT-B/2", 12, 768, 12, 130, 23.01}, Case{"DiT-L/2", 24, 1024, 16, 458, 80.71},
                    Case{"DiT-XL/2", 28, 1152, 16, 675, 118.64});
  INFO(c.name);
  const Scenario s = scenario_from_json(dit_scenario(dit_image(c.layers, c.hidden, c.heads)));
  CHECK(s.model.seq_length == 256); // (256 / 8 / 2)² patches
  // The paper's count is the module's, which holds the fixed sin-cos positional table (patches × h,
  // a parameter that is not trained); stepsim's is what takes gradients and optimizer state.
  const double trained = stage_parameters(s, 0);
  const double table   = 256.0 * c.hidden;
  CHECK((trained + table) / 1e6 == Approx(c.million_parameters).epsilon(0.01));
  const double gmacs = forward_per_sample(s) / 2 / 1e9;
  CHECK(gmacs == Approx(c.gflops).epsilon(0.02));
  // DiT-XL/2 counted by hand from models.py, per 256 tokens: 28 blocks of 12h² per token
  // (qkv 3h², proj h², MLP 8h²), 2·256·h for QKᵀ and AV and 6h² for adaLN; the patch embedding,
  // the timestep MLP and the final layer add 0.02 G.
  if (c.hidden == 1152)
    CHECK(gmacs == Approx(118.62).epsilon(0.0005));
}

TEST_CASE("an image DiT is the video DiT of one frame with spatial attention only", "[dit]")
{
  const nlohmann::json image = dit_image(28, 1152, 16);
  nlohmann::json video       = image;
  video["frames"]            = 1;
  video["patch_size"]        = {1, 2, 2};
  video["attention"]         = "spatial";
  const Scenario a = scenario_from_json(dit_scenario(image));
  const Scenario b = scenario_from_json(dit_scenario(video));
  CHECK(forward_per_sample(a) == forward_per_sample(b));
  CHECK(stage_parameters(a, 0) == stage_parameters(b, 0));
  CHECK(b.model.seq_length == 256);
}

TEST_CASE("video DiT attention: spatial over each frame's patches, temporal over each patch's frames", "[dit]")
{
  // Latte-XL/2 on 16 frames of 256×256: F = 16 latent frames of S = (256/8/2)² = 256 patches,
  // T = F·S = 4096 tokens, h = 1152. A spatial block runs F sequences of S tokens per sample, a
  // temporal block S sequences of F tokens; QKᵀ and AV are each L²·h multiply-adds per sequence
  // of L tokens (over all heads), so the forward core is 4·F·S²·h FLOPs spatially and 4·S·F²·h
  // temporally: 4·16·256²·1152 = 4.83e9 and 4·256·16²·1152 = 0.30e9.
  const double h = 1152, S = 256;
  for (int F : {8, 16}) {
    INFO("frames " << F);
    const Scenario s = scenario_from_json(dit_scenario(latte(F)));
    CHECK(s.model.seq_length == F * S);
    const double spatial  = work_flops(s, "spatial_attention_forward", "flash_attention");
    const double temporal = work_flops(s, "temporal_attention_forward", "flash_attention");
    CHECK(spatial == Approx(4 * F * S * S * h).epsilon(1e-12));
    CHECK(temporal == Approx(4 * S * F * F * h).epsilon(1e-12));
    // Half the 28 blocks are temporal: against spatial attention everywhere the model's FLOPs
    // differ by 3 (forward and backward) × 14 × (temporal − spatial core) per sample.
    const Scenario only_spatial = scenario_from_json(dit_scenario(latte(F, "spatial")));
    CHECK(forward_per_sample(s) - forward_per_sample(only_spatial) ==
          Approx(14 * (4 * S * F * F * h - 4 * F * S * S * h)).epsilon(1e-9));
  }
  // Doubling the frames doubles the spatial core (F·S²) and quadruples the temporal one (S·F²).
  const Scenario f8 = scenario_from_json(dit_scenario(latte(8))), f16 = scenario_from_json(dit_scenario(latte(16)));
  CHECK(work_flops(f16, "spatial_attention_forward", "flash_attention") ==
        Approx(2 * work_flops(f8, "spatial_attention_forward", "flash_attention")));
  CHECK(work_flops(f16, "temporal_attention_forward", "flash_attention") ==
        Approx(4 * work_flops(f8, "temporal_attention_forward", "flash_attention")));

  // 3-D patches of 2 frames halve the frames a temporal block attends over: S·(F/2)² per sample.
  nlohmann::json cubes  = latte(16);
  cubes["patch_size"]   = {2, 2, 2};
  const Scenario c      = scenario_from_json(dit_scenario(cubes));
  CHECK(c.model.seq_length == 8 * 256);
  CHECK(work_flops(c, "temporal_attention_forward", "flash_attention") == Approx(4 * S * 8 * 8 * h));

  // Unfused attention has the same matmuls, the scores materialised.
  nlohmann::json standard             = dit_scenario(latte(16));
  standard["training"]["attention"]   = "standard";
  const Scenario u                    = scenario_from_json(standard);
  CHECK(work_flops(u, "spatial_attention_forward", "spatial_attention_") == Approx(4 * 16 * S * S * h));
}

TEST_CASE("bad DiT fields are input errors naming their JSON path", "[dit]")
{
  struct Case {
    nlohmann::json patch; // merged into a good Latte scenario (RFC 7386) on `gpus` GPUs
    const char* path;
    const char* words;
    int gpus = 1;
  };
  const Case cases[] = {
      {{{"model", {{"patch_size", {1, 3, 2}}}}}, "model.patch_size", "does not divide the latent's side"},
      {{{"model", {{"patch_size", {1, 2}}}}}, "model.patch_size", "[frames, height, width]"},
      {{{"model", {{"attention", "temporal"}}}}, "model.attention", "spatial_temporal"},
      {{{"model", {{"frame", 16}}}}, "model.frame", "did you mean \"frames\""},
      {{{"model", {{"num_layers", 27}}}}, "model.num_layers", "alternates"},
      {{{"model", {{"frames", 15}, {"patch_size", {2, 2, 2}}}}}, "model.frames", "patch_size[0]"},
      {{{"model", {{"image_size", 250}}}}, "model.image_size", "vae_downsample 8"},
      {{{"parallelism", {{"tensor", 2}, {"data", 1}, {"sequence_parallel", true}}}},
       "parallelism.sequence_parallel", "DiT", 2},
      {{{"parallelism", {{"context", 2}, {"data", 1}}}}, "parallelism.context", "DiT", 2},
  };
  for (const auto& c : cases) {
    nlohmann::json doc = dit_scenario(latte(16), 1, c.gpus);
    doc.merge_patch(c.patch);
    const auto result = testing::run_stepsim("validate " + testing::write_temp_file("dit-bad.json", doc.dump()));
    INFO(c.patch.dump() << "\n" << result.output);
    CHECK(result.exit_code == 2);
    CHECK(result.output.find(c.path) != std::string::npos);
    CHECK(result.output.find(c.words) != std::string::npos);
  }
}

TEST_CASE("a video DiT step simulates with tensor 2 × data 2 × pipeline 2 on 8 A100", "[dit]")
{
  nlohmann::json doc                     = dit_scenario(latte(16), 2, 2, 2);
  doc["training"]["global_batch_size"]   = 16; // 8 micro-batches per replica
  const Scenario s                       = scenario_from_json(doc);
  REQUIRE(s.platform.total_gpus() == 8);
  const Report r = simulate_isolated(s);
  CHECK(std::isfinite(r.step_time_s));
  CHECK(r.step_time_s > 0);
  CHECK(r.mfu > 0);
  CHECK(r.mfu < 1);
  CHECK(r.fits_in_memory);
  CHECK(r.memory_peak_bytes > 0);
  CHECK(r.memory_peak_bytes < r.memory_capacity_bytes);
  REQUIRE(r.stages.size() == 2);
  CHECK(r.stages[0].layers == 14);
  CHECK(r.tokens_per_s == Approx(r.samples_per_s * 16 * 256));
  CHECK(r.model_flops_per_step == Approx(model_kind(s.model).model_flops_per_step(s)));
  // Tensor parallelism halves each block's split weights (qkv, proj, fc1, fc2 and the column-parallel
  // biases: 12h² + 7h) and keeps the rest whole (adaLN 6h² + 6h, the proj and fc2 biases 2h).
  nlohmann::json whole               = doc;
  whole["parallelism"]["tensor"]     = 1;
  whole["parallelism"]["data"]       = 4;
  const Scenario untensored          = scenario_from_json(whole);
  const double h                     = 1152;
  CHECK(stage_parameters(untensored, 0) - stage_parameters(s, 0) == Approx(14 * (12 * h * h + 7 * h) / 2));
}

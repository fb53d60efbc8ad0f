// The diffusion transformer (DiT; Peebles and Xie, "Scalable Diffusion Models with Transformers",
// ICCV 2023) as a model kind (workloads/models/model_kind.hpp), for images and for video.
//
// An image DiT patchifies the VAE latent (image_size / vae_downsample per side, latent_channels
// deep) into p × p patches and runs num_layers adaLN-Zero blocks over them: the timestep and the
// class embeddings sum to a conditioning vector c, from which each block's linear regresses six
// modulations (shift, scale and gate around its attention and its MLP), and a final layer
// (adaLN, linear) predicts p·p·2·channels per patch (noise and the learned variance).
// facebookresearch/DiT models.py is the reference for every module counted here.
//
// Video follows Latte (Ma et al. 2024, "Latte: Latent Diffusion Transformer for Video Generation",
// model variant 1; Vchitect/Latte models/latte.py): the same blocks, alternating between spatial
// ones, attention among the patches of one frame, and temporal ones, attention among the frames at
// one patch position (even blocks spatial, odd temporal). Patches are 3-D, pt × ph × pw over the
// latent's frames × height × width, as Open-Sora's ST-DiT cuts them (Latte's pt is 1). With one
// latent frame and "attention": "spatial" the model is the image DiT.
//
// Tensor parallelism splits each block as Megatron splits a transformer's (heads in the attention,
// the MLP's hidden width), with one all-reduce after each; the small per-sample layers (adaLN
// modulations, embedders, final layer) are replicated on every tensor rank.
#include "workloads/models/model_kind.hpp"
#include "workloads/models/transformer.hpp" // element_bytes, activation_bytes

#include "sim/input/limits.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace stepsim {

namespace {

// DiT's TimestepEmbedder: a sinusoidal embedding of this width, then Linear, SiLU, Linear.
constexpr double kFrequencyEmbedding = 256;
// Each adaLN-Zero block regresses shift, scale and gate for its attention and its MLP; the final
// layer shift and scale.
constexpr double kBlockModulations = 6, kFinalModulations = 2;

// The kind's own fields, under their names in `model` (ModelSpec::kind_fields).
const char* const kPatchFields[] = {"patch_size[0]", "patch_size[1]", "patch_size[2]"};

// A DiT's sizes, derived from its ModelSpec.
struct DitShape {
  double h = 0, ffn = 0, heads = 0;
  double frames  = 1; // latent frames after temporal patching (F / vae_temporal_downsample / pt)
  double patches = 0; // patches of one frame, (H / vae_downsample / ph) · (W / vae_downsample / pw)
  double tokens  = 0; // per sample: frames × patches
  double patch_in = 0, patch_out = 0; // latent values per patch in, predicted values per patch out
  double label_rows = 0;              // rows of the class embedding table, 0 when unconditional
  bool temporal     = false;          // Latte's alternating spatial and temporal blocks
};

DitShape dit_shape(const ModelSpec& m)
{
  const auto& f = m.kind_fields;
  DitShape d;
  d.h              = m.hidden_size;
  d.ffn            = m.ffn_hidden_size;
  d.heads          = m.num_attention_heads;
  const double pt = f.at(kPatchFields[0]), ph = f.at(kPatchFields[1]), pw = f.at(kPatchFields[2]);
  const double latent_side = m.image_size / f.at("vae_downsample");
  d.frames     = f.at("frames") / f.at("vae_temporal_downsample") / pt;
  d.patches    = (latent_side / ph) * (latent_side / pw);
  d.tokens     = d.frames * d.patches;
  d.patch_in   = f.at("latent_channels") * pt * ph * pw;
  d.patch_out  = d.patch_in * (f.at("learn_sigma") != 0 ? 2 : 1);
  // With classifier-free guidance DiT's LabelEmbedder keeps one more row for the dropped label.
  d.label_rows = m.num_classes > 0 ? m.num_classes + 1.0 : 0.0;
  d.temporal   = f.at("attention") != 0;
  return d;
}

// Block `index` (counted over the whole model) attends over the frames at one patch position.
bool temporal_block(const DitShape& d, int index) { return d.temporal && index % 2 == 1; }

// The attention of a block, per sample: `sequences` independent sequences of `length` tokens.
struct AttentionSpan {
  double sequences, length;
};
AttentionSpan attention_span(const DitShape& d, bool temporal)
{
  return temporal ? AttentionSpan{d.patches, d.frames} : AttentionSpan{d.frames, d.patches};
}

// Forward FLOPs per sample (a multiply-add counts two). QKᵀ and AV over every sequence are
// 2 · length² · h multiply-adds each; nothing is causal.
double core_flops(const DitShape& d, bool temporal)
{
  const AttentionSpan a = attention_span(d, temporal);
  return 4.0 * a.sequences * a.length * a.length * d.h;
}
double block_linear_flops(const DitShape& d)
{
  return 2.0 * d.tokens * (4 * d.h * d.h + 2 * d.h * d.ffn) + 2.0 * kBlockModulations * d.h * d.h;
}
double embedder_flops(const DitShape& d)
{
  return 2.0 * d.tokens * d.patch_in * d.h + 2.0 * (kFrequencyEmbedding * d.h + d.h * d.h);
}
double final_layer_flops(const DitShape& d)
{
  return 2.0 * kFinalModulations * d.h * d.h + 2.0 * d.tokens * d.h * d.patch_out;
}

double forward_flops_per_sample(const ModelSpec& m)
{
  const DitShape d = dit_shape(m);
  double flops     = embedder_flops(d) + final_layer_flops(d);
  for (int i = 0; i < m.num_layers; ++i)
    flops += block_linear_flops(d) + core_flops(d, temporal_block(d, i));
  return flops;
}

// Parameters one tensor-parallel rank holds. The positional embeddings (Latte's temporal one too)
// are fixed sin-cos tables that are not trained, so they take neither gradients nor optimizer state.
double block_parameters(const DitShape& d, int tensor)
{
  const double split      = 4 * d.h * d.h + 3 * d.h + 2 * d.h * d.ffn + d.ffn; // qkv, proj, fc1, fc2, the split biases
  const double replicated = 2 * d.h + kBlockModulations * (d.h * d.h + d.h);   // proj and fc2 biases, adaLN
  return split / tensor + replicated;
}
double embedder_parameters(const DitShape& d)
{
  return d.patch_in * d.h + d.h + kFrequencyEmbedding * d.h + d.h + d.h * d.h + d.h + d.label_rows * d.h;
}
double final_layer_parameters(const DitShape& d)
{
  return kFinalModulations * (d.h * d.h + d.h) + d.h * d.patch_out + d.patch_out;
}

// The index over the whole model of the first block of virtual stage `vs`.
int first_block(const Scenario& s, int vs)
{
  int first = 0;
  for (int before = 0; before < vs; ++before)
    first += s.layers_in_virtual_stage(before);
  return first;
}

// Activation bytes one block keeps for its backward, per micro-batch and tensor rank. Korthikanti
// et al. 2022 (sbh(10 + 24/t) + 5as²b/t at 2 bytes an element) less what DiT has not (its dropouts:
// their masks, and the dropped copy of the scores) and plus what adaLN-Zero adds: each of the two
// norms keeps its output for the gradient of its scale, each gate its input for its own gradient.
// That is 16 sbh replicated (norm inputs and outputs, the qkv and fc1 inputs, the gated outputs),
// 24 sbh split (Q, K, V, the projection input, the GELU input and output) and the softmax output,
// 2 bytes per score, which fused attention and selective recompute do not keep. Full recompute
// keeps the block's input alone.
double block_activation_bytes(const Scenario& s, const DitShape& d, bool temporal)
{
  const double e   = element_bytes(s.training.precision);
  const double b   = s.training.micro_batch_size;
  const double t   = s.parallelism.tensor;
  const double sbh = d.tokens * b * d.h;
  if (s.training.recompute == "full")
    return sbh * e;
  const bool keeps_scores = s.training.recompute == "none" && s.training.attention == "standard";
  const AttentionSpan a   = attention_span(d, temporal);
  const double scores     = keeps_scores ? b * a.sequences * d.heads / t * a.length * a.length : 0;
  return e / 2 * (sbh * (16 + 24 / t) + 2 * scores);
}

// The kernels of one micro-batch on one tensor rank.
class DitKernels {
public:
  explicit DitKernels(const Scenario& s)
      : d_(dit_shape(s.model)), b_(double(s.training.micro_batch_size)), t_(s.parallelism.tensor),
        e_(element_bytes(s.training.precision)), n_(b_ * d_.tokens), flash_(s.training.attention == "flash"),
        selective_(s.training.recompute == "selective")
  {
  }

  const DitShape& shape() const { return d_; }

  // The attention half of a block: adaLN modulation of c, norm and modulate, qkv, the core, the
  // output projection, gate and residual. Latte regroups the tokens into frame sequences and
  // back around every temporal block (einops copies); both copies are charged here.
  std::vector<Kernel> attention_forward(bool temporal) const
  {
    std::vector<Kernel> k = {conditioning("adaln_modulation", kBlockModulations * d_.h, d_.h)};
    if (temporal)
      k.push_back(over_tokens("to_frame_sequences", d_.h, 2));
    k.push_back(over_tokens("norm_modulate", d_.h, 3));
    k.push_back(token_gemm("qkv", 3 * d_.h / t_, d_.h));
    core(temporal, false, k);
    k.push_back(token_gemm("attention_proj", d_.h, d_.h / t_));
    k.push_back(over_tokens("gate_residual", d_.h, 3));
    if (temporal)
      k.push_back(over_tokens("to_patch_sequences", d_.h, 2));
    return k;
  }
  std::vector<Kernel> attention_backward_input(bool temporal) const
  {
    std::vector<Kernel> k;
    if (temporal)
      k.push_back(over_tokens("to_patch_sequences_bwd", d_.h, 2));
    k.push_back(over_tokens("gate_residual_bwd", d_.h, 4));
    k.push_back(token_gemm("attention_proj_dgrad", d_.h / t_, d_.h));
    if (selective_) // the core's forward again, inside backward
      core(temporal, false, k);
    core(temporal, true, k);
    k.push_back(token_gemm("qkv_dgrad", d_.h, 3 * d_.h / t_));
    k.push_back(over_tokens("norm_modulate_bwd", d_.h, 4));
    if (temporal)
      k.push_back(over_tokens("to_frame_sequences_bwd", d_.h, 2));
    k.push_back(conditioning("adaln_modulation_dgrad", d_.h, kBlockModulations * d_.h));
    return k;
  }
  std::vector<Kernel> attention_backward_weight() const
  {
    return {weight_gradient("attention_proj_wgrad", d_.h, d_.h / t_, n_),
            weight_gradient("qkv_wgrad", 3 * d_.h / t_, d_.h, n_),
            weight_gradient("adaln_modulation_wgrad", kBlockModulations * d_.h, d_.h, b_)};
  }

  // The MLP half: norm and modulate (with the modulations the attention half made), fc1, GELU
  // (tanh), fc2, gate and residual.
  std::vector<Kernel> mlp_forward() const
  {
    const double width = d_.ffn / t_;
    return {over_tokens("norm_modulate", d_.h, 3), token_gemm("fc1", width, d_.h), over_tokens("gelu", width, 2),
            token_gemm("fc2", d_.h, width), over_tokens("gate_residual", d_.h, 3)};
  }
  std::vector<Kernel> mlp_backward_input() const
  {
    const double width = d_.ffn / t_;
    return {over_tokens("gate_residual_bwd", d_.h, 4), token_gemm("fc2_dgrad", width, d_.h),
            over_tokens("gelu_bwd", width, 3), token_gemm("fc1_dgrad", d_.h, width),
            over_tokens("norm_modulate_bwd", d_.h, 4)};
  }
  std::vector<Kernel> mlp_backward_weight() const
  {
    const double width = d_.ffn / t_;
    return {weight_gradient("fc2_wgrad", d_.h, width, n_), weight_gradient("fc1_wgrad", width, d_.h, n_)};
  }

  // Patch embedding (a convolution whose stride is its kernel: one GEMM over the patches) plus the
  // fixed positional table, the timestep MLP and the label lookup. The latents are data: no input
  // gradient.
  std::vector<Kernel> embedders_forward() const
  {
    std::vector<Kernel> k = {token_gemm("patch_embed", d_.h, d_.patch_in), over_tokens("add_position_embedding", d_.h, 3),
                             conditioning("timestep_fc1", d_.h, kFrequencyEmbedding),
                             conditioning("timestep_fc2", d_.h, d_.h)};
    if (d_.label_rows > 0)
      k.push_back(memory_kernel("label_embedding", 2 * b_ * d_.h * e_));
    return k;
  }
  std::vector<Kernel> embedders_backward() const
  {
    std::vector<Kernel> k = {conditioning("timestep_fc2_dgrad", d_.h, d_.h),
                             weight_gradient("timestep_fc2_wgrad", d_.h, d_.h, b_),
                             weight_gradient("timestep_fc1_wgrad", d_.h, kFrequencyEmbedding, b_),
                             weight_gradient("patch_embed_wgrad", d_.h, d_.patch_in, n_)};
    if (d_.label_rows > 0)
      k.push_back(memory_kernel("label_embedding_grad", 2 * b_ * d_.h * e_));
    return k;
  }

  // adaLN, norm and modulate, the linear to the patch predictions, and the loss (mean squared
  // error on the noise plus the variational bound on the learned variance, in fp32).
  std::vector<Kernel> final_forward() const
  {
    return {conditioning("final_adaln_modulation", kFinalModulations * d_.h, d_.h),
            over_tokens("final_norm_modulate", d_.h, 3), token_gemm("final_linear", d_.patch_out, d_.h),
            memory_kernel("diffusion_loss", n_ * d_.patch_out * 3 * 4)};
  }
  std::vector<Kernel> final_backward() const
  {
    return {memory_kernel("diffusion_loss_bwd", n_ * d_.patch_out * 2 * 4),
            token_gemm("final_linear_dgrad", d_.h, d_.patch_out),
            weight_gradient("final_linear_wgrad", d_.patch_out, d_.h, n_),
            over_tokens("final_norm_modulate_bwd", d_.h, 4),
            conditioning("final_adaln_modulation_dgrad", d_.h, kFinalModulations * d_.h),
            weight_gradient("final_adaln_modulation_wgrad", kFinalModulations * d_.h, d_.h, b_)};
  }

private:
  // A linear layer over every token of the micro-batch, `in` features to `out`; the input
  // gradient of one is token_gemm(out → in).
  Kernel token_gemm(const char* name, double out, double in) const { return gemm(name, n_, out, in, e_); }
  // A linear layer over the conditioning vector, one row per sample.
  Kernel conditioning(const char* name, double out, double in) const { return gemm(name, b_, out, in, e_); }
  // dW = Xᵀ·dY for a layer of `in` → `out` features over `rows` rows.
  Kernel weight_gradient(const char* name, double out, double in, double rows) const
  {
    return gemm(name, in, out, rows, e_);
  }
  // Elementwise work reading and writing `tensors` tensors of tokens × width.
  Kernel over_tokens(const char* name, double width, double tensors) const
  {
    return memory_kernel(name, n_ * width * tensors * e_);
  }

  // Non-causal attention over this block's sequences, on this rank's heads.
  void core(bool temporal, bool backward, std::vector<Kernel>& out) const
  {
    const AttentionSpan a = attention_span(d_, temporal);
    const double batch    = b_ * a.sequences * d_.heads / t_;
    const double L = a.length, head = d_.h / d_.heads;
    const std::string kind = temporal ? "temporal_" : "spatial_";
    if (flash_) {
      out.push_back(attention_kernel(kind + (backward ? "flash_attention_bwd" : "flash_attention_fwd"), batch, L, head,
                                     false, backward, e_));
      return;
    }
    // Unfused (timm's "math" path): scores, softmax, scores × values; DiT has no attention dropout.
    const double scores = batch * L * L;
    if (!backward) {
      out.push_back(gemm(kind + "attention_scores", L, L, head, e_, batch));
      out.push_back(memory_kernel(kind + "softmax", 2 * scores * e_));
      out.push_back(gemm(kind + "attention_values", L, head, L, e_, batch));
      return;
    }
    out.push_back(gemm(kind + "attention_probs_grad", L, L, head, e_, batch)); // dP = dO·Vᵀ
    out.push_back(gemm(kind + "attention_values_grad", L, head, L, e_, batch)); // dV = Pᵀ·dO
    out.push_back(memory_kernel(kind + "softmax_bwd", 3 * scores * e_));
    out.push_back(gemm(kind + "attention_query_grad", L, head, L, e_, batch)); // dQ = dS·K
    out.push_back(gemm(kind + "attention_key_grad", L, head, L, e_, batch));   // dK = dSᵀ·Q
  }

  DitShape d_;
  double b_, t_, e_, n_;
  bool flash_, selective_;
};

// Reads patch_size: one number p (p × p patches of each frame) or [pt, ph, pw].
void read_patch_size(JsonReader& r, ModelSpec& m)
{
  auto& f                  = m.kind_fields;
  f[kPatchFields[0]]       = 1;
  f[kPatchFields[1]]       = f[kPatchFields[2]] = 2; // DiT-XL/2
  const nlohmann::json* js = r.raw("patch_size");
  if (js == nullptr)
    return;
  constexpr long long kMaxPatch = 1024;
  auto valid = [&](const nlohmann::json& v) {
    return v.is_number_integer() && v.get<long long>() >= 1 && v.get<long long>() <= kMaxPatch;
  };
  if (valid(*js)) {
    f[kPatchFields[1]] = f[kPatchFields[2]] = js->get<double>();
  } else if (js->is_array() && js->size() == 3 && std::all_of(js->begin(), js->end(), valid)) {
    for (size_t i = 0; i < 3; ++i)
      f[kPatchFields[i]] = (*js)[i].get<double>();
  } else {
    r.problems().add(r.path_of("patch_size"),
                     fmt::format("expected an integer in [1, {0}] (p × p patches of each frame) or [frames, height, "
                                 "width] of such integers, got {1}",
                                 kMaxPatch, js->dump()));
  }
}

class Dit final : public ModelKind {
public:
  void read(JsonReader& r, ModelSpec& m, const std::string&) const override
  {
    using namespace limits;
    auto& f               = m.kind_fields;
    m.name                = r.text("name", std::string("dit"));
    m.num_layers          = static_cast<int>(r.integer("num_layers", std::nullopt, 1, kMaxLayers));
    m.hidden_size         = static_cast<int>(r.integer("hidden_size", std::nullopt, 1, kMaxWidth));
    m.num_attention_heads = static_cast<int>(r.integer("num_attention_heads", std::nullopt, 1, kMaxWidth));
    m.num_query_groups    = m.num_attention_heads;
    m.ffn_hidden_size     = static_cast<int>(r.integer("ffn_hidden_size", 4LL * m.hidden_size, 1, 4 * kMaxWidth)); // mlp_ratio 4
    m.image_size          = static_cast<int>(r.integer("image_size", 256, 1, 1 << 16));
    m.num_classes         = static_cast<int>(r.integer("num_classes", 1000, 0, kMaxWidth)); // ImageNet; 0: unconditional
    f["frames"]           = double(r.integer("frames", 1, 1, 1 << 16));
    f["vae_downsample"]   = double(r.integer("vae_downsample", 8, 1, 1024)); // the SD VAE DiT and Latte use
    f["vae_temporal_downsample"] = double(r.integer("vae_temporal_downsample", 1, 1, 1024)); // 1: a per-frame VAE
    f["latent_channels"]         = double(r.integer("latent_channels", 4, 1, 1 << 12));
    f["learn_sigma"]             = r.boolean("learn_sigma", true) ? 1 : 0;
    read_patch_size(r, m);
    const double latent_frames = f["frames"] / f["vae_temporal_downsample"] / f[kPatchFields[0]];
    const std::string attention =
        r.text("attention", std::string(latent_frames > 1 ? "spatial_temporal" : "spatial"), {"spatial", "spatial_temporal"});
    f["attention"] = attention == "spatial_temporal" ? 1 : 0;
    r.reject_unknown_keys();
    m.mlp             = "gelu";
    m.norm            = "layernorm";
    m.tied_embeddings = false;
    m.vocab_size      = 0;
    check_fields(r, m);
  }

  void check(const Scenario& s, Problems& problems) const override
  {
    const auto& p = s.parallelism;
    if (p.context > 1)
      problems.add("parallelism.context", fmt::format("{}: stepsim does not split a DiT's tokens over context-parallel "
                                                      "ranks; use 1",
                                                      p.context));
    if (p.sequence_parallel)
      problems.add("parallelism.sequence_parallel",
                   "stepsim's DiT keeps the tokens whole on every tensor rank (no sequence parallelism); use false");
    if (p.stage_layers.empty() && p.stage_layers_auto)
      problems.add("parallelism.stage_layers",
                   "\"auto\" balances transformer layers by the transformer's costs; give a DiT's block counts");
  }

  double layer_count(const ModelSpec& m) const override { return m.num_layers; }

  double model_flops_per_step(const Scenario& s) const override
  {
    return 3.0 * double(s.training.global_batch_size) * forward_flops_per_sample(s.model);
  }

  double hardware_flops_per_step(const Scenario& s) const override
  {
    const double samples = double(s.training.global_batch_size);
    const double forward = forward_flops_per_sample(s.model);
    const DitShape d     = dit_shape(s.model);
    if (s.training.recompute == "full") // every block's forward twice; the embedders and final layer once
      return samples * (4.0 * forward - embedder_flops(d) - final_layer_flops(d));
    double again = 0;
    if (s.training.recompute == "selective") // each attention core twice
      for (int i = 0; i < s.model.num_layers; ++i)
        again += core_flops(d, temporal_block(d, i));
    return samples * (3.0 * forward + again);
  }

  double stage_parameters(const Scenario& s, int stage) const override
  {
    const DitShape d = dit_shape(s.model);
    double params    = s.layers_on_stage(stage) * block_parameters(d, s.parallelism.tensor);
    if (stage == 0)
      params += embedder_parameters(d);
    if (stage == s.parallelism.pipeline - 1)
      params += final_layer_parameters(d);
    return params;
  }

  // Every trained weight once (the fixed sin-cos positional tables are none); a dense model, so
  // every token goes through all of them.
  ParameterCounts parameter_counts(const Scenario& s) const override
  {
    const DitShape d   = dit_shape(s.model);
    const double total = embedder_parameters(d) + s.model.num_layers * block_parameters(d, 1) + final_layer_parameters(d);
    return {total, total};
  }

  ModelFootprint footprint(const Scenario& s, int stage, int micro_batches_in_flight) const override
  {
    const DitShape d = dit_shape(s.model);
    const int p      = s.parallelism.pipeline;
    const double e   = element_bytes(s.training.precision) == 4 ? 4 : 2;
    ModelFootprint f;
    f.parameters    = stage_parameters(s, stage);
    f.element_bytes = e;
    // Adam's two moments in fp32, and fp32 master weights when training in 16 bits (ZeRO's 12Ψ).
    f.optimizer_bytes_per_parameter = (s.training.optimizer == "adam" ? 8.0 : 4.0) + (e == 4 ? 0.0 : 4.0);
    double kept = 0, rebuilt = 0;
    Scenario whole           = s;
    whole.training.recompute = "none";
    for (int vs = stage; vs < p * s.parallelism.virtual_stages; vs += p)
      for (int i = first_block(s, vs), end = i + s.layers_in_virtual_stage(vs); i < end; ++i) {
        kept += block_activation_bytes(s, d, temporal_block(d, i));
        rebuilt = std::max(rebuilt, block_activation_bytes(whole, d, temporal_block(d, i)));
      }
    const double tokens = double(s.training.micro_batch_size) * d.tokens;
    double edges        = 0; // the final layer keeps its norm's input and output and the linear's input
    if (stage == p - 1)
      edges += 3 * tokens * d.h * e;
    f.activations = (kept + edges) * micro_batches_in_flight;
    if (s.training.recompute == "full") // one block is rebuilt in full during its backward
      f.activations += rebuilt;
    f.largest_unit = block_parameters(d, s.parallelism.tensor);
    if (stage == 0)
      f.largest_unit = std::max(f.largest_unit, embedder_parameters(d));
    if (stage == p - 1)
      f.largest_unit = std::max(f.largest_unit, final_layer_parameters(d));
    return f;
  }

  int reported_layers(const Scenario& s, int stage) const override { return s.layers_on_stage(stage); }

  ModelPlan plan(const Scenario& s, std::vector<Work>& works) const override
  {
    const DitKernels k(s);
    const DitShape& d = k.shape();
    const bool full   = s.training.recompute == "full";
    const int tensor  = s.parallelism.tensor;

    // A block's two halves, each followed by the tensor-parallel all-reduce.
    auto half = [&](const std::string& name, const std::vector<Kernel>& forward, const std::vector<Kernel>& input,
                    const std::vector<Kernel>& weight) {
      std::vector<Kernel> backward = input;
      backward.insert(backward.end(), weight.begin(), weight.end());
      return Block{add_work(works, name + "_forward", forward), add_work(works, name + "_backward", backward),
                   full ? add_work(works, name + "_recompute", forward) : -1,
                   add_work(works, name + "_backward_input", input), add_work(works, name + "_backward_weight", weight),
                   true, true};
    };
    const Block mlp = half("mlp", k.mlp_forward(), k.mlp_backward_input(), k.mlp_backward_weight());
    auto block      = [&](bool temporal) {
      const Block attention = half(temporal ? "temporal_attention" : "spatial_attention", k.attention_forward(temporal),
                                   k.attention_backward_input(temporal), k.attention_backward_weight());
      return Layer{{attention, mlp}, block_parameters(d, tensor), 0, full};
    };
    const Layer spatial  = block(false);
    const Layer temporal = d.temporal ? block(true) : spatial;
    // The embedders and the final layer are whole on every tensor rank: no collective after them
    // (the first block's backward all-reduces the gradient they receive).
    const int embed_f = add_work(works, "embedders_forward", k.embedders_forward());
    const int embed_b = add_work(works, "embedders_backward", k.embedders_backward());
    const int final_f = add_work(works, "final_layer_forward", k.final_forward());
    const int final_b = add_work(works, "final_layer_backward", k.final_backward());
    const Layer embedders{{Block{embed_f, embed_b, -1, embed_b, -1, false, false}}, embedder_parameters(d), 0, false};
    const Layer final_layer{{Block{final_f, final_b, -1, final_b, -1, false, false}}, final_layer_parameters(d), 0,
                            false};

    ModelPlan out;
    const int stages = s.parallelism.pipeline * s.parallelism.virtual_stages;
    out.stages.resize(static_cast<size_t>(stages));
    for (int vs = 0; vs < stages; ++vs) {
      auto& layers = out.stages[vs].layers;
      if (vs == 0)
        layers.push_back(embedders);
      for (int i = first_block(s, vs), end = i + s.layers_in_virtual_stage(vs); i < end; ++i)
        layers.push_back(temporal_block(d, i) ? temporal : spatial);
      if (vs == stages - 1)
        layers.push_back(final_layer);
      // The tokens (scattered over the tensor peers, as Megatron sends them) and the conditioning.
      out.stages[vs].output_bytes = activation_bytes(s) / tensor + double(s.training.micro_batch_size) * d.h *
                                                                       stored_element_bytes(s.training.precision);
    }
    return out;
  }

private:
  // What the fields must satisfy together, each named by the field a user would change; then the
  // tokens per sample.
  static void check_fields(JsonReader& r, ModelSpec& m)
  {
    const auto& f = m.kind_fields;
    if (!r.problems().about(r.path_of("hidden_size")) && !r.problems().about(r.path_of("num_attention_heads")) &&
        m.hidden_size % m.num_attention_heads != 0)
      r.problems().add(r.path_of("hidden_size"), fmt::format("{} is not divisible by num_attention_heads {}",
                                                              m.hidden_size, m.num_attention_heads));
    const long long down = static_cast<long long>(f.at("vae_downsample"));
    if (m.image_size % down != 0) {
      r.problems().add(r.path_of("image_size"),
                       fmt::format("{} is not divisible by vae_downsample {}", m.image_size, down));
      return;
    }
    const long long side = m.image_size / down;
    for (int i : {1, 2})
      if (side % static_cast<long long>(f.at(kPatchFields[i])) != 0) {
        r.problems().add(r.path_of("patch_size"),
                         fmt::format("{} does not divide the latent's side, image_size {} / vae_downsample {} = {}",
                                     f.at(kPatchFields[i]), m.image_size, down, side));
        return;
      }
    const long long frames = static_cast<long long>(f.at("frames"));
    const long long t_down = static_cast<long long>(f.at("vae_temporal_downsample"));
    const long long pt     = static_cast<long long>(f.at(kPatchFields[0]));
    if (frames % (t_down * pt) != 0) {
      r.problems().add(r.path_of("frames"),
                       fmt::format("{} is not divisible by vae_temporal_downsample {} × patch_size[0] {}", frames, t_down, pt));
      return;
    }
    if (f.at("attention") != 0 && m.num_layers % 2 != 0)
      r.problems().add(r.path_of("num_layers"),
                       fmt::format("{} is odd: \"spatial_temporal\" alternates a spatial and a temporal block (Latte)",
                                   m.num_layers));
    const double tokens = double(frames / t_down / pt) * double(side / static_cast<long long>(f.at(kPatchFields[1]))) *
                          double(side / static_cast<long long>(f.at(kPatchFields[2])));
    if (tokens > limits::kMaxTokens)
      r.problems().add(r.path(), fmt::format("{:.0f} patch tokens per sample, more than the {} stepsim accepts", tokens,
                                             limits::kMaxTokens));
    else
      m.seq_length = static_cast<int>(tokens); // the report's tokens per sample: its patches
  }
};

const bool registered = ModelKindRegistry::add(
    "dit",
    "diffusion transformer (DiT, Peebles and Xie 2023) over latent patches; video with 3-D patches and Latte's "
    "alternating spatial and temporal attention",
    std::make_shared<Dit>());

} // namespace

} // namespace stepsim

#include "workloads/models/transformer.hpp"

#include "sim/core/framework.hpp"
#include "workloads/models/latent_attention.hpp"
#include "workloads/models/moe.hpp"

#include <algorithm>

namespace stepsim {

double element_bytes(const std::string& precision)
{
  if (precision == "fp32" || precision == "tf32")
    return 4;
  if (precision == "fp8")
    return 1;
  return 2;
}

// FP8 training as Transformer Engine runs it (the recipe Megatron-Core and NeMo use; torchao's
// float8 training casts the same operands, with casts of its own: FrameworkProfile::
// fp8_dynamic_scaling): only the GEMMs of the linear layers take FP8 inputs,
// each cast with its scale and, as Hopper's FP8 GEMMs read both operands K-major, transposed.
// Their outputs, the norms, the activation functions, attention, the residual stream and the
// loss stay bf16 (Transformer Engine's user guide, "Using FP8 with Transformer Engine": "FP8 is
// used for the GEMMs ... other operations ... in higher precision"; transformer_engine/pytorch/
// module/linear.py, _Linear.forward: fp8_cast_transpose_fused of the input, the GEMM's out_dtype
// the activation dtype).
double stored_element_bytes(const std::string& precision) { return precision == "fp8" ? 2 : element_bytes(precision); }

bool runs_under_autocast(const Scenario& s)
{
  return FrameworkRegistry::get(s.training.framework, "training.framework").eager_autocast &&
         (s.training.precision == "bf16" || s.training.precision == "fp16");
}

namespace {

double mlp_matrices(const ModelSpec& m) { return m.mlp == "swiglu" ? 3.0 : 2.0; }

double kv_hidden(const ModelSpec& m) { return kv_width(m); }

// The shapes every kernel is built from, per tensor-parallel rank.
struct Shape {
  double tokens;   // micro-batch × sequence
  double h, ffn, heads, head_dim, kv, vocab, t;
  double q;        // the query's and the attention output's width, heads × head_dim (h unless model.head_dim)
  double o;        // the attention output's width: q, or heads × v_head_dim under latent attention
  double e;        // GEMM operand bytes
  double a;        // bytes of every other tensor element (stored_element_bytes): bf16 in an fp8 run
  bool fp8;        // Transformer Engine's FP8: casts before the GEMMs (add_transformer_works)
  double norm_tokens; // tokens a norm or dropout touches (sequence parallel splits them)
};

Shape shape_of(const Scenario& s)
{
  const auto& m = s.model;
  Shape x;
  x.t           = s.parallelism.tensor;
  x.tokens      = double(s.training.micro_batch_size) * m.seq_length / s.parallelism.context;
  x.h           = m.hidden_size;
  x.ffn         = m.ffn_hidden_size;
  x.heads       = m.num_attention_heads;
  x.head_dim    = attention_head_dim(m);
  x.q           = attention_width(m);
  x.o           = x.q;
  if (latent_attention(m)) {
    // Queries and keys of head_dim + qk_rope_head_dim, values and outputs of v_head_dim: the
    // core's FLOPs and bytes are those of heads of their mean width (QKᵀ over the first, PV over
    // the second; Q, K, V and O read or written once each).
    x.head_dim = (query_head_dim(m) + value_head_dim(m)) / 2;
    x.q        = m.num_attention_heads * query_head_dim(m);
    x.o        = m.num_attention_heads * value_head_dim(m);
  }
  x.kv          = kv_hidden(m);
  x.vocab       = m.vocab_size;
  x.e           = element_bytes(s.training.precision);
  x.a           = stored_element_bytes(s.training.precision);
  x.fp8         = s.training.precision == "fp8";
  x.norm_tokens = s.parallelism.sequence_parallel ? x.tokens / x.t : x.tokens;
  return x;
}

// A GEMM Y = X·W (M = tokens) and its backward: dX = dY·Wᵀ and dW = Xᵀ·dY; in an fp8 run FP8
// operands and a bf16 result.
Kernel fwd(const char* name, const Shape& x, double n, double k) { return gemm(name, x.tokens, n, k, x.e, 1, x.a); }
Kernel dgrad(const char* name, const Shape& x, double n, double k) { return gemm(name, x.tokens, k, n, x.e, 1, x.a); }
Kernel wgrad(const char* name, const Shape& x, double n, double k) { return gemm(name, k, n, x.tokens, x.e, 1, x.a); }

// Transformer Engine's cast of a bf16 tensor of tokens × width to FP8 and its transpose
// (fp8_cast_transpose_fused): 2 bytes read, 1 + 1 written per element. Run on each linear
// layer's input the layer before it left in bf16, and backward on each output gradient; a
// tensor a fused kernel already wrote in FP8 (the norm before QKV and fc1, the activation before
// fc2) needs the transpose alone (fp8_transpose: 1 read, 1 written).
Kernel fp8_cast_transpose(const char* name, double tokens, double width) { return memory_kernel(name, tokens * width * 4); }
Kernel fp8_transpose(const char* name, double tokens, double width) { return memory_kernel(name, tokens * width * 2); }

// torchao's casts with tensorwise dynamic scaling (FrameworkProfile::fp8_dynamic_scaling), per
// element of a bf16 tensor of `a` bytes: a tensor the kernel before it has just written, whose
// absolute maximum Inductor computes in that kernel, is read once and written in FP8 (a + 1), or
// in FP8 twice, row- and column-major, for an output gradient's two GEMMs (a + 2); a tensor read
// again later (a saved input, a weight) is read once more for its maximum first (2a + 1).
Kernel fp8_fresh_cast(const char* name, double elements, double a, double layouts = 1)
{
  return memory_kernel(name, elements * (a + layouts));
}
Kernel fp8_stored_cast(const char* name, double elements, double a) { return memory_kernel(name, elements * (2 * a + 1)); }

// Reads and writes of elementwise work over tokens × width elements.
Kernel elementwise(const char* name, double tokens, double width, double tensors_touched, double e)
{
  return memory_kernel(name, tokens * width * tensors_touched * e);
}

void attention_core(const Scenario& s, const Shape& x, bool backward, std::vector<Kernel>& out)
{
  // Ulysses' all-to-alls give each rank 1/ulysses_degree of its heads over the sequence of its
  // ring (workloads/parallel/ulysses.hpp); ring attention (ulysses_degree 1) keeps the heads and
  // runs one (s/cp)² block per step.
  const int ulysses = s.parallelism.ulysses_degree;
  double bh         = s.training.micro_batch_size * x.heads / x.t / ulysses;
  double seq        = double(s.model.seq_length) / (s.parallelism.context / ulysses);
  if (s.training.attention == "flash") {
    out.push_back(attention_kernel(backward ? "flash_attention_bwd" : "flash_attention_fwd", bh, seq, x.head_dim,
                                   true, backward, x.a));
    out.back().implementation = s.training.attention_kernel;
    return;
  }
  // Unfused attention materialises the seq × seq scores: two batched GEMMs around a fused
  // scale-mask-softmax and a dropout, all over bh·seq² elements.
  double scores = bh * seq * seq;
  // Unfused attention runs outside Transformer Engine's FP8 GEMMs: bf16 in an fp8 run.
  auto bmm = [&](const char* name, double m, double n, double k) {
    Kernel g = gemm(name, m, n, k, x.a, bh);
    if (x.fp8)
      g.precision = "bf16";
    return g;
  };
  if (!backward) {
    out.push_back(bmm("attention_scores", seq, seq, x.head_dim));
    out.push_back(memory_kernel("scale_mask_softmax", scores * 2 * x.a));
    out.push_back(memory_kernel("attention_dropout", scores * (2 * x.a + 1)));
    out.push_back(bmm("attention_values", seq, x.head_dim, seq));
  } else {
    out.push_back(bmm("attention_values_dgrad", seq, seq, x.head_dim));
    out.push_back(bmm("attention_values_wgrad", seq, x.head_dim, seq));
    out.push_back(memory_kernel("attention_dropout_bwd", scores * (2 * x.a + 1)));
    out.push_back(memory_kernel("scale_mask_softmax_bwd", scores * 3 * x.a));
    out.push_back(bmm("attention_scores_dgrad_q", seq, x.head_dim, seq));
    out.push_back(bmm("attention_scores_dgrad_k", seq, x.head_dim, seq));
  }
}

// Multi-head latent attention's projections (workloads/models/latent_attention.hpp), in the
// order Megatron-Core's MLASelfAttention runs them. The down projections are duplicated on every
// tensor rank and run on the rank's own tokens (norm_tokens: its sequence shard under sequence
// parallelism); the latents' norms, the up projections (over the rank's heads) and the rotary
// embedding on all the micro-batch's tokens. Under Transformer Engine's FP8 the down
// projections cast their input (TELinear), the latents' fused norms write FP8 for the up
// projections (TELayerNormColumnParallelLinear), whose weight gradients transpose it, and every
// output gradient is cast with its transpose before its input gradient.
enum class LatentPass { Forward, InputGradients, WeightGradients };

void latent_attention_works(const Scenario& s, const Shape& x, LatentPass pass, std::vector<Kernel>& out)
{
  const ModelSpec& m = s.model;
  const double own   = x.norm_tokens; // the down projections' tokens
  const double heads = m.num_attention_heads / x.t;
  const double qk = query_head_dim(m), nope = attention_head_dim(m), v = value_head_dim(m);
  const double rope = m.qk_rope_head_dim, q_lora = m.q_lora_rank, kv_lora = m.kv_lora_rank;
  const bool te_fp8 = x.fp8; // latent attention is refused under torchao's float8 (transformer_kind.cpp)
  auto on = [&](const char* name, double tokens, double n, double k) { return gemm(name, tokens, n, k, x.e, 1, x.a); };
  // A latent's RMSNorm: the norm's input read, its output written (in FP8 under FP8), backward
  // the input, the output gradient and the weight read and the input gradient written.
  auto latent_norm = [&](const char* name, double width) {
    return te_fp8 ? memory_kernel(name, x.tokens * width * (x.a + 1)) : elementwise(name, x.tokens, width, 2, x.a);
  };
  // The fused rotary embedding (fused_apply_mla_rope_for_q and _for_kv): the query and the
  // up-projected keys and values read with the shared rotary key, the query, key and value the
  // core takes written.
  const double rope_bytes = x.tokens * x.a * (heads * (qk + nope + v) + rope + heads * (2 * qk + v));
  switch (pass) {
  case LatentPass::Forward:
    if (q_lora > 0) {
      if (te_fp8)
        out.push_back(fp8_cast_transpose("q_down_proj_input_fp8_cast", own, x.h));
      out.push_back(on("q_down_proj", own, q_lora, x.h));
    }
    if (te_fp8)
      out.push_back(fp8_cast_transpose("kv_down_proj_input_fp8_cast", own, x.h));
    out.push_back(on("kv_down_proj", own, kv_lora + rope, x.h));
    if (q_lora > 0) {
      out.push_back(latent_norm("q_latent_norm", q_lora));
      out.push_back(on("q_up_proj", x.tokens, heads * qk, q_lora));
    } else {
      if (te_fp8)
        out.push_back(fp8_cast_transpose("q_proj_input_fp8_cast", x.tokens, x.h));
      out.push_back(on("q_proj", x.tokens, heads * qk, x.h));
    }
    out.push_back(latent_norm("kv_latent_norm", kv_lora));
    out.push_back(on("kv_up_proj", x.tokens, heads * (nope + v), kv_lora));
    out.push_back(memory_kernel("latent_rope", rope_bytes));
    return;
  case LatentPass::InputGradients:
    out.push_back(memory_kernel("latent_rope_bwd", rope_bytes));
    if (te_fp8)
      out.push_back(fp8_cast_transpose("kv_up_proj_grad_fp8_cast", x.tokens, heads * (nope + v)));
    out.push_back(on("kv_up_proj_dgrad", x.tokens, kv_lora, heads * (nope + v)));
    out.push_back(elementwise("kv_latent_norm_bwd", x.tokens, kv_lora, 4, x.a));
    if (te_fp8)
      out.push_back(fp8_cast_transpose("q_proj_grad_fp8_cast", x.tokens, heads * qk));
    if (q_lora > 0) {
      out.push_back(on("q_up_proj_dgrad", x.tokens, q_lora, heads * qk));
      out.push_back(elementwise("q_latent_norm_bwd", x.tokens, q_lora, 4, x.a));
      if (te_fp8)
        out.push_back(fp8_cast_transpose("q_down_proj_grad_fp8_cast", own, q_lora));
      out.push_back(on("q_down_proj_dgrad", own, x.h, q_lora));
    } else {
      out.push_back(on("q_proj_dgrad", x.tokens, x.h, heads * qk));
    }
    if (te_fp8)
      out.push_back(fp8_cast_transpose("kv_down_proj_grad_fp8_cast", own, kv_lora + rope));
    out.push_back(on("kv_down_proj_dgrad", own, x.h, kv_lora + rope));
    return;
  case LatentPass::WeightGradients:
    if (te_fp8) { // the fused norms' FP8 outputs, transposed for the up projections' weight gradients
      if (q_lora > 0)
        out.push_back(fp8_transpose("q_up_proj_input_fp8_transpose", x.tokens, q_lora));
      out.push_back(fp8_transpose("kv_up_proj_input_fp8_transpose", x.tokens, kv_lora));
    }
    if (q_lora > 0) {
      out.push_back(on("q_up_proj_wgrad", q_lora, heads * qk, x.tokens));
      out.push_back(on("q_down_proj_wgrad", x.h, q_lora, own));
    } else {
      out.push_back(on("q_proj_wgrad", x.h, heads * qk, x.tokens));
    }
    out.push_back(on("kv_up_proj_wgrad", kv_lora, heads * (nope + v), x.tokens));
    out.push_back(on("kv_down_proj_wgrad", x.h, kv_lora + rope, own));
    return;
  }
}

} // namespace

double layer_parameters_per_rank(const ModelSpec& m, int tensor, int expert, int expert_tensor)
{
  double h    = m.hidden_size;
  double q    = attention_width(m);
  double qkv  = h * (q + 2 * kv_hidden(m));
  double proj = q * h;
  bool moe    = is_moe(m); // the experts replace the MLP (workloads/models/moe.hpp)
  double mlp  = moe ? 0 : mlp_matrices(m) * h * m.ffn_hidden_size;
  double biases = m.norm == "layernorm" ? (q + 2 * kv_hidden(m)) + h + (moe ? 0 : m.ffn_hidden_size + h) : 0;
  double norms  = m.norm == "layernorm" ? 4 * h : 2 * h;
  double experts = moe ? expert_parameters_per_rank(m, expert_tensor > 0 ? expert_tensor : tensor, expert) +
                             router_parameters(m) +
                             shared_expert_parameters_per_rank(m, tensor)
                       : 0;
  if (latent_attention(m)) // its down projections and latent norms whole on every rank (RMSNorm, no biases)
    return mlp / tensor + latent_attention_parameters_per_rank(m, tensor) + norms + experts;
  return (qkv + proj + mlp + biases) / tensor + norms + experts;
}

std::vector<double> layer_parameter_tensors(const ModelSpec& m, int tensor)
{
  if (is_moe(m))
    return {};
  const double h = m.hidden_size, t = tensor, ffn = m.ffn_hidden_size;
  const double q         = attention_width(m);
  const double qkv_width = q + 2 * kv_hidden(m);
  const bool biases      = m.norm == "layernorm"; // GPT's linear layers have biases, Llama's none
  std::vector<double> out;
  auto norm = [&] {
    out.push_back(h); // weight
    if (biases)
      out.push_back(h);
  };
  auto linear = [&](double weight, double bias) {
    out.push_back(weight);
    if (biases)
      out.push_back(bias);
  };
  norm();
  if (latent_attention(m)) { // RMSNorm, no biases
    for (double tensor_parameters : latent_attention_parameter_tensors(m, tensor))
      out.push_back(tensor_parameters);
  } else {
    linear(h * qkv_width / t, qkv_width / t);
    linear(q * h / t, h / t); // the row-parallel biases counted per rank, as layer_parameters_per_rank does
  }
  norm();
  linear(mlp_matrices(m) == 3 ? 2 * h * ffn / t : h * ffn / t, ffn / t); // SwiGLU's gate and up in one
  linear(h * ffn / t, h / t);
  return out;
}

std::vector<double> embedding_parameter_tensors(const ModelSpec& m, int tensor)
{
  std::vector<double> out{double(m.vocab_size) * m.hidden_size / tensor};
  if (m.norm == "layernorm") // GPT learns its positions
    out.push_back(double(m.seq_length) * m.hidden_size);
  return out;
}

double embedding_parameters_per_rank(const ModelSpec& m, int tensor)
{
  double positions = m.norm == "layernorm" ? double(m.seq_length) * m.hidden_size : 0; // GPT learns them
  return double(m.vocab_size) * m.hidden_size / tensor + positions;
}

double model_parameters(const ModelSpec& m)
{
  double embeddings = embedding_parameters_per_rank(m, 1);
  if (!m.tied_embeddings)
    embeddings += double(m.vocab_size) * m.hidden_size;
  // A mixture of experts' dense layers (moe_layer) hold an MLP where the others hold experts.
  const double moe_layers = double(moe_layer_count(m));
  return moe_layers * layer_parameters_per_rank(m, 1) +
         (m.num_layers - moe_layers) * layer_parameters_per_rank(dense_layer_model(m), 1) + embeddings + m.hidden_size;
}

double activation_bytes(const Scenario& s)
{
  return double(s.training.micro_batch_size) * s.model.seq_length / s.parallelism.context * s.model.hidden_size *
         stored_element_bytes(s.training.precision);
}

TransformerWorks add_transformer_works(const Scenario& s, std::vector<Work>& works)
{
  const Shape x   = shape_of(s);
  const double nt = x.norm_tokens;
  const bool latent = latent_attention(s.model); // multi-head latent attention: latent_attention_works
  auto add        = [&](const char* name, std::vector<Kernel> kernels) {
    works.push_back(Work{name, std::move(kernels), 0});
    return static_cast<int>(works.size() - 1);
  };
  const double qkv_n = (x.q + 2 * x.kv) / x.t;
  const double mlp_n = x.ffn / x.t * (s.model.mlp == "swiglu" ? 2 : 1);
  const double act   = s.model.mlp == "swiglu" ? 3 : 2; // swiglu reads two inputs
  // The residual add after each block, fused with its dropout (Megatron's bias_dropout_add): the
  // block's output and the residual read, the sum written, and a mask beside it; without dropout
  // no mask.
  const bool dropout        = s.model.dropout > 0;
  const char* residual      = dropout ? "dropout_residual" : "residual_add";
  const char* residual_bwd  = dropout ? "dropout_residual_bwd" : "residual_add_bwd";
  const double residual_rw  = dropout ? 4 : 3;

  auto joined = [](std::vector<Kernel> a, const std::vector<Kernel>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };

  // Eager PyTorch under torch.autocast (FrameworkProfile::eager_autocast): the residual stream
  // and the norms in fp32 (r bytes), a cast before every linear layer a norm feeds, casts of the
  // weights down in forward and of their gradients up in backward, biases' gradients reduced on
  // their own, and the copies around the attention core. Otherwise the fused kernels of
  // Megatron-style frameworks, everything in the training precision (an fp8 run's GEMMs in FP8,
  // the rest in bf16, with Transformer Engine's casts: stored_element_bytes).
  const bool autocast = runs_under_autocast(s);
  const double r      = autocast ? 4 : x.a;
  // PyTorch ops one by one where the framework runs the model eagerly (FrameworkProfile::eager_ops;
  // an autocast or FP8 run keeps the passes above). Bytes per element of the tensor each works
  // on, a the training precision's; where two figures are given, forward then backward as
  // autograd runs it:
  //   RMSNorm: x.float() a+4, pow 8, mean 4, x * rsqrt 8, type_as 4+a, * weight 2a: 28 + 4a, six
  //     launches and two on the per-token rsqrt; backward 8a + 60 in twelve (the weight's product
  //     and its sum over tokens 6a, the cast up a+4, the product's two gradients 8 and 16, mean's
  //     expand 4, pow's 12, their sum 12, the cast down 4+a) where a fused norm reads and writes 2a
  //     and 4a;
  //   rotary embedding on the query and the key: the cast up a+4, the complex multiply 8, the cast
  //     down 4+a, 16 + 2a both ways, three launches each;
  //   SwiGLU: silu 2a and the product 3a, 5a, backward the product's two gradients 6a and silu's
  //     3a, 9a, where a fused kernel reads two and writes one (3a, backward 4a);
  //   the attention output transposed to (batch, sequence, hidden) by a copy, 2a, and its
  //     gradient made contiguous again for the attention's backward, 2a;
  //   grouped-query attention's keys and values repeated to every head (repeat_kv: expand, then
  //     reshape copies), reading kv and writing h per token for each, and summed back in backward.
  // RMSNorm and the rotary embedding are Llama's (a GPT's nn.LayerNorm is one kernel eagerly too,
  // and it learns its positions); SwiGLU goes with model.mlp.
  const FrameworkProfile& framework = FrameworkRegistry::get(s.training.framework, "training.framework");
  // torch.compile (training.compile) fuses these chains into Inductor's kernels: the fused
  // frameworks' bytes.
  const bool eager = framework.eager_ops && !autocast && !x.fp8 && !s.training.compile;
  const bool eager_rms = eager && s.model.norm == "rmsnorm";
  // FP8 with Transformer Engine's casts (delayed scaling), or with torchao's (dynamic scaling),
  // whose weights are cast every pass unless FSDP gathered them in FP8.
  const bool te_fp8      = x.fp8 && !framework.fp8_dynamic_scaling;
  const bool dynamic_fp8 = x.fp8 && framework.fp8_dynamic_scaling;
  const bool cast_weights = dynamic_fp8 && !s.parallelism.float8_all_gather;
  auto eager_kernel = [](const char* name, double bytes, double launches) {
    Kernel k   = memory_kernel(name, bytes);
    k.launches = launches;
    return k;
  };
  const double qk_width = (x.q + x.kv) / x.t; // the query's and the key's elements per token
  auto rope             = [&](const char* name) { return eager_kernel(name, x.tokens * qk_width * (16 + 2 * x.a), 6); };
  auto repeat_kv        = [&](const char* name) {
    return eager_kernel(name, x.tokens * 2 * (x.kv + x.q) / x.t * x.a, 2);
  };
  const bool grouped = x.kv < x.q && !latent;
  const bool biases   = s.model.norm == "layernorm"; // GPT's linear layers have biases, Llama's none
  const double attn_weights = (x.h * (qkv_n + x.q / x.t)) + (biases ? qkv_n + x.h / x.t : 0);
  const double mlp_weights  = (x.h * (mlp_n + x.ffn / x.t)) + (biases ? mlp_n + x.h : 0);

  // A norm, and under autocast the cast of its fp32 output down for the linear layer after it.
  // Under FP8 the norm writes its output in FP8 for the linear layer it feeds (Transformer
  // Engine's LayerNormLinear and LayerNormMLP: layernorm_fwd_fp8 / rmsnorm_fwd_fp8); torchao's
  // norm writes bf16, which the linear layer casts (the cast's name then).
  auto norm = [&](const char* name, const char* cast) {
    if (eager_rms)
      return std::vector<Kernel>{eager_kernel(name, nt * x.h * (28 + 4 * x.a), 8)};
    std::vector<Kernel> out = {te_fp8 ? memory_kernel(name, nt * x.h * (x.a + 1)) : elementwise(name, nt, x.h, 2, r)};
    if (autocast)
      out.push_back(elementwise(cast, nt, x.h, 1, r + x.a));
    if (dynamic_fp8)
      out.push_back(fp8_fresh_cast(cast, x.tokens * x.h, x.a));
    return out;
  };
  // The residual add: under autocast the fp32 stream and the block's 16-bit output read, fp32 written.
  auto residual_add = [&] {
    return autocast ? memory_kernel(residual, nt * x.h * (2 * r + x.a + (dropout ? x.a + 1 : 0)))
                    : elementwise(residual, nt, x.h, residual_rw, x.a);
  };
  // Backward of a norm and of the residual add around it. Under autocast: the fp32 gradient cast
  // down into the block, the cast before the linear layer undone (16-bit gradient to fp32), the
  // norm's backward in fp32 and its gradient added to the residual's.
  auto residual_backward = [&] {
    return autocast ? elementwise(residual_bwd, nt, x.h, 1, r + x.a) : elementwise(residual_bwd, nt, x.h, residual_rw, x.a);
  };
  auto norm_backward = [&](const char* name, const char* cast, const char* add) {
    std::vector<Kernel> out;
    if (autocast)
      out.push_back(elementwise(cast, nt, x.h, 1, x.a + r));
    out.push_back(eager_rms ? eager_kernel(name, nt * x.h * (8 * x.a + 60), 12) : elementwise(name, nt, x.h, 4, r));
    if (autocast || eager) // eagerly, autograd adds the norm's gradient to the residual's
      out.push_back(elementwise(add, nt, x.h, 3, r));
    return out;
  };
  auto weight_cast = [&](const char* name, double weights) {
    return memory_kernel(name, weights * (4 + x.a)); // fp32 read, 16-bit written (or back)
  };

  // The attention block in three parts: before its core, the core, after it. Context parallelism
  // runs the core once per K/V block of the ring (workloads/parallel/context_parallel.hpp).
  // Under latent attention the input norm is a norm of its own (TENorm) that writes the
  // training precision for the down projections, each casting it to FP8 itself (TELinear).
  std::vector<Kernel> attn_f_pre =
      latent ? std::vector<Kernel>{elementwise("input_norm", nt, x.h, 2, x.a)} : norm("input_norm", "input_norm_cast");
  if (autocast)
    attn_f_pre.insert(attn_f_pre.begin(), weight_cast("attention_weight_cast", attn_weights));
  if (cast_weights)
    attn_f_pre.insert(attn_f_pre.begin(), fp8_stored_cast("attention_weight_fp8_cast", attn_weights, x.a));
  if (latent)
    latent_attention_works(s, x, LatentPass::Forward, attn_f_pre);
  else
    attn_f_pre.push_back(fwd("qkv", x, qkv_n, x.h));
  if (eager_rms)
    attn_f_pre.push_back(rope("rotary_embedding"));
  if (eager && grouped)
    attn_f_pre.push_back(repeat_kv("repeat_kv"));
  std::vector<Kernel> attn_f_core;
  attention_core(s, x, false, attn_f_core);
  std::vector<Kernel> attn_f_post;
  if (autocast || eager) // (batch, heads, sequence, head_dim) to (batch, sequence, hidden)
    attn_f_post.push_back(elementwise("attention_output_copy", x.tokens, x.o / x.t, 2, x.a));
  if (te_fp8) // the bf16 attention output into the projection (te.Linear)
    attn_f_post.push_back(fp8_cast_transpose("attention_out_fp8_cast", x.tokens, x.o / x.t));
  if (dynamic_fp8)
    attn_f_post.push_back(fp8_fresh_cast("attention_out_fp8_cast", x.tokens * x.o / x.t, x.a));
  attn_f_post.push_back(fwd("attention_out", x, x.h, x.o / x.t));
  attn_f_post.push_back(residual_add());
  const std::vector<Kernel> attn_f = joined(joined(attn_f_pre, attn_f_core), attn_f_post);

  std::vector<Kernel> mlp_f = norm("post_attention_norm", "post_attention_norm_cast");
  if (autocast)
    mlp_f.insert(mlp_f.begin(), weight_cast("mlp_weight_cast", mlp_weights));
  if (cast_weights)
    mlp_f.insert(mlp_f.begin(), fp8_stored_cast("mlp_weight_fp8_cast", mlp_weights, x.a));
  // The activation function reads fc1's bf16 output; under FP8 it writes fc2's input in FP8
  // (LayerNormMLP: the activation kernel takes fc2's input scale).
  const char* activation = s.model.mlp == "swiglu" ? "swiglu" : "gelu";
  const bool eager_swiglu = eager && s.model.mlp == "swiglu";
  mlp_f.insert(mlp_f.end(), {fwd("fc1", x, mlp_n, x.h),
                             te_fp8         ? memory_kernel(activation, x.tokens * x.ffn / x.t * ((act - 1) * x.a + 1))
                             : eager_swiglu ? eager_kernel(activation, x.tokens * x.ffn / x.t * 5 * x.a, 2)
                                            : elementwise(activation, x.tokens, x.ffn / x.t, act, x.a)});
  if (dynamic_fp8)
    mlp_f.push_back(fp8_fresh_cast("fc2_input_fp8_cast", x.tokens * x.ffn / x.t, x.a));
  mlp_f.insert(mlp_f.end(), {fwd("fc2", x, x.h, x.ffn / x.t), residual_add()});

  // Under FP8 each output gradient is cast (and transposed, for the weight gradient) before the
  // dgrad: grad_output_preprocess in transformer_engine/pytorch/module/base.py, on the sequence
  // shard before a sequence-parallel all-gather. fc1's is fused into the activation's backward
  // (fp8_cast_transpose_bgrad_dgelu_fused), whose FP8 output and transpose are the bytes of its
  // bf16 one.
  // Selective recompute as the framework runs it (FrameworkProfile::selective_recompute): Megatron
  // re-runs the attention core inside backward; torchtitan's per-op policy keeps the attention's
  // output and the odd matmuls' (query, value, gate, down projections) and rebuilds the rest of
  // the block before its backward (in forward order; the block's tail after the down projection,
  // which no backward reads, is not rebuilt: torch.utils.checkpoint stops early).
  const bool by_op = s.training.recompute == "selective" && framework.selective_recompute == "op";
  std::vector<Kernel> attn_bi_post;
  if (by_op) {
    attn_bi_post = norm("input_norm_recompute", "input_norm_cast_recompute");
    attn_bi_post.push_back(fwd("key_recompute", x, x.kv / x.t, x.h));
    if (eager_rms)
      attn_bi_post.push_back(rope("rotary_embedding_recompute"));
    if (eager && grouped)
      attn_bi_post.push_back(repeat_kv("repeat_kv_recompute"));
    if (autocast || eager)
      attn_bi_post.push_back(elementwise("attention_output_copy_recompute", x.tokens, x.q / x.t, 2, x.a));
    attn_bi_post.push_back(fwd("attention_out_recompute", x, x.h, x.q / x.t));
    attn_bi_post.push_back(residual_add());
  }
  attn_bi_post.push_back(residual_backward());
  // An output gradient's cast: Transformer Engine's cast and transpose, torchao's two FP8 layouts
  // from one read (fp8_fresh_cast with two), the same bytes in bf16.
  if (x.fp8)
    attn_bi_post.push_back(fp8_cast_transpose("attention_out_grad_fp8_cast", nt, x.h));
  if (cast_weights) // the weights again for the input gradients (weight_for_grad_input)
    attn_bi_post.push_back(fp8_stored_cast("attention_weight_fp8_cast_bwd", attn_weights, x.a));
  attn_bi_post.push_back(dgrad("attention_out_dgrad", x, x.h, x.o / x.t));
  if (autocast || eager)
    attn_bi_post.push_back(elementwise("attention_output_copy_bwd", x.tokens, x.o / x.t, 2, x.a));
  std::vector<Kernel> attn_bi_core;
  if (s.training.recompute == "selective" && !by_op) // the attention core is recomputed inside backward
    attention_core(s, x, false, attn_bi_core);
  attention_core(s, x, true, attn_bi_core);
  std::vector<Kernel> attn_bi_pre;
  if (eager && grouped)
    attn_bi_pre.push_back(repeat_kv("repeat_kv_bwd"));
  if (eager_rms)
    attn_bi_pre.push_back(rope("rotary_embedding_bwd"));
  if (autocast) // the query, key and value gradients copied into the projection's output gradient
    attn_bi_pre.push_back(elementwise("qkv_grad_copy", x.tokens, qkv_n, 2, x.a));
  if (latent) {
    latent_attention_works(s, x, LatentPass::InputGradients, attn_bi_pre);
  } else {
    if (x.fp8)
      attn_bi_pre.push_back(fp8_cast_transpose("qkv_grad_fp8_cast", x.tokens, qkv_n));
    attn_bi_pre.push_back(dgrad("qkv_dgrad", x, qkv_n, x.h));
  }
  attn_bi_pre = joined(attn_bi_pre, norm_backward("input_norm_bwd", "input_norm_cast_bwd", "input_residual_grad_add"));
  const std::vector<Kernel> attn_bi = joined(joined(attn_bi_post, attn_bi_core), attn_bi_pre);
  // The weight gradients read the FP8 inputs transposed: the projection's was cast and transposed
  // in forward; QKV's and fc1's (the norm's FP8 output, gathered under sequence parallelism) and
  // fc2's (the activation's) are transposed here (fp8_transpose).
  // torchao saved them in bf16 and casts them again, column-major (input_for_grad_weight).
  std::vector<Kernel> attn_bw;
  if (te_fp8 && !latent)
    attn_bw.push_back(fp8_transpose("qkv_input_fp8_transpose", x.tokens, x.h));
  if (dynamic_fp8) {
    attn_bw.push_back(fp8_stored_cast("qkv_input_fp8_recast", x.tokens * x.h, x.a));
    attn_bw.push_back(fp8_stored_cast("attention_out_input_fp8_recast", x.tokens * x.q / x.t, x.a));
  }
  attn_bw.push_back(wgrad("attention_out_wgrad", x, x.h, x.o / x.t));
  if (latent)
    latent_attention_works(s, x, LatentPass::WeightGradients, attn_bw);
  else
    attn_bw.push_back(wgrad("qkv_wgrad", x, qkv_n, x.h));

  std::vector<Kernel> mlp_bi;
  if (by_op) { // the norm, the up projection (a gated MLP's second matmul) and the activation
    mlp_bi = norm("post_attention_norm_recompute", "post_attention_norm_cast_recompute");
    if (s.model.mlp == "swiglu")
      mlp_bi.push_back(fwd("fc1_up_recompute", x, x.ffn / x.t, x.h));
    mlp_bi.push_back(eager_swiglu ? eager_kernel("activation_recompute", x.tokens * x.ffn / x.t * 5 * x.a, 2)
                                  : elementwise("activation_recompute", x.tokens, x.ffn / x.t, act, x.a));
  }
  mlp_bi.push_back(residual_backward());
  if (x.fp8)
    mlp_bi.push_back(fp8_cast_transpose("fc2_grad_fp8_cast", nt, x.h));
  if (cast_weights)
    mlp_bi.push_back(fp8_stored_cast("mlp_weight_fp8_cast_bwd", mlp_weights, x.a));
  mlp_bi.insert(mlp_bi.end(), {dgrad("fc2_dgrad", x, x.h, x.ffn / x.t),
                               eager_swiglu ? eager_kernel("activation_bwd", x.tokens * x.ffn / x.t * 9 * x.a, 3)
                                            : elementwise("activation_bwd", x.tokens, x.ffn / x.t, act + 1, x.a)});
  if (dynamic_fp8) // Transformer Engine fuses this cast into the activation's backward
    mlp_bi.push_back(fp8_fresh_cast("fc1_grad_fp8_cast", x.tokens * mlp_n, x.a, 2));
  mlp_bi.push_back(dgrad("fc1_dgrad", x, mlp_n, x.h));
  mlp_bi = joined(mlp_bi, norm_backward("post_attention_norm_bwd", "post_attention_norm_cast_bwd",
                                        "post_attention_residual_grad_add"));
  std::vector<Kernel> mlp_bw;
  if (te_fp8) {
    mlp_bw.push_back(fp8_transpose("fc2_input_fp8_transpose", x.tokens, x.ffn / x.t));
    mlp_bw.push_back(fp8_transpose("fc1_input_fp8_transpose", x.tokens, x.h));
  }
  if (dynamic_fp8) {
    mlp_bw.push_back(fp8_stored_cast("fc2_input_fp8_recast", x.tokens * x.ffn / x.t, x.a));
    mlp_bw.push_back(fp8_stored_cast("fc1_input_fp8_recast", x.tokens * x.h, x.a));
  }
  mlp_bw.insert(mlp_bw.end(), {wgrad("fc2_wgrad", x, x.h, x.ffn / x.t), wgrad("fc1_wgrad", x, mlp_n, x.h)});
  if (autocast) {
    if (biases) { // each bias's gradient: the output gradient summed over the tokens
      attn_bw.push_back(elementwise("attention_bias_grad", x.tokens, qkv_n + x.h, 1, x.a));
      mlp_bw.push_back(elementwise("mlp_bias_grad", x.tokens, mlp_n + x.h, 1, x.a));
    }
    attn_bw.push_back(weight_cast("attention_weight_grad_cast", attn_weights));
    mlp_bw.push_back(weight_cast("mlp_weight_grad_cast", mlp_weights));
  }

  TransformerWorks w{};
  w.attention_forward         = add("attention_forward", attn_f);
  w.mlp_forward               = add("mlp_forward", mlp_f);
  w.attention_backward        = add("attention_backward", joined(attn_bi, attn_bw));
  w.mlp_backward              = add("mlp_backward", joined(mlp_bi, mlp_bw));
  w.attention_backward_input  = add("attention_backward_input", attn_bi);
  w.attention_backward_weight = add("attention_backward_weight", attn_bw);
  w.mlp_backward_input        = add("mlp_backward_input", mlp_bi);
  w.mlp_backward_weight       = add("mlp_backward_weight", mlp_bw);
  w.attention_recompute       = add("attention_recompute", attn_f);
  // A checkpoint that stops early (FrameworkProfile::recompute_stops_early) leaves out the block's
  // tail: fc2 and the residual add after it, which no backward reads (dropout keeps a mask there).
  std::vector<Kernel> mlp_r = mlp_f;
  if (framework.recompute_stops_early && !dropout) {
    const auto fc2 = std::find_if(mlp_r.begin(), mlp_r.end(), [](const Kernel& k) { return k.name == "fc2"; });
    mlp_r.erase(fc2, mlp_r.end());
  }
  w.mlp_recompute             = add("mlp_recompute", mlp_r);
  w.attention_parts           = {-1, -1, -1, -1, -1, -1};
  if (s.parallelism.context > 1) {
    w.attention_parts.qkv_forward   = add("attention_qkv_forward", attn_f_pre);
    w.attention_parts.core_forward  = add("attention_core_forward", attn_f_core);
    w.attention_parts.out_forward   = add("attention_out_forward", attn_f_post);
    w.attention_parts.out_backward  = add("attention_out_backward", attn_bi_post);
    w.attention_parts.core_backward = add("attention_core_backward", attn_bi_core);
    w.attention_parts.qkv_backward  = add("attention_qkv_backward", attn_bi_pre);
  }

  // Under autocast the embedding runs on its fp32 table (not on autocast's lists): fp32 out.
  w.embedding_forward  = add("embedding_forward", {elementwise("embedding_lookup", x.tokens, x.h, 3, r)});
  w.embedding_backward = add("embedding_backward", {elementwise("embedding_grad", x.tokens, x.h, 3, r)});
  // Logits over the vocabulary shard, then the vocab-parallel cross entropy, pass by pass as
  // Megatron runs it (megatron/core/tensor_parallel/cross_entropy.py, VocabParallelCrossEntropy;
  // the same passes as megatron/mpu/cross_entropy.py before it), in bytes per logit: forward,
  // the cast to fp32 (read e, write 4), the max (read 4), the subtraction, exp and normalisation
  // in place (read and write 4 each) and the sum (read 4); backward, the scaling by the loss
  // gradient in place (read and write 4) and the cast of the gradient back (read 4, write e).
  // The output layer is Megatron's own ColumnParallelLinear, not a Transformer Engine module
  // (megatron/core/models/gpt/gpt_model.py, GPTModel.__init__): bf16 GEMMs in an fp8 run, on
  // the final norm's bf16 output.
  const double logits = x.tokens * (x.vocab / x.t);
  auto output_layer   = [&](Kernel g) {
    if (x.fp8) {
      g = gemm(g.name, g.m, g.n, g.k, x.a);
      g.precision = "bf16";
    }
    return g;
  };
  std::vector<Kernel> head_f =
      x.fp8 ? std::vector<Kernel>{elementwise("final_norm", nt, x.h, 2, x.a)} : norm("final_norm", "final_norm_cast");
  if (autocast)
    head_f.insert(head_f.begin(), weight_cast("logits_weight_cast", x.vocab / x.t * x.h));
  head_f.insert(head_f.end(), {output_layer(fwd("logits", x, x.vocab / x.t, x.h)),
                               memory_kernel("cross_entropy", logits * (x.a + 36))});
  w.head_forward = add("head_forward", std::move(head_f));
  std::vector<Kernel> head_b = {memory_kernel("cross_entropy_bwd", logits * (12 + x.a)),
                                output_layer(dgrad("logits_dgrad", x, x.vocab / x.t, x.h)),
                                output_layer(wgrad("logits_wgrad", x, x.vocab / x.t, x.h))};
  if (autocast) {
    head_b.push_back(weight_cast("logits_weight_grad_cast", x.vocab / x.t * x.h));
    head_b.push_back(elementwise("final_norm_cast_bwd", nt, x.h, 1, x.a + r));
  }
  head_b.push_back(eager_rms ? eager_kernel("final_norm_bwd", nt * x.h * (8 * x.a + 60), 12)
                         : elementwise("final_norm_bwd", nt, x.h, 4, r));
  w.head_backward = add("head_backward", std::move(head_b));
  return w;
}

} // namespace stepsim

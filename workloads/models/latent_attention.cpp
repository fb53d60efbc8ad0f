#include "workloads/models/latent_attention.hpp"

namespace stepsim {

double query_head_dim(const ModelSpec& m)
{
  return attention_head_dim(m) + (latent_attention(m) ? m.qk_rope_head_dim : 0);
}

double value_head_dim(const ModelSpec& m)
{
  return latent_attention(m) && m.v_head_dim > 0 ? double(m.v_head_dim) : attention_head_dim(m);
}

namespace {

// The widths Megatron's MLASelfAttention builds its projections with.
struct Widths {
  double h, heads, qk, nope, v, rope, q_lora, kv_lora;
};

Widths widths_of(const ModelSpec& m)
{
  return {double(m.hidden_size), double(m.num_attention_heads), query_head_dim(m), attention_head_dim(m),
          value_head_dim(m),     double(m.qk_rope_head_dim),    double(m.q_lora_rank), double(m.kv_lora_rank)};
}

} // namespace

double latent_attention_projection_macs(const ModelSpec& m)
{
  const Widths w = widths_of(m);
  const double q = w.q_lora > 0 ? w.h * w.q_lora + w.q_lora * w.heads * w.qk : w.h * w.heads * w.qk;
  const double kv = w.h * (w.kv_lora + w.rope) + w.kv_lora * w.heads * (w.nope + w.v);
  return q + kv + w.heads * w.v * w.h;
}

std::vector<double> latent_attention_parameter_tensors(const ModelSpec& m, int tensor)
{
  const Widths w = widths_of(m);
  const double t = tensor;
  std::vector<double> out;
  if (w.q_lora > 0) {
    out.push_back(w.h * w.q_lora);                 // linear_q_down_proj, duplicated
    out.push_back(w.q_lora);                       // q_layernorm
    out.push_back(w.q_lora * w.heads * w.qk / t);  // linear_q_up_proj
  } else {
    out.push_back(w.h * w.heads * w.qk / t); // linear_q_proj
  }
  out.push_back(w.h * (w.kv_lora + w.rope));              // linear_kv_down_proj, duplicated
  out.push_back(w.kv_lora);                               // kv_layernorm
  out.push_back(w.kv_lora * w.heads * (w.nope + w.v) / t); // linear_kv_up_proj
  out.push_back(w.heads * w.v * w.h / t);                 // linear_proj
  return out;
}

double latent_attention_parameters_per_rank(const ModelSpec& m, int tensor)
{
  double sum = 0;
  for (double p : latent_attention_parameter_tensors(m, tensor))
    sum += p;
  return sum;
}

LatentAttentionBytes latent_attention_activation_bytes(const ModelSpec& m, double e, double input)
{
  const Widths w = widths_of(m);
  // Each rank's own tokens: the query latent's norm input and the up projection's input (the
  // norm's output), the key-value latent's likewise, and the rotary key before its rotation.
  const double query_latent = w.q_lora > 0 ? w.q_lora * (e + input) : 0.0;
  const double whole        = query_latent + w.kv_lora * (e + input) + w.rope * e;
  // The heads' shard: the rotated query and key and the value the fused core saves, and its output,
  // which the output projection saves as its input (once more at one byte under FP8). Without a
  // query latent, linear_q_proj's input is the block's, counted by the caller.
  const double sharded = e * (2 * w.heads * w.qk + w.heads * w.v) + e * w.heads * w.v +
                         (input < e ? input * w.heads * w.v : 0.0);
  return {whole, sharded};
}

} // namespace stepsim

#include "workloads/models/cnn.hpp"
#include "workloads/models/layer_list.hpp"
#include "workloads/lower.hpp"
#include "workloads/models/moe.hpp"

namespace stepsim {

namespace {
double forward_flops_per_token(const ModelSpec& m, double seq)
{
  double h      = m.hidden_size;
  double kv     = h / m.num_attention_heads * m.num_query_groups;
  // A MoE token runs through top_k experts (Megatron's count: no capacity padding, no router).
  double mlp    = is_moe(m) ? (m.mlp == "swiglu" ? 3.0 : 2.0) * h * expert_ffn_hidden_size(m) * m.moe_top_k
                            : (m.mlp == "swiglu" ? 3.0 : 2.0) * h * m.ffn_hidden_size;
  double layer  = 2.0 * (h * (h + 2 * kv) + h * h + mlp) + 4.0 * seq * h;
  return m.num_layers * layer + 2.0 * h * m.vocab_size;
}
} // namespace

double model_flops_per_step(const Scenario& s)
{
  if (is_layer_list(s.model)) { // the FLOPs given, forward and backward
    const SampleFlops f = layer_list_flops_per_sample(s.model, double(s.training.micro_batch_size));
    return double(s.training.global_batch_size) * (f.forward + f.backward);
  }
  if (is_cnn(s.model)) // forward, then input and weight gradients at twice the forward
    return 3.0 * double(s.training.global_batch_size) * cnn_forward_flops_per_sample(s.model);
  double tokens = double(s.training.global_batch_size) * s.model.seq_length;
  return 3.0 * tokens * forward_flops_per_token(s.model, s.model.seq_length);
}

double hardware_flops_per_step(const Scenario& s)
{
  if (is_layer_list(s.model)) { // full recompute runs every forward twice
    const SampleFlops f = layer_list_flops_per_sample(s.model, double(s.training.micro_batch_size));
    return double(s.training.global_batch_size) * ((s.training.recompute == "full" ? 2 : 1) * f.forward + f.backward);
  }
  if (is_cnn(s.model)) // full recompute runs every forward twice
    return (s.training.recompute == "full" ? 4.0 : 3.0) * double(s.training.global_batch_size) *
           cnn_forward_flops_per_sample(s.model);
  double tokens  = double(s.training.global_batch_size) * s.model.seq_length;
  double forward = tokens * forward_flops_per_token(s.model, s.model.seq_length);
  if (s.training.recompute == "full")
    return 4.0 * forward - tokens * 2.0 * s.model.hidden_size * s.model.vocab_size; // the head is not recomputed
  if (s.training.recompute == "selective")
    return 3.0 * forward + tokens * s.model.num_layers * 4.0 * s.model.seq_length * s.model.hidden_size;
  return 3.0 * forward;
}

} // namespace stepsim

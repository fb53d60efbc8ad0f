#include "models/memory.hpp"

#include "workloads/transformer.hpp"

namespace stepsim {

double layer_activation_bytes(const Scenario& s)
{
  const double sq = double(s.model.seq_length) / s.parallelism.context;
  const double b  = s.training.micro_batch_size;
  const double h  = s.model.hidden_size;
  const double a  = s.model.num_attention_heads;
  const double t  = s.parallelism.tensor;
  const bool sp   = s.parallelism.sequence_parallel;
  const double sbh = sq * b * h;
  if (s.training.recompute == "full") // only each layer's input is kept
    return 2 * sbh / (sp ? t : 1);
  // The 5as/h term is the attention scores and their dropout mask; selective recompute and fused
  // (flash) attention do not keep them.
  const bool keeps_scores = s.training.recompute == "none" && s.training.attention == "standard";
  const double scores     = keeps_scores ? 5 * a * sq / h : 0;
  if (sp)
    return sbh / t * (34 + scores);
  return sbh * (10 + 24 / t + scores / t);
}

double stage_parameters(const Scenario& s, int stage)
{
  const int p      = s.parallelism.pipeline;
  const int t      = s.parallelism.tensor;
  double params    = double(s.model.num_layers) / p * layer_parameters_per_rank(s.model, t);
  if (stage == 0)
    params += embedding_parameters_per_rank(s.model, t);
  if (stage == p - 1) // the output layer, or the copy of the tied word embeddings
    params += double(s.model.vocab_size) * s.model.hidden_size / t + s.model.hidden_size;
  return params;
}

MemoryBreakdown stage_memory(const Scenario& s, int stage, int micro_batches_in_flight)
{
  const int dp      = s.parallelism.data * s.parallelism.context;
  const int zero    = s.parallelism.zero_stage;
  const double psi  = stage_parameters(s, stage);
  const double e    = element_bytes(s.training.precision) == 4 ? 4 : 2;
  MemoryBreakdown m;
  m.weights   = psi * e / (zero >= 3 ? dp : 1);
  m.gradients = psi * e / (zero >= 2 ? dp : 1);
  double k    = s.training.optimizer == "adam" ? 12 : 8; // fp32 master weights and moments
  m.optimizer = psi * k / (zero >= 1 ? dp : 1);

  const int p             = s.parallelism.pipeline;
  const double layers     = double(s.model.num_layers) / p;
  const double per_layer  = layer_activation_bytes(s);
  m.activations           = per_layer * layers * micro_batches_in_flight;
  if (s.training.recompute == "full") { // one layer is rebuilt in full during its backward
    Scenario whole              = s;
    whole.training.recompute    = "none";
    m.activations += layer_activation_bytes(whole);
  }
  if (stage == p - 1) // fp32 logits of the vocabulary shard
    m.activations += 4.0 * s.training.micro_batch_size * s.model.seq_length / s.parallelism.context *
                     s.model.vocab_size / s.parallelism.tensor;
  if (dp > 1)
    m.buffers = s.parallelism.bucket_bytes;
  return m;
}

} // namespace stepsim

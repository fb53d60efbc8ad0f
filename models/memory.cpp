#include "models/memory.hpp"

#include "workloads/cnn.hpp"
#include "workloads/transformer.hpp"

#include <algorithm>

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

namespace {

// A CNN's layers on each pipeline stage (over its virtual stages), by index into cnn_layers.
std::vector<std::vector<int>> cnn_layers_by_stage(const Scenario& s, const std::vector<CnnLayer>& layers)
{
  const auto split = cnn_stage_split(s, layers);
  std::vector<std::vector<int>> by_stage(static_cast<size_t>(s.parallelism.pipeline));
  int next = 0;
  for (size_t vs = 0; vs < split.size(); ++vs)
    for (int i = 0; i < split[vs] && next < static_cast<int>(layers.size()); ++i)
      by_stage[vs % by_stage.size()].push_back(next++);
  return by_stage;
}

// A CNN trains in the precision it computes in (fp32 in the published runs): weights and
// gradients in that precision; optimizer states as the optimizer keeps them (Adam two moments,
// SGD a momentum buffer), plus fp32 master weights when the weights are 16-bit. Activations: each
// layer's output is kept for its backward; under full recompute only the stage's input is kept per
// micro-batch, and one micro-batch's layers are rebuilt at a time.
MemoryBreakdown cnn_stage_memory(const Scenario& s, int stage, int micro_batches_in_flight)
{
  const double e   = element_bytes(s.training.precision) == 4 ? 4 : 2;
  const auto layers = cnn_layers(s.model, double(s.training.micro_batch_size), e);
  const auto mine   = cnn_layers_by_stage(s, layers).at(static_cast<size_t>(stage));
  double psi = 0, kept = 0;
  for (int i : mine) {
    psi += layers[i].parameters;
    kept += layers[i].saved_bytes;
  }
  const int dp   = s.parallelism.data;
  const int zero = s.parallelism.zero_stage;
  double states  = (s.training.optimizer == "adam" ? 8.0 : 4.0) + (e == 4 ? 0.0 : 4.0);
  MemoryBreakdown m;
  m.weights   = psi * e / (zero >= 3 ? dp : 1);
  m.gradients = psi * e / (zero >= 2 ? dp : 1);
  m.optimizer = psi * states / (zero >= 1 ? dp : 1);
  if (s.training.recompute == "full") {
    double input = mine.empty() || mine.front() == 0 ? double(s.training.micro_batch_size) * 3 * s.model.image_size *
                                                           s.model.image_size * e
                                                     : layers[mine.front() - 1].output_bytes;
    m.activations = input * micro_batches_in_flight + kept;
  } else {
    m.activations = kept * micro_batches_in_flight;
  }
  if (dp > 1)
    m.buffers = std::min(s.parallelism.bucket_bytes, m.gradients);
  return m;
}

} // namespace

double stage_parameters(const Scenario& s, int stage)
{
  if (is_cnn(s.model)) {
    const auto layers = cnn_layers(s.model, 1, 4);
    double psi        = 0;
    for (int i : cnn_layers_by_stage(s, layers).at(static_cast<size_t>(stage)))
      psi += layers[i].parameters;
    return psi;
  }
  const int p      = s.parallelism.pipeline;
  const int t      = s.parallelism.tensor;
  double params    = double(s.layers_on_stage(stage)) * layer_parameters_per_rank(s.model, t);
  if (stage == 0)
    params += embedding_parameters_per_rank(s.model, t);
  if (stage == p - 1) // the output layer, or the copy of the tied word embeddings
    params += double(s.model.vocab_size) * s.model.hidden_size / t + s.model.hidden_size;
  return params;
}

MemoryBreakdown stage_memory(const Scenario& s, int stage, int micro_batches_in_flight)
{
  if (is_cnn(s.model))
    return cnn_stage_memory(s, stage, micro_batches_in_flight);
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
  const double layers     = s.layers_on_stage(stage);
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
    m.buffers = std::min(s.parallelism.bucket_bytes, m.gradients); // a bucket never holds more than the gradients
  return m;
}

} // namespace stepsim

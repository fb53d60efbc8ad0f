#include "models/memory.hpp"

#include "workloads/models/cnn.hpp"
#include "workloads/models/layer_list.hpp"
#include "workloads/models/moe.hpp"
#include "workloads/models/transformer.hpp"

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
  const double experts = moe_activation_delta_bytes(s); // a MoE layer's experts instead of its MLP
  if (sp)
    return sbh / t * (34 + scores) + experts;
  return sbh * (10 + 24 / t + scores / t) + experts;
}

namespace {

// The layers as the lowering splits them: a layer list's kernels are per micro-batch and its
// figures per sample, so the split by FLOPs depends on the micro-batch.
std::vector<CnnLayer> cnn_layers_of(const Scenario& s)
{
  return cnn_layers(s.model, double(s.training.micro_batch_size), element_bytes(s.training.precision) == 4 ? 4 : 2);
}

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
  const auto layers = cnn_layers_of(s);
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
    const double b     = double(s.training.micro_batch_size);
    const double sample = is_layer_list(s.model) ? s.model.input_bytes : 3.0 * s.model.image_size * s.model.image_size * e;
    double input = mine.empty() || mine.front() == 0 ? b * sample : layers[mine.front() - 1].output_bytes;
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
    const auto layers   = cnn_layers_of(s);
    const auto by_stage = cnn_layers_by_stage(s, layers); // kept: the loop below refers into it
    double psi          = 0;
    for (int i : by_stage.at(static_cast<size_t>(stage)))
      psi += layers[i].parameters;
    return psi;
  }
  const int p      = s.parallelism.pipeline;
  const int t      = s.parallelism.tensor;
  double params    = double(s.layers_on_stage(stage)) * layer_parameters_per_rank(s.model, t, s.parallelism.expert);
  if (stage == 0)
    params += embedding_parameters_per_rank(s.model, t);
  if (stage == p - 1) // the final norm, and the output layer or the last stage's copy of the tied embeddings
    params += (s.model.tied_embeddings && p == 1 ? 0 : double(s.model.vocab_size) * s.model.hidden_size / t) +
              s.model.hidden_size;
  return params;
}

namespace {

// What ZeRO-3 / FSDP and ZeRO-Offload change, on top of the ZeRO paper's accounting (`m` already
// holds it): gathered parameters and the unit gradient waiting for its reduce-scatter, and the
// optimizer states that live on the host. `largest_unit`: parameters of the stage's largest unit
// (a layer, or the embedding or head), per rank.
void sharded_data_parallel(const Scenario& s, double psi, double e, double largest_unit, MemoryBreakdown& m)
{
  const int dp = s.parallelism.data * s.parallelism.context;
  if (s.parallelism.zero_stage >= 3 && dp > 1) {
    if (s.parallelism.reshard_after_forward) // the unit in use and the prefetched next one
      m.buffers = 2 * largest_unit * e + largest_unit * e;
    else { // the stage stays gathered between forward and backward
      m.weights += psi * e;
      m.buffers = largest_unit * e;
    }
  }
  if (s.parallelism.offload_optimizer) // fp32 master weights and moments live in host memory
    m.optimizer = 0;
}

} // namespace

MemoryBreakdown stage_memory(const Scenario& s, int stage, int micro_batches_in_flight, int weight_versions)
{
  if (is_cnn(s.model)) {
    MemoryBreakdown m = cnn_stage_memory(s, stage, micro_batches_in_flight);
    m.weights *= weight_versions;
    const auto layers   = cnn_layers_of(s);
    const auto by_stage = cnn_layers_by_stage(s, layers); // kept: the loop below refers into it
    double largest      = 0;
    for (int i : by_stage.at(static_cast<size_t>(stage)))
      largest = std::max(largest, layers[static_cast<size_t>(i)].parameters);
    sharded_data_parallel(s, stage_parameters(s, stage), element_bytes(s.training.precision) == 4 ? 4 : 2, largest, m);
    return m;
  }
  const int dp      = s.parallelism.data * s.parallelism.context;
  const int zero    = s.parallelism.zero_stage;
  const double psi  = stage_parameters(s, stage);
  const double e    = element_bytes(s.training.precision) == 4 ? 4 : 2;
  MemoryBreakdown m;
  // Stashed versions are whole working copies; the optimizer's master copy stays one.
  m.weights   = psi * e / (zero >= 3 ? dp : 1) * weight_versions;
  m.gradients = psi * e / (zero >= 2 ? dp : 1);
  double k    = s.training.optimizer == "adam" ? 12 : 8; // fp32 master weights and moments
  m.optimizer = psi * k / (zero >= 1 ? dp : 1);
  if (is_moe(s.model) && s.parallelism.expert > 1) {
    // Experts are sharded over the ranks that hold the same experts: data × context / expert.
    const double experts = s.layers_on_stage(stage) * expert_parameters_per_rank(s.model, s.parallelism.tensor,
                                                                                s.parallelism.expert);
    const double more    = experts * (double(s.parallelism.expert) / dp - 1.0 / dp); // 1/edp − 1/dp
    if (zero >= 3)
      m.weights += more * e * weight_versions;
    if (zero >= 2)
      m.gradients += more * e;
    if (zero >= 1)
      m.optimizer += more * k;
  }

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
  double largest = layer_parameters_per_rank(s.model, s.parallelism.tensor, s.parallelism.expert);
  if (stage == 0)
    largest = std::max(largest, embedding_parameters_per_rank(s.model, s.parallelism.tensor));
  if (stage == p - 1)
    largest = std::max(largest, double(s.model.vocab_size) * s.model.hidden_size / s.parallelism.tensor);
  sharded_data_parallel(s, psi, e, largest, m);
  return m;
}

} // namespace stepsim

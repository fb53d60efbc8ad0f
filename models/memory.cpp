#include "models/memory.hpp"

#include <algorithm>

namespace stepsim {

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

MemoryBreakdown zero_memory(const Scenario& s, const ModelFootprint& f, int weight_versions)
{
  const int dp     = s.parallelism.data * s.parallelism.context;
  const int zero   = s.parallelism.zero_stage;
  const double psi = f.parameters;
  const double e   = f.element_bytes;
  const double k   = f.optimizer_bytes_per_parameter;
  MemoryBreakdown m;
  // Stashed versions are whole working copies; the optimizer's master copy stays one.
  m.weights   = psi * e / (zero >= 3 ? dp : 1) * weight_versions;
  // Gradients as they are accumulated (training.gradient_precision): Megatron's bf16 runs hold fp32 ones.
  const double g = s.training.gradient_precision == "fp32" ? 4 : e;
  m.gradients = psi * g / (zero >= 2 ? dp : 1);
  m.optimizer = psi * k / (zero >= 1 ? dp : 1);
  if (f.expert_parameters > 0 && s.parallelism.expert > 1) {
    // Experts are sharded over the ranks that hold the same experts: data × context / expert.
    const double more = f.expert_parameters * (double(s.parallelism.expert) / dp - 1.0 / dp); // 1/edp − 1/dp
    if (zero >= 3)
      m.weights += more * e * weight_versions;
    if (zero >= 2)
      m.gradients += more * g;
    if (zero >= 1)
      m.optimizer += more * k;
  }
  m.activations = f.activations;
  if (dp > 1)
    m.buffers = std::min(s.parallelism.bucket_bytes, m.gradients); // a bucket never holds more than the gradients
  sharded_data_parallel(s, psi, e, f.largest_unit, m);
  return m;
}

} // namespace stepsim

#include "models/memory.hpp"

#include <algorithm>

#include "sim/core/framework.hpp"

namespace stepsim {

namespace {

// What ZeRO-3 / FSDP and ZeRO-Offload change, on top of the ZeRO paper's accounting (`m` already
// holds it): gathered parameters and the unit gradient waiting for its reduce-scatter, and the
// optimizer states that live on the host. `f.largest_unit`: parameters of the stage's largest unit
// (a layer, or the embedding or head), per rank.
void sharded_data_parallel(const Scenario& s, double psi, double e, const ModelFootprint& f, MemoryBreakdown& m)
{
  const int dp = s.parallelism.data * s.parallelism.context;
  if (s.parallelism.zero_stage >= 3 && dp > 1) {
    const bool per_tensor = FrameworkRegistry::get(s.training.framework, "training.framework").gather_per_tensor;
    if (per_tensor && f.largest_tensor > 0 && s.parallelism.reshard_after_forward)
      // Gathered tensor by tensor (DeepSpeed 2021), a layer is never whole: the largest tensor in
      // use, the flat buffer PyTorch's list-form all_gather gathers it into before copying it out
      // (ProcessGroupNCCL.cpp, allgather), and a gradient of that size waiting for its
      // reduce-scatter. Prefetching is bounded by stage3_prefetch_bucket_size, 5e7 elements
      // (deepspeed/runtime/zero/config.py), below one such tensor on the models that need ZeRO-3.
      m.buffers = 3 * f.largest_tensor * e;
    else if (s.parallelism.reshard_after_forward) // the unit in use and the prefetched next one
      m.buffers = 2 * f.largest_unit * e + f.largest_unit * e;
    else { // the stage stays gathered between forward and backward
      m.weights += psi * e;
      m.buffers = f.largest_unit * e;
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
  const auto& par = s.parallelism;
  const bool own_expert_tensor = expert_tensor_size(par) != par.tensor;
  if (f.expert_parameters > 0 && (par.expert > 1 || own_expert_tensor)) {
    // Experts are sharded over the ranks that hold the same experts: data × context / expert, or
    // with the experts' own tensor size tensor × data × context / (expert_tensor × expert).
    const double edp  = own_expert_tensor ? double(par.tensor) * dp / (double(expert_tensor_size(par)) * par.expert)
                                          : 0.0;
    const double more = own_expert_tensor ? f.expert_parameters * (1.0 / edp - 1.0 / dp)
                                          : f.expert_parameters * (double(par.expert) / dp - 1.0 / dp); // 1/edp − 1/dp
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
  sharded_data_parallel(s, psi, e, f, m);
  // Plain PyTorch frees its gradients after each step; with one micro-batch they are allocated
  // only as backward frees the activations (FrameworkProfile::eager_autocast).
  if (FrameworkRegistry::get(s.training.framework, "training.framework").eager_autocast &&
      s.micro_batches_per_replica() == 1)
    m.gradients_replace_activations = true;
  return m;
}

} // namespace stepsim

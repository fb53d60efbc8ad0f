#include "workloads/models/layer_list.hpp"

#include "workloads/schedules/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace stepsim {

namespace {

// The kernels as given, at the training precision.
std::vector<Kernel> at_precision(const std::vector<Kernel>& given, double e)
{
  std::vector<Kernel> out;
  for (const Kernel& k : given) {
    if (k.kind == KernelKind::Gemm)
      out.push_back(gemm(k.name, k.m, k.n, k.k, e, k.batch));
    else if (k.kind == KernelKind::Attention)
      out.push_back(attention_kernel(k.name, k.batch, k.m, k.k, k.causal, k.backward, e));
    else
      out.push_back(k);
  }
  return out;
}

// One pass given by figures: its FLOPs as one kernel, timed as matrix products, and its memory
// bytes as another, timed at the memory bandwidth. They add, as a layer's GEMMs and its norms and
// activations run one after the other. No kernel for a part that is zero (an identity, a first
// layer's input gradient), so that it costs no launch either.
std::vector<Kernel> opaque_pass(const std::string& name, double flops, double bytes)
{
  std::vector<Kernel> kernels;
  if (flops > 0)
    kernels.push_back(opaque_kernel(name, flops));
  if (bytes > 0)
    kernels.push_back(memory_kernel(name + "_memory", bytes));
  return kernels;
}

double flops_of(const std::vector<Kernel>& kernels)
{
  double flops = 0;
  for (const Kernel& k : kernels)
    flops += k.flops();
  return flops;
}

} // namespace

bool is_layer_list(const ModelSpec& m)
{
  return m.architecture == "layers";
}

std::vector<CnnLayer> layer_list_layers(const ModelSpec& m, double micro_batch, double element_bytes)
{
  const double b            = micro_batch;
  const double weight_bytes = element_bytes >= 4 ? 4 : 2; // as models/memory.cpp keeps the weights
  std::vector<CnnLayer> layers;
  for (const LayerSpec& spec : m.layers) {
    CnnLayer l;
    l.parameters   = spec.parameter_bytes >= 0 ? spec.parameter_bytes / weight_bytes : spec.parameters;
    l.output_bytes = spec.activation_bytes * b;
    l.saved_bytes  = spec.saved_bytes * b;
    for (int i = 0; i < spec.repeat; ++i) {
      l.name = spec.repeat > 1 ? fmt::format("{}.{}", spec.name, i) : spec.name;
      if (spec.by_kernels) {
        l.forward         = at_precision(spec.forward, element_bytes);
        l.backward_input  = at_precision(spec.backward_input, element_bytes);
        l.backward_weight = at_precision(spec.backward_weight, element_bytes);
        l.forward_flops   = flops_of(l.forward);
      } else {
        l.forward        = opaque_pass(l.name, spec.forward_flops * b, spec.forward_memory_bytes * b);
        l.backward_input = opaque_pass(l.name + "_bwd", spec.backward_input_flops * b, spec.backward_input_memory_bytes * b);
        if (spec.backward_weight_flops >= 0)
          l.backward_weight = opaque_pass(l.name + "_wgrad", spec.backward_weight_flops * b,
                                          spec.backward_weight_memory_bytes * b);
        l.forward_flops = spec.forward_flops * b;
      }
      layers.push_back(l);
    }
  }
  return layers;
}

SampleFlops layer_list_flops_per_sample(const ModelSpec& m, double micro_batch)
{
  SampleFlops f;
  for (const LayerSpec& spec : m.layers) {
    if (spec.by_kernels) {
      f.forward += spec.repeat * flops_of(spec.forward) / micro_batch;
      f.backward += spec.repeat * (flops_of(spec.backward_input) + flops_of(spec.backward_weight)) / micro_batch;
    } else {
      f.forward += spec.repeat * spec.forward_flops;
      f.backward += spec.repeat * (spec.backward_input_flops + std::max(0.0, spec.backward_weight_flops));
    }
  }
  return f;
}

void check_layer_list(const Scenario& s, Problems& problems)
{
  for (size_t i = 0; i < s.model.layers.size(); ++i) {
    const LayerSpec& l = s.model.layers[i];
    if (l.by_kernels && l.kernels_micro_batch > 0 && l.kernels_micro_batch != s.training.micro_batch_size)
      problems.add(fmt::format("model.layers[{}].kernels.micro_batch_size", i),
                   fmt::format("the kernels are written for {} samples but training.micro_batch_size is {}: stepsim "
                               "cannot tell which dimension of a kernel's shape is the batch, so write the kernels "
                               "for {} samples",
                               l.kernels_micro_batch, s.training.micro_batch_size, s.training.micro_batch_size));
  }
  const PipelineSchedule* schedule = ScheduleRegistry::find(s.parallelism.schedule);
  if (schedule == nullptr || !schedule->splits_backward) // an unknown schedule is reported by its own check
    return;
  for (size_t i = 0; i < s.model.layers.size(); ++i) {
    const LayerSpec& l = s.model.layers[i];
    if (!l.by_kernels && l.backward_weight_flops < 0)
      problems.add(fmt::format("model.layers[{}].backward_flops", i),
                   fmt::format("parallelism.schedule \"{}\" runs input and weight gradients as separate passes: give "
                               "backward_input_flops and backward_weight_flops instead",
                               s.parallelism.schedule));
  }
}

} // namespace stepsim

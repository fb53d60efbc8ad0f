// A training framework's behaviour, as a profile registered by name (training.framework): what a
// Megatron-LM, Megatron-Core, DeepSpeed or FSDP run does that the scenario does not spell out. A
// profile is plain data; each is one file in workloads/frameworks/ that names the framework source
// every behaviour was read from. The parser takes the profile's defaults for the fields a scenario
// leaves out (sim/input/scenario_parse.cpp); the memory model takes what the framework holds beside
// the model (sim/job_plan.cpp).
#pragma once

#include "sim/core/registry.hpp"

#include <string>
#include <vector>

namespace stepsim {

struct FrameworkProfile {
  // Defaults for what the run leaves to the framework.
  std::string attention    = "flash"; // training.attention: fused (FlashAttention) or scores materialised
  bool overlap_grad_reduce = true;    // parallelism.overlap_grad_reduce
  // parallelism.bucket_size: bucket_bytes when set (PyTorch DDP caps buckets in bytes); else, in
  // parameters at the training precision's element size, max(bucket_parameters,
  // bucket_parameters_per_rank × data-parallel ranks) (Megatron-Core grows its buckets with the
  // group); all zero = one bucket for all gradients.
  double bucket_bytes               = 0;
  double bucket_parameters          = 0;
  double bucket_parameters_per_rank = 0;
  // Memory per GPU the framework's process holds beside the model's tensors: the CUDA context
  // with the kernels and library handles it loads, bytes.
  double context_bytes = 0;
  // What each behaviour above was read from: "behaviour: file (function), version".
  std::vector<std::string> sources;
};

using FrameworkRegistry = Registry<FrameworkProfile>;

// The profile a scenario names when it names none (README, "Framework profiles").
inline constexpr const char* kDefaultFramework = "generic";

} // namespace stepsim

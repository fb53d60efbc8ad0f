// A model described layer by layer in the scenario (model.architecture "layers", model.layers),
// for what stepsim does not build in: each layer by figures (FLOPs, parameters and activation
// sizes per sample, as profilers and papers give them) or by the kernels it runs. The layers are
// lowered as the CNNs' are (workloads/models/cnn.hpp): the same CnnLayer list, pipeline split, memory
// accounting and data-parallel plans; a layer list has no tensor-parallel partitioning.
#pragma once

#include "sim/core/input_error.hpp"
#include "workloads/models/cnn.hpp"

namespace stepsim {

bool is_layer_list(const ModelSpec& m);

// The layers for a micro-batch of `micro_batch` samples, `repeat` expanded ("name.0", "name.1",
// ...). Figures scale with the micro-batch and become one kernel per pass that is known only by
// its FLOPs and bytes (KernelKind::Opaque: timed at the device's calibrated GEMM efficiency,
// models/compute/kernel_model.cpp); kernels are those given, in the precision's `element_bytes`.
// parameter_bytes are counted in the weights' precision: 4 bytes when `element_bytes` is 4, else 2.
std::vector<CnnLayer> layer_list_layers(const ModelSpec& m, double micro_batch, double element_bytes);

// FLOPs of one sample: forward, and backward (input and weight gradients), as given (kernels:
// their FLOPs over the micro-batch's samples).
struct SampleFlops {
  double forward = 0, backward = 0;
};
SampleFlops layer_list_flops_per_sample(const ModelSpec& m, double micro_batch);

// What a layer-list scenario must satisfy beyond check_cnn's checks (a schedule that splits the
// backward needs it split); adds to `problems` with the JSON path.
void check_layer_list(const Scenario& s, Problems& problems);

} // namespace stepsim

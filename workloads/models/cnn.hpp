// Convolutional image classifiers (ResNet-50, ResNet-101, VGG-16) as a flat list of layers, in
// the order and granularity of the model as a flattened nn.Sequential, the way torchgpipe counts
// them when it balances a pipeline (ResNet-101: 370 modules; a bottleneck is identity, conv1,
// bn1, relu1, conv2, bn2, relu2, conv3, bn3, residual, relu3). Each layer is lowered to kernels
// for one micro-batch: a convolution is an implicit GEMM (M = batch × output pixels, N = output
// channels, K = input channels × kernel area) and its input and weight gradients are the two
// transposed GEMMs; batch norm, ReLU, pooling and the residual add are bandwidth-bound.
#pragma once

#include "sim/core/kernel.hpp"
#include "sim/core/scenario.hpp"
#include "workloads/models/model_kind.hpp"

#include <string>
#include <vector>

namespace stepsim {

struct CnnLayer {
  std::string name;
  std::vector<Kernel> forward;
  std::vector<Kernel> backward_input;  // gradient of the layer's input
  std::vector<Kernel> backward_weight; // gradient of its weights (empty without weights)
  double parameters      = 0;          // weights and biases, counted once
  double forward_flops   = 0;          // per micro-batch
  double output_bytes    = 0;          // the activation leaving the layer, per micro-batch
  double saved_bytes     = 0;          // what autograd keeps for the backward, per micro-batch
};

// The architectures stepsim builds in, for error messages.
const std::vector<std::string>& cnn_architectures();

// Layers of the model for a micro-batch of `micro_batch` images, each element `element_bytes`.
// The last layer of a built-in CNN carries the loss (softmax cross entropy).
std::vector<CnnLayer> cnn_layers(const ModelSpec& m, double micro_batch, double element_bytes);

// Layers per virtual stage: parallelism.stage_layers when given (torchgpipe's `balance`), else a
// contiguous split that balances forward FLOPs.
std::vector<int> cnn_stage_split(const Scenario& s, const std::vector<CnnLayer>& layers);

// The kinds walked as a flat list of CnnLayer (cnn_layers): the built-in CNNs (cnn.cpp) and a
// layer list (layer_list.cpp). One block per layer, the layers split over the pipeline by forward
// FLOPs or parallelism.stage_layers; no tensor, context or sequence parallelism. A CNN trains in
// the precision it computes in (fp32 in the published runs): weights and gradients in that
// precision; optimizer states as the optimizer keeps them (Adam two moments, SGD a momentum
// buffer), plus fp32 master weights when the weights are 16-bit. Activations: each layer's output
// is kept for its backward; under full recompute only the stage's input is kept per micro-batch,
// and one micro-batch's layers are rebuilt at a time.
class LayerWalkKind : public ModelKind {
public:
  void check(const Scenario& s, Problems& problems) const override;
  double stage_parameters(const Scenario& s, int stage) const override;
  // Every layer's weights and biases once, all of them active (no layer is skipped for a sample).
  ParameterCounts parameter_counts(const Scenario& s) const override;
  ModelFootprint footprint(const Scenario& s, int stage, int micro_batches_in_flight) const override;
  int reported_layers(const Scenario&, int) const override { return 0; } // modules, not transformer layers
  ModelPlan plan(const Scenario& s, std::vector<Work>& works) const override;

protected:
  // Bytes of one input sample, which full recompute keeps per micro-batch.
  virtual double input_bytes_per_sample(const ModelSpec& m, double element_bytes) const = 0;
};

// Per image: forward FLOPs and parameters of the whole model.
double cnn_forward_flops_per_sample(const ModelSpec& m);
double cnn_parameters(const ModelSpec& m);

} // namespace stepsim

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
// True for every model walked as a flat list of CnnLayer: the built-in CNNs and a layer list
// (model.architecture "layers"; workloads/models/layer_list.hpp), whose layers cnn_layers returns too.
bool is_cnn(const ModelSpec& m);

// Layers of the model for a micro-batch of `micro_batch` images, each element `element_bytes`.
// The last layer of a built-in CNN carries the loss (softmax cross entropy).
std::vector<CnnLayer> cnn_layers(const ModelSpec& m, double micro_batch, double element_bytes);

// Layers per virtual stage: parallelism.stage_layers when given (torchgpipe's `balance`), else a
// contiguous split that balances forward FLOPs.
std::vector<int> cnn_stage_split(const Scenario& s, const std::vector<CnnLayer>& layers);

// What a CNN scenario must satisfy beyond the parser's checks; throws InputError naming the path.
void check_cnn(const Scenario& s);

// Per image: forward FLOPs and parameters of the whole model.
double cnn_forward_flops_per_sample(const ModelSpec& m);
double cnn_parameters(const ModelSpec& m);

} // namespace stepsim

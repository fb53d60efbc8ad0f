#include "workloads/models/cnn.hpp"

#include "sim/core/input_error.hpp"
#include "sim/input/limits.hpp"
#include "workloads/models/layer_list.hpp"
#include "workloads/models/transformer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace stepsim {

namespace {

// Builds the layer list while tracking the feature map (channels × height × width) that flows
// through it.
class CnnBuilder {
public:
  CnnBuilder(double batch, double e, int image) : b_(batch), e_(e), c_(3), h_(image), w_(image) {}

  std::vector<CnnLayer> take() { return std::move(layers_); }

  double map_bytes() const { return b_ * c_ * h_ * w_ * e_; }

  // A convolution without bias (followed by batch norm) or with one (VGG).
  void conv(const std::string& name, int out, int kernel, int stride, int padding, bool bias = false)
  {
    CnnLayer l = conv_layer(name, c_, h_, w_, out, kernel, stride, padding, bias, layers_.empty());
    set_shape(out, output_side(h_, kernel, stride, padding), output_side(w_, kernel, stride, padding));
    l.output_bytes = map_bytes();
    l.saved_bytes  = map_bytes(); // the next batch norm (or ReLU) keeps it
    layers_.push_back(std::move(l));
  }

  // Training-mode batch norm: one pass to reduce the statistics, one to normalise (read + write);
  // backward reduces over dy and x, then writes dx from dy and x.
  void batch_norm(const std::string& name)
  {
    CnnLayer l;
    l.name         = name;
    l.parameters   = 2.0 * c_;
    l.forward      = {memory_kernel(name, 3 * map_bytes())};
    l.backward_input = {memory_kernel(name + "_bwd", 5 * map_bytes())};
    l.output_bytes = map_bytes();
    layers_.push_back(std::move(l));
  }

  void relu(const std::string& name)
  {
    CnnLayer l;
    l.name           = name;
    l.forward        = {memory_kernel(name, 2 * map_bytes())};
    l.backward_input = {memory_kernel(name + "_bwd", 3 * map_bytes())};
    l.output_bytes   = map_bytes();
    l.saved_bytes    = map_bytes(); // ReLU's backward reads its own output (also the next layer's input)
    layers_.push_back(std::move(l));
  }

  // Max or average pooling: reads the input once and writes the smaller output; backward writes
  // the input gradient from the output gradient (and the argmax indices for max pooling).
  void pool(const std::string& name, int kernel, int stride, int padding)
  {
    double in = map_bytes();
    set_shape(c_, output_side(h_, kernel, stride, padding), output_side(w_, kernel, stride, padding));
    pool_layer(name, in);
  }

  void global_pool(const std::string& name, int side)
  {
    double in = map_bytes();
    set_shape(c_, side, side);
    pool_layer(name, in);
  }

  // A module that moves no data (torchgpipe's identity stash, flatten): it still counts as a
  // layer when a pipeline is balanced by layer counts.
  void no_op(const std::string& name)
  {
    CnnLayer l;
    l.name         = name;
    l.output_bytes = map_bytes();
    layers_.push_back(std::move(l));
  }

  // The residual add at the end of a bottleneck, with the projection of the identity (a strided
  // 1×1 convolution and batch norm) when the shape changes. `in_*` is the block's input.
  void residual(const std::string& name, int in_c, int in_h, int in_w, bool downsample, int stride)
  {
    CnnLayer l;
    l.name = name;
    if (downsample) {
      CnnLayer proj = conv_layer(name + "_downsample", in_c, in_h, in_w, c_, 1, stride, 0, false, false);
      l              = proj;
      l.name         = name;
      l.parameters  += 2.0 * c_;
      l.forward.push_back(memory_kernel(name + "_downsample_bn", 3 * map_bytes()));
      l.backward_input.push_back(memory_kernel(name + "_downsample_bn_bwd", 5 * map_bytes()));
    }
    if (downsample)
      l.saved_bytes = map_bytes(); // the projection's batch norm keeps its input
    l.forward.push_back(memory_kernel(name + "_add", 3 * map_bytes()));
    // Autograd adds the gradients of the two branches where the identity was stashed.
    l.backward_input.push_back(memory_kernel(name + "_grad_accumulate", 3 * map_bytes()));
    l.output_bytes = map_bytes();
    layers_.push_back(std::move(l));
  }

  void linear(const std::string& name, int out)
  {
    const double in = double(c_) * h_ * w_;
    CnnLayer l;
    l.name            = name;
    l.parameters      = in * out + out;
    l.forward         = {gemm(name, b_, out, in, e_)};
    l.backward_input  = {gemm(name + "_dgrad", b_, in, out, e_)};
    l.backward_weight = {gemm(name + "_wgrad", out, in, b_, e_)};
    l.forward_flops   = 2.0 * b_ * in * out;
    set_shape(out, 1, 1);
    l.output_bytes = map_bytes();
    l.saved_bytes  = map_bytes();
    layers_.push_back(std::move(l));
  }

  void dropout(const std::string& name)
  {
    CnnLayer l;
    l.name           = name;
    l.forward        = {memory_kernel(name, 2 * map_bytes() + b_ * c_ * h_ * w_)}; // and a one-byte mask
    l.backward_input = {memory_kernel(name + "_bwd", 2 * map_bytes() + b_ * c_ * h_ * w_)};
    l.output_bytes   = map_bytes();
    l.saved_bytes    = b_ * c_ * h_ * w_; // the mask
    layers_.push_back(std::move(l));
  }

  // Softmax cross entropy over the logits, in fp32, carried by the last layer.
  void loss()
  {
    CnnLayer& l  = layers_.back();
    double bytes = b_ * c_ * 4.0;
    l.forward.push_back(memory_kernel("cross_entropy", 2 * bytes));
    l.backward_input.insert(l.backward_input.begin(), memory_kernel("cross_entropy_bwd", 2 * bytes));
  }

  int channels() const { return c_; }
  int height() const { return h_; }
  int width() const { return w_; }

private:
  static int output_side(int in, int kernel, int stride, int padding) { return (in + 2 * padding - kernel) / stride + 1; }

  void set_shape(int c, int h, int w)
  {
    c_ = c;
    h_ = h;
    w_ = w;
  }

  void pool_layer(const std::string& name, double in_bytes)
  {
    CnnLayer l;
    l.name           = name;
    l.forward        = {memory_kernel(name, in_bytes + map_bytes())};
    l.backward_input = {memory_kernel(name + "_bwd", in_bytes + 2 * map_bytes())};
    l.output_bytes   = map_bytes();
    // The output is the next convolution's input; max pooling also keeps int64 argmax indices.
    l.saved_bytes = map_bytes() * (1 + 8 / e_);
    layers_.push_back(std::move(l));
  }

  // Implicit GEMM: forward M = batch × output pixels, N = output channels, K = input channels ×
  // kernel area; the input gradient swaps N and the input channels; the weight gradient reduces
  // over the batch and pixels. The first layer needs no input gradient (the images).
  CnnLayer conv_layer(const std::string& name, int in_c, int in_h, int in_w, int out, int kernel, int stride,
                      int padding, bool bias, bool first) const
  {
    const double oh    = output_side(in_h, kernel, stride, padding);
    const double ow    = output_side(in_w, kernel, stride, padding);
    const double pixels = b_ * oh * ow;
    const double area   = double(kernel) * kernel;
    CnnLayer l;
    l.name       = name;
    l.parameters = out * in_c * area + (bias ? out : 0);
    l.forward    = {gemm(name, pixels, out, in_c * area, e_)};
    if (!first)
      l.backward_input = {gemm(name + "_dgrad", pixels, in_c, out * area, e_)};
    l.backward_weight = {gemm(name + "_wgrad", out, in_c * area, pixels, e_)};
    if (bias) {
      double out_bytes = pixels * out * e_;
      l.forward.push_back(memory_kernel(name + "_bias_relu", 2 * out_bytes));
      l.backward_weight.push_back(memory_kernel(name + "_bias_grad", out_bytes));
    }
    l.forward_flops = 2.0 * pixels * out * in_c * area;
    return l;
  }

  double b_, e_;
  int c_, h_, w_;
  std::vector<CnnLayer> layers_;
};

void resnet(CnnBuilder& net, const std::vector<int>& blocks)
{
  net.conv("conv1", 64, 7, 2, 3);
  net.batch_norm("bn1");
  net.relu("relu");
  net.pool("maxpool", 3, 2, 1);
  int inplanes = 64;
  const int planes_of[] = {64, 128, 256, 512};
  for (size_t stage = 0; stage < blocks.size(); ++stage) {
    const int planes = planes_of[stage];
    for (int block = 0; block < blocks[stage]; ++block) {
      const int stride       = block == 0 && stage > 0 ? 2 : 1;
      const bool downsample  = block == 0 && (stride != 1 || inplanes != planes * 4);
      const std::string name = fmt::format("layer{}.{}.", stage + 1, block);
      const int in_c = net.channels(), in_h = net.height(), in_w = net.width();
      net.no_op(name + "identity");
      net.conv(name + "conv1", planes, 1, 1, 0);
      net.batch_norm(name + "bn1");
      net.relu(name + "relu1");
      net.conv(name + "conv2", planes, 3, stride, 1);
      net.batch_norm(name + "bn2");
      net.relu(name + "relu2");
      net.conv(name + "conv3", planes * 4, 1, 1, 0);
      net.batch_norm(name + "bn3");
      net.residual(name + "residual", in_c, in_h, in_w, downsample, stride);
      net.relu(name + "relu3");
      inplanes = planes * 4;
    }
  }
  net.global_pool("avgpool", 1);
  net.no_op("flat");
}

void vgg16(CnnBuilder& net)
{
  const int widths[][3] = {{64, 64, 0}, {128, 128, 0}, {256, 256, 256}, {512, 512, 512}, {512, 512, 512}};
  int index = 0;
  for (const auto& group : widths) {
    for (int c : group) {
      if (c == 0)
        continue;
      net.conv(fmt::format("features.{}", index), c, 3, 1, 1, true);
      net.relu(fmt::format("features.{}", index + 1));
      index += 2;
    }
    net.pool(fmt::format("features.{}", index++), 2, 2, 0);
  }
  net.global_pool("avgpool", 7);
  net.no_op("flatten");
  net.linear("classifier.0", 4096);
  net.relu("classifier.1");
  net.dropout("classifier.2");
  net.linear("classifier.3", 4096);
  net.relu("classifier.4");
  net.dropout("classifier.5");
}

} // namespace

const std::vector<std::string>& cnn_architectures()
{
  static const std::vector<std::string> names = {"resnet50", "resnet101", "vgg16"};
  return names;
}

std::vector<CnnLayer> cnn_layers(const ModelSpec& m, double micro_batch, double element_bytes)
{
  if (is_layer_list(m))
    return layer_list_layers(m, micro_batch, element_bytes);
  CnnBuilder net(micro_batch, element_bytes, m.image_size);
  if (m.architecture == "resnet50")
    resnet(net, {3, 4, 6, 3});
  else if (m.architecture == "resnet101")
    resnet(net, {3, 4, 23, 3});
  else if (m.architecture == "vgg16")
    vgg16(net);
  else
    throw InputError({fmt::format("model.architecture: \"{}\" is not a built-in CNN", m.architecture)});
  net.linear(m.architecture == "vgg16" ? "classifier.6" : "fc", m.num_classes);
  net.loss();
  return net.take();
}

std::vector<int> cnn_stage_split(const Scenario& s, const std::vector<CnnLayer>& layers)
{
  const int parts = s.parallelism.pipeline * s.parallelism.virtual_stages;
  if (!s.parallelism.stage_layers.empty())
    return s.parallelism.stage_layers;
  // Contiguous parts with the smallest largest share of forward FLOPs, each at least one layer
  // (dynamic programming over prefixes). Layers without FLOPs (norms, activations) cost nothing
  // here and go with the convolution before them.
  const int n = static_cast<int>(layers.size());
  std::vector<double> prefix(static_cast<size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + layers[i].forward_flops;
  // best[k][i]: the smallest largest part when the first i layers form k parts; cut[k][i]: where
  // the last of those parts starts.
  std::vector<std::vector<double>> best(parts + 1, std::vector<double>(n + 1, INFINITY));
  std::vector<std::vector<int>> cut(parts + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= parts; ++k)
    for (int i = k; i <= n; ++i)
      for (int j = k - 1; j < i; ++j) {
        double worst = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (worst < best[k][i]) { // strict: the earliest cut wins, deterministically
          best[k][i] = worst;
          cut[k][i]  = j;
        }
      }
  std::vector<int> counts(static_cast<size_t>(parts));
  for (int k = parts, i = n; k > 0; i = cut[k][i], --k)
    counts[k - 1] = i - cut[k][i];
  return counts;
}

void LayerWalkKind::check(const Scenario& s, Problems& problems) const
{
  const auto& p     = s.parallelism;
  const bool listed = is_layer_list(s.model);
  const char* what  = listed ? "a layer list" : "a CNN";
  if (p.tensor > 1)
    problems.add("parallelism.tensor",
                 listed ? fmt::format("{}: a layer list has no tensor-parallel partitioning (each layer's work is given "
                                      "whole); use 1",
                                      p.tensor)
                        : fmt::format("{}: a {} is not split by tensor parallelism in stepsim; use 1", p.tensor,
                                      s.model.architecture));
  if (p.context > 1)
    problems.add("parallelism.context", fmt::format("{}: {} has no sequence to split; use 1", p.context, what));
  if (p.sequence_parallel)
    problems.add("parallelism.sequence_parallel", fmt::format("{} has no sequence to split; use false", what));
  if (s.training.recompute == "selective")
    problems.add("training.recompute",
                 fmt::format("\"selective\" recomputes attention, which {} has not; use none or full", what));
  if (p.stage_layers.empty() && p.stage_layers_auto)
    problems.add("parallelism.stage_layers",
                 listed ? std::string("\"auto\" balances transformer layers; model.layers is a layer list: give the "
                                      "layer counts")
                        : fmt::format("\"auto\" balances transformer layers; model {} is a {}: give the layer counts",
                                      s.model.name.empty() ? "architecture" : s.model.name, s.model.architecture));
  if (listed)
    check_layer_list(s, problems);
  const auto layers = cnn_layers(s.model, 1, 4);
  const int parts   = p.pipeline * p.virtual_stages;
  if (!p.stage_layers.empty()) {
    long long sum = std::accumulate(p.stage_layers.begin(), p.stage_layers.end(), 0LL);
    if (p.stage_layers.size() != static_cast<size_t>(parts))
      problems.add("parallelism.stage_layers", fmt::format("expected {} entries (pipeline {} × virtual_stages {}), got {}",
                                                           parts, p.pipeline, p.virtual_stages, p.stage_layers.size()));
    else if (sum != static_cast<long long>(layers.size()))
      problems.add("parallelism.stage_layers",
                   listed ? fmt::format("the entries add up to {} layers, but model.layers has {} (each counted as "
                                        "often as its repeat)",
                                        sum, layers.size())
                          : fmt::format("the entries add up to {} layers, but {} has {} (torchgpipe's count of its "
                                        "flattened modules)",
                                        sum, s.model.architecture, layers.size()));
  } else if (parts > static_cast<int>(layers.size())) {
    problems.add("parallelism.pipeline", fmt::format("{} × virtual_stages {} parts for the {} layers of {}", p.pipeline,
                                                     p.virtual_stages, layers.size(),
                                                     listed ? std::string("model.layers") : s.model.architecture));
  }
}


namespace {

// The layers as the lowering splits them: a layer list's kernels are per micro-batch and its
// figures per sample, so the split by FLOPs depends on the micro-batch.
std::vector<CnnLayer> cnn_layers_of(const Scenario& s)
{
  return cnn_layers(s.model, double(s.training.micro_batch_size), element_bytes(s.training.precision) == 4 ? 4 : 2);
}

// The layers on each pipeline stage (over its virtual stages), by index into cnn_layers.
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

} // namespace

double LayerWalkKind::stage_parameters(const Scenario& s, int stage) const
{
  const auto layers   = cnn_layers_of(s);
  const auto by_stage = cnn_layers_by_stage(s, layers); // kept: the loop below refers into it
  double psi          = 0;
  for (int i : by_stage.at(static_cast<size_t>(stage)))
    psi += layers[i].parameters;
  return psi;
}

ParameterCounts LayerWalkKind::parameter_counts(const Scenario& s) const
{
  double total = 0;
  for (const auto& l : cnn_layers_of(s)) // a layer list's parameter_bytes at the training precision
    total += l.parameters;
  return {total, total};
}

ModelFootprint LayerWalkKind::footprint(const Scenario& s, int stage, int micro_batches_in_flight) const
{
  const double e    = element_bytes(s.training.precision) == 4 ? 4 : 2;
  const auto layers = cnn_layers_of(s);
  const auto mine   = cnn_layers_by_stage(s, layers).at(static_cast<size_t>(stage));
  double psi = 0, kept = 0, largest = 0;
  for (int i : mine) {
    psi += layers[i].parameters;
    kept += layers[i].saved_bytes;
    largest = std::max(largest, layers[static_cast<size_t>(i)].parameters);
  }
  ModelFootprint f;
  f.parameters                    = psi;
  f.largest_unit                  = largest;
  f.element_bytes                 = e;
  f.optimizer_bytes_per_parameter = (s.training.optimizer == "adam" ? 8.0 : 4.0) + (e == 4 ? 0.0 : 4.0);
  if (s.training.recompute == "full") {
    const double b      = double(s.training.micro_batch_size);
    const double sample = input_bytes_per_sample(s.model, e);
    double input = mine.empty() || mine.front() == 0 ? b * sample : layers[mine.front() - 1].output_bytes;
    f.activations = input * micro_batches_in_flight + kept;
  } else {
    f.activations = kept * micro_batches_in_flight;
  }
  return f;
}

ModelPlan LayerWalkKind::plan(const Scenario& s, std::vector<Work>& works) const
{
  const auto layers = cnn_layers(s.model, double(s.training.micro_batch_size), element_bytes(s.training.precision));
  const auto split  = cnn_stage_split(s, layers);
  const bool full   = s.training.recompute == "full";
  ModelPlan plan;
  plan.stages.resize(split.size());
  size_t next = 0;
  for (size_t vs = 0; vs < split.size(); ++vs) {
    for (int i = 0; i < split[vs] && next < layers.size(); ++i, ++next) {
      const CnnLayer& l = layers[next];
      std::vector<Kernel> backward = l.backward_input;
      backward.insert(backward.end(), l.backward_weight.begin(), l.backward_weight.end());
      Block b;
      b.forward         = add_work(works, l.name + "_forward", l.forward);
      b.backward        = add_work(works, l.name + "_backward", backward);
      b.recompute       = full ? add_work(works, l.name + "_recompute", l.forward) : -1;
      b.backward_input  = add_work(works, l.name + "_backward_input", l.backward_input);
      b.backward_weight = add_work(works, l.name + "_backward_weight", l.backward_weight);
      plan.stages[vs].layers.push_back(Layer{{b}, l.parameters, 0, full});
      plan.stages[vs].output_bytes = l.output_bytes;
    }
  }
  return plan;
}

namespace {

// ResNet-50, ResNet-101 and VGG-16 as torchvision builds them, at model.image_size.
class Cnn final : public LayerWalkKind {
public:
  void read(JsonReader& r, ModelSpec& m, const std::string&) const override
  {
    m.name        = r.text("name", m.architecture);
    m.image_size  = static_cast<int>(r.integer("image_size", 224, 32, 4096));
    m.num_classes = static_cast<int>(r.integer("num_classes", 1000, 1, limits::kMaxWidth));
    r.reject_unknown_keys();
  }

  // The built-in CNNs are named, not counted in num_layers; none has more than 128 layers.
  double layer_count(const ModelSpec&) const override { return 128; }

  // Forward, then input and weight gradients at twice the forward; full recompute runs every
  // forward twice.
  double model_flops_per_step(const Scenario& s) const override
  {
    return 3.0 * double(s.training.global_batch_size) * cnn_forward_flops_per_sample(s.model);
  }
  double hardware_flops_per_step(const Scenario& s) const override
  {
    return (s.training.recompute == "full" ? 4.0 : 3.0) * double(s.training.global_batch_size) *
           cnn_forward_flops_per_sample(s.model);
  }

  // torchvision's ToTensor hands the GPU float32 images, 3 channels of image_size² pixels.
  double loaded_bytes_per_sample(const Scenario& s) const override { return input_bytes_per_sample(s.model, 4.0); }

protected:
  double input_bytes_per_sample(const ModelSpec& m, double e) const override
  {
    return 3.0 * m.image_size * m.image_size * e; // RGB
  }
};

const bool registered = [] {
  const auto cnn = std::make_shared<Cnn>();
  ModelKindRegistry::add("resnet50", "ResNet-50 (He et al. 2016) as torchvision builds it", cnn);
  ModelKindRegistry::add("resnet101", "ResNet-101 (He et al. 2016) as torchvision builds it", cnn);
  ModelKindRegistry::add("vgg16", "VGG-16 (Simonyan and Zisserman 2015) as torchvision builds it", cnn);
  return true;
}();

} // namespace

double cnn_forward_flops_per_sample(const ModelSpec& m)
{
  double flops = 0;
  for (const auto& l : cnn_layers(m, 1, 4))
    flops += l.forward_flops;
  return flops;
}

double cnn_parameters(const ModelSpec& m)
{
  double params = 0;
  for (const auto& l : cnn_layers(m, 1, 4))
    params += l.parameters;
  return params;
}

} // namespace stepsim

#include "workloads/models/layer_list.hpp"

#include "sim/input/limits.hpp"
#include "workloads/models/transformer.hpp"
#include "workloads/schedules/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace stepsim {

using namespace limits;

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

// A FLOP count or a size of one layer: finite, >= 0, and below the bounds above.
double layer_amount(JsonReader& r, const std::string& key, bool is_bytes, std::optional<double> fallback = std::nullopt)
{
  const double value = is_bytes ? r.bytes(key, fallback) : r.number(key, fallback, 0);
  const double limit = is_bytes ? kMaxLayerBytes : kMaxLayerFlops;
  if (value > limit) {
    r.problems().add(r.path_of(key), fmt::format("{:.3g} is more than the {:.3g} {} per sample stepsim accepts", value,
                                                 limit, is_bytes ? "bytes" : "FLOPs"));
    return 0;
  }
  return value;
}

// One kernel of a layer given by kernels: {"gemm": [M, N, K]} (or [M, N, K, batch]),
// {"memory_bytes": B} or {"attention": {"batch_heads", "seq", "head_dim", "causal"}}, each with an
// optional "name". Element bytes come from the training precision when the layer is lowered.
std::optional<Kernel> read_kernel(JsonReader& k, const std::string& layer_name, const std::string& pass, size_t index)
{
  const std::string name = k.text("name", fmt::format("{}_{}{}", layer_name, pass, index));
  const int kinds        = int(k.has("gemm")) + int(k.has("memory_bytes")) + int(k.has("attention"));
  std::optional<Kernel> out;
  if (kinds != 1) {
    for (const char* key : {"gemm", "memory_bytes", "attention"})
      k.raw(key); // reported here, not again as unknown keys
    k.problems().add(k.path(), fmt::format("expected exactly one of \"gemm\", \"memory_bytes\" or \"attention\", got {}",
                                           kinds));
  } else if (const auto* g = k.raw("gemm")) {
    bool ok = g->is_array() && (g->size() == 3 || g->size() == 4);
    for (const auto& v : ok ? *g : nlohmann::json::array())
      ok = ok && v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 1 && v.get<double>() <= kMaxTokens * double(kMaxWidth);
    if (ok)
      out = gemm(name, g->at(0).get<double>(), g->at(1).get<double>(), g->at(2).get<double>(), 1,
                 g->size() == 4 ? g->at(3).get<double>() : 1.0);
    else
      k.problems().add(k.path_of("gemm"), fmt::format("expected [M, N, K] or [M, N, K, batch], numbers from 1 to {:.3g}, "
                                                      "got {}", kMaxTokens * double(kMaxWidth), g->dump()));
  } else if (k.has("memory_bytes")) {
    const size_t before = k.problems().list().size();
    const double bytes  = layer_amount(k, "memory_bytes", true);
    if (bytes <= 0 && k.problems().list().size() == before)
      k.problems().add(k.path_of("memory_bytes"), "expected a size above zero");
    out = memory_kernel(name, bytes);
  } else {
    JsonReader a            = k.object("attention");
    const double heads      = double(a.integer("batch_heads", std::nullopt, 1, kMaxWidth * kMaxTokens));
    const double seq        = double(a.integer("seq", std::nullopt, 1, kMaxTokens));
    const double head_dim   = double(a.integer("head_dim", std::nullopt, 1, kMaxWidth));
    const bool causal       = a.boolean("causal", false);
    a.reject_unknown_keys();
    out = attention_kernel(name, heads, seq, head_dim, causal, pass != "forward", 1);
  }
  if (out && out->flops() > kMaxKernelFlops)
    k.problems().add(k.path(), fmt::format("{:.3g} FLOPs in one kernel is more than the {:.0e} stepsim accepts (a "
                                           "micro-batch of a thousand samples at 1e18 each)",
                                           out->flops(), kMaxKernelFlops));
  k.reject_unknown_keys();
  return out;
}

// model.layers: each layer by figures (per sample) or by kernels (per micro-batch).
void read_layer(JsonReader& l, size_t index, LayerSpec& layer)
{
  layer.name   = l.text("name", fmt::format("layer{}", index));
  layer.repeat = static_cast<int>(l.integer("repeat", 1, 1, kMaxLayers));
  if (l.has("parameters") == l.has("parameter_bytes"))
    l.problems().add(l.path_of("parameters"),
                     l.has("parameters") ? std::string("give either parameters (a count) or parameter_bytes, not both")
                                         : std::string("required field is missing (expected a count of parameters, "
                                                       "0 for a layer without weights, or parameter_bytes)"));
  if (l.has("parameters"))
    layer.parameters = double(l.integer("parameters", std::nullopt, 0, static_cast<long long>(kMaxParameters)));
  if (l.has("parameter_bytes"))
    layer.parameter_bytes = layer_amount(l, "parameter_bytes", true);
  layer.activation_bytes = layer_amount(l, "activation_bytes", true);
  layer.saved_bytes      = layer_amount(l, "saved_bytes", true, layer.activation_bytes);
  static const char* const figures[] = {"forward_flops",          "backward_flops",           "backward_input_flops",
                                        "backward_weight_flops",  "forward_memory_bytes",     "backward_memory_bytes",
                                        "backward_input_memory_bytes", "backward_weight_memory_bytes"};
  if (l.has("kernels")) {
    layer.by_kernels = true;
    for (const char* key : figures)
      if (l.raw(key) != nullptr)
        l.problems().add(l.path_of(key), "a layer given by kernels takes its work from them: give either kernels or "
                                         "the figures, not both");
    JsonReader k               = l.object("kernels");
    layer.kernels_micro_batch = k.integer("micro_batch_size", std::nullopt, 1, kMaxTokens);
    for (auto [pass, list] : {std::pair<const char*, std::vector<Kernel>*>{"forward", &layer.forward},
                              {"backward_input", &layer.backward_input},
                              {"backward_weight", &layer.backward_weight}}) {
      auto entries = k.array_of_objects(pass, std::string(pass) == "forward");
      for (size_t i = 0; i < entries.size(); ++i)
        if (auto kernel = read_kernel(entries[i], layer.name, pass, i))
          list->push_back(*kernel);
    }
    k.reject_unknown_keys();
    l.reject_unknown_keys();
    return;
  }
  layer.forward_flops        = layer_amount(l, "forward_flops", false);
  layer.forward_memory_bytes = layer_amount(l, "forward_memory_bytes", true, 0.0);
  const bool whole = l.has("backward_flops"), split = l.has("backward_input_flops") || l.has("backward_weight_flops");
  if (whole && split) {
    for (const char* key : {"backward_input_flops", "backward_weight_flops", "backward_input_memory_bytes",
                            "backward_weight_memory_bytes"})
      l.raw(key); // reported here, not again as unknown keys
    l.problems().add(l.path_of("backward_flops"),
                     "give either backward_flops or backward_input_flops and backward_weight_flops, not both");
  } else if (!whole && !split)
    l.problems().add(l.path_of("backward_flops"),
                     "required field is missing (expected a number: stepsim does not assume the backward is twice the "
                     "forward; give backward_flops, or backward_input_flops and backward_weight_flops)");
  if (whole) {
    layer.backward_input_flops        = layer_amount(l, "backward_flops", false);
    layer.backward_input_memory_bytes = layer_amount(l, "backward_memory_bytes", true, 0.0);
  } else if (split) {
    layer.backward_input_flops         = layer_amount(l, "backward_input_flops", false);
    layer.backward_weight_flops        = layer_amount(l, "backward_weight_flops", false);
    layer.backward_input_memory_bytes  = layer_amount(l, "backward_input_memory_bytes", true, 0.0);
    layer.backward_weight_memory_bytes = layer_amount(l, "backward_weight_memory_bytes", true, 0.0);
  }
  l.reject_unknown_keys();
}

void read_layer_list(JsonReader& r, ModelSpec& m)
{
  m.name        = r.text("name", std::string("layers"));
  // Tokens per sample where the samples are sequences; left out, the report counts samples. Given,
  // it is at least 1 (0 reported 0 tokens per second).
  m.seq_length  = r.has("seq_length") ? static_cast<int>(r.integer("seq_length", std::nullopt, 1, kMaxTokens)) : 0;
  m.input_bytes = layer_amount(r, "input_bytes", true, 0.0);
  auto layers   = r.array_of_objects("layers", true);
  long long count = 0;
  double parameters = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerSpec layer;
    read_layer(layers[i], i, layer);
    count += layer.repeat;
    parameters += layer.repeat * std::max(layer.parameters, layer.parameter_bytes);
    m.layers.push_back(std::move(layer));
  }
  if (count > kMaxLayers)
    r.problems().add(r.path_of("layers"), fmt::format("{} layers with their repeats, more than the {} stepsim accepts",
                                                      count, kMaxLayers));
  if (parameters > kMaxParameters)
    r.problems().add(r.path_of("layers"), fmt::format("about {:.3g} parameters, more than the {:.0e} stepsim accepts",
                                                      parameters, kMaxParameters));
  r.reject_unknown_keys();
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

namespace {

// A model given layer by layer in the scenario (layer_list.hpp).
class LayerList final : public LayerWalkKind {
public:
  void read(JsonReader& r, ModelSpec& m, const std::string&) const override { read_layer_list(r, m); }

  double layer_count(const ModelSpec& m) const override
  {
    double layers = 0;
    for (const auto& l : m.layers)
      layers += l.repeat;
    return layers;
  }

  // The FLOPs given, forward and backward; full recompute runs every forward twice.
  double model_flops_per_step(const Scenario& s) const override
  {
    const SampleFlops f = layer_list_flops_per_sample(s.model, double(s.training.micro_batch_size));
    return double(s.training.global_batch_size) * (f.forward + f.backward);
  }
  double hardware_flops_per_step(const Scenario& s) const override
  {
    const SampleFlops f = layer_list_flops_per_sample(s.model, double(s.training.micro_batch_size));
    return double(s.training.global_batch_size) * ((s.training.recompute == "full" ? 2 : 1) * f.forward + f.backward);
  }

protected:
  double input_bytes_per_sample(const ModelSpec& m, double) const override { return m.input_bytes; }
  double loaded_bytes_per_sample(const Scenario& s) const override { return s.model.input_bytes; }
};

const bool registered = ModelKindRegistry::add(
    "layers", "a model given layer by layer (model.layers), by figures or by kernels", std::make_shared<LayerList>());

} // namespace

} // namespace stepsim

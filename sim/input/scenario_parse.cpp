// parse_scenario: the JSON contract of the design notes, read through JsonReader so that every
// problem names its path. Checks that need only the scenario itself live here; checks that need
// the device catalogue or a schedule registry are done by the driver with the same wording.
#include "sim/input/hf_config.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/input/network_parse.hpp"
#include "sim/core/rank_order.hpp"
#include "sim/core/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace stepsim {

int PlatformSpec::total_gpus() const
{
  int total = 0;
  for (const auto& g : node_groups)
    total += g.count * g.gpus_per_node;
  return total;
}

namespace {

// Upper bounds on sizes, far above any real job, so that absurd values become a clear error here
// instead of an int overflow, a huge allocation or a lowering that never ends downstream.
constexpr long long kMaxGpus        = 1LL << 20; // GPUs of a platform, and each parallel degree
constexpr long long kMaxWidth       = 1LL << 20; // hidden, FFN, heads
constexpr long long kMaxLayers      = 1LL << 16;
constexpr long long kMaxTokens      = 1LL << 24; // sequence length, vocabulary
constexpr long long kMaxExperts     = 1LL << 16;
constexpr long long kMaxGpusPerNode = 1LL << 10;
constexpr double kMaxParameters     = 1e15;      // a thousand times the largest published models
constexpr double kMaxBucketBytes    = 1LL << 50; // 1 PiB
constexpr double kMaxMicroBatchTokens = 1LL << 31;
// The lowering builds about a dozen tasks per (simulated rank, micro-batch, layer); beyond this
// many triples the graphs would need tens of GB.
constexpr double kMaxLayerPasses = 4e6;
// The replay engine numbers the messages across one stage boundary (micro-batch × virtual stage,
// forward and backward) in 20 bits.
constexpr double kMaxPipelineMessages = 1LL << 19;

// Rated per-direction bandwidth of a node type's GPU links when the scenario gives none. A chiplet
// mesh is no product with a datasheet: its link bandwidth must be given.
std::optional<double> default_intra_node_bandwidth(const std::string& type)
{
  if (type == "nvswitch")
    return 300e9; // NVLink3, 12 links x 25 GB/s per A100 (A100 datasheet)
  if (type == "dgx2")
    return 150e9; // NVLink2, 6 links x 25 GB/s per V100 into the NVSwitches (DGX-2 datasheet)
  if (type == "dgx1_cube_mesh")
    return 25e9; // one NVLink2 link per direction (DGX-1 with Tesla V100 system architecture whitepaper)
  if (type == "nvl72")
    return 900e9; // NVLink5, 18 links x 50 GB/s per Blackwell GPU (GB200 NVL72 datasheet)
  if (type == "chiplet_mesh")
    return std::nullopt;
  return 32e9; // PCIe Gen4 x16: 16 GT/s x 16 lanes x 128/130 = 31.5 GB/s per direction
}

// The CNNs stepsim builds in (workloads/models/cnn.cpp) are named, not described layer by layer; "layers"
// is a model described layer by layer in the scenario.
const std::vector<std::string> kArchitectures = {"transformer", "resnet50", "resnet101", "vgg16", "layers"};
// Per sample: a thousand times a GPT-3 sequence's forward (7e14), and 1 PiB.
constexpr double kMaxLayerFlops = 1e18;
// One given kernel covers a micro-batch: a thousand samples at the per-sample bound. Beyond it a
// step would run for years of simulated time and report zero throughput instead of an error.
constexpr double kMaxKernelFlops = 1e21;
constexpr double kMaxLayerBytes = 1LL << 50;

void read_cnn(JsonReader& r, ModelSpec& m)
{
  m.name        = r.text("name", m.architecture);
  m.image_size  = static_cast<int>(r.integer("image_size", 224, 32, 4096));
  m.num_classes = static_cast<int>(r.integer("num_classes", 1000, 1, kMaxWidth));
  r.reject_unknown_keys();
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
  m.seq_length  = static_cast<int>(r.integer("seq_length", 0, 0, kMaxTokens));
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

void read_model(JsonReader r, ModelSpec& m, const std::string& base_dir)
{
  m.architecture = r.text("architecture", std::string("transformer"), kArchitectures);
  if (m.architecture == "layers") {
    read_layer_list(r, m);
    return;
  }
  if (m.architecture != "transformer" && std::find(kArchitectures.begin(), kArchitectures.end(), m.architecture) !=
                                             kArchitectures.end()) {
    read_cnn(r, m);
    return;
  }
  bool import_failed = false;
  if (r.has("hf_config")) {
    std::string file = r.text("hf_config");
    std::filesystem::path p(file);
    if (p.is_relative())
      p = std::filesystem::path(base_dir) / p;
    try {
      m = import_hf_config(read_json_file(p.string()));
    } catch (const InputError& e) {
      for (const auto& problem : e.problems())
        r.problems().add(r.path_of("hf_config"), problem);
      import_failed = true;
    }
  }
  // Fields given next to hf_config override what the import read.
  bool imported  = r.has("hf_config");
  auto from_file = [&](int imported_value) -> std::optional<long long> {
    return imported ? std::optional<long long>(imported_value) : std::nullopt;
  };
  m.name                = r.text("name", m.name.empty() ? std::string("model") : m.name);
  m.num_layers          = static_cast<int>(r.integer("num_layers", from_file(m.num_layers), 1, kMaxLayers));
  m.hidden_size         = static_cast<int>(r.integer("hidden_size", from_file(m.hidden_size), 1, kMaxWidth));
  m.num_attention_heads =
      static_cast<int>(r.integer("num_attention_heads", from_file(m.num_attention_heads), 1, kMaxWidth));
  m.seq_length = static_cast<int>(r.integer("seq_length", from_file(m.seq_length), 1, kMaxTokens));
  m.vocab_size = static_cast<int>(r.integer("vocab_size", from_file(m.vocab_size), 1, kMaxTokens));
  m.ffn_hidden_size  = static_cast<int>(
      r.integer("ffn_hidden_size", imported ? m.ffn_hidden_size : 4LL * m.hidden_size, 1, 4 * kMaxWidth));
  m.num_query_groups = static_cast<int>(r.integer(
      "num_query_groups", m.num_query_groups > 0 ? m.num_query_groups : m.num_attention_heads, 1, kMaxWidth));
  m.mlp             = r.text("mlp", m.mlp, {"gelu", "swiglu"});
  m.norm            = r.text("norm", m.norm, {"layernorm", "rmsnorm"});
  m.tied_embeddings = r.boolean("tied_embeddings", m.tied_embeddings);
  m.num_experts     = static_cast<int>(r.integer("num_experts", m.num_experts, 0, kMaxExperts));
  m.moe_top_k       = static_cast<int>(r.integer("moe_top_k", m.moe_top_k, 1, kMaxExperts));
  m.moe_capacity_factor = r.number("moe_capacity_factor", 1.0, 0, true);
  m.moe_ffn_hidden_size =
      static_cast<int>(r.integer("moe_ffn_hidden_size", m.moe_ffn_hidden_size > 0 ? m.moe_ffn_hidden_size : m.ffn_hidden_size,
                                 1, 4 * kMaxWidth));
  r.reject_unknown_keys();
  if (imported && !import_failed) { // values the import read did not pass through the bounds above
    const std::pair<const char*, std::pair<long long, long long>> fields[] = {
        {"num_layers", {m.num_layers, kMaxLayers}},       {"hidden_size", {m.hidden_size, kMaxWidth}},
        {"num_attention_heads", {m.num_attention_heads, kMaxWidth}}, {"seq_length", {m.seq_length, kMaxTokens}},
        {"vocab_size", {m.vocab_size, kMaxTokens}},       {"ffn_hidden_size", {m.ffn_hidden_size, 4 * kMaxWidth}},
        {"num_query_groups", {m.num_query_groups, kMaxWidth}}, {"num_experts", {m.num_experts, kMaxExperts}},
        {"moe_top_k", {m.moe_top_k, kMaxExperts}}};
    for (const auto& [name, bounds] : fields)
      if (bounds.first < (std::string(name) == "num_experts" ? 0 : 1) || bounds.first > bounds.second)
        r.problems().add(r.path_of("hf_config"), fmt::format("{} {} from the HuggingFace config is outside [1, {}]",
                                                             name, bounds.first, bounds.second));
  }

  if (m.hidden_size > 0 && m.num_attention_heads > 0 && m.hidden_size % m.num_attention_heads != 0)
    r.problems().add(r.path_of("hidden_size"), fmt::format("{} is not divisible by num_attention_heads {}",
                                                            m.hidden_size, m.num_attention_heads));
  if (m.num_query_groups > m.num_attention_heads)
    r.problems().add(r.path_of("num_query_groups"), fmt::format("{} is more than num_attention_heads {}",
                                                                 m.num_query_groups, m.num_attention_heads));
  else if (m.num_query_groups > 0 && m.num_attention_heads % m.num_query_groups != 0)
    r.problems().add(r.path_of("num_query_groups"), fmt::format("num_attention_heads {} is not divisible by {}",
                                                                 m.num_attention_heads, m.num_query_groups));
  if (m.num_experts > 0 && m.moe_top_k > m.num_experts)
    r.problems().add(r.path_of("moe_top_k"), fmt::format("{} is more than num_experts {}", m.moe_top_k, m.num_experts));
  else if (m.num_experts > 0 && m.moe_capacity_factor * m.moe_top_k > m.num_experts)
    r.problems().add(r.path_of("moe_capacity_factor"),
                     fmt::format("{} × moe_top_k {} is more than num_experts {}: an expert would take more than every "
                                 "token",
                                 m.moe_capacity_factor, m.moe_top_k, m.num_experts));
}

void read_training(JsonReader r, TrainingSpec& t)
{
  t.global_batch_size = r.integer("global_batch_size");
  t.micro_batch_size  = r.integer("micro_batch_size", 1);
  t.precision         = r.text("precision", std::string("bf16"), {"fp32", "tf32", "fp16", "bf16", "fp8"});
  t.recompute         = r.text("recompute", std::string("none"), {"none", "selective", "full"});
  t.attention         = r.text("attention", std::string("flash"), {"flash", "standard"});
  t.optimizer         = r.text("optimizer", std::string("adam"), {"adam", "sgd"});
  r.reject_unknown_keys();
}

void read_parallelism(JsonReader r, ParallelSpec& p)
{
  p.tensor              = static_cast<int>(r.integer("tensor", 1, 1, kMaxGpus));
  p.pipeline            = static_cast<int>(r.integer("pipeline", 1, 1, kMaxGpus));
  p.data                = static_cast<int>(r.integer("data", 1, 1, kMaxGpus));
  p.context             = static_cast<int>(r.integer("context", 1, 1, kMaxGpus));
  p.expert              = static_cast<int>(r.integer("expert", 1, 1, kMaxGpus));
  p.rank_order          = r.text("rank_order", p.rank_order);
  try {
    rank_order_axes(p);
  } catch (const std::invalid_argument& e) {
    r.problems().add(r.path_of("rank_order"), e.what());
    p.rank_order = ParallelSpec{}.rank_order; // the other checks go on with the default
  }
  p.virtual_stages      = static_cast<int>(r.integer("virtual_stages", 1, 1, kMaxLayers));
  p.schedule            = r.text("schedule", std::string("1f1b"));
  p.sequence_parallel   = r.boolean("sequence_parallel", false);
  p.zero_stage          = static_cast<int>(r.integer("zero_stage", r.has("fsdp") ? 3 : 0, 0));
  if (r.has("fsdp")) { // FSDP is ZeRO-3 with its own switches (README, "Sharded data parallel")
    JsonReader fsdp         = r.object("fsdp");
    p.reshard_after_forward = fsdp.boolean("reshard_after_forward", true);
    p.host_cache            = fsdp.boolean("host_cache", false);
    fsdp.reject_unknown_keys();
    if (p.zero_stage != 3)
      r.problems().add(r.path_of("fsdp"), fmt::format("FSDP shards parameters: needs zero_stage 3, got {}", p.zero_stage));
    if (p.host_cache && !p.reshard_after_forward)
      r.problems().add(fsdp.path_of("host_cache"), "caches parameters to re-gather them for backward: needs "
                                                   "reshard_after_forward true (without resharding nothing is re-gathered)");
  }
  p.offload_optimizer = r.boolean("offload_optimizer", false);
  if (p.offload_optimizer && p.zero_stage < 1)
    r.problems().add(r.path_of("offload_optimizer"),
                     "ZeRO-Offload steps each rank's optimizer shard on the CPU: needs zero_stage 1, 2 or 3, got 0");
  p.bucket_bytes        = r.bytes("bucket_size", 100e6);
  p.overlap_grad_reduce = r.boolean("overlap_grad_reduce", true);
  if (const auto* layers = r.raw("stage_layers"); layers != nullptr && layers->is_string()) {
    p.stage_layers_auto = layers->get<std::string>() == "auto";
    if (!p.stage_layers_auto)
      r.problems().add(r.path_of("stage_layers"),
                       fmt::format("expected \"auto\" or an array of layer counts, got \"{}\"", layers->get<std::string>()));
  } else if (layers != nullptr) {
    bool ok = layers->is_array() && !layers->empty();
    for (const auto& n : ok ? *layers : nlohmann::json::array())
      ok = ok && n.is_number_integer() && n.get<long long>() >= 1 && n.get<long long>() <= 1000000;
    if (ok)
      p.stage_layers = layers->get<std::vector<int>>();
    else
      r.problems().add(r.path_of("stage_layers"), "expected a non-empty array of layer counts, each at least 1");
  }
  r.reject_unknown_keys();
  if (p.zero_stage > 3)
    r.problems().add(r.path_of("zero_stage"), fmt::format("expected 0, 1, 2 or 3, got {}", p.zero_stage));
  if (p.bucket_bytes <= 0)
    r.problems().add(r.path_of("bucket_size"), "expected a size above zero");
  else if (p.bucket_bytes > kMaxBucketBytes)
    r.problems().add(r.path_of("bucket_size"), fmt::format("{:.0f} bytes is more than 1PiB", p.bucket_bytes));
}

void read_platform(JsonReader r, PlatformSpec& platform)
{
  for (auto& g : r.array_of_objects("node_groups", true)) {
    NodeGroupSpec spec;
    spec.count         = static_cast<int>(g.integer("count", std::nullopt, 1, kMaxGpus));
    spec.gpu           = g.text("gpu");
    spec.gpus_per_node = static_cast<int>(g.integer("gpus_per_node", 8, 1, kMaxGpusPerNode));
    auto intra         = g.object("intra_node");
    // The type names a node builder (topologies/node_*.cpp); the driver checks the name and the
    // GPU count it needs, so that an unknown type is reported with the closest one.
    spec.intra_node.type          = intra.text("type", std::string("nvswitch"));
    spec.intra_node.bandwidth_Bps = intra.bandwidth("bandwidth", default_intra_node_bandwidth(spec.intra_node.type));
    spec.intra_node.latency_s     = intra.time("latency", 1e-6);
    spec.intra_node.gpus_per_switch =
        static_cast<int>(intra.integer("gpus_per_switch", 2, 1, kMaxGpusPerNode));
    if (const auto* mesh = intra.raw("mesh")) {
      const bool ok = mesh->is_array() && mesh->size() == 2 &&
                      std::all_of(mesh->begin(), mesh->end(), [](const nlohmann::json& v) {
                        return v.is_number_integer() && v.get<long long>() >= 1 && v.get<long long>() <= kMaxGpusPerNode;
                      });
      if (ok)
        spec.intra_node.mesh = {mesh->at(0).get<int>(), mesh->at(1).get<int>()};
      else
        r.problems().add(intra.path_of("mesh"), fmt::format("expected [rows, columns] of chiplets, two integers "
                                                             "from 1 to {}, got {}", kMaxGpusPerNode, mesh->dump()));
    }
    intra.reject_unknown_keys();
    auto host                         = g.object("host");
    spec.host.link_bandwidth_Bps      = host.has("link_bandwidth") ? host.bandwidth("link_bandwidth") : 0.0;
    spec.host.link_latency_s          = host.time("link_latency", 1e-6);
    spec.host.memory_bandwidth_Bps    = host.bandwidth("memory_bandwidth", 204.8e9);
    host.reject_unknown_keys();
    auto nic                  = g.object("nic");
    spec.nic.count            = static_cast<int>(nic.integer("count", 8, 1, kMaxGpusPerNode));
    spec.nic.bandwidth_Bps    = nic.bandwidth("bandwidth", 25e9);
    spec.nic.latency_s        = nic.time("latency", 2e-6);
    nic.reject_unknown_keys();
    g.reject_unknown_keys();
    if (spec.nic.count > spec.gpus_per_node || spec.gpus_per_node % spec.nic.count != 0)
      r.problems().add(nic.path_of("count"), fmt::format("{} NICs cannot be shared evenly by {} GPUs per node",
                                                          spec.nic.count, spec.gpus_per_node));
    platform.node_groups.push_back(spec);
  }
  read_network(r.object("network"), platform.network, platform.node_groups);
  // A preset (configs/platforms/) was expanded into the fields above by expand_platform_preset.
  platform.preset = r.text("preset", std::string());
  if (const auto* placement = r.raw("placement")) {
    JsonReader pr = r.object("placement");
    if (const auto* stages = pr.raw("stages")) {
      bool ok = stages->is_array() && !stages->empty();
      for (const auto& g : ok ? *stages : nlohmann::json::array())
        ok = ok && g.is_number_integer() && g.get<long long>() >= 0 &&
             g.get<long long>() < static_cast<long long>(platform.node_groups.size());
      if (ok)
        platform.stage_groups = stages->get<std::vector<int>>();
      else
        pr.problems().add(pr.path_of("stages"),
                          "expected an array with one index into platform.node_groups per pipeline stage");
    }
    pr.reject_unknown_keys();
    (void)placement;
  }
  r.reject_unknown_keys();
}

void read_simulation(JsonReader r, SimulationSpec& s)
{
  s.fidelity             = r.text("fidelity", std::string("reduced"), {"reduced", "full"});
  // A name for every collective type, or an object of names per type ({"all_reduce": "tree",
  // "default": "ring"}); the names are checked against the registry by validate(). "auto" by
  // default: NCCL's tuner's choice, which the link calibration against nccl-tests
  // (configs/calibration/nccl_tests.json) is fitted and tested with.
  if (const auto* algorithms = r.raw("collective_algorithm"); algorithms != nullptr && algorithms->is_object()) {
    for (const auto& [type, name] : algorithms->items()) {
      if (!name.is_string()) {
        r.problems().add(r.path_of("collective_algorithm") + "." + type,
                         fmt::format("expected an algorithm name (a string), got {}", name.dump()));
        continue;
      }
      if (type == "default")
        s.collective_algorithm = name.get<std::string>();
      else
        s.collective_algorithm_per_op[type] = name.get<std::string>();
    }
  } else if (algorithms != nullptr && !algorithms->is_string()) {
    r.problems().add(r.path_of("collective_algorithm"),
                     fmt::format("expected an algorithm name or an object of names per collective type "
                                 "({{\"all_reduce\": \"tree\"}}), got {}", algorithms->dump()));
  } else {
    s.collective_algorithm = r.text("collective_algorithm", std::string("auto"));
  }
  s.nccl_channels = static_cast<int>(r.integer("nccl_channels", 0, 0, 64));
  s.nccl_protocol = r.text("nccl_protocol", std::string("auto"), {"auto", "LL", "LL128", "Simple"});
  s.compute_model        = r.text("compute_model", std::string("kernel"));
  s.allow_oom            = r.boolean("allow_oom", false);
  s.network_fidelity     = r.text("network_fidelity", std::string("flow"), {"flow", "analytic"});
  for (auto& e : r.array_of_objects("stragglers")) {
    SimulationSpec::Straggler st;
    const bool rank = e.has("rank"), link = e.has("link");
    if (rank == link)
      e.problems().add(e.path(), "expected either \"rank\" (a GPU whose compute is slower) or \"link\" (a link name or kind)");
    if (rank)
      st.rank = static_cast<int>(e.integer("rank", std::nullopt, 0));
    if (link) {
      st.link = e.text("link");
      if (st.link.empty())
        e.problems().add(e.path_of("link"), "expected a link name or kind such as \"nic\", got an empty string");
    }
    st.slowdown = e.number("slowdown", std::nullopt, 1.0);
    if (st.slowdown > 1e6)
      e.problems().add(e.path_of("slowdown"), fmt::format("expected a factor from 1 to 1e6, got {}", st.slowdown));
    e.reject_unknown_keys();
    s.stragglers.push_back(st);
  }
  JsonReader jitter = r.object("jitter");
  s.jitter_sigma    = jitter.number("sigma", 0.0);
  if (s.jitter_sigma > 1)
    jitter.problems().add(jitter.path_of("sigma"), fmt::format("expected a relative spread from 0 to 1, got {}", s.jitter_sigma));
  s.jitter_seed = static_cast<unsigned>(jitter.integer("seed", 1, 0, std::numeric_limits<int>::max()));
  jitter.reject_unknown_keys();
  // In reduced fidelity one rank stands for its tensor- and data-parallel peers; a slow rank or
  // per-kernel noise makes the peers differ, so every rank is simulated (the report says "full").
  bool rank_straggler = false;
  for (const auto& st : s.stragglers)
    rank_straggler = rank_straggler || st.rank >= 0;
  if (rank_straggler || s.jitter_sigma > 0)
    s.fidelity = "full";
  s.comm_compute_interference = r.boolean("comm_compute_interference", true);
  r.reject_unknown_keys();
}

// Sizes that are each within bounds but together too large to count or to lower.
void check_sizes(const Scenario& s, Problems& problems)
{
  const auto& m = s.model;
  const auto& p = s.parallelism;
  const auto& t = s.training;
  const double h = m.hidden_size;
  const double parameters =
      m.num_layers * (4 * h * h + 3 * h * m.ffn_hidden_size * std::max(1, m.num_experts)) + 2 * double(m.vocab_size) * h;
  if (parameters > kMaxParameters)
    problems.add("model", fmt::format("about {:.3g} parameters, more than the {:.0e} stepsim accepts", parameters,
                                      kMaxParameters));
  const double tokens = double(t.micro_batch_size) * m.seq_length;
  if (tokens > kMaxMicroBatchTokens)
    problems.add("training.micro_batch_size",
                 fmt::format("{} × model.seq_length {} = {:.0f} tokens per micro-batch, more than {:.0f}",
                             t.micro_batch_size, m.seq_length, tokens, kMaxMicroBatchTokens));
  const double micro_batches = double(t.global_batch_size) / (double(t.micro_batch_size) * p.data);
  const double messages      = micro_batches * p.pipeline * p.virtual_stages;
  if (messages > kMaxPipelineMessages)
    problems.add("training.global_batch_size",
                 fmt::format("{:.0f} micro-batches per replica × pipeline {} × virtual_stages {} is more than the {:.0f} "
                             "pipeline messages per stage boundary the replay engine numbers",
                             micro_batches, p.pipeline, p.virtual_stages, kMaxPipelineMessages));
  const bool full      = s.simulation.fidelity == "full";
  const double ranks   = full ? double(p.tensor) * p.data * p.context : 1; // simulated ranks per stage
  // The built-in CNNs are named, not counted in num_layers; none has more than 128 layers.
  double layers = m.architecture == "transformer" ? m.num_layers : 128;
  if (m.architecture == "layers") {
    layers = 0;
    for (const auto& l : m.layers)
      layers += l.repeat;
  }
  const double passes  = ranks * micro_batches * layers;
  if (passes > kMaxLayerPasses)
    problems.add(full ? "simulation.fidelity" : "training.global_batch_size",
                 fmt::format("{:.0f} simulated ranks per stage × {:.0f} micro-batches × {} layers = {:.3g} layer passes "
                             "to lower, more than the {:.0e} stepsim can hold{}",
                             ranks, micro_batches, layers, passes, kMaxLayerPasses,
                             full ? "; use \"reduced\" fidelity" : ""));
}

void check_shapes(const Scenario& s, Problems& problems)
{
  const auto& m = s.model;
  const auto& p = s.parallelism;
  const auto& t = s.training;
  // Products in long long: each factor is bounded, their product need not fit an int.
  const long long degrees = 1LL * p.tensor * p.pipeline * p.data * p.context;
  long long gpus          = 0;
  for (const auto& g : s.platform.node_groups)
    gpus += 1LL * g.count * g.gpus_per_node;
  if (gpus > kMaxGpus)
    problems.add("platform.node_groups", fmt::format("{} GPUs in all, more than the {} stepsim simulates", gpus, kMaxGpus));
  else if (gpus > 0 && degrees != gpus)
    problems.add("parallelism.tensor",
                 fmt::format("{} × pipeline {} × data {}{} = {} GPUs, but the platform has {}", p.tensor, p.pipeline,
                             p.data, p.context > 1 ? fmt::format(" × context {}", p.context) : "", degrees, gpus));
  if (m.num_attention_heads > 0 && m.num_attention_heads % p.tensor != 0)
    problems.add("parallelism.tensor", fmt::format("model.num_attention_heads {} is not divisible by tensor {}",
                                                   m.num_attention_heads, p.tensor));
  if (m.num_query_groups > 0 && m.num_query_groups % p.tensor != 0 && p.tensor % m.num_query_groups != 0)
    problems.add("parallelism.tensor", fmt::format("model.num_query_groups {} and tensor {} do not divide each other",
                                                   m.num_query_groups, p.tensor));
  if (!p.stage_layers.empty()) {
    long long sum = 0;
    for (int n : p.stage_layers)
      sum += n;
    if (p.stage_layers.size() != static_cast<size_t>(p.pipeline) * p.virtual_stages)
      problems.add("parallelism.stage_layers", fmt::format("expected {} entries (pipeline {} × virtual_stages {}), got {}",
                                                           p.pipeline * p.virtual_stages, p.pipeline, p.virtual_stages,
                                                           p.stage_layers.size()));
    else if (m.num_layers > 0 && sum != m.num_layers)
      problems.add("parallelism.stage_layers",
                   fmt::format("the entries add up to {} layers, but model.num_layers is {}", sum, m.num_layers));
  } else if (p.stage_layers_auto) {
    if (m.architecture == "layers")
      problems.add("parallelism.stage_layers", "\"auto\" balances transformer layers; model.layers is a layer list: "
                                               "give the layer counts");
    else if (m.architecture != "transformer")
      problems.add("parallelism.stage_layers", fmt::format("\"auto\" balances transformer layers; model {} is a {}: "
                                                           "give the layer counts",
                                                           m.name.empty() ? "architecture" : m.name, m.architecture));
    else if (m.num_layers > 0 && m.num_layers < 1LL * p.pipeline * p.virtual_stages)
      problems.add("parallelism.stage_layers",
                   fmt::format("\"auto\" needs at least one layer per virtual stage: model.num_layers {} < pipeline {} × "
                               "virtual_stages {}",
                               m.num_layers, p.pipeline, p.virtual_stages));
  } else if (m.num_layers > 0 && m.num_layers % (1LL * p.pipeline * p.virtual_stages) != 0)
    problems.add("parallelism.pipeline",
                 fmt::format("model.num_layers {} is not divisible by pipeline {} × virtual_stages {}", m.num_layers,
                             p.pipeline, p.virtual_stages));
  const auto& placement = s.platform.stage_groups;
  if (!placement.empty()) {
    if (placement.size() != static_cast<size_t>(p.pipeline))
      problems.add("platform.placement.stages",
                   fmt::format("expected {} entries (one per pipeline stage), got {}", p.pipeline, placement.size()));
    else if (gpus == degrees)
      for (size_t g = 0; g < s.platform.node_groups.size(); ++g) {
        const auto& group   = s.platform.node_groups[g];
        const long long has = 1LL * group.count * group.gpus_per_node;
        const long long wants =
            std::count(placement.begin(), placement.end(), static_cast<int>(g)) * (degrees / p.pipeline);
        if (has != wants)
          problems.add("platform.placement.stages",
                       fmt::format("the stages placed on node group {} need {} GPUs, but it has {}", g, wants, has));
      }
  }
  if (m.ffn_hidden_size > 0 && m.ffn_hidden_size % p.tensor != 0)
    problems.add("parallelism.tensor", fmt::format("model.ffn_hidden_size {} is not divisible by tensor {}",
                                                   m.ffn_hidden_size, p.tensor));
  if (t.global_batch_size > 0 && t.global_batch_size % (t.micro_batch_size * p.data) != 0)
    problems.add("training.global_batch_size",
                 fmt::format("{} is not divisible by micro_batch_size {} × data {}", t.global_batch_size,
                             t.micro_batch_size, p.data));
  if (m.seq_length > 0 && m.seq_length % p.context != 0)
    problems.add("parallelism.context",
                 fmt::format("model.seq_length {} is not divisible by context {}", m.seq_length, p.context));
  if (p.sequence_parallel && m.seq_length > 0 && m.seq_length % p.tensor != 0)
    problems.add("parallelism.sequence_parallel",
                 fmt::format("model.seq_length {} is not divisible by tensor {}", m.seq_length, p.tensor));
  if (m.num_experts > 0 && m.num_experts % p.expert != 0)
    problems.add("parallelism.expert",
                 fmt::format("model.num_experts {} is not divisible by expert {}", m.num_experts, p.expert));
  if (m.num_experts == 0 && p.expert > 1)
    problems.add("parallelism.expert", fmt::format("{} needs a mixture-of-experts model (model.num_experts)", p.expert));
  // Megatron carves the expert-parallel groups out of the data × context ranks ("tp-cp-ep-dp-pp").
  if (p.expert > 1 && (1LL * p.data * p.context) % p.expert != 0)
    problems.add("parallelism.expert", fmt::format("{} does not divide data {} × context {} = {}: expert-parallel "
                                                   "groups are carved out of the data × context ranks",
                                                   p.expert, p.data, p.context, 1LL * p.data * p.context));
  if (m.num_experts > 0 && (1LL * p.data * p.context) % p.expert == 0 &&
      1LL * p.tensor * p.context * p.data * p.pipeline <= kMaxGpus)
    if (const std::string why = rank_order_problem(p); !why.empty())
      problems.add("parallelism.rank_order", why);
  if (m.num_experts > 0 && p.tensor > 1 && !p.sequence_parallel)
    problems.add("parallelism.sequence_parallel",
                 fmt::format("a mixture-of-experts model with tensor {} needs sequence_parallel true (as Megatron "
                             "requires: each tensor rank routes its share of the tokens)",
                             p.tensor));
  // Ring attention balances the causal work by cutting the sequence into 2 × context chunks.
  if (p.context > 1 && m.seq_length > 0 && m.seq_length % p.context == 0 && m.seq_length % (2 * p.context) != 0)
    problems.add("parallelism.context",
                 fmt::format("model.seq_length {} is not divisible by 2 × context {}: the load-balanced ring cuts the "
                             "sequence into 2 × context chunks",
                             m.seq_length, p.context));
  check_sizes(s, problems);
}

} // namespace

int Scenario::layers_in_virtual_stage(int vs) const
{
  const auto& p = parallelism;
  if (!p.stage_layers.empty())
    return p.stage_layers.at(static_cast<size_t>(vs));
  return model.num_layers / (p.pipeline * p.virtual_stages);
}

int Scenario::layers_on_stage(int stage) const
{
  int layers = 0;
  for (int chunk = 0; chunk < parallelism.virtual_stages; ++chunk)
    layers += layers_in_virtual_stage(chunk * parallelism.pipeline + stage);
  return layers;
}

Scenario parse_scenario(const nlohmann::json& document, const std::string& base_dir)
{
  Problems problems;
  Scenario s;
  JsonReader top(document, "", problems);
  s.name = top.text("name", std::string("scenario"));
  read_model(top.object("model", true), s.model, base_dir);
  read_training(top.object("training", true), s.training);
  read_parallelism(top.object("parallelism"), s.parallelism);
  read_platform(top.object("platform", true), s.platform);
  read_simulation(top.object("simulation"), s.simulation);
  for (size_t i = 0; i < s.simulation.stragglers.size(); ++i)
    if (s.simulation.stragglers[i].rank >= s.platform.total_gpus() && problems.empty())
      problems.add(fmt::format("simulation.stragglers[{}].rank", i),
                   fmt::format("expected a rank below the platform's {} GPUs, got {}", s.platform.total_gpus(),
                               s.simulation.stragglers[i].rank));
  top.raw("description"); // free text for people
  top.raw("validation");  // a published measurement to compare with (configs/validation/, `stepsim accuracy`)
  top.reject_unknown_keys();
  if (problems.empty())
    check_shapes(s, problems);
  problems.throw_if_any();
  s.source = document;
  return s;
}

} // namespace stepsim

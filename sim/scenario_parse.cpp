// parse_scenario: the JSON contract of the design notes, read through JsonReader so that every
// problem names its path. Checks that need only the scenario itself live here; checks that need
// the device catalogue or a schedule registry are done by the driver with the same wording.
#include "sim/hf_config.hpp"
#include "sim/json_reader.hpp"
#include "sim/scenario.hpp"

#include <fmt/format.h>

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

void read_model(JsonReader r, ModelSpec& m, const std::string& base_dir)
{
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
    }
  }
  // Fields given next to hf_config override what the import read.
  bool imported  = r.has("hf_config");
  auto from_file = [&](int imported_value) -> std::optional<long long> {
    return imported ? std::optional<long long>(imported_value) : std::nullopt;
  };
  m.name                = r.text("name", m.name.empty() ? std::string("model") : m.name);
  m.num_layers          = static_cast<int>(r.integer("num_layers", from_file(m.num_layers)));
  m.hidden_size         = static_cast<int>(r.integer("hidden_size", from_file(m.hidden_size)));
  m.num_attention_heads = static_cast<int>(r.integer("num_attention_heads", from_file(m.num_attention_heads)));
  m.seq_length          = static_cast<int>(r.integer("seq_length", from_file(m.seq_length)));
  m.vocab_size          = static_cast<int>(r.integer("vocab_size", from_file(m.vocab_size)));
  m.ffn_hidden_size =
      static_cast<int>(r.integer("ffn_hidden_size", imported ? m.ffn_hidden_size : 4LL * m.hidden_size));
  m.num_query_groups =
      static_cast<int>(r.integer("num_query_groups", m.num_query_groups > 0 ? m.num_query_groups : m.num_attention_heads));
  m.mlp             = r.text("mlp", m.mlp, {"gelu", "swiglu"});
  m.norm            = r.text("norm", m.norm, {"layernorm", "rmsnorm"});
  m.tied_embeddings = r.boolean("tied_embeddings", m.tied_embeddings);
  m.num_experts     = static_cast<int>(r.integer("num_experts", m.num_experts, 0));
  m.moe_top_k       = static_cast<int>(r.integer("moe_top_k", m.moe_top_k));
  r.reject_unknown_keys();

  if (m.hidden_size > 0 && m.num_attention_heads > 0 && m.hidden_size % m.num_attention_heads != 0)
    r.problems().add(r.path_of("hidden_size"), fmt::format("{} is not divisible by num_attention_heads {}",
                                                            m.hidden_size, m.num_attention_heads));
  if (m.num_query_groups > 0 && m.num_attention_heads % m.num_query_groups != 0)
    r.problems().add(r.path_of("num_query_groups"), fmt::format("num_attention_heads {} is not divisible by {}",
                                                                 m.num_attention_heads, m.num_query_groups));
  if (m.num_experts > 0 && m.moe_top_k > m.num_experts)
    r.problems().add(r.path_of("moe_top_k"), fmt::format("{} is more than num_experts {}", m.moe_top_k, m.num_experts));
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
  p.tensor              = static_cast<int>(r.integer("tensor", 1));
  p.pipeline            = static_cast<int>(r.integer("pipeline", 1));
  p.data                = static_cast<int>(r.integer("data", 1));
  p.context             = static_cast<int>(r.integer("context", 1));
  p.expert              = static_cast<int>(r.integer("expert", 1));
  p.virtual_stages      = static_cast<int>(r.integer("virtual_stages", 1));
  p.schedule            = r.text("schedule", std::string("1f1b"));
  p.sequence_parallel   = r.boolean("sequence_parallel", false);
  p.zero_stage          = static_cast<int>(r.integer("zero_stage", 0, 0));
  p.bucket_bytes        = r.bytes("bucket_size", 100e6);
  p.overlap_grad_reduce = r.boolean("overlap_grad_reduce", true);
  r.reject_unknown_keys();
  if (p.zero_stage > 3)
    r.problems().add(r.path_of("zero_stage"), fmt::format("expected 0, 1, 2 or 3, got {}", p.zero_stage));
  if (p.bucket_bytes <= 0)
    r.problems().add(r.path_of("bucket_size"), "expected a size above zero");
}

void read_platform(JsonReader r, PlatformSpec& platform)
{
  for (auto& g : r.array_of_objects("node_groups", true)) {
    NodeGroupSpec spec;
    spec.count         = static_cast<int>(g.integer("count"));
    spec.gpu           = g.text("gpu");
    spec.gpus_per_node = static_cast<int>(g.integer("gpus_per_node", 8));
    auto intra         = g.object("intra_node");
    spec.intra_node.type          = intra.text("type", std::string("nvswitch"), {"nvswitch", "pcie"});
    double default_intra_bw       = spec.intra_node.type == "nvswitch" ? 300e9 : 32e9;
    spec.intra_node.bandwidth_Bps = intra.bandwidth("bandwidth", default_intra_bw);
    spec.intra_node.latency_s     = intra.time("latency", 1e-6);
    intra.reject_unknown_keys();
    auto nic                  = g.object("nic");
    spec.nic.count            = static_cast<int>(nic.integer("count", 8));
    spec.nic.bandwidth_Bps    = nic.bandwidth("bandwidth", 25e9);
    spec.nic.latency_s        = nic.time("latency", 2e-6);
    nic.reject_unknown_keys();
    g.reject_unknown_keys();
    if (spec.nic.count > spec.gpus_per_node || spec.gpus_per_node % spec.nic.count != 0)
      r.problems().add(nic.path_of("count"), fmt::format("{} NICs cannot be shared evenly by {} GPUs per node",
                                                          spec.nic.count, spec.gpus_per_node));
    platform.node_groups.push_back(spec);
  }
  auto net                         = r.object("network");
  platform.network.topology        = net.text("topology", std::string("fat_tree"));
  platform.network.oversubscription = net.number("oversubscription", 1.0, 1.0);
  platform.network.leaf_radix      = static_cast<int>(net.integer("leaf_radix", 32));
  net.reject_unknown_keys();
  r.reject_unknown_keys();
}

void read_simulation(JsonReader r, SimulationSpec& s)
{
  s.fidelity             = r.text("fidelity", std::string("reduced"), {"reduced", "full"});
  s.collective_algorithm = r.text("collective_algorithm", std::string("ring"));
  s.compute_model        = r.text("compute_model", std::string("kernel"));
  r.reject_unknown_keys();
}

void check_shapes(const Scenario& s, Problems& problems)
{
  const auto& m = s.model;
  const auto& p = s.parallelism;
  const auto& t = s.training;
  int degrees   = p.tensor * p.pipeline * p.data * p.context;
  int gpus      = s.platform.total_gpus();
  if (gpus > 0 && degrees != gpus)
    problems.add("parallelism.tensor",
                 fmt::format("{} × pipeline {} × data {}{} = {} GPUs, but the platform has {}", p.tensor, p.pipeline,
                             p.data, p.context > 1 ? fmt::format(" × context {}", p.context) : "", degrees, gpus));
  if (m.num_attention_heads > 0 && m.num_attention_heads % p.tensor != 0)
    problems.add("parallelism.tensor", fmt::format("model.num_attention_heads {} is not divisible by tensor {}",
                                                   m.num_attention_heads, p.tensor));
  if (m.num_query_groups > 0 && m.num_query_groups % p.tensor != 0 && p.tensor % m.num_query_groups != 0)
    problems.add("parallelism.tensor", fmt::format("model.num_query_groups {} and tensor {} do not divide each other",
                                                   m.num_query_groups, p.tensor));
  if (m.num_layers > 0 && m.num_layers % (p.pipeline * p.virtual_stages) != 0)
    problems.add("parallelism.pipeline",
                 fmt::format("model.num_layers {} is not divisible by pipeline {} × virtual_stages {}", m.num_layers,
                             p.pipeline, p.virtual_stages));
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
}

} // namespace

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
  top.raw("description"); // free text for people
  top.reject_unknown_keys();
  if (problems.empty())
    check_shapes(s, problems);
  problems.throw_if_any();
  s.source = document;
  return s;
}

} // namespace stepsim

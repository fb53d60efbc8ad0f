// parse_scenario: the JSON contract of the design notes, read through JsonReader so that every
// problem names its path. Checks that need only the scenario itself live here; checks that need
// the device catalogue or a schedule registry are done by the driver with the same wording.
#include "sim/input/scenario_parse.hpp"

#include "sim/input/context_parse.hpp"
#include "sim/input/federated_parse.hpp"
#include "sim/input/limits.hpp"
#include "sim/input/input_pipeline_parse.hpp"
#include "sim/input/platform_parse.hpp"
#include "sim/core/kernel.hpp"
#include "sim/core/rank_order.hpp"
#include "sim/core/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace stepsim {

namespace {
using namespace limits;

// The profile's defaults stand for what the run leaves to its framework.
const FrameworkProfile& read_framework(JsonReader& r, TrainingSpec& t)
{
  t.framework = r.text("framework", std::string(kDefaultFramework), FrameworkRegistry::names());
  const FrameworkProfile* profile = FrameworkRegistry::find(t.framework);
  return profile != nullptr ? *profile : FrameworkRegistry::get(kDefaultFramework, "training.framework");
}

void read_training(JsonReader r, TrainingSpec& t, const FrameworkProfile& framework)
{
  if (r.has("federated")) // a round on edge devices instead of a step (sim/input/federated_parse.hpp)
    read_federated(r, t);
  else
    t.global_batch_size = r.integer("global_batch_size");
  t.micro_batch_size  = r.integer("micro_batch_size", 1);
  t.precision         = r.text("precision", std::string("bf16"), {"fp32", "tf32", "fp16", "bf16", "fp8"});
  t.recompute         = r.text("recompute", std::string("none"), {"none", "selective", "full"});
  // A partial full recompute: every k-th layer (torchtitan's selective layer checkpointing) or the
  // first N of each pipeline chunk (Megatron's block method); either names which layers "full"
  // rebuilds, so it needs "full", and one of them at a time. Megatron's uniform method rebuilds
  // every layer, N at a time from one checkpoint (megatron/core/transformer/transformer_block.py,
  // TransformerBlock._checkpointed_forward); its --recompute-num-layers defaults to 1.
  t.recompute_every      = static_cast<int>(r.integer("recompute_every", 1, 1, limits::kMaxLayers));
  const bool method      = r.has("recompute_method");
  const std::string how  = r.text("recompute_method", std::string("block"), {"uniform", "block"});
  const int num_layers   = static_cast<int>(r.integer("recompute_num_layers", method ? 1 : 0, 1, limits::kMaxLayers));
  if (how == "uniform")
    t.recompute_group = num_layers;
  else
    t.recompute_num_layers = num_layers;
  for (const char* key : {"recompute_every", "recompute_method", "recompute_num_layers"})
    if (r.has(key) && t.recompute != "full")
      r.problems().add(r.path_of(key), fmt::format("chooses the layers a full recompute rebuilds, but "
                                                   "training.recompute is \"{}\"; set it to \"full\"",
                                                   t.recompute));
  if (r.has("recompute_every") && r.has("recompute_num_layers"))
    r.problems().add(r.path_of("recompute_num_layers"),
                     "give recompute_every (every k-th layer) or recompute_num_layers (the first N of each chunk), "
                     "not both");
  else if (r.has("recompute_every") && method)
    r.problems().add(r.path_of("recompute_method"),
                     "give recompute_every (every k-th layer) or recompute_method (Megatron's uniform or block), "
                     "not both");
  t.attention         = r.text("attention", framework.attention, {"flash", "standard"});
  t.optimizer         = r.text("optimizer", std::string("adam"), {"adam", "sgd"});
  std::vector<std::string> kernels(std::begin(kAttentionKernels), std::end(kAttentionKernels));
  if (r.has("attention_kernel") || !framework.attention_kernel.empty())
    t.attention_kernel = r.text("attention_kernel", framework.attention_kernel, kernels);
  if (r.has("attention_kernel") && t.attention != "flash")
    r.problems().add(r.path_of("attention_kernel"),
                     fmt::format("names a fused-attention kernel, but training.attention is \"{}\"", t.attention));
  // Gradients as the framework keeps them: fp32 where the profile says so for this precision
  // (Megatron's bf16), else the training precision's own (16-bit for fp8 runs).
  const auto& fp32_for = framework.fp32_gradients_for;
  const bool fp32      = t.precision == "fp32" || t.precision == "tf32" ||
                    std::find(fp32_for.begin(), fp32_for.end(), t.precision) != fp32_for.end();
  const std::string gradients = fp32 ? "fp32" : t.precision == "fp8" ? "bf16" : t.precision;
  t.gradient_precision        = r.text("gradient_precision", gradients, {"fp32", "bf16", "fp16"});
  // torch.compile fuses what the framework would run op by op; a framework of fused kernels has
  // nothing left for it to fuse, as stepsim models it.
  t.compile = r.boolean("compile", false);
  if (t.compile && !framework.eager_ops)
    r.problems().add(r.path_of("compile"), fmt::format("torch.compile is modelled for a framework that runs the model "
                                                       "op by op (torchtitan); \"{}\" runs fused kernels already",
                                                       t.framework));
  if (t.precision == "fp8" && framework.fp8_dynamic_scaling && !t.compile)
    r.problems().add(r.path_of("precision"),
                     fmt::format("fp8 under {} is torchao's float8 training, which stepsim models compiled, as {} runs "
                                 "it: set training.compile true",
                                 t.framework, t.framework));
  read_input_pipeline(r, t.input);
  read_checkpoint(r, t.checkpoint);
  r.reject_unknown_keys();
}

// The framework's gradient bucket for this plan, in bytes (sim/core/framework.hpp).
double framework_bucket_bytes(const FrameworkProfile& f, const ParallelSpec& p, const TrainingSpec& t)
{
  if (f.bucket_bytes > 0)
    return f.bucket_bytes;
  if (f.bucket_parameters <= 0 && f.bucket_parameters_per_rank <= 0)
    return kMaxBucketBytes; // one bucket for all gradients
  const double element = gradient_element_bytes(t.precision, t.gradient_precision);
  return std::max(f.bucket_parameters, f.bucket_parameters_per_rank * p.data * p.context) * element;
}

void read_parallelism(JsonReader r, ParallelSpec& p, const FrameworkProfile& framework, const TrainingSpec& t)
{
  p.tensor              = static_cast<int>(r.integer("tensor", 1, 1, kMaxGpus));
  p.pipeline            = static_cast<int>(r.integer("pipeline", 1, 1, kMaxGpus));
  p.data                = static_cast<int>(r.integer("data", 1, 1, kMaxGpus));
  p.context             = static_cast<int>(r.integer("context", 1, 1, kMaxGpus));
  read_context_attention(r, p); // context_attention, ulysses_degree (sim/input/context_parse.hpp)
  p.expert              = static_cast<int>(r.integer("expert", 1, 1, kMaxGpus));
  if (r.has("expert_tensor")) // else 0: the experts split as the dense layers (expert_tensor_size)
    p.expert_tensor = static_cast<int>(r.integer("expert_tensor", std::nullopt, 1, kMaxGpus));
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
  // The profile's overlap applies where it can (tensor > 1 with sequence parallelism); asked for
  // explicitly, it must.
  p.tensor_comm_overlap = r.boolean("tensor_comm_overlap", framework.tensor_comm_overlap);
  if (r.has("tensor_comm_overlap") && p.tensor_comm_overlap && (p.tensor < 2 || !p.sequence_parallel))
    r.problems().add(r.path_of("tensor_comm_overlap"),
                     fmt::format("overlaps the sequence-parallel all-gathers and reduce-scatters with the GEMMs: needs "
                                 "tensor > 1 and sequence_parallel true, got tensor {} and sequence_parallel {}",
                                 p.tensor, p.sequence_parallel));
  p.zero_stage          = static_cast<int>(r.integer("zero_stage", r.has("fsdp") ? 3 : 0, 0));
  if (r.has("fsdp")) { // FSDP is ZeRO-3 with its own switches (README, "Sharded data parallel")
    JsonReader fsdp         = r.object("fsdp");
    p.reshard_after_forward = fsdp.boolean("reshard_after_forward", true);
    p.host_cache            = fsdp.boolean("host_cache", false);
    p.float8_all_gather     = fsdp.boolean("float8_all_gather", false);
    fsdp.reject_unknown_keys();
    if (p.float8_all_gather && (t.precision != "fp8" || !framework.fp8_dynamic_scaling))
      r.problems().add(fsdp.path_of("float8_all_gather"),
                       fmt::format("gathers torchao's float8 weights: needs training.precision \"fp8\" under a "
                                   "framework that trains with torchao's float8 (torchtitan), got \"{}\" under {}",
                                   t.precision, t.framework));
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
  p.bucket_bytes        = r.bytes("bucket_size", framework_bucket_bytes(framework, p, t));
  p.overlap_grad_reduce = r.boolean("overlap_grad_reduce", framework.overlap_grad_reduce);
  p.overlap_param_gather = r.boolean("overlap_param_gather", false);
  if (p.overlap_param_gather && p.zero_stage != 1 && p.zero_stage != 2)
    r.problems().add(r.path_of("overlap_param_gather"),
                     fmt::format("overlaps the distributed optimizer's gather of the updated weights: needs zero_stage 1 "
                                 "or 2, got {}",
                                 p.zero_stage));
  p.align_param_gather = r.boolean("align_param_gather", false);
  if (p.align_param_gather && !p.overlap_param_gather)
    r.problems().add(r.path_of("align_param_gather"),
                     "dispatches the overlapped parameter gathers of every stage when the step starts: needs "
                     "overlap_param_gather true (Megatron-Core's --overlap-param-gather)");
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

void read_simulation(JsonReader r, SimulationSpec& s, const std::string& base_dir)
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
  // The host's time per kernel launch, in place of the device calibration's (a profile of one's
  // own job: `stepsim replay` prints it from a PyTorch profiler trace); absent, the calibration's.
  if (r.has("host_launch_overhead")) {
    s.host_launch_overhead_s = r.time("host_launch_overhead");
    if (s.host_launch_overhead_s >= 1e-2)
      r.problems().add(r.path_of("host_launch_overhead"),
                       fmt::format("expected a host time per kernel launch below 10 ms, got {:g} s",
                                   s.host_launch_overhead_s));
  }
  // The host's time each step between its micro-batches' work, in place of the framework's fitted
  // figure (the gap a profile of one's own job shows between one step's last kernel and the
  // next one's first); absent, the calibration's.
  if (r.has("step_host_overhead")) {
    s.step_host_overhead_s = r.time("step_host_overhead");
    if (s.step_host_overhead_s >= 10.0)
      r.problems().add(r.path_of("step_host_overhead"),
                       fmt::format("expected a host time per step below 10 s, got {:g} s", s.step_host_overhead_s));
  }
  // A file of `stepsim calibrate network`, relative to the scenario's folder; read and checked by
  // validate() (sim/validate.cpp), applied by simulate() (models/link_calibration.hpp).
  if (r.has("network_calibration")) {
    s.network_calibration = r.text("network_calibration");
    if (s.network_calibration.empty() && r.raw("network_calibration")->is_string())
      r.problems().add(r.path_of("network_calibration"),
                       "expected the path of a file written by `stepsim calibrate network -o FILE`, got \"\"");
    else if (std::filesystem::path(s.network_calibration).is_relative())
      s.network_calibration = (std::filesystem::path(base_dir) / s.network_calibration).lexically_normal().string();
  }
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
void check_sizes(const Scenario& s, const ModelHooks& model, Problems& problems)
{
  const auto& m = s.model;
  const auto& p = s.parallelism;
  const auto& t = s.training;
  const double h = m.hidden_size;
  const double parameters =
      m.num_layers * (4 * h * h + 3 * h * m.ffn_hidden_size * std::max(1, m.num_experts) +
                      3 * h * double(m.moe_shared_experts) * // shared experts, at most this wide
                          std::max({m.moe_shared_expert_ffn_hidden_size, m.moe_ffn_hidden_size, m.ffn_hidden_size})) +
      2 * double(m.vocab_size) * h;
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
  const double layers = model.layer_count(m);
  const double passes  = ranks * micro_batches * layers;
  if (passes > kMaxLayerPasses)
    problems.add(full ? "simulation.fidelity" : "training.global_batch_size",
                 fmt::format("{:.0f} simulated ranks per stage × {:.0f} micro-batches × {} layers = {:.3g} layer passes "
                             "to lower, more than the {:.3g} stepsim can hold{}",
                             ranks, micro_batches, layers, passes, kMaxLayerPasses,
                             full ? "; use \"reduced\" fidelity" : ""));
}

void check_shapes(const Scenario& s, const ModelHooks& model, Problems& problems)
{
  const auto& m = s.model;
  const auto& p = s.parallelism;
  const auto& t = s.training;
  // Products in long long: each factor is bounded, their product need not fit an int.
  const long long degrees = 1LL * p.tensor * p.pipeline * p.data * p.context;
  long long gpus          = 0;
  for (const auto& g : s.platform.node_groups)
    gpus += 1LL * g.count * g.gpus_per_node;
  if (gpus > kMaxPlatformGpus)
    problems.add("platform.node_groups",
                 fmt::format("{} GPUs in all, more than the {} stepsim simulates in reasonable time", gpus, kMaxPlatformGpus));
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
    // The model's kind checks that it can balance itself (its check(), below).
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
  // Sequence parallelism splits the tensor-parallel group's activations; with no such group it is
  // nothing (Megatron-LM turns it off with a warning: megatron/training/arguments.py,
  // validate_args, "Disabling sequence parallelism because tensor model parallelism is disabled").
  if (p.sequence_parallel && p.tensor == 1)
    problems.add("parallelism.sequence_parallel", "true needs parallelism.tensor above 1: it splits the "
                                                  "tensor-parallel group's activations, and tensor is 1");
  if (p.sequence_parallel && m.seq_length > 0 && m.seq_length % p.tensor != 0)
    problems.add("parallelism.sequence_parallel",
                 fmt::format("model.seq_length {} is not divisible by tensor {}", m.seq_length, p.tensor));
  // Context parallelism splits the causal sequence over ranks as if every query saw all keys
  // before it; a sliding window would leave most ring steps or gathered keys unused, which its
  // lowering (workloads/parallel/context_parallel.hpp) does not model.
  if (m.sliding_window > 0 && p.context > 1)
    problems.add("parallelism.context",
                 fmt::format("{} with model.sliding_window {}: context-parallel attention over a sliding window is "
                             "not modelled; expected 1",
                             p.context, m.sliding_window));
  if (m.num_experts > 0 && m.num_experts % p.expert != 0)
    problems.add("parallelism.expert",
                 fmt::format("model.num_experts {} is not divisible by expert {}", m.num_experts, p.expert));
  if (m.num_experts == 0 && p.expert > 1)
    problems.add("parallelism.expert", fmt::format("{} needs a mixture-of-experts model (model.num_experts)", p.expert));
  // Megatron carves the expert-parallel groups out of the data × context ranks ("tp-cp-ep-dp-pp"),
  // or, with the experts' own tensor size, out of a stage's tensor × context × data ranks less
  // the expert tensor groups (megatron/core/parallel_state.py, initialize_model_parallel:
  // expert_tensor_model_pipeline_parallel_size must divide the world size).
  const bool own_expert_tensor = p.expert_tensor > 0 && p.expert_tensor != p.tensor;
  const long long expert_ranks = own_expert_tensor ? 1LL * p.tensor * p.context * p.data : 1LL * p.data * p.context;
  const long long expert_split = own_expert_tensor ? 1LL * p.expert_tensor * p.expert : p.expert;
  if (p.expert_tensor > 0 && m.num_experts == 0)
    problems.add("parallelism.expert_tensor",
                 fmt::format("{} needs a mixture-of-experts model (model.num_experts)", p.expert_tensor));
  else if (own_expert_tensor && expert_ranks % expert_split != 0)
    problems.add("parallelism.expert_tensor",
                 fmt::format("expert_tensor {} × expert {} = {} does not divide tensor {} × context {} × data {} = {}: "
                             "the experts' tensor and expert-parallel groups are carved out of a stage's ranks",
                             p.expert_tensor, p.expert, expert_split, p.tensor, p.context, p.data, expert_ranks));
  else if (p.expert > 1 && !own_expert_tensor && (1LL * p.data * p.context) % p.expert != 0)
    problems.add("parallelism.expert", fmt::format("{} does not divide data {} × context {} = {}: expert-parallel "
                                                   "groups are carved out of the data × context ranks",
                                                   p.expert, p.data, p.context, 1LL * p.data * p.context));
  if (p.expert_tensor > 0 && m.num_experts > 0) {
    const int width = m.moe_ffn_hidden_size > 0 ? m.moe_ffn_hidden_size : m.ffn_hidden_size;
    if (width > 0 && width % p.expert_tensor != 0)
      problems.add("parallelism.expert_tensor", fmt::format("each expert's FFN width {} (model.moe_ffn_hidden_size, "
                                                            "else ffn_hidden_size) is not divisible by expert_tensor {}",
                                                            width, p.expert_tensor));
  }
  if (m.num_experts > 0 && expert_ranks % expert_split == 0 &&
      1LL * p.tensor * p.context * p.data * p.pipeline <= kMaxGpus)
    if (const std::string why = rank_order_problem(p); !why.empty())
      problems.add("parallelism.rank_order", why);
  if (m.num_experts > 0 && p.tensor > 1 && !p.sequence_parallel)
    problems.add("parallelism.sequence_parallel",
                 fmt::format("a mixture-of-experts model with tensor {} needs sequence_parallel true (as Megatron "
                             "requires: each tensor rank routes its share of the tokens)",
                             p.tensor));
  // A framework's per-op selective policy is lowered for the transformer's blocks (its lowering
  // names the ops); the other kinds' "selective" is the attention core's.
  if (t.recompute == "selective" && m.architecture == "dit" &&
      FrameworkRegistry::get(t.framework, "training.framework").selective_recompute != "attention")
    problems.add("training.recompute",
                 fmt::format("\"selective\" under {} is its per-op policy, which stepsim lowers for the transformer's "
                             "blocks; a dit recomputes its attention core only under a profile whose selective "
                             "recompute is the attention's (e.g. megatron-lm-2022)",
                             t.framework));
  // torch.compile and torchao's float8 casts are lowered for the transformer's dense blocks.
  const auto& profile = FrameworkRegistry::get(t.framework, "training.framework");
  if (t.compile && m.architecture != "transformer")
    problems.add("training.compile", fmt::format("torch.compile is modelled for the transformer's blocks; "
                                                 "model.architecture \"{}\" is lowered as the framework runs it "
                                                 "uncompiled",
                                                 m.architecture));
  if (t.precision == "fp8" && profile.fp8_dynamic_scaling && (m.architecture != "transformer" || m.num_experts > 0))
    problems.add("training.precision",
                 fmt::format("fp8 under {} is torchao's float8 training, which stepsim lowers for a dense "
                             "transformer's linear layers; use bf16 for model.architecture \"{}\"{}",
                             t.framework, m.architecture,
                             m.num_experts > 0 ? fmt::format(" with num_experts {}", m.num_experts) : std::string()));
  // Partial recompute picks layers of the transformer's plan; the other kinds recompute all or none.
  if ((t.recompute_every != 1 || t.recompute_num_layers != 0) && m.architecture != "transformer")
    problems.add(t.recompute_every != 1 ? "training.recompute_every" : "training.recompute_num_layers",
                 fmt::format("picks the transformer layers a full recompute rebuilds; model.architecture \"{}\" "
                             "recomputes all its layers or none",
                             m.architecture));
  if (t.recompute_group > 1 && m.architecture != "transformer")
    problems.add("training.recompute_num_layers",
                 fmt::format("groups transformer layers under one checkpoint (recompute_method \"uniform\"); "
                             "model.architecture \"{}\" checkpoints each of its layers",
                             m.architecture));
  // Sharded parameters are gathered layer by layer, each just before its own recompute; a group
  // rebuilt at once would need its layers gathered together, which stepsim does not lower.
  if (t.recompute_group > 1 && p.zero_stage == 3)
    problems.add("training.recompute_method",
                 fmt::format("\"uniform\" with recompute_num_layers {} rebuilds layers in groups, which stepsim "
                             "lowers for parameters a rank holds whole; with zero_stage 3 (ZeRO-3, FSDP) use "
                             "recompute_num_layers 1 or the block method",
                             t.recompute_group));
  check_context_attention(s, problems); // heads for Ulysses' all-to-alls (sim/input/context_parse.hpp)
  // Ring attention balances the causal work by cutting the sequence into 2 × context chunks
  // (Ulysses computes whole sequences and needs no such cut).
  if (p.context > 1 && p.context_attention != "ulysses" && m.seq_length > 0 && m.seq_length % p.context == 0 &&
      m.seq_length % (2 * p.context) != 0)
    problems.add("parallelism.context",
                 fmt::format("model.seq_length {} is not divisible by 2 × context {}: the load-balanced ring cuts the "
                             "sequence into 2 × context chunks",
                             m.seq_length, p.context));
  check_sizes(s, model, problems);
  model.check(s, problems);
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

bool Scenario::layer_recomputed(long long layer, int j) const
{
  if (training.recompute != "full")
    return false;
  if (training.recompute_num_layers > 0) // Megatron's block method counts within each model chunk
    return j < training.recompute_num_layers;
  return (layer + 1) % training.recompute_every == 0;
}

int Scenario::recompute_checkpoints_on_stage(int stage) const
{
  if (training.recompute_group <= 1)
    return recomputed_layers_on_stage(stage);
  int n = 0; // a chunk's last group may be short
  for (int chunk = 0; chunk < parallelism.virtual_stages; ++chunk) {
    const int layers = layers_in_virtual_stage(chunk * parallelism.pipeline + stage);
    n += (layers + training.recompute_group - 1) / training.recompute_group;
  }
  return training.recompute == "full" ? n : 0;
}

int Scenario::layers_rebuilt_at_once(int stage) const
{
  if (training.recompute != "full" || recomputed_layers_on_stage(stage) == 0)
    return 0;
  int widest = 0;
  for (int chunk = 0; chunk < parallelism.virtual_stages; ++chunk)
    widest = std::max(widest, layers_in_virtual_stage(chunk * parallelism.pipeline + stage));
  return std::min(widest, training.recompute_group);
}

int Scenario::recomputed_layers_on_stage(int stage) const
{
  if (training.recompute != "full")
    return 0;
  if (training.recompute_every == 1 && training.recompute_num_layers == 0)
    return layers_on_stage(stage);
  const int p = parallelism.pipeline;
  long long first = 0; // the index in the whole model of each chunk's first layer (virtual-stage order)
  int n           = 0;
  for (int vs = 0; vs < p * parallelism.virtual_stages; ++vs) {
    const int layers = layers_in_virtual_stage(vs);
    if (vs % p == stage)
      for (int j = 0; j < layers; ++j)
        n += layer_recomputed(first + j, j) ? 1 : 0;
    first += layers;
  }
  return n;
}

double Scenario::recomputed_layer_share() const
{
  if (training.recompute != "full" || model.num_layers <= 0)
    return 0;
  if (training.recompute_every == 1 && training.recompute_num_layers == 0) // every layer, however staged
    return 1;
  long long first = 0, n = 0;
  for (int vs = 0; vs < parallelism.pipeline * parallelism.virtual_stages; ++vs) {
    const int layers = layers_in_virtual_stage(vs);
    for (int j = 0; j < layers; ++j)
      n += layer_recomputed(first + j, j) ? 1 : 0;
    first += layers;
  }
  return double(n) / model.num_layers;
}

Scenario parse_scenario(const nlohmann::json& document, const std::string& base_dir, const ModelHooks& model)
{
  Problems problems;
  Scenario s;
  JsonReader top(document, "", problems);
  s.name = top.text("name", std::string("scenario"));
  JsonReader model_reader = top.object("model", true);
  model.read(model_reader, s.model, base_dir);
  JsonReader training                = top.object("training", true);
  const FrameworkProfile& framework  = read_framework(training, s.training);
  read_training(training, s.training, framework);
  read_parallelism(top.object("parallelism"), s.parallelism, framework, s.training);
  if (!s.training.federated.enabled) // a federated round has no platform: its clients are it
    read_platform(top.object("platform", true), s.platform);
  read_simulation(top.object("simulation"), s.simulation, base_dir);
  if (s.training.federated.enabled)
    check_federated_scenario(top, s); // after the simulation section, which it checks too
  for (size_t i = 0; i < s.simulation.stragglers.size(); ++i)
    if (s.training.federated.enabled)
      problems.add(fmt::format("simulation.stragglers[{}]", i),
                   "a federated round has no ranks: a slower client is a client group of its own in "
                   "training.federated.clients (its own device)");
    else if (s.simulation.stragglers[i].rank >= s.platform.total_gpus() && problems.empty())
      problems.add(fmt::format("simulation.stragglers[{}].rank", i),
                   fmt::format("expected a rank below the platform's {} GPUs, got {}", s.platform.total_gpus(),
                               s.simulation.stragglers[i].rank));
  top.raw("description"); // free text for people
  top.raw("validation");  // a published measurement to compare with (configs/validation/, `stepsim accuracy`)
  top.reject_unknown_keys();
  if (problems.empty())
    check_input_and_checkpoint(s, problems);
  if (problems.empty())
    check_shapes(s, model, problems);
  problems.throw_if_any();
  s.source = document;
  return s;
}

} // namespace stepsim

#include "tools/driver/plan.hpp"

#include "models/compute/compute_model.hpp"
#include "models/device.hpp"
#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/simulate.hpp"
#include "sim/stages.hpp"
#include "tools/driver/process_pool.hpp"
#include "topologies/preset.hpp"
#include "workloads/models/transformer.hpp"
#include "workloads/parallel/ulysses.hpp"
#include "workloads/schedules/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <tuple>
#include <unistd.h>

namespace stepsim {

namespace {

std::vector<int> divisors(int n)
{
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0)
      out.push_back(d);
  return out;
}

// A ring all-reduce of `bytes` over n members on links of `Bps` and `latency_s`.
double ring_all_reduce_s(double bytes, int n, double Bps, double latency_s)
{
  return n <= 1 ? 0 : 2.0 * (n - 1) / n * bytes / Bps + 2.0 * (n - 1) * latency_s;
}

// Layers over `chunks` virtual stages when they do not divide evenly: the extra layers go to the
// middle chunks, as the first holds the embedding and the last the output layer (Llama 3's split).
std::vector<int> balanced_split(int layers, int chunks)
{
  std::vector<int> split(static_cast<size_t>(chunks), layers / chunks);
  const int extra = layers % chunks, first = (chunks - extra) / 2;
  for (int i = 0; i < extra; ++i)
    ++split[static_cast<size_t>(first + i)];
  return split;
}

// Context parallelism splits the sequence; Megatron-Core's parallelism guide gives it for "long
// sequences (8K+ tokens)" (docs.nvidia.com/megatron-core, user-guide/parallelism-guide), so
// shorter ones are planned without it. Ring attention cuts the sequence into 2·context chunks
// (workloads/parallel/context_parallel.hpp); a chunk keeps at least the 128 rows a fused
// attention kernel tiles its queries by (FlashAttention-2's forward block).
constexpr long long kContextFromTokens = 8192;
constexpr long long kMinContextChunk   = 128;

std::vector<int> context_degrees(const Scenario& base, int gpus)
{
  std::vector<int> out = {1};
  const long long seq  = base.model.seq_length;
  if (base.model.architecture != "transformer" || seq < kContextFromTokens)
    return out;
  for (int c = 2; gpus % c == 0 && seq % (2LL * c) == 0 && seq / (2LL * c) >= kMinContextChunk; c *= 2)
    out.push_back(c);
  return out;
}

// How attention may run over c context ranks at tensor degree t (parallelism.context_attention):
// ring attention always; Ulysses where the heads and the K/V heads per tensor rank divide by c
// (sim/input/context_parse.hpp), else USP with the largest all-to-all group they divide by and the
// ring across the groups. {"ring", 1} alone without context parallelism.
std::vector<std::pair<std::string, int>> context_attentions(const ModelSpec& m, int t, int c)
{
  std::vector<std::pair<std::string, int>> out = {{"ring", 1}};
  const int groups = m.num_query_groups > 0 ? m.num_query_groups : m.num_attention_heads;
  if (c == 1 || m.num_attention_heads % t != 0 || groups % t != 0)
    return out;
  int widest = 1;
  for (int u : divisors(c))
    if ((m.num_attention_heads / t) % u == 0 && (groups / t) % u == 0)
      widest = u;
  if (widest == c)
    out.emplace_back("ulysses", c);
  else if (widest > 1)
    out.emplace_back("usp", widest);
  return out;
}

// Expert degrees of a mixture-of-experts model: the divisors of its expert count (the parser
// checks that each divides the data × context ranks it spans).
std::vector<int> expert_degrees(const Scenario& base)
{
  if (base.model.num_experts <= 0)
    return {1};
  return divisors(base.model.num_experts);
}

// The schedules to plan for a pipeline of p stages, with the virtual-stage counts of those that
// interleave; one for a single stage, where they all run the same order. By default every
// registered schedule that flushes between steps: one without a flush (PipeDream) updates weights
// asynchronously, which changes what is trained, so it is planned only when asked for by name
// or with "all".
std::vector<std::pair<std::string, int>> schedules_for(int p, const std::vector<std::string>& wanted)
{
  std::vector<std::pair<std::string, int>> out;
  const bool every = std::find(wanted.begin(), wanted.end(), "all") != wanted.end();
  if (p == 1) {
    out.emplace_back(wanted.empty() || every ? "1f1b" : wanted.front(), 1);
    return out;
  }
  for (const auto& [name, item] : ScheduleRegistry::all()) {
    const bool named = std::find(wanted.begin(), wanted.end(), name) != wanted.end();
    if (!(named || every || (wanted.empty() && item.entry.flushes)))
      continue;
    if (item.entry.needs_virtual_stages)
      for (int v : {2, 3, 4})
        out.emplace_back(name, v);
    else
      out.emplace_back(name, 1);
  }
  return out;
}

std::vector<nlohmann::json> enumerate(const Scenario& base, int gpus, const PlanOptions& options)
{
  // On a platform of several GPU types a pipeline's stages run at different speeds: their layers
  // are split by the automatic split (parallelism.stage_layers "auto", topologies/placement.cpp)
  // where the schedule has one chunk per stage; interleaved chunks are split evenly.
  std::set<std::string> devices;
  for (const auto& g : base.platform.node_groups)
    devices.insert(g.gpu);
  const bool mixed = devices.size() > 1;
  const auto& m    = base.model;
  const int layers = m.num_layers;
  int per_node     = 0; // tensor degrees divide every group's node
  for (const auto& g : base.platform.node_groups)
    per_node = std::gcd(per_node, g.gpus_per_node);
  std::vector<nlohmann::json> out;
  for (int t : divisors(per_node)) {
    if (gpus % t != 0)
      continue;
    // Each context degree with every way attention may run over it.
    std::vector<std::tuple<int, std::string, int>> contexts;
    for (int c : context_degrees(base, gpus / t))
      for (const auto& [attention, ulysses] : context_attentions(m, t, c))
        contexts.emplace_back(c, attention, ulysses);
    for (const auto& [c, attention, ulysses] : contexts) {
      for (int p : divisors(gpus / (t * c))) {
        if (p > layers)
          break;
        const int d = gpus / (t * c * p);
        for (int e : expert_degrees(base)) {
          if ((d * c) % e != 0)
            continue; // experts are spread over data × context ranks
          for (int mb : {1, 2, 4, 8}) {
            if (base.training.global_batch_size % (static_cast<long long>(mb) * d) != 0)
              continue;
            for (const auto& [schedule, v] : schedules_for(p, options.schedules))
              for (int zero : {0, 1})
                for (const char* recompute : {"none", "selective", "full"}) {
                  if (zero == 1 && d * c == 1)
                    continue; // nothing to shard
                  nlohmann::json setting = {{"parallelism.tensor", t},
                                            {"parallelism.context", c},
                                            {"parallelism.expert", e},
                                            {"parallelism.pipeline", p},
                                            {"parallelism.data", d},
                                            {"parallelism.virtual_stages", v},
                                            {"parallelism.schedule", schedule},
                                            {"parallelism.sequence_parallel", t > 1},
                                            {"parallelism.zero_stage", zero},
                                            {"training.micro_batch_size", mb},
                                            {"training.recompute", recompute}};
                  if (attention != "ring") // ring attention, the default, is left out as before
                    setting["parallelism.context_attention"] = attention;
                  if (attention == "usp")
                    setting["parallelism.ulysses_degree"] = ulysses;
                  if (mixed && p > 1 && v == 1)
                    setting["parallelism.stage_layers"] = "auto";
                  else if (layers % (p * v) != 0)
                    setting["parallelism.stage_layers"] = balanced_split(layers, p * v);
                  out.push_back(std::move(setting));
                }
          }
        }
      }
    }
  }
  return out;
}

// What one GPU-hour costs on each node group: the command line's price, or the platform's.
std::vector<double> prices(const Scenario& s, const PlanOptions& options)
{
  std::vector<double> out;
  for (const auto& g : s.platform.node_groups)
    out.push_back(options.price_per_gpu_hour > 0 ? options.price_per_gpu_hour : g.price_per_gpu_hour);
  return out;
}

} // namespace

nlohmann::json with_settings(const nlohmann::json& base, const nlohmann::json& settings)
{
  nlohmann::json doc = base;
  for (const auto& [path, value] : settings.items())
    set_by_path(doc, path + "=" + value.dump());
  // A tensor-parallel overlap the base asks for applies to the layouts that have tensor ranks.
  if (settings.value("parallelism.tensor", 1) == 1 && doc.contains("parallelism") && doc["parallelism"].is_object() &&
      doc["parallelism"].contains("tensor_comm_overlap"))
    doc["parallelism"]["tensor_comm_overlap"] = false;
  // Which layers a full recompute rebuilds, and how many at once, applies to the candidates that
  // recompute in full; the others recompute none or by their profile's selection.
  if (settings.contains("training.recompute") && settings["training.recompute"] != "full" &&
      doc.contains("training") && doc["training"].is_object())
    for (const char* key : {"recompute_every", "recompute_method", "recompute_num_layers"})
      doc["training"].erase(key);
  return doc;
}

double estimate_step_seconds(const Scenario& s, const JobPlan& job)
{
  const auto& par = s.parallelism;
  // The works of one layer, per device the stages run on (the cost model times them per device).
  std::map<std::string, std::pair<Workload, TransformerWorks>> by_device;
  auto works_on = [&](const Device& device) -> const std::pair<Workload, TransformerWorks>& {
    auto [it, fresh] = by_device.try_emplace(device.name);
    if (fresh) {
      it->second.second = add_transformer_works(s, it->second.first.works);
      assign_work_seconds(it->second.first, device,
                          ComputeModelRegistry::get(s.simulation.compute_model, "simulation.compute_model"),
                          s.training.precision);
    }
    return it->second;
  };
  const double moe_factor = s.model.num_experts > 0 ? s.model.moe_top_k : 1; // tokens through top-k experts
  double slowest = 0, nic_Bps = 1e300, nic_latency = 0;
  for (int stage = 0; stage < par.pipeline; ++stage) {
    const Device& device = stage_device(s, job.placement, job.devices, stage);
    const int g          = std::max(0, job.placement.group_of_stage[static_cast<size_t>(stage)]);
    const auto& node     = s.platform.node_groups[static_cast<size_t>(g)];
    const auto& [w, k]   = works_on(device);
    auto sec             = [&](int work) { return work < 0 ? 0.0 : w.works[static_cast<size_t>(work)].seconds; };
    double layer = sec(k.attention_forward) + sec(k.attention_backward) +
                   moe_factor * (sec(k.mlp_forward) + sec(k.mlp_backward));
    // Tensor-parallel collectives per layer: two in forward, two in backward, two more in a
    // recomputed forward (on average over the layers, which a partial recompute rebuilds some of).
    const double recomputed = s.recomputed_layer_share();
    double blocks           = 4 + 2 * recomputed;
    if (s.training.recompute == "full")
      layer += recomputed * (sec(k.attention_recompute) + moe_factor * sec(k.mlp_recompute));
    // Ring attention runs its core once per block of the ring: context times the one block the
    // attention works hold (causal blocks off the diagonal are whole, half of them skipped).
    // Ulysses runs one core over the whole sequence (ring of 1), USP one per rank of its ring.
    const int ring = ring_degree(par);
    if (ring > 1)
      layer += (ring - 1) * (sec(k.attention_parts.core_forward) + sec(k.attention_parts.core_backward));
    // Ulysses' all-to-alls, which the attention waits for: (u−1)/u of each buffer leaves a rank,
    // in node when the tensor × Ulysses ranks fit one (the default rank order puts context next
    // to tensor), forward, backward and a full recompute's forward again.
    if (par.ulysses_degree > 1) {
      const int u          = par.ulysses_degree;
      const bool in_node   = 1LL * par.tensor * u <= node.gpus_per_node;
      const double Bps     = in_node ? node.intra_node.bandwidth_Bps : node.nic.bandwidth_Bps;
      const double latency = in_node ? node.intra_node.latency_s : node.nic.latency_s;
      const double passes  = 2 + recomputed;
      layer += passes * ((u - 1.0) / u * ulysses_forward_buffer_bytes_per_layer(s) / Bps + 4.0 * (u - 1) * latency);
    }
    layer += blocks * ring_all_reduce_s(activation_bytes(s), par.tensor, node.intra_node.bandwidth_Bps,
                                        node.intra_node.latency_s);
    double t = s.layers_on_stage(stage) * layer;
    if (stage == 0)
      t += sec(k.embedding_forward) + sec(k.embedding_backward);
    if (stage == par.pipeline - 1)
      t += sec(k.head_forward) + sec(k.head_backward);
    slowest     = std::max(slowest, t);
    nic_Bps     = std::min(nic_Bps, node.nic.bandwidth_Bps);
    nic_latency = std::max(nic_latency, node.nic.latency_s);
  }
  // The schedule's own bubble (its textbook_bubble), over the slowest stage's work.
  const PipelineSchedule& schedule = ScheduleRegistry::get(par.schedule, "parallelism.schedule");
  const PipelineShape shape{par.pipeline, static_cast<int>(s.micro_batches_per_replica()), par.virtual_stages};
  const double bubble = par.pipeline > 1 ? std::clamp(schedule.textbook_bubble(shape), 0.0, 0.95) : 0.0;
  const double m      = static_cast<double>(s.micro_batches_per_replica());
  double step         = m * slowest / (1 - bubble);
  // Point-to-point activations, one each way per micro-batch and chunk, at the NIC's speed.
  if (par.pipeline > 1)
    step += 2 * m * par.virtual_stages * activation_bytes(s) / par.tensor / nic_Bps;
  // The last bucket of gradients is reduced after backward ends: count a share of the reduction.
  const double params =
      s.layers_on_stage(0) * layer_parameters_per_rank(s.model, par.tensor, par.expert, expert_tensor_size(par));
  step += 0.25 * ring_all_reduce_s(2 * params, par.data * par.context, nic_Bps, nic_latency);
  return step;
}

double estimate_step_seconds(const Scenario& s) { return estimate_step_seconds(s, plan_job(s)); }

PlanResult plan(const nlohmann::json& base_doc, const std::string& base_dir, const PlanOptions& options)
{
  // The GPU count first, from the document, as the scenario's own degrees need not fit it.
  nlohmann::json base = expand_platform_preset(base_doc); // a preset becomes the fields it stands for
  const nlohmann::json::json_pointer groups_path("/platform/node_groups");
  int gpus = 0, per_node = 8, group_count = 0;
  if (base.contains(groups_path) && base[groups_path].is_array())
    for (const auto& g : base[groups_path]) {
      if (!g.is_object())
        continue;
      ++group_count;
      per_node = g.contains("gpus_per_node") && g["gpus_per_node"].is_number_integer() ? g["gpus_per_node"].get<int>() : 8;
      const int nodes = g.contains("count") && g["count"].is_number_integer() ? g["count"].get<int>() : 1;
      gpus += per_node * nodes;
    }
  if (options.gpus > 0 && options.gpus != gpus) {
    // A single group scales to the GPUs asked for; several groups are planned as they are.
    if (group_count > 1)
      throw InputError({fmt::format("--gpus {}: the platform has {} node groups ({} GPUs); the planner plans a "
                                    "mixed platform as it is given (leave --gpus out, or change the groups' counts)",
                                    options.gpus, group_count, gpus)});
    if (per_node < 1 || options.gpus % per_node != 0)
      throw InputError({fmt::format("--gpus {}: not a whole number of {}-GPU nodes", options.gpus, per_node)});
    gpus = options.gpus;
    set_by_path(base, fmt::format("platform.node_groups.0.count={}", gpus / per_node));
  }
  // A hand-made layer split and a stage placement belong to one pipeline size; the candidates set
  // every degree, and the scenario's rank order places their stages on the groups in turn.
  if (base.contains("parallelism") && base["parallelism"].is_object())
    for (const char* key : {"stage_layers", "context", "context_attention", "ulysses_degree", "expert"})
      base["parallelism"].erase(key);
  if (base.contains("platform") && base["platform"].is_object())
    base["platform"].erase("placement");

  // The model, batch and platform as the scenario states them, read under a plan that surely
  // divides (the candidates replace it).
  nlohmann::json probe = base;
  set_by_path(probe, "parallelism={}");
  set_by_path(probe, fmt::format("parallelism.data={}", std::max(1, gpus)));
  set_by_path(probe, "training.micro_batch_size=1");
  set_by_path(probe, fmt::format("training.global_batch_size={}", std::max(1, gpus)));
  set_by_path(probe, "simulation.allow_oom=true");
  Scenario base_scenario = parse_scenario(probe, base_dir);
  const nlohmann::json::json_pointer batch("/training/global_batch_size");
  if (!base.contains(batch) || !base[batch].is_number_integer() || base[batch].get<long long>() < 1)
    throw InputError({"training.global_batch_size: the planner needs the global batch size, a positive integer"});
  base_scenario.training.global_batch_size = base[batch].get<long long>();
  // The candidates split transformer layers over tensor and pipeline ranks; other models have
  // none of the sizes that split reads, and would give zero candidates with no reason.
  if (base_scenario.model.architecture != "transformer")
    throw InputError({fmt::format("model.architecture: the planner searches layouts of transformer models; \"{}\" "
                                  "is not one (run it with `stepsim run`, or sweep its parallelism.data)",
                                  base_scenario.model.architecture)});
  for (const auto& name : options.schedules)
    if (name != "all")
      try {
        ScheduleRegistry::get(name, "--schedules");
      } catch (const InputError& e) {
        throw InputError({e.problems().front() + ", or \"all\" for every one"});
      }
  const std::vector<double> price = prices(base_scenario, options);
  const bool priced = std::all_of(price.begin(), price.end(), [](double p) { return p > 0; });
  if (options.objective == PlanObjective::Cost && !priced)
    throw InputError({"--objective cost: needs a price per GPU-hour, --price-per-gpu-hour or "
                      "platform.node_groups[].price_per_gpu_hour on every group"});

  PlanResult result;
  result.gpus = gpus;
  std::vector<nlohmann::json> settings = enumerate(base_scenario, gpus, options);
  result.enumerated = settings.size();
  double closest = INFINITY; // the least memory short among those that do not fit, bytes
  for (auto& setting : settings) {
    try {
      nlohmann::json doc = with_settings(base, setting);
      set_by_path(doc, "simulation.allow_oom=true"); // the memory check is the planner's, with headroom
      Scenario s       = scenario_from_json(doc, base_dir);
      const JobPlan job      = plan_job(s);
      const double need      = job.analytic.memory_peak_bytes + options.headroom_bytes;
      const double capacity  = job.analytic.memory_capacity_bytes;
      if (!job.analytic.fits_in_memory || need > capacity) {
        ++result.too_big;
        if (need - capacity < closest) {
          closest                       = need - capacity;
          result.closest_settings       = setting;
          result.closest_need_bytes     = need;
          result.closest_capacity_bytes = capacity;
        }
        continue;
      }
      result.candidates.push_back(PlanCandidate{setting, estimate_step_seconds(s, job), false, {}, 0});
    } catch (const InputError&) {
      ++result.invalid;
    }
  }
  // Stable order: estimate, then enumeration order, so equal inputs give equal plans.
  std::stable_sort(result.candidates.begin(), result.candidates.end(),
                   [](const PlanCandidate& a, const PlanCandidate& b) { return a.estimate_s < b.estimate_s; });
  size_t count = options.simulate <= 0 ? result.candidates.size()
                                       : std::min(result.candidates.size(), static_cast<size_t>(options.simulate));
  std::vector<size_t> chosen(count);
  std::iota(chosen.begin(), chosen.end(), 0);
  size_t done         = 0;
  const bool terminal = isatty(STDERR_FILENO) != 0;
  run_in_processes(
      chosen, options.jobs,
      [&](size_t i) {
        try {
          Scenario s         = scenario_from_json(with_settings(base, result.candidates[i].settings), base_dir);
          nlohmann::json out = nlohmann::json::object();
          out["report"]      = to_json(simulate(s));
          return out.dump();
        } catch (const std::exception& e) {
          nlohmann::json out = nlohmann::json::object();
          out["error"]       = e.what();
          return out.dump();
        }
      },
      [&](size_t i, std::string text) {
        auto j = nlohmann::json::parse(text, nullptr, false);
        if (!j.is_discarded() && j.contains("report")) {
          result.candidates[i].report    = report_from_json(j["report"]);
          result.candidates[i].simulated = true;
        } else if (result.failed++ == 0) {
          result.first_failure = !j.is_discarded() && j.contains("error") ? j["error"].get<std::string>()
                                                                          : "the simulation process died";
        }
        ++done;
        if (!options.quiet && terminal)
          fmt::print(stderr, "\r  simulated {}/{} candidates", done, count);
        else if (!options.quiet && (done * 10 / count != (done - 1) * 10 / count || done == count))
          fmt::print(stderr, "  simulated {}/{} candidates\n", done, count);
      });
  if (!options.quiet && terminal && count > 0)
    fmt::print(stderr, "\n");
  // Cost per token: every group's GPUs for the step, at their price, over the step's tokens.
  if (priced) {
    double per_hour = 0;
    for (size_t g = 0; g < price.size(); ++g)
      per_hour += price[g] * base_scenario.platform.node_groups[g].count * base_scenario.platform.node_groups[g].gpus_per_node;
    for (auto& c : result.candidates)
      if (c.simulated && c.report.tokens_per_s > 0)
        c.cost_per_token = per_hour / 3600.0 / c.report.tokens_per_s;
  }
  auto better = [&](const PlanCandidate& a, const PlanCandidate& b) {
    switch (options.objective) {
    case PlanObjective::Cost: return a.cost_per_token < b.cost_per_token;
    case PlanObjective::Energy: return a.report.energy_j_per_token < b.report.energy_j_per_token;
    case PlanObjective::Throughput: break;
    }
    return a.report.tokens_per_s > b.report.tokens_per_s;
  };
  std::stable_sort(result.candidates.begin(), result.candidates.end(), [&](const PlanCandidate& a, const PlanCandidate& b) {
    if (a.simulated != b.simulated)
      return a.simulated;
    return a.simulated ? better(a, b) : a.estimate_s < b.estimate_s;
  });
  return result;
}

} // namespace stepsim

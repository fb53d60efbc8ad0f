#include "tools/driver/plan.hpp"

#include "models/compute/compute_model.hpp"
#include "models/device.hpp"
#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"
#include "tools/driver/process_pool.hpp"
#include "sim/simulate.hpp"
#include "topologies/preset.hpp"
#include "workloads/models/transformer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
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

std::vector<nlohmann::json> enumerate(const Scenario& base, int gpus)
{
  const auto& m           = base.model;
  const int layers        = m.num_layers;
  const int gpus_per_node = base.platform.node_groups.front().gpus_per_node;
  std::vector<nlohmann::json> out;
  for (int t : divisors(gpus_per_node)) {
    if (gpus % t != 0)
      continue;
    for (int p : divisors(gpus / t)) {
      if (p > layers)
        break;
      const int d = gpus / (t * p);
      for (int mb : {1, 2, 4, 8}) {
        if (base.training.global_batch_size % (static_cast<long long>(mb) * d) != 0)
          continue;
        std::vector<std::pair<std::string, int>> schedules = {{"1f1b", 1}};
        if (p > 1)
          schedules.insert(schedules.end(), {{"gpipe", 1}, {"zb_h1", 1}, {"interleaved_1f1b", 2},
                                             {"interleaved_1f1b", 3}, {"interleaved_1f1b", 4}});
        for (const auto& [schedule, v] : schedules)
          for (int zero : {0, 1})
            for (const char* recompute : {"none", "selective", "full"}) {
              if (zero == 1 && d == 1)
                continue; // nothing to shard
              nlohmann::json setting = {{"parallelism.tensor", t},
                             {"parallelism.pipeline", p},
                             {"parallelism.data", d},
                             {"parallelism.virtual_stages", v},
                             {"parallelism.schedule", schedule},
                             {"parallelism.sequence_parallel", t > 1},
                             {"parallelism.zero_stage", zero},
                             {"training.micro_batch_size", mb},
                             {"training.recompute", recompute}};
              if (layers % (p * v) != 0)
                setting["parallelism.stage_layers"] = balanced_split(layers, p * v);
              out.push_back(std::move(setting));
            }
      }
    }
  }
  return out;
}

nlohmann::json with_settings(const nlohmann::json& base, const nlohmann::json& settings)
{
  nlohmann::json doc = base;
  for (const auto& [path, value] : settings.items())
    set_by_path(doc, path + "=" + value.dump());
  return doc;
}

} // namespace

double estimate_step_seconds(const Scenario& s)
{
  const auto& par  = s.parallelism;
  const auto& node = s.platform.node_groups.front();
  Device device    = load_device(node.gpu, "platform.node_groups[0].gpu");
  Workload w;
  TransformerWorks k = add_transformer_works(s, w.works);
  assign_work_seconds(w, device, ComputeModelRegistry::get(s.simulation.compute_model, "simulation.compute_model"),
                      s.training.precision);
  auto sec = [&](int work) { return w.works[static_cast<size_t>(work)].seconds; };
  double layer = sec(k.attention_forward) + sec(k.mlp_forward) + sec(k.attention_backward) + sec(k.mlp_backward);
  int blocks   = 4; // tensor-parallel collectives per layer: two in forward, two in backward
  if (s.training.recompute == "full") {
    layer += sec(k.attention_recompute) + sec(k.mlp_recompute);
    blocks += 2;
  }
  const double tp_s = ring_all_reduce_s(activation_bytes(s), par.tensor, node.intra_node.bandwidth_Bps,
                                        node.intra_node.latency_s);
  layer += blocks * tp_s;
  double slowest = 0;
  for (int stage = 0; stage < par.pipeline; ++stage) {
    double t = s.layers_on_stage(stage) * layer;
    if (stage == 0)
      t += sec(k.embedding_forward) + sec(k.embedding_backward);
    if (stage == par.pipeline - 1)
      t += sec(k.head_forward) + sec(k.head_backward);
    slowest = std::max(slowest, t);
  }
  const double m      = static_cast<double>(s.micro_batches_per_replica());
  const double chunks = par.schedule == "interleaved_1f1b" ? par.virtual_stages : 1;
  const double fill   = par.schedule == "zb_h1" ? (par.pipeline - 1) / 3.0 : (par.pipeline - 1) / chunks;
  const double per_mb = slowest / par.virtual_stages; // the slowest stage's work for one micro-batch, per chunk
  double step         = (m * par.virtual_stages + fill * chunks) * per_mb;
  // Point-to-point activations, one each way per micro-batch and chunk, at the NIC's speed.
  if (par.pipeline > 1)
    step += 2 * m * par.virtual_stages * activation_bytes(s) / par.tensor / node.nic.bandwidth_Bps;
  // The last bucket of gradients is reduced after backward ends: count a share of the reduction.
  const double params = s.layers_on_stage(0) * layer_parameters_per_rank(s.model, par.tensor);
  step += 0.25 * ring_all_reduce_s(2 * params, par.data * par.context, node.nic.bandwidth_Bps, node.nic.latency_s);
  return step;
}

PlanResult plan(const nlohmann::json& base_doc, const std::string& base_dir, const PlanOptions& options)
{
  // The GPU count first, from the document, as the scenario's own degrees need not fit it.
  nlohmann::json base = expand_platform_preset(base_doc); // a preset becomes the fields it stands for
  const nlohmann::json::json_pointer group("/platform/node_groups/0");
  int per_node = 8, nodes = 1;
  if (base.contains(group) && base[group].is_object()) {
    const auto& g = base[group];
    per_node      = g.contains("gpus_per_node") && g["gpus_per_node"].is_number_integer() ? g["gpus_per_node"].get<int>() : 8;
    nodes         = g.contains("count") && g["count"].is_number_integer() ? g["count"].get<int>() : 1;
  }
  const int gpus = options.gpus > 0 ? options.gpus : per_node * nodes;
  if (per_node < 1 || gpus % per_node != 0)
    throw InputError({fmt::format("--gpus {}: not a whole number of {}-GPU nodes", gpus, per_node)});
  set_by_path(base, fmt::format("platform.node_groups.0.count={}", gpus / per_node));
  // A hand-made layer split belongs to one pipeline size; context and expert parallelism are not
  // planned yet (the lowering has neither), so every candidate runs without them.
  if (base.contains("parallelism") && base["parallelism"].is_object())
    for (const char* key : {"stage_layers", "context", "expert"})
      base["parallelism"].erase(key);

  // The model, batch and platform as the scenario states them, read under a plan that surely
  // divides (the candidates replace it).
  nlohmann::json probe = base;
  set_by_path(probe, "parallelism={}");
  set_by_path(probe, fmt::format("parallelism.data={}", gpus));
  set_by_path(probe, "training.micro_batch_size=1");
  set_by_path(probe, fmt::format("training.global_batch_size={}", gpus));
  set_by_path(probe, "simulation.allow_oom=true");
  Scenario base_scenario = parse_scenario(probe, base_dir);
  const nlohmann::json::json_pointer batch("/training/global_batch_size");
  if (!base.contains(batch) || !base[batch].is_number_integer() || base[batch].get<long long>() < 1)
    throw InputError({"training.global_batch_size: the planner needs the global batch size, a positive integer"});
  base_scenario.training.global_batch_size = base[batch].get<long long>();
  if (base_scenario.platform.node_groups.size() != 1)
    throw InputError({"platform.node_groups: the planner handles one node group"});
  // The candidates split transformer layers over tensor and pipeline ranks; other models have
  // none of the sizes that split reads, and would give zero candidates with no reason.
  if (base_scenario.model.architecture != "transformer")
    throw InputError({fmt::format("model.architecture: the planner searches layouts of transformer models; \"{}\" "
                                  "is not one (run it with `stepsim run`, or sweep its parallelism.data)",
                                  base_scenario.model.architecture)});

  PlanResult result;
  std::vector<nlohmann::json> settings = enumerate(base_scenario, gpus);
  result.enumerated = settings.size();
  for (auto& setting : settings) {
    try {
      Scenario s = scenario_from_json(with_settings(base, setting), base_dir);
      if (!memory_problem(s).empty()) {
        ++result.too_big;
        continue;
      }
      result.candidates.push_back(PlanCandidate{setting, estimate_step_seconds(s), false, {}});
    } catch (const InputError& e) {
      bool memory = false;
      for (const auto& p : e.problems())
        memory = memory || p.find("does not fit in memory") != std::string::npos;
      ++(memory ? result.too_big : result.invalid);
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
  std::stable_sort(result.candidates.begin(), result.candidates.end(), [](const PlanCandidate& a, const PlanCandidate& b) {
    if (a.simulated != b.simulated)
      return a.simulated;
    return a.simulated ? a.report.tokens_per_s > b.report.tokens_per_s : a.estimate_s < b.estimate_s;
  });
  return result;
}

} // namespace stepsim

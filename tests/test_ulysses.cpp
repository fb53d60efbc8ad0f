// Ulysses context parallelism (DeepSpeed-Ulysses, arXiv:2309.14509) and its combination with ring
// attention (USP, arXiv:2405.07719): the all-to-alls the lowering puts around attention against
// the closed form of head-parallel attention, the groups (Ulysses inside, ring across), the
// attention's shape, memory, the refusals of head counts that do not divide, ring attention left
// as it was, the step time, and the planner trying both. Then all-gather context parallelism
// (Llama 3, arXiv:2407.21783, section 3.3.2; Transformer Engine's cp_comm_type "all_gather"): K
// and V all-gathered over the context ranks before attention, again in backward, dK and dV
// reduce-scattered after it, each waited for: the ring's bytes and causal work, none hidden.
#include "support.hpp"

#include "models/collectives/collective.hpp"
#include "sim/core/input_error.hpp"
#include "sim/simulate.hpp"
#include "tools/driver/plan.hpp"
#include "workloads/lower.hpp"
#include "workloads/models/transformer.hpp"
#include "workloads/parallel/context_parallel.hpp"
#include "workloads/parallel/ulysses.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>

using namespace stepsim;
using testing::Traffic;
using testing::traffic;

namespace {

// A Llama-style model with grouped-query attention (16 heads of 64, 8 K/V heads) on single-GPU
// nodes.
nlohmann::json llama_like(int tensor, int context, int data, int micro_batches, const std::string& attention)
{
  nlohmann::json doc = testing::small_scenario(1, data, micro_batches);
  doc["model"]       = {{"num_layers", 4},       {"hidden_size", 1024}, {"num_attention_heads", 16},
                        {"num_query_groups", 8}, {"seq_length", 8192},  {"vocab_size", 32000},
                        {"mlp", "swiglu"},       {"norm", "rmsnorm"}};
  doc["training"]["attention"]  = "flash";
  doc["parallelism"]["tensor"]  = tensor;
  doc["parallelism"]["context"] = context;
  if (tensor > 1)
    doc["parallelism"]["sequence_parallel"] = true;
  if (attention != "ring")
    doc["parallelism"]["context_attention"] = attention;
  doc["platform"]["node_groups"][0]["count"] = tensor * context * data;
  return doc;
}


bool is_all_to_all(const Task& t)
{
  return t.kind == TaskKind::Collective && t.op == CollectiveOp::AllToAll && t.stream == Stream::Context;
}

// Edges from an all-to-all to a compute task of the work named `work` in `pass`.
int all_to_alls_feeding(const Workload& w, const RankProgram& r, const std::string& work, Pass pass)
{
  int edges = 0;
  for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
    if (!is_all_to_all(r.graph[v]))
      continue;
    for (auto e : boost::make_iterator_range(boost::out_edges(v, r.graph))) {
      const Task& next = r.graph[boost::target(e, r.graph)];
      if (next.kind == TaskKind::Compute && next.pass == pass && next.work >= 0 &&
          w.works[static_cast<size_t>(next.work)].name == work)
        ++edges;
    }
  }
  return edges;
}

// The attention kernels of the rank's forward compute tasks.
std::vector<Kernel> forward_attention_kernels(const Workload& w, const RankProgram& r)
{
  std::vector<Kernel> out;
  for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
    const Task& task = r.graph[v];
    if (task.kind == TaskKind::Compute && task.pass == Pass::Forward)
      for (const Kernel& k : w.works[static_cast<size_t>(task.work)].kernels)
        if (k.kind == KernelKind::Attention)
          out.push_back(k);
  }
  return out;
}

// llama_like(t, cp, 1, m, attention), with `recompute` where given, and its lowering, whose one
// simulated rank stands for the rest.
struct Lowered {
  Scenario s;
  Workload w;
  Lowered(int t, int cp, int m, const std::string& attention, const char* recompute = nullptr)
      : s(scenario_from_json(with_recompute(llama_like(t, cp, 1, m, attention), recompute))), w(lower(s))
  {
    REQUIRE(w.ranks.size() == 1);
  }
  const RankProgram& rank() const { return w.ranks[0]; }

private:
  static nlohmann::json with_recompute(nlohmann::json doc, const char* recompute)
  {
    if (recompute != nullptr)
      doc["training"]["recompute"] = recompute;
    return doc;
  }
};

// The context group of the rank of tensor index 0: its cp context ranks (rank = tensor + t·context).
std::vector<int> context_ranks(int t, int cp)
{
  std::vector<int> ranks;
  for (int c = 0; c < cp; ++c)
    ranks.push_back(c * t);
  return ranks;
}

std::string problems(const nlohmann::json& doc)
{
  try {
    validate(scenario_from_json(doc));
  } catch (const InputError& e) {
    return e.what();
  }
  return {};
}

} // namespace

TEST_CASE("Ulysses: per layer and pass, all-to-alls of Q, K, V and the output of b·(s/cp)·heads/t·d·e each "
          "(K, V: query groups), (cp-1)/cp of it sent",
          "[ulysses]")
{
  const int cp = GENERATE(2, 4);
  const int t  = GENERATE(1, 2);
  const int m = 3, layers = 4;
  const Lowered lowered(t, cp, m, "ulysses", "full"); // the recompute re-runs the forward's all-to-alls
  const auto& [s, w] = lowered;
  const auto& r      = lowered.rank();

  // Jacobs et al. 2023 (§3.1): the sequence of N tokens is split over P ranks, and before
  // attention an all-to-all per projection gathers it whole for 1/P of the heads; after it one
  // all-to-all scatters the output back. Each rank's buffer is its N/P tokens × its heads.
  const double b = 1, seq = 8192, heads = 16, groups = 8, head_dim = 64, e = 2;
  const double q  = b * (seq / cp) * (heads / t) * head_dim * e;  // Q, and the attention's output
  const double kv = b * (seq / cp) * (groups / t) * head_dim * e; // K, and V
  CAPTURE(cp, t);
  for (Pass pass : {Pass::Forward, Pass::Recompute, Pass::Backward}) {
    CAPTURE(pass_name(pass));
    const Traffic a2a = traffic(r, TaskKind::Collective, Stream::Context, pass);
    CHECK(a2a.tasks == 4 * layers * m);
    CHECK(a2a.bytes == Approx(layers * m * (2 * q + 2 * kv)));
  }
  CHECK(ulysses_forward_buffer_bytes_per_layer(s) == Approx(2 * q + 2 * kv));
  // No ring: nothing is sent point to point.
  CHECK(traffic(r, TaskKind::Send, Stream::Context, Pass::Forward).tasks == 0);
  CHECK(traffic(r, TaskKind::Send, Stream::Context, Pass::Backward).tasks == 0);
  // A rank keeps its own 1/cp of each buffer and sends the rest (ring or direct exchange alike).
  for (const char* name : {"ring", "direct"}) {
    const auto& algorithm = CollectiveRegistry::get(name, "test");
    CHECK(bytes_sent_per_member(algorithm, CollectiveOp::AllToAll, cp, q) == Approx((cp - 1.0) / cp * q));
    CHECK(bytes_sent_per_member(algorithm, CollectiveOp::AllToAll, cp, kv) == Approx((cp - 1.0) / cp * kv));
  }
  // The group: the cp context ranks of the same tensor index.
  std::set<int> groups_used;
  for (auto v : boost::make_iterator_range(boost::vertices(r.graph)))
    if (is_all_to_all(r.graph[v]))
      groups_used.insert(r.graph[v].group);
  REQUIRE(groups_used.size() == 1);
  CHECK(w.groups[static_cast<size_t>(*groups_used.begin())].ranks == context_ranks(t, cp));
  // Blocking, as in DeepSpeed: the attention core waits for the last of Q, K, V, the output
  // projection for the output's; backward, the core for dO and the QKV dgrad for dQ, dK, dV.
  CHECK(all_to_alls_feeding(w, r, "attention_core_forward", Pass::Forward) == layers * m);
  CHECK(all_to_alls_feeding(w, r, "attention_out_forward", Pass::Forward) == layers * m);
  CHECK(all_to_alls_feeding(w, r, "attention_core_backward", Pass::Backward) == layers * m);
  CHECK(all_to_alls_feeding(w, r, "attention_qkv_backward", Pass::Backward) == layers * m);
}

TEST_CASE("Ulysses attention runs the whole sequence for heads/(t·cp) heads: ring attention's FLOPs in one block",
          "[ulysses]")
{
  const int cp = GENERATE(2, 4);
  const int t  = GENERATE(1, 2);
  const Workload ulysses = lower(scenario_from_json(llama_like(t, cp, 1, 1, "ulysses")));
  const Workload ring    = lower(scenario_from_json(llama_like(t, cp, 1, 1, "ring")));
  const auto u_kernels   = forward_attention_kernels(ulysses, ulysses.ranks[0]);
  const auto r_kernels   = forward_attention_kernels(ring, ring.ranks[0]);
  const double layers = 4, seq = 8192, heads = 16;
  CAPTURE(cp, t);
  REQUIRE(u_kernels.size() == layers);          // one core per layer
  REQUIRE(r_kernels.size() == layers * cp);     // one per ring step
  double u_flops = 0, r_flops = 0;
  for (const Kernel& k : u_kernels) {
    CHECK(k.m == seq);                 // the whole sequence's queries
    CHECK(k.batch == heads / t / cp);  // of 1/cp of the rank's heads
    CHECK(k.causal);
    u_flops += k.flops();
  }
  for (const Kernel& k : r_kernels)
    r_flops += k.flops();
  CHECK(u_flops == Approx(r_flops));
}

TEST_CASE("USP: Ulysses all-to-alls inside groups of ulysses_degree consecutive context ranks, the ring across them",
          "[ulysses]")
{
  const int t = GENERATE(1, 2);
  const int cp = 8, u = 2, ring = cp / u, m = 2, layers = 4;
  nlohmann::json doc                   = llama_like(t, cp, 1, m, "usp");
  doc["parallelism"]["ulysses_degree"] = u;
  const Scenario s                     = scenario_from_json(doc);
  CHECK(ring_degree(s.parallelism) == ring);
  // Rank (tensor t-1, context 3) at full detail: rank = tensor + t·context.
  const int tensor = t - 1;
  auto rank_at     = [&](int context) { return tensor + t * context; };
  const Workload w = lower_one_rank(s, rank_at(3));
  const auto& r    = w.ranks[0];
  CAPTURE(t);
  // Its Ulysses group: context ranks 2 and 3 (yunchang's set_seq_parallel_pg, use_ulysses_low).
  for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
    const Task& task = r.graph[v];
    if (is_all_to_all(task))
      CHECK(w.groups[static_cast<size_t>(task.group)].ranks == std::vector<int>{rank_at(2), rank_at(3)});
    // Its ring: one rank of every Ulysses group, 3 -> 5 -> 7 -> 1 -> 3.
    if (task.kind == TaskKind::Send && task.stream == Stream::Context)
      CHECK(task.peer == rank_at(5));
    if (task.kind == TaskKind::Recv && task.stream == Stream::ContextRecv)
      CHECK(task.peer == rank_at(1));
  }
  // The ring of 4 passes K/V blocks of heads/(t·u) heads over s/ring tokens: the same bytes as
  // ring attention's 2·b·(s/cp)·kv/t·e, ring − 1 times per layer forward.
  const double b = 1, seq = 8192, heads = 16, groups = 8, head_dim = 64, e = 2;
  const double block = 2 * b * (seq / cp) * groups * head_dim / t * e;
  CHECK(ring_kv_bytes(s) == Approx(block));
  const Traffic sends = traffic(r, TaskKind::Send, Stream::Context, Pass::Forward);
  CHECK(sends.tasks == layers * m * (ring - 1));
  CHECK(sends.bytes == Approx(layers * m * (ring - 1) * block));
  CHECK(traffic(r, TaskKind::Send, Stream::Context, Pass::Backward).bytes == Approx(2 * sends.bytes));
  const Traffic a2a = traffic(r, TaskKind::Collective, Stream::Context, Pass::Forward);
  CHECK(a2a.tasks == 4 * layers * m);
  CHECK(a2a.bytes == Approx(layers * m * b * (seq / cp) * (2 * heads + 2 * groups) / t * head_dim * e));
  // Each ring step's core: s/ring queries of heads/(t·u) heads.
  const auto kernels = forward_attention_kernels(w, r);
  REQUIRE(kernels.size() == static_cast<size_t>(layers * m * ring));
  for (const Kernel& k : kernels) {
    CHECK(k.m == seq / ring);
    CHECK(k.batch == heads / t / u);
  }
  // Reduced fidelity: the representative's all-to-alls go to context ranks 0 and 1.
  const Workload reduced = lower(s);
  for (auto v : boost::make_iterator_range(boost::vertices(reduced.ranks[0].graph)))
    if (is_all_to_all(reduced.ranks[0].graph[v])) {
      CHECK(reduced.groups[static_cast<size_t>(reduced.ranks[0].graph[v].group)].ranks == std::vector<int>{0, t});
      break;
    }
}

TEST_CASE("ring attention stays as it was: \"ring\" is the default, and llama-cp's report is unchanged", "[ulysses]")
{
  // Stated or left out, the same task graph, task by task.
  nlohmann::json stated                      = llama_like(2, 4, 1, 2, "ring");
  stated["parallelism"]["context_attention"] = "ring";
  const Workload a = lower(scenario_from_json(stated));
  const Workload b = lower(scenario_from_json(llama_like(2, 4, 1, 2, "ring")));
  REQUIRE(boost::num_vertices(a.ranks[0].graph) == boost::num_vertices(b.ranks[0].graph));
  REQUIRE(boost::num_edges(a.ranks[0].graph) == boost::num_edges(b.ranks[0].graph));
  for (auto v : boost::make_iterator_range(boost::vertices(a.ranks[0].graph))) {
    const Task &x = a.ranks[0].graph[v], &y = b.ranks[0].graph[v];
    CHECK((x.kind == y.kind && x.stream == y.stream && x.bytes == y.bytes && x.peer == y.peer && x.work == y.work));
  }
  CHECK(traffic(a.ranks[0], TaskKind::Collective, Stream::Context, Pass::Forward).tasks == 0); // no all-to-alls
  // The shipped ring-attention example: the same report with "ring" stated, and the step time,
  // communication and memory its recorded golden report holds (tests/golden; the golden test
  // compares every byte, these figures are the ones a change of the ring's lowering would move).
  const std::string root = STEPSIM_SOURCE_DIR;
  const std::string out = testing::write_temp_file("ulysses-llama-cp.json", ""),
                    ring = testing::write_temp_file("ulysses-llama-cp-ring.json", "");
  const std::string run = "run " + root + "/configs/scenarios/llama-cp.json --quiet --json ";
  const auto result     = testing::run_stepsim(run + out);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  REQUIRE(testing::run_stepsim(run + ring + " --set parallelism.context_attention=ring").exit_code == 0);
  CHECK(testing::read_text_file(out) == testing::read_text_file(ring));
  const auto now    = nlohmann::json::parse(testing::read_text_file(out));
  const auto before = nlohmann::json::parse(testing::read_text_file(root + "/tests/golden/reports/scenarios-llama-cp.json"));
  for (const char* figure : {"step_time_s", "comm_s", "exposed_comm_s", "memory_peak_bytes"}) {
    CAPTURE(figure);
    CHECK(now.at(figure) == before.at(figure));
  }
}

TEST_CASE("a long sequence: Ulysses and ring attention take finite, different step times; Ulysses' all-to-alls "
          "are waited for",
          "[ulysses]")
{
  auto run = [](const std::string& attention) {
    nlohmann::json doc         = llama_like(1, 4, 1, 4, attention);
    doc["model"]["seq_length"] = 32768;
    doc["model"]["num_layers"] = 2;
    doc["platform"]["node_groups"][0]["count"]         = 1;
    doc["platform"]["node_groups"][0]["gpus_per_node"] = 4;
    doc["platform"]["node_groups"][0]["nic"]["count"]  = 1;
    return simulate_isolated(scenario_from_json(doc));
  };
  const Report ring = run("ring"), ulysses = run("ulysses");
  CAPTURE(ring.step_time_s, ulysses.step_time_s, ulysses.comm_s, ulysses.exposed_comm_s);
  CHECK(std::isfinite(ulysses.step_time_s));
  CHECK(ulysses.step_time_s > 0);
  CHECK(std::isfinite(ring.step_time_s));
  CHECK(ulysses.step_time_s != Approx(ring.step_time_s).epsilon(1e-6));
  // Tensor 1 and data 1: the all-to-alls are all the communication, and nothing computes while
  // they run (the attention waits for them), where the ring hides behind the attention blocks.
  CHECK(ulysses.comm_s > 0);
  CHECK(ulysses.exposed_comm_s > 0.9 * ulysses.comm_s);
  CHECK(ring.exposed_comm_s < 0.5 * ring.comm_s);
}

TEST_CASE("full fidelity replays Ulysses' and USP's all-to-alls like the reduced one", "[ulysses]")
{
  const std::string attention = GENERATE(std::string("ulysses"), std::string("usp"));
  nlohmann::json doc = llama_like(2, 4, 2, 2, attention);
  if (attention == "usp")
    doc["parallelism"]["ulysses_degree"] = 2;
  // Links slow enough that the all-to-alls show in the step time.
  doc["platform"]["node_groups"][0]["nic"] = {{"count", 1}, {"bandwidth", "25GBps"}, {"latency", "2us"}};
  const Report reduced = simulate_isolated(scenario_from_json(doc));
  doc["simulation"]["fidelity"] = "full";
  const Report full = simulate_isolated(scenario_from_json(doc));
  CAPTURE(attention, reduced.step_time_s, full.step_time_s, reduced.comm_s);
  CHECK(reduced.comm_s > 0.05 * reduced.step_time_s);
  CHECK(full.step_time_s == Approx(reduced.step_time_s).epsilon(0.02));
  CHECK(full.comm_s == Approx(reduced.comm_s).epsilon(0.05));
}

TEST_CASE("Ulysses memory: the attention's output kept twice with fused attention; scores of the whole sequence "
          "unfused",
          "[ulysses]")
{
  const int t = GENERATE(1, 2);
  const int cp = 4;
  const double b = 1, seq = 8192, h = 1024, heads = 16, e = 2;
  auto bytes = [&](const std::string& attention, const std::string& recompute, const std::string& kernel) {
    nlohmann::json doc             = llama_like(t, cp, 1, 1, attention);
    doc["training"]["recompute"]   = recompute;
    doc["training"]["attention"]   = kernel;
    return layer_activation_bytes(scenario_from_json(doc));
  };
  CAPTURE(t);
  // Fused attention saves its output in head shards for its backward, and the output projection
  // its input in sequence shards: one more b·(s/cp)·h/t·e.
  CHECK(bytes("ulysses", "none", "flash") - bytes("ring", "none", "flash") == Approx(b * seq / cp * h / t * e));
  // Selective recompute keeps neither of the core's: the same as the ring.
  CHECK(bytes("ulysses", "selective", "flash") == Approx(bytes("ring", "selective", "flash")));
  // Unfused attention keeps 5 bytes per score (Korthikanti et al. 2022, 5as²b): Ulysses the whole
  // sequence's s² for heads/(t·cp) heads, the ring one (s/cp)² block of heads/t.
  const double whole = 5 * b * seq * seq * heads / t / cp, block = 5 * b * (seq / cp) * (seq / cp) * heads / t;
  CHECK(bytes("ulysses", "none", "standard") - bytes("ring", "none", "standard") == Approx(whole - block));
}

TEST_CASE("Ulysses refuses heads that do not divide, naming the path", "[ulysses]")
{
  // 12 heads of 32 over tensor 2: 6 per tensor rank, not divisible by context 4.
  nlohmann::json doc                  = llama_like(2, 4, 1, 1, "ulysses");
  doc["model"]["hidden_size"]         = 384;
  doc["model"]["num_attention_heads"] = 12;
  doc["model"]["num_query_groups"]    = 12;
  CHECK_THAT(problems(doc),
             Catch::Contains("parallelism.context: Ulysses needs the 6 heads per tensor rank to divide by the context "
                             "degree 4"));
  // K/V heads: 8 query groups over tensor 2 and context 8 (16 heads do divide: 8 per rank).
  doc = llama_like(2, 8, 1, 1, "ulysses");
  CHECK_THAT(problems(doc), Catch::Contains("parallelism.context: Ulysses needs the 4 K/V heads"));
  // USP names its own degree; the same plan with ulysses_degree 4 divides.
  doc                                    = llama_like(2, 8, 1, 1, "usp");
  doc["parallelism"]["ulysses_degree"]   = 8;
  CHECK_THAT(problems(doc), Catch::Contains("parallelism.ulysses_degree: Ulysses needs the 4 K/V heads"));
  doc["parallelism"]["ulysses_degree"] = 4;
  CHECK(problems(doc).empty());
  doc["parallelism"]["ulysses_degree"] = 3;
  CHECK_THAT(problems(doc), Catch::Contains("parallelism.ulysses_degree: 3 does not divide context 8"));
  // Ulysses needs no load-balancing cut of the sequence: 8196 tokens over 4 ranks run; the ring refuses them.
  doc                        = llama_like(1, 4, 1, 1, "ulysses");
  doc["model"]["seq_length"] = 8196;
  CHECK(problems(doc).empty());
  doc["parallelism"].erase("context_attention");
  CHECK_THAT(problems(doc), Catch::Contains("is not divisible by 2 × context 4"));
  // As a user meets it: exit code 2 and the path, from the bad-input corpus's case.
  const auto result = testing::run_stepsim(std::string("run ") + STEPSIM_SOURCE_DIR +
                                           "/tests/bad_inputs/ulysses_heads_not_dividing.json --quiet");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.output, Catch::Contains("error: parallelism.context: Ulysses needs the 6 heads per tensor rank"));
}

TEST_CASE("the planner tries Ulysses beside the ring where the heads divide, and USP where they divide in part",
          "[ulysses][plan]")
{
  nlohmann::json doc = testing::small_scenario(1, 1, 8);
  doc["model"]       = {{"num_layers", 8},        {"hidden_size", 2048}, {"num_attention_heads", 16},
                        {"num_query_groups", 4},  {"seq_length", 65536}, {"vocab_size", 32000},
                        {"mlp", "swiglu"},        {"norm", "rmsnorm"},   {"ffn_hidden_size", 5632}};
  doc["training"]["global_batch_size"] = 8;
  doc["training"]["attention"]         = "flash";
  auto& group                          = doc["platform"]["node_groups"][0];
  group["count"]                       = 2;
  group["gpus_per_node"]               = 8;
  group["gpu"]                         = "H100-SXM";
  group["intra_node"]                  = {{"type", "nvswitch"}, {"bandwidth", "450GBps"}, {"latency", "1us"}};
  group["nic"]                         = {{"count", 8}, {"bandwidth", "400Gbps"}, {"latency", "3us"}};
  PlanOptions options;
  options.simulate = 1;
  options.quiet    = true;
  const PlanResult result = plan(doc, ".", options);
  // Per (tensor, context > 1): which kinds of context attention were planned.
  std::map<std::pair<int, int>, std::set<std::string>> kinds;
  for (const auto& c : result.candidates) {
    const auto& s = c.settings;
    const int t = s["parallelism.tensor"].get<int>(), cp = s["parallelism.context"].get<int>();
    const std::string kind = s.value("parallelism.context_attention", std::string("ring"));
    CHECK(std::isfinite(c.estimate_s));
    CHECK(c.estimate_s > 0);
    if (cp == 1) {
      CHECK(kind == "ring");
      continue;
    }
    kinds[{t, cp}].insert(kind);
    const int heads = 16 / t, groups = 4 % t == 0 ? 4 / t : 0; // per tensor rank (0: replicated K/V heads)
    if (kind == "ulysses")
      CHECK((heads % cp == 0 && groups % cp == 0));
    if (kind == "usp") {
      const int u = s["parallelism.ulysses_degree"].get<int>();
      CHECK((u > 1 && u < cp && cp % u == 0 && heads % u == 0 && groups % u == 0));
    }
  }
  REQUIRE(!kinds.empty());
  for (const auto& [degrees, planned] : kinds) {
    const auto [t, cp] = degrees;
    // 4 K/V heads over tensor t: whole ones per rank, fewer than 16 / t heads, powers of two.
    const int groups = 4 % t == 0 ? 4 / t : 0;
    CAPTURE(t, cp);
    CHECK(planned.count("ring") == 1);
    CHECK(planned.count("ulysses") == (groups > 0 && groups % cp == 0 ? 1u : 0u));
    CHECK(planned.count("usp") == (groups > 1 && groups < cp ? 1u : 0u));
  }
  // At least one degree where Ulysses divides (tensor 1, context 2 and 4).
  CHECK(kinds[{1, 4}].count("ulysses") == 1);
}

TEST_CASE("all-gather context parallelism: K/V gathered forward and backward, dK/dV reduce-scattered, the ring's "
          "bytes on the context ranks",
          "[ulysses][context]")
{
  // Tensor 1 and 2 by context 2 and 4.
  const auto [t, cp] = GENERATE(table<int, int>({{1, 2}, {2, 2}, {1, 4}, {2, 4}}));
  const int m = 3, layers = 4;
  const Lowered lowered(t, cp, m, "all_gather");
  const auto& [s, w] = lowered;
  const auto& r      = lowered.rank();
  CAPTURE(cp, t);
  // One K and V block: 2·b·(s/cp)·(query groups·head_dim)/t elements of 2 bytes; each collective's
  // buffer is the cp blocks of the group.
  const double block = 2.0 * (8192.0 / cp) * (8 * 64) / t * 2;
  CHECK(ring_kv_bytes(s) == Approx(block));
  const Traffic forward = traffic(r, TaskKind::Collective, Stream::Context, Pass::Forward);
  CHECK(forward.tasks == layers * m);
  CHECK(forward.bytes == Approx(layers * m * cp * block));
  const Traffic backward = traffic(r, TaskKind::Collective, Stream::Context, Pass::Backward);
  CHECK(backward.tasks == 2 * layers * m); // the gather again, and the reduce-scatter
  CHECK(backward.bytes == Approx(2 * layers * m * cp * block));
  // Nothing goes around a ring.
  CHECK(traffic(r, TaskKind::Send, Stream::Context, Pass::Forward).tasks == 0);
  CHECK(traffic(r, TaskKind::Send, Stream::Context, Pass::Backward).tasks == 0);
  // The group: the cp context ranks of the rank's tensor index (rank = tensor + t·context).
  std::set<int> groups;
  std::set<CollectiveOp> ops;
  for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
    const Task& task = r.graph[v];
    if (task.kind == TaskKind::Collective && task.stream == Stream::Context) {
      groups.insert(task.group);
      ops.insert(task.op);
    }
  }
  REQUIRE(groups.size() == 1);
  CHECK(w.groups[static_cast<size_t>(*groups.begin())].ranks == context_ranks(t, cp));
  CHECK(ops == std::set<CollectiveOp>{CollectiveOp::AllGather, CollectiveOp::ReduceScatter});
  // The same causal work as the ring: cp attention cores per layer, micro-batch and pass.
  const Workload ring = lower(scenario_from_json(llama_like(t, cp, 1, m, "ring")));
  auto cores          = [](const Workload& wl, Pass pass) {
    int n = 0;
    for (auto v : boost::make_iterator_range(boost::vertices(wl.ranks[0].graph))) {
      const Task& task = wl.ranks[0].graph[v];
      if (task.kind == TaskKind::Compute && task.pass == pass && task.work >= 0 &&
          wl.works[static_cast<size_t>(task.work)].name.rfind("attention_core", 0) == 0)
        ++n;
    }
    return n;
  };
  CHECK(cores(w, Pass::Forward) == cp * layers * m);
  CHECK(cores(w, Pass::Forward) == cores(ring, Pass::Forward));
  CHECK(cores(w, Pass::Backward) == cores(ring, Pass::Backward));
}

TEST_CASE("all-gather context parallelism waits for its transfers, which the ring hides behind the attention",
          "[ulysses][context]")
{
  auto run = [](const std::string& attention) {
    nlohmann::json doc         = llama_like(1, 4, 1, 3, attention);
    doc["model"]["seq_length"] = 32768;
    doc["model"]["num_layers"] = 2;
    return simulate_isolated(scenario_from_json(doc));
  };
  const Report ring = run("ring"), gathered = run("all_gather");
  CAPTURE(ring.step_time_s, gathered.step_time_s, gathered.comm_s, gathered.exposed_comm_s, ring.exposed_comm_s);
  REQUIRE(std::isfinite(gathered.step_time_s));
  CHECK(gathered.comm_s > 0);
  CHECK(gathered.exposed_comm_s > 0.9 * gathered.comm_s);
  CHECK(ring.exposed_comm_s < 0.5 * ring.comm_s);
  CHECK(gathered.step_time_s > ring.step_time_s);
}

TEST_CASE("all-gather context parallelism takes no ulysses_degree and keeps the ring's load-balanced cut",
          "[ulysses][context]")
{
  nlohmann::json doc                   = llama_like(1, 4, 1, 3, "all_gather");
  doc["parallelism"]["ulysses_degree"] = 2;
  CHECK_THAT(problems(doc), Catch::Contains("parallelism.ulysses_degree: is the all-to-all group size of "
                                            "context_attention \"usp\", but context_attention is \"all_gather\""));
  doc = llama_like(1, 4, 1, 3, "all_gather");
  doc["model"]["seq_length"] = 8196;
  CHECK_THAT(problems(doc), Catch::Contains("is not divisible by 2 × context 4"));
  doc = llama_like(1, 4, 1, 3, "all-gather");
  CHECK_THAT(problems(doc), Catch::Contains("parallelism.context_attention"));
}

// The data-parallel family (workloads/parallel/data_parallel.hpp): the bytes each plan's collectives move
// per rank against their closed forms, measured on the lowered graphs and on the links of a
// replayed step; ZeRO-3 / FSDP's prefetch and resharding, FCDP's host cache and ZeRO-Offload's
// CPU optimizer in simulated steps.
#include "support.hpp"

#include "models/collectives/collective.hpp"
#include "workloads/stage_memory.hpp"
#include "sim/output/timeline.hpp"
#include "sim/simulate.hpp"
#include "workloads/parallel/data_parallel.hpp"
#include "workloads/lower.hpp"
#include "workloads/models/transformer.hpp"

#include <catch2/catch.hpp>

#include <set>

using namespace stepsim;

namespace {

constexpr double kH = 1024, kV = 32000, kSeq = 1024, kLayers = 4;

// Parameters of small_scenario's model on one rank without pipeline or tensor parallelism: the
// layers (12h² + 13h each), the word and position embeddings; the output layer shares the word
// embeddings (tied), so it has no parameters of its own.
double model_parameters_lowered() { return kLayers * (12 * kH * kH + 13 * kH) + kV * kH + kSeq * kH; }

nlohmann::json dp_scenario(int data, int micro_batches, const nlohmann::json& parallelism)
{
  auto j = testing::small_scenario(1, data, micro_batches);
  for (const auto& [key, value] : parallelism.items())
    j["parallelism"][key] = value;
  return j;
}

struct Moved {
  double network = 0;        // bytes rank 0 sends in data-parallel collectives (ring)
  double tensor  = 0;        // bytes it sends in tensor-parallel collectives
  double to_host = 0, from_host = 0;
  int gathers = 0;
};

// Sums what the first simulated rank's collectives send, as the ring algorithm moves them, and
// what its host copies carry.
Moved moved_by_rank0(const nlohmann::json& scenario)
{
  const Scenario s           = scenario_from_json(scenario);
  const Workload w           = lower(s);
  const auto& ring           = CollectiveRegistry::get("ring", "");
  const RankProgram& program = w.ranks.front();
  Moved m;
  for (auto v : boost::make_iterator_range(boost::vertices(program.graph))) {
    const Task& t = program.graph[v];
    if (t.kind == TaskKind::HostCopy)
      (t.stream == Stream::DeviceToHost ? m.to_host : m.from_host) += t.bytes;
    if (t.kind != TaskKind::Collective)
      continue;
    const Group& g     = w.groups[static_cast<size_t>(t.group)];
    const double sent  = bytes_sent_per_member(ring, t.op, group_shape(static_cast<int>(g.ranks.size())), t.bytes);
    if (t.stream == Stream::Tensor)
      m.tensor += sent;
    else if (t.stream == Stream::Data || t.stream == Stream::ParamGather)
      m.network += sent;
    m.gathers += t.stream == Stream::ParamGather ? 1 : 0;
  }
  return m;
}

} // namespace

TEST_CASE("bytes per rank of each data-parallel plan equal the closed form", "[data_parallel][bytes]")
{
  const int n        = 4;
  const double f     = double(n - 1) / n; // a ring member sends (n-1)/n of the buffer per pass
  const double psi   = model_parameters_lowered();
  const double g     = 2 * psi; // bf16 gradients
  const double p     = 2 * psi; // bf16 weights
  for (int m : {1, 4}) {
    INFO("micro-batches " << m);
    const double plain = moved_by_rank0(dp_scenario(n, m, {{"zero_stage", 0}})).network;
    CHECK(plain == Approx(2 * f * g).epsilon(1e-9)); // one all-reduce per step
    CHECK(moved_by_rank0(dp_scenario(n, m, {{"zero_stage", 1}})).network == Approx(f * (g + p)));
    CHECK(moved_by_rank0(dp_scenario(n, m, {{"zero_stage", 2}})).network == Approx(f * (m * g + p)));
    const Moved zero3 = moved_by_rank0(dp_scenario(n, m, {{"zero_stage", 3}}));
    CHECK(zero3.network == Approx(f * m * (2 * p + g)));
    CHECK(zero3.gathers == 2 * m * 5); // embedding + 4 layers, before forward and before backward
    if (m == 1) // the ZeRO paper: 3Ψ against 2Ψ per step
      CHECK(zero3.network / plain == Approx(1.5).epsilon(1e-9));
    const Moved kept = moved_by_rank0(dp_scenario(n, m, {{"fsdp", {{"reshard_after_forward", false}}}}));
    CHECK(kept.network == Approx(f * (p + m * g)));
    CHECK(kept.gathers == 5);
    // FCDP: the first gather of each unit crosses the network and is copied to the host; every
    // later one (2m - 1 per unit) comes back over the host link.
    const Moved fcdp = moved_by_rank0(dp_scenario(n, m, {{"fsdp", {{"host_cache", true}}}}));
    CHECK(fcdp.network == Approx(f * (p + m * g)));
    CHECK(fcdp.to_host == Approx(p));
    CHECK(fcdp.from_host == Approx((2 * m - 1) * p));
    // ZeRO-Offload on ZeRO-2: the reduced gradient shard goes to the host, the shard's updated
    // weights come back; the network carries what ZeRO-2 carries.
    const Moved offload = moved_by_rank0(dp_scenario(n, m, {{"zero_stage", 2}, {"offload_optimizer", true}}));
    CHECK(offload.network == Approx(f * (m * g + p)));
    CHECK(offload.to_host == Approx(g / n));
    CHECK(offload.from_host == Approx(p / n));
  }
}

TEST_CASE("tensor parallelism moves 8bsh(t-1)/t elements per layer per micro-batch, with or without sequence "
          "parallelism",
          "[data_parallel][bytes][tensor]")
{
  const int t = 4, m = 2;
  const double b = 1, s = kSeq, h = kH, element = 2;
  for (bool sp : {false, true}) {
    auto j                                   = testing::small_scenario(1, 1, m);
    j["parallelism"]["tensor"]               = t;
    j["parallelism"]["sequence_parallel"]    = sp;
    j["platform"]["node_groups"][0]["count"] = t;
    // The embedding and the head add their own collectives: take the difference of two depths.
    j["model"]["num_layers"] = 4;
    const double four        = moved_by_rank0(j).tensor;
    j["model"]["num_layers"] = 2;
    const double two         = moved_by_rank0(j).tensor;
    INFO("sequence parallel " << sp);
    CHECK((four - two) / (2 * m) == Approx(8 * b * s * h * (t - 1) / t * element).epsilon(1e-9));
  }
}

TEST_CASE("the replayed transfers of a rank carry the closed-form bytes: ZeRO-3 moves 1.5x plain data parallel",
          "[data_parallel][bytes][replay]")
{
  // Every rank simulated (full fidelity), each on a node of its own: all a rank sends leaves
  // through its NIC's uplink.
  auto nic_bytes = [](nlohmann::json j) {
    j["simulation"]["fidelity"] = "full";
    return testing::in_child([&] {
      const Report r = simulate(scenario_from_json(j), nullptr, 1000);
      double bytes   = 0;
      for (const auto& l : r.links)
        if (l.name.rfind("node0-", 0) == 0 && l.name.find("nic") != std::string::npos &&
            l.name.size() > 3 && l.name.compare(l.name.size() - 3, 3, "_UP") == 0)
          bytes += l.bytes;
      return nlohmann::json(bytes);
    }).get<double>();
  };
  const int n      = 4;
  const double psi = model_parameters_lowered();
  const double plain = nic_bytes(dp_scenario(n, 1, {{"zero_stage", 0}}));
  const double zero3 = nic_bytes(dp_scenario(n, 1, {{"zero_stage", 3}}));
  CHECK(plain == Approx(2.0 * (n - 1) / n * 2 * psi).epsilon(1e-6));
  CHECK(zero3 == Approx(1.5 * plain).epsilon(1e-6));
}

namespace {

// The second micro-batch's forward on the first simulated rank: when each parameter gather
// starts and ends, when each layer's attention starts and its MLP ends; and the step's
// communication and exposed communication.
nlohmann::json forward_timeline(const nlohmann::json& j)
{
  return testing::in_child([&] {
    Timeline tl;
    const Report r      = simulate(scenario_from_json(j), &tl);
    nlohmann::json seen = {{"gathers", nlohmann::json::array()}, {"gather_ends", nlohmann::json::array()},
                           {"layers", nlohmann::json::array()},  {"layer_ends", nlohmann::json::array()}};
    for (const auto& i : tl.ranks.front().intervals) {
      if (i.pass != Pass::Forward || i.micro_batch != 1)
        continue;
      if (i.stream == Stream::ParamGather) {
        seen["gathers"].push_back(i.start_s);
        seen["gather_ends"].push_back(i.end_s);
      }
      if (i.stream == Stream::Compute && i.work == "attention_forward")
        seen["layers"].push_back(i.start_s);
      if (i.stream == Stream::Compute && i.work == "mlp_forward")
        seen["layer_ends"].push_back(i.end_s);
    }
    seen["exposed"] = r.exposed_comm_s;
    seen["comm"]    = r.comm_s;
    return seen;
  });
}

} // namespace

TEST_CASE("ZeRO-3 issues the gather of unit i+1 when unit i starts computing", "[data_parallel][fsdp]")
{
  // A network slow enough that gathers matter.
  auto j = dp_scenario(4, 2, {{"zero_stage", 3}});
  j["platform"]["node_groups"][0]["nic"]["bandwidth"] = "25GBps";
  j["platform"]["node_groups"][0]["nic"]["latency"]   = "2us";
  const auto out = forward_timeline(j);
  const auto gathers = out["gathers"].get<std::vector<double>>(); // embedding, layer 0 .. 3
  const auto layers  = out["layers"].get<std::vector<double>>();
  REQUIRE(gathers.size() == 5);
  REQUIRE(layers.size() == 4);
  for (size_t k = 0; k + 1 < layers.size(); ++k) {
    INFO("layer " << k);
    CHECK(gathers[k + 2] == Approx(layers[k]).margin(1e-12));
  }
  // Prefetching hides part of the gathers behind compute.
  CHECK(out["exposed"].get<double>() < out["comm"].get<double>());
}

TEST_CASE("DeepSpeed ZeRO-3 (2021) fetches each unit synchronously: a gather starts when the compute before it "
          "ends, and none is hidden",
          "[data_parallel][fsdp]")
{
  auto j = dp_scenario(4, 2, {{"zero_stage", 3}});
  j["platform"]["node_groups"][0]["nic"]["bandwidth"] = "25GBps";
  j["platform"]["node_groups"][0]["nic"]["latency"]   = "2us";
  j["training"]["framework"]                          = "deepspeed-zero3";
  j["training"]["attention"]                          = "flash"; // only the gathers differ from FSDP's
  const auto out = forward_timeline(j);
  const auto gathers     = out["gathers"].get<std::vector<double>>();
  const auto gather_ends = out["gather_ends"].get<std::vector<double>>();
  const auto layers      = out["layers"].get<std::vector<double>>();
  const auto layer_ends  = out["layer_ends"].get<std::vector<double>>();
  // Tensor by tensor: the word and position embeddings, then each layer's four weights (its
  // biases and norms, under 1e5 elements, stay whole on every rank and are not gathered).
  constexpr size_t kEmbedding = 2, kPerLayer = 4;
  REQUIRE(gathers.size() == kEmbedding + 4 * kPerLayer);
  REQUIRE(layers.size() == 4);
  REQUIRE(layer_ends.size() == 4);
  for (size_t k = 0; k < layers.size(); ++k) {
    INFO("layer " << k);
    const size_t first = kEmbedding + kPerLayer * k, last = first + kPerLayer - 1;
    CHECK(layers[k] >= gather_ends[last] - 1e-12); // the layer waits for its own gathers
    for (size_t g = first; g < last; ++g)
      CHECK(gathers[g + 1] >= gather_ends[g] - 1e-12); // one after the other
    if (k > 0)
      CHECK(gathers[first] >= layer_ends[k - 1] - 1e-12); // which waited for the layer before it
  }
  // Every gather is on the critical path: the step's exposed communication holds them all.
  double gathering = 0;
  for (size_t g = 0; g < gathers.size(); ++g)
    gathering += gather_ends[g] - gathers[g];
  CHECK(gathering > 0);
  CHECK(out["exposed"].get<double>() >= gathering);
}

TEST_CASE("DeepSpeed ZeRO-3 (2021) gathers tensor by tensor, again after a recomputed forward, and pays its host "
          "calls per rank of each list-form collective",
          "[data_parallel][fsdp]")
{
  const int n = 4, m = 2;
  auto j = dp_scenario(n, m, {{"zero_stage", 3}});
  j["training"]["framework"] = "deepspeed-zero3";
  j["training"]["recompute"] = "full";
  const Scenario s    = scenario_from_json(j);
  const Workload w    = lower(s);
  const auto& program = w.ranks.front();
  const double h = kH, e = 2; // bf16
  std::multiset<double> forward, backward, scattered;
  int gather_copies = 0, scatter_copies = 0;
  for (auto v : boost::make_iterator_range(boost::vertices(program.graph))) {
    const Task& t = program.graph[v];
    if (t.kind == TaskKind::Collective && t.op == CollectiveOp::AllGather && t.micro_batch == 1)
      (t.pass == Pass::Forward ? forward : backward).insert(t.bytes / e);
    if (t.kind == TaskKind::Collective && t.op == CollectiveOp::ReduceScatter && t.micro_batch == 1)
      scattered.insert(t.bytes / e);
    if (t.kind == TaskKind::Compute && t.micro_batch == 1) {
      const Work& work = w.works[static_cast<size_t>(t.work)];
      if (work.name == "all_gather_copies" || work.name == "reduce_scatter_copies") {
        REQUIRE(work.kernels.size() == 1);
        // Four host calls per rank's entry, the copy among them (the profile's sources).
        CHECK(work.kernels.front().launches == 4 * n);
        ++(work.name == "all_gather_copies" ? gather_copies : scatter_copies);
      }
    }
  }
  // Per layer: QKV (3h²), projection (h²), fc1 and fc2 (4h² each); the embedding's word (V·h)
  // and position (s·h) tables.
  CHECK(forward.size() == 2 + 4 * 4);
  CHECK(forward.count(3 * h * h) == 4);
  CHECK(forward.count(4 * h * h) == 8);
  CHECK(forward.count(kV * h) == 1);
  CHECK(forward.count(h * h) == 4 + 1); // the projections and the position table (kSeq = kH)
  // Backward gathers each recomputed layer twice (the embedding is not recomputed).
  CHECK(backward.size() == 2 + 2 * 4 * 4);
  CHECK(backward.count(3 * h * h) == 2 * 4);
  // Every gradient tensor is reduce-scattered, biases and norms too: 12 per GPT layer.
  CHECK(scattered.size() == 2 + 12 * 4);
  CHECK(scattered.count(h) == 6 * 4); // the two norms' weights and biases, the projection's and fc2's biases
  CHECK(gather_copies == static_cast<int>(forward.size() + backward.size()));
  CHECK(scatter_copies == static_cast<int>(scattered.size()));

  // PyTorch FSDP gathers each unit as one flat parameter, once for the backward.
  j["training"]["framework"] = "pytorch-fsdp";
  const Workload fsdp        = lower(scenario_from_json(j));
  int fsdp_gathers = 0, copies = 0;
  for (auto v : boost::make_iterator_range(boost::vertices(fsdp.ranks.front().graph))) {
    const Task& t = fsdp.ranks.front().graph[v];
    fsdp_gathers += t.kind == TaskKind::Collective && t.op == CollectiveOp::AllGather && t.micro_batch == 1;
    copies += t.kind == TaskKind::Compute && fsdp.works[static_cast<size_t>(t.work)].name.find("copies") != std::string::npos;
  }
  CHECK(fsdp_gathers == 2 * 5);
  CHECK(copies == 0);
}

TEST_CASE("A layer's parameter tensors add up to its parameters", "[data_parallel][fsdp]")
{
  for (int t : {1, 4}) {
    ModelSpec gpt;
    gpt.hidden_size = 1024, gpt.num_attention_heads = 16, gpt.num_query_groups = 16, gpt.ffn_hidden_size = 4096;
    gpt.norm = "layernorm", gpt.mlp = "gelu";
    ModelSpec llama = gpt;
    llama.norm = "rmsnorm", llama.mlp = "swiglu", llama.num_query_groups = 4, llama.ffn_hidden_size = 2816;
    for (const ModelSpec& m : {gpt, llama}) {
      INFO(m.norm << " tensor " << t);
      const auto tensors = layer_parameter_tensors(m, t);
      double sum         = 0;
      for (double x : tensors)
        sum += x;
      CHECK(sum == Approx(layer_parameters_per_rank(m, t)).epsilon(1e-12));
      CHECK(tensors.size() == (m.norm == "layernorm" ? 12u : 6u));
    }
  }
}

TEST_CASE("overlap_param_gather moves the distributed optimizer's gather from after the step to the next forward",
          "[data_parallel][zero]")
{
  auto j = dp_scenario(4, 4, {{"zero_stage", 1}});
  j["platform"]["node_groups"][0]["nic"]["bandwidth"] = "25GBps";
  const auto gathers = [&](bool overlap) {
    j["parallelism"]["overlap_param_gather"] = overlap;
    return testing::in_child([&] {
      Timeline tl;
      simulate(scenario_from_json(j), &tl);
      nlohmann::json seen = {{"forward", 0}, {"optimizer", 0}, {"bytes_forward", 0.0}};
      for (const auto& i : tl.ranks.front().intervals)
        if (i.stream == Stream::ParamGather && i.pass == Pass::Forward)
          seen["forward"] = seen["forward"].get<int>() + 1;
        else if (i.stream == Stream::Data && i.pass == Pass::Optimizer)
          seen["optimizer"] = seen["optimizer"].get<int>() + 1;
      return seen;
    });
  };
  const auto after_step = gathers(false);
  CHECK(after_step["forward"].get<int>() == 0);
  CHECK(after_step["optimizer"].get<int>() == 1);
  const auto overlapped = gathers(true);
  CHECK(overlapped["optimizer"].get<int>() == 0);
  CHECK(overlapped["forward"].get<int>() == 5); // the embedding and the four layers, once each, in the first forward
}

TEST_CASE("align_param_gather dispatches every stage's parameter gathers when the step starts",
          "[data_parallel][zero]")
{
  // Two stages: the last one's first forward starts only when the first stage's activations
  // arrive. Without alignment each later layer's gather waits for the layer before it to start
  // computing (Megatron-Core's forward hook dispatches the next bucket), so they run then, on
  // the critical path; aligned, the schedule dispatches them all at the step's start.
  auto j = testing::small_scenario(2, 4, 4);
  j["parallelism"]["zero_stage"]                      = 1;
  j["parallelism"]["overlap_param_gather"]            = true;
  j["platform"]["node_groups"][0]["nic"]["bandwidth"] = "5GBps";
  const auto run = [&](bool align) {
    j["parallelism"]["align_param_gather"] = align;
    return testing::in_child([&] {
      Timeline tl;
      const Report r     = simulate(scenario_from_json(j), &tl);
      double latest      = 0; // the last stage's latest start of a forward gather
      int gathers        = 0;
      for (const auto& i : tl.ranks.back().intervals)
        if (i.stream == Stream::ParamGather && i.pass == Pass::Forward) {
          latest = std::max(latest, i.start_s);
          ++gathers;
        }
      return nlohmann::json{{"step", r.step_time_s}, {"latest", latest}, {"gathers", gathers}};
    });
  };
  const auto hooked = run(false), aligned = run(true);
  CHECK(aligned["gathers"].get<int>() == hooked["gathers"].get<int>()); // the same gathers, once each
  CHECK(aligned["latest"].get<double>() < hooked["latest"].get<double>());
  CHECK(aligned["step"].get<double>() < hooked["step"].get<double>());
  // Only with overlap_param_gather: exit 2 with the path.
  j["parallelism"]["overlap_param_gather"] = false;
  j["parallelism"]["align_param_gather"]   = true;
  CHECK_THROWS_WITH(scenario_from_json(j), Catch::Contains("parallelism.align_param_gather"));
}

TEST_CASE("FSDP without resharding gathers once per step and runs faster when gathers are exposed",
          "[data_parallel][fsdp]")
{
  auto j = dp_scenario(4, 4, {{"zero_stage", 3}});
  j["platform"]["node_groups"][0]["nic"]["bandwidth"] = "5GBps";
  const Scenario reshard = scenario_from_json(j);
  j["parallelism"]["fsdp"] = {{"reshard_after_forward", false}};
  const Scenario kept      = scenario_from_json(j);
  const double t_reshard   = simulate_isolated(reshard).step_time_s;
  const double t_kept      = simulate_isolated(kept).step_time_s;
  CHECK(t_kept < t_reshard);
  // and holds more memory for it
  CHECK(analytic_report(kept).memory_peak_bytes > analytic_report(reshard).memory_peak_bytes);
}

TEST_CASE("FCDP reloads parameters over the host link instead of the network", "[data_parallel][fcdp]")
{
  // Slow network, PCIe host links: reloading from host memory beats re-gathering.
  auto j = dp_scenario(4, 4, {{"zero_stage", 3}});
  j["platform"]["node_groups"][0]["nic"]["bandwidth"] = "2GBps";
  const double zero3 = simulate_isolated(scenario_from_json(j)).step_time_s;
  j["parallelism"]["fsdp"] = {{"host_cache", true}};
  const double fcdp = simulate_isolated(scenario_from_json(j)).step_time_s;
  CHECK(fcdp < zero3);

  // One reload of the largest unit (the word embeddings, 2·V·h bytes) takes at least its bytes
  // over the device's host link (A100 SXM: PCIe Gen4 x16, 32 GB/s).
  const auto reload = testing::in_child([&] {
    Timeline tl;
    simulate(scenario_from_json(j), &tl);
    double longest = 0;
    for (const auto& i : tl.ranks.front().intervals)
      if (i.stream == Stream::HostToDevice)
        longest = std::max(longest, i.end_s - i.start_s);
    return nlohmann::json(longest);
  });
  CHECK(reload.get<double>() >= 2 * kV * kH / 32e9 * (1 - 1e-9));
}

TEST_CASE("ZeRO-Offload steps the optimizer shard on the CPU at the node's memory bandwidth", "[data_parallel][offload]")
{
  const int n = 4;
  auto j      = dp_scenario(n, 2, {{"zero_stage", 2}, {"offload_optimizer", true}});
  j["platform"]["node_groups"][0]["host"] = {{"memory_bandwidth", "100GBps"}};
  const auto out = testing::in_child([&] {
    Timeline tl;
    const Report r = simulate(scenario_from_json(j), &tl);
    double cpu = 0;
    for (const auto& i : tl.ranks.front().intervals)
      if (i.stream == Stream::Host)
        cpu += i.end_s - i.start_s;
    return nlohmann::json{{"cpu", cpu}, {"optimizer", r.memory.optimizer}};
  });
  // Adam on the CPU reads and writes 30 bytes per parameter of the shard (fp32 master, moments,
  // gradient; the 16-bit copy written), one GPU per node here.
  const double shard = model_parameters_lowered() / n;
  CHECK(out["cpu"].get<double>() == Approx(shard * optimizer_bytes_per_parameter(TrainingSpec{}) / 100e9).epsilon(1e-6));
  CHECK(out["optimizer"].get<double>() == 0);
}

TEST_CASE("the replayed tensor-parallel transfers of a rank carry 8bsh(t-1)/t elements per layer per micro-batch",
          "[data_parallel][bytes][tensor][replay]")
{
  // One node of t GPUs, every rank simulated: all rank 0 sends leaves through its NVSwitch uplink.
  const int t = 4, m = 2;
  auto uplink_bytes = [&](int layers, bool sp) {
    auto j                                           = testing::small_scenario(1, 1, m);
    j["model"]["num_layers"]                         = layers;
    j["parallelism"]["tensor"]                       = t;
    j["parallelism"]["sequence_parallel"]            = sp;
    j["platform"]["node_groups"][0]["gpus_per_node"] = t;
    j["platform"]["node_groups"][0]["nic"]["count"]  = t;
    j["simulation"]["fidelity"]                      = "full";
    return testing::in_child([&] {
      const Report r = simulate(scenario_from_json(j), nullptr, 1000);
      double bytes   = 0;
      for (const auto& l : r.links)
        if (l.name == "node0-gpu0-nvswitch_UP")
          bytes += l.bytes;
      return nlohmann::json(bytes);
    }).get<double>();
  };
  for (bool sp : {false, true}) {
    INFO("sequence parallel " << sp);
    const double per_layer = (uplink_bytes(4, sp) - uplink_bytes(2, sp)) / (2 * m);
    CHECK(per_layer == Approx(8 * 1.0 * kSeq * kH * (t - 1) / t * 2).epsilon(1e-6));
  }
}

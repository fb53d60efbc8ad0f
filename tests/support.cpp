#include "support.hpp"

#include <boost/range/iterator_range.hpp>

#include "models/collectives/collective.hpp"
#include "models/compute/compute_model.hpp"
#include "sim/core/input_error.hpp"
#include "sim/engine/replay.hpp"
#include "sim/simulate.hpp"
#include "topologies/platform.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

namespace stepsim::testing {

nlohmann::json small_scenario(int pipeline, int data, int micro_batches)
{
  return {
      {"name", "small"},
      {"model",
       {{"num_layers", 4 * pipeline}, {"hidden_size", 1024}, {"num_attention_heads", 16}, {"seq_length", 1024},
        {"vocab_size", 32000}}},
      {"training",
       {{"global_batch_size", micro_batches * data}, {"micro_batch_size", 1}, {"precision", "bf16"},
        {"recompute", "none"}}},
      {"parallelism", {{"tensor", 1}, {"pipeline", pipeline}, {"data", data}, {"schedule", "1f1b"}}},
      {"platform",
       {{"node_groups",
         {{{"count", pipeline * data},
           {"gpu", "A100-SXM4-80GB"},
           {"gpus_per_node", 1},
           {"intra_node", {{"type", "nvswitch"}, {"bandwidth", "300GBps"}, {"latency", 0}}},
           {"nic", {{"count", 1}, {"bandwidth", "1000000TBps"}, {"latency", 0}}}}}},
        {"network", {{"topology", "fat_tree"}}}}}};
}

nlohmann::json measure_route(const PlatformSpec& spec, int src, int dst, double bytes)
{
  return in_child([&] {
    auto engine = start_engine();
    BuiltPlatform p = build_platform(spec);
    std::vector<simgrid::s4u::Link*> links;
    double latency = 0;
    p.gpus[static_cast<size_t>(src)]->route_to(p.gpus[static_cast<size_t>(dst)], links, &latency);
    nlohmann::json out{{"route_latency_s", latency}, {"links", nlohmann::json::array()}};
    double bottleneck = 1e300, summed = 0;
    for (const auto* l : links) {
      out["links"].push_back(l->get_name());
      bottleneck = std::min(bottleneck, l->get_bandwidth());
      summed += l->get_latency();
    }
    out["bottleneck_Bps"]   = bottleneck;
    out["summed_latency_s"] = summed;

    Workload w;
    w.world_size = spec.total_gpus();
    for (int r : {std::min(src, dst), std::max(src, dst)}) {
      w.ranks.emplace_back();
      w.ranks.back().rank = r;
      ProgramBuilder b(w.ranks.back());
      b.add(point_to_point_task(r == src ? TaskKind::Send : TaskKind::Recv, r == src ? Stream::SendNext : Stream::RecvPrev,
                                r == src ? dst : src, 0, bytes, Pass::Other, -1, 0));
    }
    out["transfer_s"] = replay(w, p.gpus, CollectiveRegistry::get("ring", "")).end_s;
    return out;
  });
}

namespace {
// Uniform stages: only the transformer layers cost time (1 us per forward kernel, 2 us per
// backward kernel); embedding, head and optimizer are free, so every stage does the same work.
double uniform_layer_seconds(const Kernel& k, const Device&, const std::string&)
{
  static const std::set<std::string> free_kernels = {
      "embedding_lookup", "embedding_grad", "final_norm", "logits", "cross_entropy", "cross_entropy_bwd",
      "logits_dgrad",     "logits_wgrad",   "final_norm_bwd", "optimizer_step"};
  if (free_kernels.count(k.name) != 0)
    return 0;
  return k.name.find("bwd") != std::string::npos || k.name.find("grad") != std::string::npos ? 2e-6 : 1e-6;
}
const bool registered = ComputeModelRegistry::add(kUniformLayers, "test only", ComputeModel{uniform_layer_seconds});
} // namespace

std::unique_ptr<simgrid::s4u::Engine> start_engine() { return stepsim::start_engine(); }

NodeGroupSpec nvswitch_nodes(const std::string& gpu, int count, int gpus_per_node, double nvlink_Bps, double nvlink_s,
                             double nic_Bps, double nic_s)
{
  NodeGroupSpec g;
  g.count                    = count;
  g.gpu                      = gpu;
  g.gpus_per_node            = gpus_per_node;
  g.intra_node.type          = "nvswitch";
  g.intra_node.bandwidth_Bps = nvlink_Bps;
  g.intra_node.latency_s     = nvlink_s;
  g.nic.count                = gpus_per_node;
  g.nic.bandwidth_Bps        = nic_Bps;
  g.nic.latency_s            = nic_s;
  return g;
}

PlatformSpec single_gpu_nodes(int n, double bandwidth_Bps, double latency_s)
{
  PlatformSpec spec;
  NodeGroupSpec g;
  g.count             = n;
  g.gpu               = "A100-SXM4-80GB";
  g.gpus_per_node     = 1;
  g.nic.count         = 1;
  g.nic.bandwidth_Bps = bandwidth_Bps;
  g.nic.latency_s     = latency_s;
  spec.node_groups    = {g};
  return spec;
}

nlohmann::json in_child(const std::function<nlohmann::json()>& body)
{
  auto j = nlohmann::json::parse(run_in_child([&] {
    try {
      return body().dump();
    } catch (const std::exception& e) {
      return nlohmann::json{{"error", e.what()}}.dump();
    }
  }));
  if (j.is_object() && j.contains("error"))
    throw std::runtime_error(j["error"].get<std::string>());
  return j;
}

CommandResult run_stepsim(const std::string& arguments)
{
  std::string command = std::string(STEPSIM_BINARY) + " " + arguments + " 2>&1";
  FILE* pipe          = popen(command.c_str(), "r");
  if (pipe == nullptr)
    throw std::runtime_error("popen");
  std::string output;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0)
    output.append(buffer, n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

std::string input_problems(const std::function<void()>& body)
{
  try {
    body();
  } catch (const InputError& e) {
    std::string all;
    for (const auto& p : e.problems())
      all += p + "\n";
    return all;
  }
  return "";
}

std::string write_temp_file(const std::string& name, const std::string& text)
{
  auto dir = std::filesystem::temp_directory_path() / ("stepsim-tests-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

std::string read_text_file(const std::string& path)
{
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Traffic traffic(const RankProgram& r, TaskKind kind, Stream stream, Pass pass)
{
  Traffic t;
  for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
    const Task& task = r.graph[v];
    if (task.kind == kind && task.stream == stream && task.pass == pass) {
      t.bytes += task.bytes;
      ++t.tasks;
    }
  }
  return t;
}

} // namespace stepsim::testing

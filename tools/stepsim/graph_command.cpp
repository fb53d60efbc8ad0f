// `stepsim graph FILE [--rank R] --dot OUT | --json OUT`: the task graph one rank runs, with the
// seconds the cost model gives each compute task, for Graphviz or for scripts. "-" writes to
// standard output.
#include "models/compute/compute_model.hpp"
#include "models/device.hpp"
#include "sim/core/input_error.hpp"
#include "sim/simulate.hpp"
#include "tools/stepsim/command.hpp"
#include "workloads/parallel/layout.hpp"
#include "workloads/lower.hpp"

#include <boost/graph/graphviz.hpp>
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <sstream>

namespace stepsim {
namespace {

struct GraphOptions {
  std::string file, dot_out, json_out;
  std::vector<std::string> sets;
  int rank = 0;
};

const char* kind_name(TaskKind k)
{
  switch (k) {
  case TaskKind::Compute: return "compute";
  case TaskKind::Send: return "send";
  case TaskKind::Recv: return "recv";
  case TaskKind::Collective: return "collective";
  case TaskKind::HostCopy: return "host_copy";
  }
  return "task";
}

std::string label(const Workload& w, const Task& t)
{
  std::string what = t.kind == TaskKind::Compute    ? w.works[static_cast<size_t>(t.work)].name
                     : t.kind == TaskKind::Collective ? fmt::format("{} {}", collective_name(t.op),
                                                                    w.groups[static_cast<size_t>(t.group)].name)
                     : t.kind == TaskKind::HostCopy   ? fmt::format("{} {:.0f} bytes", stream_name(t.stream), t.bytes)
                                                      : fmt::format("{} rank {}", kind_name(t.kind), t.peer);
  return t.micro_batch >= 0 ? fmt::format("{} mb{} c{}\\n{}", pass_name(t.pass), t.micro_batch, t.chunk, what)
                            : fmt::format("{}\\n{}", pass_name(t.pass), what);
}

void emit(const std::string& path, const std::string& text)
{
  if (path == "-")
    std::cout << text;
  else
    write_text_file(path, text);
}

int run_graph(const GraphOptions& o)
{
  if (o.dot_out.empty() && o.json_out.empty())
    throw InputError({"stepsim graph: give --dot OUT or --json OUT (\"-\" for standard output)"});
  Scenario s = load_scenario(o.file, o.sets);
  if (s.training.federated.enabled)
    throw InputError({"training.federated: a federated round has no rank task graph of its own: each client runs a "
                      "one-device local step, which `stepsim run` reports; `stepsim graph` exports a training step's"});
  if (o.rank < 0 || o.rank >= s.platform.total_gpus())
    throw InputError({fmt::format("--rank {}: expected a rank from 0 to {}", o.rank, s.platform.total_gpus() - 1)});
  Workload w    = lower_one_rank(s, o.rank);
  Device device = load_device(s.platform.node_groups.front().gpu, "platform.node_groups[0].gpu");
  assign_work_seconds(w, device, ComputeModelRegistry::get(s.simulation.compute_model, "simulation.compute_model"),
                      s.training.precision);
  const RankProgram& p = w.ranks.front();

  if (!o.dot_out.empty()) {
    std::ostringstream dot;
    boost::write_graphviz(
        dot, p.graph,
        [&](std::ostream& out, TaskId v) {
          const Task& t = p.graph[v];
          out << fmt::format("[label=\"{}\", shape={}]", label(w, t), t.kind == TaskKind::Compute ? "box" : "ellipse");
        });
    emit(o.dot_out, dot.str());
  }
  if (!o.json_out.empty()) {
    nlohmann::json tasks = nlohmann::json::array(), edges = nlohmann::json::array();
    for (auto v : boost::make_iterator_range(boost::vertices(p.graph))) {
      const Task& t     = p.graph[v];
      nlohmann::json j  = {{"id", v},          {"kind", kind_name(t.kind)},  {"stream", stream_name(t.stream)},
                           {"pass", pass_name(t.pass)}, {"micro_batch", t.micro_batch}, {"chunk", t.chunk}};
      if (t.kind == TaskKind::Compute) {
        j["work"]    = w.works[static_cast<size_t>(t.work)].name;
        j["seconds"] = w.works[static_cast<size_t>(t.work)].seconds;
      } else if (t.kind == TaskKind::Collective) {
        j["op"]    = collective_name(t.op);
        j["group"] = w.groups[static_cast<size_t>(t.group)].name;
        j["ranks"] = w.groups[static_cast<size_t>(t.group)].ranks;
        j["bytes"] = t.bytes;
      } else if (t.kind == TaskKind::HostCopy) {
        j["bytes"] = t.bytes;
      } else {
        j["peer"]  = t.peer;
        j["tag"]   = t.tag;
        j["bytes"] = t.bytes;
      }
      tasks.push_back(j);
    }
    // By source, then in the order the lowering added them.
    for (TaskId u = 0; u < boost::num_vertices(p.graph); ++u)
      for (auto [e, end] = boost::out_edges(u, p.graph); e != end; ++e)
        edges.push_back({u, boost::target(*e, p.graph)});
    emit(o.json_out, nlohmann::json{{"rank", p.rank}, {"stage", p.stage}, {"tasks", tasks}, {"edges", edges}}.dump(1) +
                         "\n");
  }
  return 0;
}

std::function<int()> setup(CLI::App& sub)
{
  auto o = std::make_shared<GraphOptions>();
  sub.add_option("FILE", o->file, "scenario JSON file")->required();
  sub.add_option("--rank", o->rank, "the rank whose graph to export (default 0)");
  sub.add_option("--dot", o->dot_out, "write Graphviz DOT here (\"-\" = standard output)");
  sub.add_option("--json", o->json_out, "write tasks and edges as JSON here (\"-\" = standard output)");
  sub.add_option("--set", o->sets, "override a field: path=value");
  sub.footer("Examples:\n  stepsim graph configs/scenarios/gpt-7b-64.json --rank 4 --dot - | dot -Tsvg > rank4.svg\n"
             "  stepsim graph configs/scenarios/default.json --set training.global_batch_size=64 --json graph.json");
  return [o] { return run_graph(*o); };
}

const bool registered = CommandRegistry::add(
    "graph", "export the task graph of one rank (Graphviz DOT or JSON), with its compute costs", Command{setup});

} // namespace
} // namespace stepsim

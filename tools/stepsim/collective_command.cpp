// `stepsim collective FILE`: time one collective alone on the scenario's platform, size by size,
// and print nccl-tests' table (size, time, algorithm and bus bandwidth), to check the network
// model against nccl-tests runs on the real machine.
#include "models/collectives/collective.hpp"
#include "models/collectives/protocol.hpp"
#include "models/link_calibration.hpp"
#include "sim/core/input_error.hpp"
#include "sim/core/units.hpp"
#include "topologies/collective_groups.hpp"
#include "tools/driver/collective_bench.hpp"
#include "tools/driver/nccl_compare.hpp"
#include "sim/simulate.hpp"
#include "tools/stepsim/command.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include <memory>
#include <sstream>
#include <stdexcept>

namespace stepsim {
namespace {

struct CollectiveOptions {
  std::string file, platform, preset, op = "all_reduce", algorithm, protocol, sizes, min = "8B", max = "8GiB", json_out, network;
  std::string network_calibration; // a file of `stepsim calibrate network`
  std::string compare, compare_case; // --compare FILE [--case NAME]: published runs against the model
  std::vector<std::string> sets;
  int gpus    = 0;
  int nodes   = 0;
  int jobs    = 1;
  int gpus_per_thread = 1; // nccl-tests -g (collective_bench.hpp nccl_tests_iteration_seconds)
  bool stride  = false;
  int per_node = 0; // --per-node K: the first K GPUs of each node
};

double parse_size(const std::string& text, const std::string& option)
{
  // Two messages: "1PB" is no unit stepsim knows (the largest is TB), which "from 1B to 1PB"
  // hid. A bare count of bytes is taken as nccl-tests takes `-b 201433088` (src/common.cu
  // parsesize: no suffix, bytes), so a size copied from a log or a task graph needs no unit.
  const bool digits = !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
  auto bytes        = digits ? units::parse_bytes(text + "B") : units::parse_bytes(text);
  if (!bytes)
    throw InputError({fmt::format("{}: \"{}\" is not a size; expected a count of bytes or a number with B, KB, MB, GB, "
                                  "TB, KiB, MiB, GiB or TiB, such as 201433088, 16MB or 1GiB",
                                  option, text)});
  if (!(*bytes >= 1) || *bytes > 1e15)
    throw InputError({fmt::format("{}: expected a size from 1B to 1000TB, got \"{}\"", option, text)});
  return *bytes;
}

std::vector<double> sizes_of(const CollectiveOptions& o)
{
  std::vector<double> sizes;
  if (!o.sizes.empty()) {
    std::stringstream list(o.sizes);
    for (std::string item; std::getline(list, item, ',');)
      sizes.push_back(parse_size(item, "--sizes"));
    return sizes;
  }
  // nccl-tests -b MIN -e MAX -f 2
  const double min = parse_size(o.min, "--min"), max = parse_size(o.max, "--max");
  if (max < min)
    throw InputError({fmt::format("--max: {} is below --min {}", o.max, o.min)});
  for (double s = min; s <= max; s *= 2)
    sizes.push_back(s);
  return sizes;
}

// --compare FILE: every published case of FILE timed on its preset (tools/driver/nccl_compare.hpp).
int run_compare(const CollectiveOptions& o)
{
  if (!o.file.empty() || !o.platform.empty() || !o.preset.empty() || !o.sets.empty() || o.nodes != 0 || o.gpus != 0)
    throw InputError({"--compare: each case of the file names its preset, nodes and GPUs; give no FILE, --platform, "
                      "--preset, --set, --nodes or --gpus with it"});
  if (!o.network.empty() && o.network != "flow" && o.network != "analytic")
    throw InputError({fmt::format("--network: expected flow or analytic, got \"{}\"", o.network)});
  // A cluster's own calibration (`stepsim calibrate network`), when given, times every case: what
  // the fit did to the published cases, or one log's calibration tried on the others.
  std::unique_ptr<ScopedLinkEfficiency> calibration;
  if (!o.network_calibration.empty())
    calibration = std::make_unique<ScopedLinkEfficiency>(
        load_network_calibration(o.network_calibration, load_link_efficiency(), "--network-calibration"));
  const Comparison c = compare_published(o.compare, o.network == "analytic", o.compare_case, 0, o.jobs);
  if (c.cases.empty())
    throw InputError({fmt::format("--case: no case of {} has \"{}\" in its name", o.compare, o.compare_case)});
  if (o.json_out == "-")
    fmt::print("{}\n", comparison_json(c).dump(2));
  else {
    fmt::print("{}", comparison_table(c));
    if (!o.json_out.empty())
      write_text_file(o.json_out, comparison_json(c).dump(2) + "\n");
  }
  return 0;
}

int run(const CollectiveOptions& o)
{
  if (!o.compare.empty() && o.gpus_per_thread != 1)
    throw InputError({"--gpus-per-thread: with --compare each case gives its own (its \"gpus_per_thread\")"});
  if (!o.compare.empty())
    return run_compare(o);
  if (!o.compare_case.empty())
    throw InputError({"--case: applies to --compare only"});
  const int sources = (o.file.empty() ? 0 : 1) + (o.platform.empty() ? 0 : 1) + (o.preset.empty() ? 0 : 1);
  if (sources != 1)
    throw InputError({"FILE: give exactly one of a scenario FILE, --platform FILE or --preset NAME"});
  if (o.nodes != 0 && !o.file.empty())
    throw InputError({"--nodes: applies to --platform and --preset only (use --set platform.node_groups.0.count=N)"});
  Scenario s = o.file.empty() ? platform_scenario(o.preset, o.platform, o.nodes, o.sets) : load_scenario(o.file, o.sets);
  if (s.training.federated.enabled)
    throw InputError({"training.federated: a federated scenario has no platform of GPUs to time a collective on (its "
                      "clients, their links and the server are in training.federated); name a --preset or --platform"});
  auto op    = benchmark_op(o.op);
  if (!op)
    throw InputError({fmt::format("--op: expected all_reduce, all_gather, reduce_scatter or all_to_all, got \"{}\"", o.op)});
  const std::string network = o.network.empty() ? s.simulation.network_fidelity : o.network;
  if (network != "flow" && network != "analytic")
    throw InputError({fmt::format("--network: expected flow or analytic, got \"{}\"", network)});
  const std::string algorithm = o.algorithm.empty() ? s.simulation.collective_algorithm : o.algorithm;
  const auto& chosen          = CollectiveRegistry::get(algorithm, "--algorithm");
  const std::string protocol  = o.protocol.empty() ? s.simulation.nccl_protocol : o.protocol;
  if (!protocol_named(protocol) && protocol != "auto")
    throw InputError({fmt::format("--protocol: expected auto, LL, LL128 or Simple, got \"{}\"", protocol)});
  std::vector<int> members    = benchmark_group(s.platform, o.gpus, o.stride ? 1 : o.per_node);
  const int n                 = static_cast<int>(members.size());
  // nccl-tests runs nProcs x nThreads x nGpus ranks: a thread's GPUs divide the group.
  if (n % o.gpus_per_thread != 0)
    throw InputError({fmt::format("--gpus-per-thread: {} GPUs per thread do not divide the group of {} GPUs (nccl-tests "
                                  "runs processes x threads x GPUs per thread ranks)",
                                  o.gpus_per_thread, n)});
  try { // the node of each member, for algorithms that need it (hierarchical, NVLS)
    // The group as the replay describes it (topologies/collective_groups.hpp describe_groups):
    // a forced nvls is checked against the node's NVSwitch, as auto finds it.
    Workload one;
    one.groups.push_back(Group{"benchmark", members, {}, false, 0, {}});
    describe_groups(one, s.platform, {}, s.simulation.nccl_channels);
    const Group& g         = one.groups.front();
    const GroupShape shape = group_shape(g); // its flags too: NVLS, SHARP
    concrete_algorithm(chosen, *op, shape, 1.0).steps(*op, shape, 1.0);
    // The platform's NCCL_ALGO and NCCL_PROTO (platform.nccl_env) may leave the collective no
    // algorithm or protocol: refused here, as NCCL refuses it, before any size is timed.
    concrete_algorithm(with_protocol_choice(chosen, protocol, "--protocol"), *op, shape, 1.0);
  } catch (const std::invalid_argument& e) {
    throw InputError({fmt::format("--algorithm: {} (group of {} members)", e.what(), n)});
  }
  const std::vector<double> sizes = sizes_of(o);
  const double factor             = bus_bandwidth_factor(*op, n);
  // The cluster's own calibration, for these timings only: the flag's, else the scenario's
  // simulation.network_calibration (models/link_calibration.hpp).
  std::unique_ptr<ScopedLinkEfficiency> calibration;
  if (!o.network_calibration.empty())
    calibration = std::make_unique<ScopedLinkEfficiency>(
        load_network_calibration(o.network_calibration, load_link_efficiency(), "--network-calibration"));
  else
    calibration = network_calibration_scope(s.simulation);

  nlohmann::json doc = {{"op", collective_name(*op)}, {"gpus", n},         {"one_per_node", o.stride || o.per_node == 1},
                        {"algorithm", algorithm},     {"protocol", protocol},
                        {"platform", s.name},         {"network_fidelity", network},
                        {"busbw_factor", factor},     {"rows", nlohmann::json::array()}};
  if (o.gpus_per_thread > 1)
    doc["gpus_per_thread"] = o.gpus_per_thread;
  if (o.per_node > 1)
    doc["per_node"] = o.per_node;
  const bool table = o.json_out != "-";
  const std::string where = o.stride || o.per_node == 1 ? std::string("one per node")
                            : o.per_node > 1            ? fmt::format("the first {} of each node", o.per_node)
                                                        : std::string("the first GPUs");
  if (table) {
    fmt::print("# {} of {} GPUs ({}), algorithm {}, protocol {}, {} network, platform of {}\n", collective_name(*op),
               n, where, algorithm, protocol, network, s.name);
    if (o.gpus_per_thread > 1)
      fmt::print("# {} GPUs per host thread (nccl-tests -g {}): an iteration takes at least {} launches of {:.2f} us\n",
                 o.gpus_per_thread, o.gpus_per_thread, o.gpus_per_thread, link_efficiency().group_launch_per_gpu_s * 1e6);
    fmt::print("# busbw = algbw x {:.4f} ({})\n", factor, *op == CollectiveOp::AllReduce ? "2(n-1)/n" : "(n-1)/n");
    // Said before the first row, which may take minutes.
    if (network == "flow" && algorithm != "ring" && members.size() > kFlowMembers && !closed_form_fabric(s.platform))
      fmt::print("# {} GPUs on a {} fabric: a tree (auto's pick across many nodes) runs flow by flow here, up to "
                 "minutes a size; --network analytic times it in seconds by its closed form, which shares only the "
                 "members' own links\n",
                 members.size(), s.platform.network.topology);
    fmt::print("{:>14} {:>14} {:>14} {:>13} {:>13}  {}\n", "size (B)", "count (fp32)", "time (us)", "algbw (GB/s)",
               "busbw (GB/s)", "algorithm/protocol");
  }
  int closed_forms = 0;
  // Row by row as each size is timed (a table over thousands of GPUs takes seconds).
  auto print_row = [&](size_t i, const CollectiveTime& timed) {
    const double bytes   = sizes[i];
    const double seconds = nccl_tests_iteration_seconds(timed.seconds, o.gpus_per_thread, link_efficiency());
    const bool host_bound = seconds > timed.seconds;
    const double algbw   = bytes / seconds / 1e9;
    if (table)
      fmt::print("{:>14.0f} {:>14.0f} {:>14.2f} {:>13.2f} {:>13.2f}  {}{}{}\n", bytes, std::floor(bytes / 4),
                 seconds * 1e6, algbw, algbw * factor, timed.algorithm, timed.closed_form ? " (closed form)" : "",
                 host_bound ? " (host-bound)" : "");
    std::fflush(stdout);
    doc["rows"].push_back({{"bytes", bytes},          {"count", std::floor(bytes / 4)}, {"time_us", seconds * 1e6},
                           {"algbw_GBps", algbw},     {"busbw_GBps", algbw * factor},   {"picked", timed.algorithm},
                           {"closed_form", timed.closed_form}});
    if (o.gpus_per_thread > 1)
      doc["rows"].back()["host_bound"] = host_bound;
    closed_forms += timed.closed_form ? 1 : 0;
  };
  time_collectives(s.platform, members, *op, sizes, algorithm, network == "analytic", protocol, print_row, o.jobs);
  if (table && closed_forms > 0)
    fmt::print("# (closed form): a collective other than a ring (a tree, NVLS-tree, an all-to-all) over more than {} "
               "GPUs on a fat-tree or rail fabric is timed by its closed form "
               "on the members' own links and the fabric's thinned uplinks, not flow by flow (--network analytic does "
               "so for every size)\n",
               kFlowMembers);
  if (o.json_out == "-")
    fmt::print("{}\n", doc.dump(2));
  else if (!o.json_out.empty())
    write_text_file(o.json_out, doc.dump(2) + "\n");
  return 0;
}

std::function<int()> setup(CLI::App& sub)
{
  auto o = std::make_shared<CollectiveOptions>();
  sub.add_option("FILE", o->file, "scenario JSON file (its platform and collective algorithm are used)");
  sub.add_option("--platform", o->platform, "a platform file {\"platform\": {...}} instead of a scenario");
  sub.add_option("--preset", o->preset, "a platform preset of configs/platforms/ (dgx-a100, dgx-h100, ...)");
  // Ranges, so that 0 is refused rather than read as "not given" (the file's nodes, all GPUs).
  sub.add_option("--nodes", o->nodes, "with --platform or --preset: the number of nodes (default the file's)")
      ->check(CLI::Range(1, 1 << 17));
  sub.add_option("--set", o->sets,
                 "override a field: path=value, e.g. platform.node_groups.0.nic.bandwidth=400Gbps (repeatable; with "
                 "--preset or --platform, platform.* and simulation.* fields)");
  sub.add_option("--op", o->op, "all_reduce (default), all_gather, reduce_scatter or all_to_all");
  sub.add_option("--gpus", o->gpus, "group size: the first N GPUs (default all)")->check(CLI::Range(1, 1 << 24));
  sub.add_option("--gpus-per-thread", o->gpus_per_thread,
                 "GPUs one host thread drives, as nccl-tests -g N (its header's nGpus): an iteration then takes at "
                 "least N launches (default 1: one process per GPU, as under mpirun)")
      ->check(CLI::Range(1, 1024));
  auto* stride = sub.add_flag("--stride", o->stride, "take the first GPU of each node instead (the inter-node network alone)");
  sub.add_option("--per-node", o->per_node,
                 "take the first K GPUs of each node, node after node (nccl-tests run on N nodes x K GPUs)")
      ->check(CLI::Range(1, 1024))
      ->excludes(stride);
  sub.add_option("--algorithm", o->algorithm, "collective algorithm (default simulation.collective_algorithm)");
  sub.add_option("--protocol", o->protocol, "NCCL protocol: auto, LL, LL128 or Simple (default simulation.nccl_protocol)");
  sub.add_option("--network", o->network, "flow or analytic (default simulation.network_fidelity)");
  sub.add_option("--network-calibration", o->network_calibration,
                 "a calibration file of `stepsim calibrate network` (default simulation.network_calibration)");
  auto* sizes = sub.add_option("--sizes", o->sizes, "comma-separated buffer sizes, e.g. 1MB,16MB,256MB");
  sub.add_option("--min", o->min, "smallest size when doubling (default 8B, like nccl-tests -b 8)")->excludes(sizes);
  sub.add_option("--max", o->max, "largest size when doubling (default 8GiB, like nccl-tests -e 8G)")->excludes(sizes);
  sub.add_option("--json", o->json_out, "write the rows as JSON to this file (- = standard output, no table)");
  sub.add_option("--compare", o->compare,
                 "published nccl-tests cases (configs/calibration/nccl_tests_published.json): time each on its preset "
                 "and print the bus bandwidth error per case (>= 64 MiB and 8 KiB-1 MiB)");
  sub.add_option("--case", o->compare_case, "with --compare: only the cases whose name contains this");
  sub.add_option("-j,--jobs", o->jobs, "worker processes: sizes timed at once, each in a process of its own (default 1); the table does not depend on it")
      ->check(CLI::Range(1, 64));
  sub.footer("Examples:\n  stepsim collective configs/scenarios/default.json --gpus 8 --sizes 1MB,16MB,256MB\n"
             "  stepsim collective --preset dgx-a100 --nodes 2 --min 8KB --max 1GiB --json rows.json\n"
             "  stepsim collective --preset dgx1-v100 --set platform.node_groups.0.nic.count=2 --set "
             "platform.node_groups.0.nic.kind=roce\n"
             "  stepsim collective configs/scenarios/default.json --stride --op all_gather --algorithm direct\n"
             "  stepsim collective configs/scenarios/default.json --gpus 8 --algorithm halving_doubling --min 1KB --max 64MB\n"
             "  stepsim collective --compare configs/calibration/nccl_tests_published.json --case aws");
  return [o] { return run(*o); };
}

const bool registered = CommandRegistry::add(
    "collective", "time one collective alone on the scenario's platform, size by size (nccl-tests' table)",
    Command{setup});

} // namespace
} // namespace stepsim

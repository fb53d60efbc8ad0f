// training.federated, key by key. Device names are checked against the catalogue by validate()
// (the check "federated" in sim/federated.cpp), which this layer cannot read.
#include "sim/input/federated_parse.hpp"

#include "sim/core/units.hpp"
#include "sim/input/limits.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

namespace stepsim {
namespace {

// Clients of one scenario. Each is a SimGrid host with its own link and actor, and SimGrid 3.32
// checks each new link's name against every link made before (sim/input/limits.hpp,
// kMaxPlatformGpus); 4,096 is ten times the few hundred devices a production round selects
// (Bonawitz et al. 2019, "Towards Federated Learning at Scale: System Design", arXiv 1902.01046,
// section 2: "a few hundred devices" per round).
constexpr long long kMaxClients = 4096;
// A client's samples: a billion is far above any one device's data set.
constexpr long long kMaxSamples = 1000000000;
// Local work per round: a million SGD updates, or ten thousand epochs.
constexpr long long kMaxLocalSteps  = 1000000;
constexpr long long kMaxLocalEpochs = 10000;
// A round's deadline: a week, far above the minutes production rounds last (Bonawitz et al. 2019,
// figure 8: round completion times of a few minutes). JsonReader::time stops at a minute, which
// is right for latencies but not for rounds.
constexpr double kMaxDeadlineSeconds = 7 * 24 * 3600.0;

const std::vector<std::string> kLinkKinds = {"wired", "cellular", "wifi"};

// A client's link (any kind, required), or a server's (wired: "kind" may be left out).
void read_link(JsonReader r, FederatedLinkSpec& link, bool client)
{
  link.kind = client ? r.text("kind", std::nullopt, kLinkKinds) : r.text("kind", std::string("wired"), {"wired"});
  link.bandwidth_Bps = r.bandwidth("bandwidth");
  link.latency_s     = r.time("latency");
  r.reject_unknown_keys();
}

// A time such as "30s", up to kMaxDeadlineSeconds; 0 when absent. A bare number is refused, as
// every time is (sim/input/json_reader.hpp with_unit).
double read_deadline(JsonReader& r)
{
  const nlohmann::json* v = r.raw("deadline");
  if (v == nullptr)
    return 0;
  std::optional<double> seconds;
  if (v->is_string())
    seconds = units::parse_time(v->get<std::string>());
  if (!seconds || !std::isfinite(*seconds) || *seconds <= 0 || *seconds > kMaxDeadlineSeconds) {
    r.problems().add(r.path_of("deadline"),
                     fmt::format("expected a time above 0 and at most {:.0f} s (a week) with its unit, such as "
                                 "\"30s\" (units: {}), got {}",
                                 kMaxDeadlineSeconds, units::time_units(), v->dump()));
    return 0;
  }
  return *seconds;
}

void read_clients(JsonReader& r, FederatedSpec& f)
{
  std::string wifi_latency_path; // the first Wi-Fi client's latency, which the others must equal
  double wifi_latency = -1;
  long long total     = 0;
  for (auto& c : r.array_of_objects("clients", true)) {
    FederatedClientGroup g;
    g.device  = c.text("device");
    g.name    = c.text("name", g.device);
    g.count   = static_cast<int>(c.integer("count", 1, 1, kMaxClients));
    g.samples = c.integer("samples", std::nullopt, 1, kMaxSamples);
    read_link(c.object("link", true), g.link, true);
    c.reject_unknown_keys();
    if (g.name.empty())
      c.problems().add(c.path_of("name"), "expected a name for the report's rows, got an empty string");
    for (size_t other = 0; other < f.clients.size(); ++other)
      if (f.clients[other].name == g.name)
        c.problems().add(c.has("name") ? c.path_of("name") : c.path_of("device"),
                         fmt::format("the group is named \"{}\", as {}[{}]: each group of clients needs a name of its "
                                     "own (its rows in the report are name-0, name-1, ...; give \"name\")",
                                     g.name, r.path_of("clients"), other));
    // SimGrid's air has no latency of its own: the access point's one wired hop carries it
    // (topologies/fabrics/wifi.cpp), so every station of the access point has the same.
    if (g.link.kind == "wifi" && wifi_latency < 0) {
      wifi_latency      = g.link.latency_s;
      wifi_latency_path = c.path_of("link") + ".latency";
    } else if (g.link.kind == "wifi" && g.link.latency_s != wifi_latency)
      c.problems().add(c.path_of("link") + ".latency",
                       fmt::format("{} s, but {} is {} s: Wi-Fi clients share one access point, whose air has one "
                                   "latency",
                                   g.link.latency_s, wifi_latency_path, wifi_latency));
    total += g.count;
    f.clients.push_back(g);
  }
  if (total > kMaxClients)
    r.problems().add(r.path_of("clients"),
                     fmt::format("{} clients in all, more than the {} stepsim simulates in one round", total, kMaxClients));
}

void read_aggregation(JsonReader r, FederatedSpec& f, int clients)
{
  f.aggregation = r.text("kind", std::string("fedavg"), {"fedavg", "hierarchical"});
  if (f.aggregation == "hierarchical") {
    f.edge_servers = static_cast<int>(r.integer("edge_servers", std::nullopt, 1, kMaxClients));
    f.edge_device  = r.text("device");
    read_link(r.object("link", true), f.edge_link, false);
    if (clients > 0 && f.edge_servers > clients)
      r.problems().add(r.path_of("edge_servers"),
                       fmt::format("{} edge servers for {} clients: each edge server needs at least one client",
                                   f.edge_servers, clients));
  } else
    for (const char* key : {"edge_servers", "device", "link"})
      if (r.has(key)) {
        r.raw(key);
        r.problems().add(r.path_of(key), "describes edge servers, which only \"kind\": \"hierarchical\" has");
      }
  r.reject_unknown_keys();
}

} // namespace

void read_federated(JsonReader& training, TrainingSpec& t)
{
  if (training.has("global_batch_size")) {
    training.raw("global_batch_size");
    training.problems().add(training.path_of("global_batch_size"),
                            "a federated round has no global batch: each client trains on its own samples "
                            "(training.federated.clients[].samples) in local batches of training.micro_batch_size");
  }
  JsonReader r = training.object("federated", true);
  auto& f      = t.federated;
  f.enabled    = true;
  read_clients(r, f);
  const bool epochs = r.has("local_epochs"), steps = r.has("local_steps");
  if (epochs == steps)
    r.problems().add(r.path(), "expected either \"local_epochs\" (E: passes over each client's samples) or "
                               "\"local_steps\" (SGD updates per round), not both or neither");
  if (epochs)
    f.local_epochs = static_cast<int>(r.integer("local_epochs", std::nullopt, 1, kMaxLocalEpochs));
  if (steps)
    f.local_steps = r.integer("local_steps", std::nullopt, 1, kMaxLocalSteps);
  f.participation = r.number("participation", 1.0, 0, true);
  if (f.participation > 1)
    r.problems().add(r.path_of("participation"),
                     fmt::format("expected the fraction of clients in a round, above 0 and at most 1, got {}",
                                 f.participation));
  f.seed = static_cast<unsigned>(r.integer("seed", 1, 0, std::numeric_limits<int>::max()));
  read_aggregation(r.object("aggregation"), f, f.total_clients());
  f.compression = r.number("compression", 1.0, 0, true);
  if (f.compression > 1)
    r.problems().add(r.path_of("compression"),
                     fmt::format("expected the fraction of the update's bytes sent, above 0 and at most 1, got {}",
                                 f.compression));
  f.deadline_s = read_deadline(r);
  JsonReader server = r.object("server", true);
  f.server_device   = server.text("device");
  read_link(server.object("link", true), f.server_link, false);
  server.reject_unknown_keys();
  r.reject_unknown_keys();
}

void check_federated_scenario(JsonReader& top, Scenario& s)
{
  Problems& problems = top.problems();
  if (top.has("platform")) {
    top.raw("platform");
    problems.add("platform", "a federated scenario has no platform: its clients, their links and the server are "
                             "described in training.federated");
  }
  const auto& p = s.parallelism;
  const std::pair<const char*, int> degrees[] = {{"tensor", p.tensor},     {"pipeline", p.pipeline},
                                                 {"data", p.data},         {"context", p.context},
                                                 {"expert", p.expert},     {"virtual_stages", p.virtual_stages}};
  for (const auto& [key, degree] : degrees)
    if (degree != 1)
      problems.add(fmt::format("parallelism.{}", key),
                   fmt::format("{}, but in a federated round each client trains alone on its one device: expected 1",
                               degree));
  // A round's clients train alone and talk to the server over their own links: no collective
  // runs, so neither a collective algorithm nor NCCL's protocol nor ZeRO's sharding has anything
  // to act on (and the checks that ask them about the plan's groups have no platform to ask).
  if (s.simulation.collective_algorithm != "auto" || !s.simulation.collective_algorithm_per_op.empty())
    problems.add("simulation.collective_algorithm",
                 "a federated round runs no collectives (its clients send their updates to the server over their own "
                 "links): leave it out");
  if (s.simulation.nccl_protocol != "auto")
    problems.add("simulation.nccl_protocol", "a federated round runs no collectives: leave it out");
  if (p.zero_stage != 0)
    problems.add("parallelism.zero_stage",
                 fmt::format("{}, but in a federated round each client keeps its whole model and optimizer: expected 0",
                             p.zero_stage));
  if (s.training.input.enabled)
    problems.add("training.input", "is not simulated in a federated round (training.federated)");
  if (s.training.checkpoint.every_steps > 0)
    problems.add("training.checkpoint", "is not simulated in a federated round (training.federated)");
  // One local step is one batch of one client: the one-device job its compute is costed from.
  s.training.global_batch_size = s.training.micro_batch_size;
}

} // namespace stepsim

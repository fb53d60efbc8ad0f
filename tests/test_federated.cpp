// Federated rounds (training.federated): the round time against its closed forms on star
// platforms (own links; one Wi-Fi access point whose air is shared; edge servers), the clients a
// deadline drops, FedAvg's choice of participants, and the refusals of bad input. Every run goes
// through the stepsim binary, as a user runs it. The closed forms are computed here from the
// scenario's figures; what they take from stepsim itself is only the local step of one device
// (a one-GPU job of the same model, run on its own) and the device files.
#include "support.hpp"

#include "models/device.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

using namespace stepsim;

namespace {

// A small GPT (the shared test model) trained by clients in batches of 4.
nlohmann::json base_model() { return testing::small_scenario(1, 1, 1).at("model"); }
constexpr int kBatch = 4;

nlohmann::json link(const std::string& kind, const std::string& bandwidth, const std::string& latency)
{
  return {{"kind", kind}, {"bandwidth", bandwidth}, {"latency", latency}};
}

nlohmann::json client(const std::string& name, const std::string& device, int count, int samples, nlohmann::json l)
{
  return {{"name", name}, {"device", device}, {"count", count}, {"samples", samples}, {"link", std::move(l)}};
}

// A federated scenario of `clients`, FedAvg, one local epoch, a fast server link.
nlohmann::json federated(nlohmann::json clients)
{
  return {{"name", "federated-test"},
          {"model", base_model()},
          {"training",
           {{"micro_batch_size", kBatch},
            {"precision", "bf16"},
            {"federated",
             {{"clients", std::move(clients)},
              {"local_epochs", 1},
              {"server", {{"device", "A100-PCIe-80GB"}, {"link", link("wired", "400Gbps", "10us")}}}}}}}};
}

nlohmann::json run(const nlohmann::json& doc, const std::string& tag)
{
  const std::string file = testing::write_temp_file("federated-" + tag + ".json", doc.dump(2));
  const std::string out  = testing::write_temp_file("federated-" + tag + "-report.json", "");
  const auto result      = testing::run_stepsim("run " + file + " --quiet --json " + out);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  return nlohmann::json::parse(testing::read_text_file(out));
}

// The step of one `device` alone with the same model and batch: the local step the clients'
// compute is made of, and the weights that travel.
struct LocalStep {
  double step_s = 0, weight_bytes = 0;
};
LocalStep local_step(const std::string& device)
{
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["training"]["global_batch_size"] = kBatch;
  doc["training"]["micro_batch_size"]  = kBatch;
  doc["platform"]["node_groups"][0]["gpu"] = device;
  const auto r = run(doc, "one-" + device);
  return {r.at("step_time_s").get<double>(), r.at("memory").at("weights_bytes").get<double>()};
}

// FedAvg's average of k updates on `device`: one bandwidth-bound pass reading k updates and
// writing the model ((k + 1) · model bytes), at the device's achieved memory bandwidth, plus a
// kernel's launch (configs/devices/, calibration).
double aggregation_s(const std::string& device, int k, double model_bytes)
{
  const Device d = load_device(device, "test");
  return (k + 1) * model_bytes / (d.memory_bandwidth_Bps * d.calibration.memory_efficiency) +
         d.calibration.kernel_overhead_s;
}

double Bps(double megabits) { return megabits * 1e6 / 8; }

const nlohmann::json& row(const nlohmann::json& report, const std::string& name)
{
  for (const auto& r : report.at("federated").at("client_rows"))
    if (r.at("name") == name)
      return r;
  FAIL("no client row " << name);
  return report;
}

} // namespace

TEST_CASE("star with links of their own: the round is the slowest client's download, compute and upload, "
          "then the average",
          "[federated]")
{
  // Clients of two devices, each on its own wired or cellular link of its own rate and latency.
  struct Client {
    std::string name, device, kind;
    double megabits, latency_s;
    int samples;
  };
  const std::vector<Client> clients = {{"orin-wired", "Jetson-AGX-Orin", "wired", 100, 1e-3, 32},
                                       {"orin-lte", "Jetson-AGX-Orin", "cellular", 20, 40e-3, 16},
                                       {"rtx-wired", "RTX-4090", "wired", 1000, 0.2e-3, 64},
                                       {"rtx-lte", "RTX-4090", "cellular", 50, 30e-3, 128}};
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : clients)
    list.push_back(client(c.name, c.device, 1, c.samples,
                          link(c.kind, fmt::format("{}Mbps", c.megabits), fmt::format("{}ms", c.latency_s * 1e3))));
  nlohmann::json doc                                     = federated(list);
  doc["training"]["federated"]["compression"]            = 0.25;
  const auto report                                      = run(doc, "star");
  const std::map<std::string, LocalStep> step            = {{"Jetson-AGX-Orin", local_step("Jetson-AGX-Orin")},
                                                            {"RTX-4090", local_step("RTX-4090")}};
  const double model  = step.at("Jetson-AGX-Orin").weight_bytes;
  const double update = 0.25 * model;
  const double server_Bps = Bps(400e3), server_s = 10e-6;
  double slowest          = 0;
  for (const auto& c : clients) {
    INFO(c.name);
    // A transfer over the server's link and the client's: both latencies, the narrower bandwidth.
    const double path_Bps = std::min(Bps(c.megabits), server_Bps);
    const double down     = c.latency_s + server_s + model / path_Bps;
    const double up       = c.latency_s + server_s + update / path_Bps;
    const double compute  = std::ceil(double(c.samples) / kBatch) * step.at(c.device).step_s;
    const auto& r         = row(report, c.name + "-0");
    CHECK(r.at("compute_s").get<double>() == Approx(compute).epsilon(1e-6));
    CHECK(r.at("download_s").get<double>() == Approx(down).epsilon(0.02));
    CHECK(r.at("upload_s").get<double>() == Approx(up).epsilon(0.02));
    CHECK_FALSE(r.at("dropped").get<bool>());
    slowest = std::max(slowest, down + compute + up);
  }
  const auto& f       = report.at("federated");
  const double expect = slowest + aggregation_s("A100-PCIe-80GB", 4, model);
  CAPTURE(slowest, expect);
  CHECK(f.at("round_time_s").get<double>() == Approx(expect).epsilon(0.02));
  CHECK(report.at("step_time_s").get<double>() == f.at("round_time_s").get<double>());
  CHECK(f.at("aggregation_s").get<double>() == Approx(aggregation_s("A100-PCIe-80GB", 4, model)).epsilon(0.01));
  CHECK(f.at("bytes_down").get<double>() == Approx(4 * model));
  CHECK(f.at("bytes_up").get<double>() == Approx(4 * update));
  CHECK(f.at("dropped") == 0);
  // Idle: the round less the client's own work; the slowest client idles only through the average.
  double least_idle = 1e300;
  for (const auto& r : f.at("client_rows")) {
    const double busy = r.at("download_s").get<double>() + r.at("compute_s").get<double>() + r.at("upload_s").get<double>();
    CHECK(r.at("idle_s").get<double>() == Approx(f.at("round_time_s").get<double>() - busy).margin(1e-6));
    least_idle = std::min(least_idle, r.at("idle_s").get<double>());
  }
  CHECK(least_idle == Approx(f.at("aggregation_s").get<double>()).epsilon(0.02));
}

TEST_CASE("clients on one Wi-Fi access point share its air: n transfers at once each move 1 / sum(1/r) bytes "
          "per second",
          "[federated]")
{
  const double latency_s = 2e-3, server_s = 10e-6;
  const LocalStep step   = local_step("Jetson-AGX-Orin");
  const double model     = step.weight_bytes;
  const double compute   = std::ceil(32.0 / kBatch) * step.step_s;
  SECTION("four stations at one rate")
  {
    const auto report = run(federated({client("orin", "Jetson-AGX-Orin", 4, 32, link("wifi", "400Mbps", "2ms"))}), "wifi");
    // All four download at once, compute alike, upload at once: each phase takes four times one
    // transfer alone.
    const double transfer = 4 * model / Bps(400) + latency_s + server_s;
    const double expect   = 2 * transfer + compute + aggregation_s("A100-PCIe-80GB", 4, model);
    CHECK(report.at("federated").at("round_time_s").get<double>() == Approx(expect).epsilon(0.02));
    CHECK(row(report, "orin-2").at("download_s").get<double>() == Approx(transfer).epsilon(0.02));
    // The same clients each on a wired link of the station's rate: four times less transfer time.
    const auto wired = run(federated({client("orin", "Jetson-AGX-Orin", 4, 32, link("wired", "400Mbps", "2ms"))}), "wired");
    const double alone = model / Bps(400) + latency_s + server_s;
    CHECK(row(wired, "orin-2").at("download_s").get<double>() == Approx(alone).epsilon(0.02));
    CHECK(wired.at("federated").at("round_time_s").get<double>() <
          report.at("federated").at("round_time_s").get<double>() - 4 * model / Bps(400));
  }
  SECTION("a slow station slows the fast ones (the 802.11 performance anomaly)")
  {
    const auto report = run(federated({client("near", "Jetson-AGX-Orin", 3, 32, link("wifi", "400Mbps", "2ms")),
                                       client("far", "Jetson-AGX-Orin", 1, 32, link("wifi", "54Mbps", "2ms"))}),
                            "wifi-anomaly");
    // Each of the four transfers moves x = 1 / (3/r_near + 1/r_far) bytes per second; alike
    // sizes end together.
    const double per_byte = 3 / Bps(400) + 1 / Bps(54);
    const double transfer = model * per_byte + latency_s + server_s;
    const double expect   = 2 * transfer + compute + aggregation_s("A100-PCIe-80GB", 4, model);
    CHECK(report.at("federated").at("round_time_s").get<double>() == Approx(expect).epsilon(0.02));
    CHECK(row(report, "near-0").at("download_s").get<double>() == Approx(transfer).epsilon(0.02));
  }
}

TEST_CASE("a deadline drops exactly the clients whose closed-form finish is beyond it", "[federated]")
{
  // Eight Jetsons on links from 10 to 160 Mb/s: finishes spread from fast to slow.
  const LocalStep step = local_step("Jetson-AGX-Orin");
  const double model = step.weight_bytes, compute = std::ceil(32.0 / kBatch) * step.step_s;
  nlohmann::json list = nlohmann::json::array();
  std::vector<double> finish;
  for (int i = 0; i < 8; ++i) {
    const double megabits = 10.0 * (1 << (i % 5)) + 3 * i; // distinct rates
    list.push_back(client(fmt::format("c{}", i), "Jetson-AGX-Orin", 1, 32,
                          link("wired", fmt::format("{}Mbps", megabits), "5ms")));
    const double path = 5e-3 + 10e-6;
    finish.push_back(2 * path + 1.5 * model / Bps(megabits) + compute); // compression 0.5: up is half
  }
  std::vector<double> sorted = finish;
  std::sort(sorted.begin(), sorted.end());
  // Between the third and fourth slowest: three dropped.
  const double deadline = (sorted[4] + sorted[5]) / 2;
  REQUIRE(sorted[5] - sorted[4] > 0.05 * sorted[4]); // far from the edge of the 2 % tolerance
  nlohmann::json doc                                  = federated(list);
  doc["training"]["federated"]["compression"]         = 0.5;
  doc["training"]["federated"]["deadline"]            = fmt::format("{}s", deadline);
  const auto report                                   = run(doc, "deadline");
  const auto& f                                       = report.at("federated");
  int expected_drops                                  = 0;
  for (int i = 0; i < 8; ++i) {
    INFO("client " << i << " closed-form finish " << finish[i] << " s, deadline " << deadline << " s");
    const bool late = finish[static_cast<size_t>(i)] > deadline;
    expected_drops += late ? 1 : 0;
    const auto& r = row(report, fmt::format("c{}-0", i));
    CHECK(r.at("dropped").get<bool>() == late);
    if (late)
      CHECK(r.at("finish_s").get<double>() == Approx(deadline));
    else
      CHECK(r.at("finish_s").get<double>() == Approx(finish[static_cast<size_t>(i)]).epsilon(0.02));
  }
  CHECK(expected_drops == 3);
  CHECK(f.at("dropped") == expected_drops);
  // The server waited until the deadline for the late ones, then averaged the five it kept.
  CHECK(f.at("round_time_s").get<double>() ==
        Approx(deadline + aggregation_s("A100-PCIe-80GB", 8 - expected_drops, model)).epsilon(1e-6));
  // Dropped uploads moved part of their bytes; the kept ones all of them.
  CHECK(f.at("bytes_up").get<double>() > 5 * 0.5 * model);
  CHECK(f.at("bytes_up").get<double>() < 8 * 0.5 * model);

  // A deadline beyond every finish drops none, and the round does not wait for it.
  doc["training"]["federated"]["deadline"] = fmt::format("{}s", sorted.back() * 2);
  const auto all                           = run(doc, "deadline-late");
  CHECK(all.at("federated").at("dropped") == 0);
  CHECK(all.at("federated").at("round_time_s").get<double>() ==
        Approx(sorted.back() + aggregation_s("A100-PCIe-80GB", 8, model)).epsilon(0.02));
}

TEST_CASE("participation picks ceil(C·K) clients, the same ones for the same seed", "[federated]")
{
  const auto selected = [](const nlohmann::json& report) {
    std::set<std::string> names;
    for (const auto& r : report.at("federated").at("client_rows"))
      if (r.at("selected").get<bool>())
        names.insert(r.at("name").get<std::string>());
    return names;
  };
  nlohmann::json doc = federated({client("c", "Jetson-AGX-Orin", 10, 8, link("wired", "100Mbps", "1ms"))});
  for (const auto& [fraction, expected] : std::vector<std::pair<double, size_t>>{{0.3, 3}, {0.25, 3}, {0.05, 1}, {1.0, 10}}) {
    INFO("participation " << fraction);
    doc["training"]["federated"]["participation"] = fraction;
    const auto report                             = run(doc, "participation");
    CHECK(selected(report).size() == expected);
    CHECK(report.at("federated").at("selected") == expected);
    for (const auto& r : report.at("federated").at("client_rows"))
      if (!r.at("selected").get<bool>()) { // idle through the whole round
        CHECK(r.at("idle_s").get<double>() == Approx(report.at("federated").at("round_time_s").get<double>()));
        CHECK(r.at("local_steps").get<double>() == 0);
      }
  }
  doc["training"]["federated"]["participation"] = 0.3;
  doc["training"]["federated"]["seed"]          = 7;
  const auto first                              = selected(run(doc, "seed-a"));
  CHECK(selected(run(doc, "seed-b")) == first); // deterministic
  bool another = false;                         // and the seed matters: 120 possible choices of 3 of 10
  for (int seed : {1, 2, 3})
    if (!another) {
      doc["training"]["federated"]["seed"] = seed;
      another                              = selected(run(doc, "seed-c")) != first;
    }
  CHECK(another);
}

TEST_CASE("hierarchical: clients report to edge servers, which average and report to the server", "[federated]")
{
  const LocalStep step = local_step("Jetson-AGX-Orin");
  const double model = step.weight_bytes, compute = std::ceil(32.0 / kBatch) * step.step_s;
  // Four wired clients dealt round-robin over two edge servers: c0, c2 -> edge 0; c1, c3 -> edge 1.
  const std::vector<double> megabits = {100, 50, 20, 200};
  nlohmann::json list                = nlohmann::json::array();
  for (size_t i = 0; i < megabits.size(); ++i)
    list.push_back(client(fmt::format("c{}", i), "Jetson-AGX-Orin", 1, 32,
                          link("wired", fmt::format("{}Mbps", megabits[i]), "1ms")));
  nlohmann::json doc = federated(list);
  doc["training"]["federated"]["aggregation"] = {
      {"kind", "hierarchical"}, {"edge_servers", 2}, {"device", "Jetson-AGX-Orin"}, {"link", {{"bandwidth", "1Gbps"}, {"latency", "10ms"}}}};
  const auto report = run(doc, "hierarchical");
  // Server to edge and back: the server's link and the edge's; edge to client: the client's link.
  const double backhaul = 10e-3 + 10e-6 + model / Bps(1000);
  double slowest_edge   = 0;
  for (int e = 0; e < 2; ++e) {
    double last = 0;
    for (size_t i = static_cast<size_t>(e); i < megabits.size(); i += 2) {
      const double own = 1e-3 + model / Bps(megabits[i]);
      last             = std::max(last, own + compute + 1e-3 + model / Bps(megabits[i]));
      CHECK(row(report, fmt::format("c{}-0", i)).at("edge_server") == e);
    }
    slowest_edge = std::max(slowest_edge, backhaul + last + aggregation_s("Jetson-AGX-Orin", 2, model) + backhaul);
  }
  const double expect = slowest_edge + aggregation_s("A100-PCIe-80GB", 2, model);
  CHECK(report.at("federated").at("round_time_s").get<double>() == Approx(expect).epsilon(0.02));
  CHECK(report.at("federated").at("aggregation") == "hierarchical");
  // The model went to 2 edges and 4 clients; 4 updates and 2 edge averages came up.
  CHECK(report.at("federated").at("bytes_down").get<double>() == Approx(6 * model));
  CHECK(report.at("federated").at("bytes_up").get<double>() == Approx(6 * model));
}

TEST_CASE("the example scenario runs and its table names the round", "[federated]")
{
  const std::string file = std::string(STEPSIM_SOURCE_DIR) + "/configs/scenarios/federated-jetson-wifi.json";
  const auto result      = testing::run_stepsim("run " + file);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK(result.output.find("federated round (fedavg)") != std::string::npos);
  CHECK(result.output.find("round time") != std::string::npos);
  CHECK(result.output.find("clients dropped") != std::string::npos);
  // `stepsim validate` checks each client device's local step against its memory (it has no
  // platform of its own; validate once crashed on it).
  const auto valid = testing::run_stepsim("validate " + file);
  CHECK(valid.exit_code == 0);
  CHECK(valid.output.find(": valid") != std::string::npos);
  const auto too_big = testing::run_stepsim("validate " + file + " --set training.micro_batch_size=4096");
  CHECK(too_big.exit_code == 2);
  CHECK(too_big.output.find("error: training.federated.clients[0].device: one local step of a Jetson-AGX-Orin") !=
        std::string::npos);
  // Commands about a step's ranks or a platform say why there is none.
  for (const std::string& command :
       {"graph " + file + " --dot -", "collective " + file + " --sizes 1MB", "platform " + file + " --json - -q"}) {
    const auto refused = testing::run_stepsim(command);
    INFO(command << ": " << refused.output);
    CHECK(refused.exit_code == 2);
    CHECK(refused.output.find("error: training.federated: ") != std::string::npos);
  }
}

TEST_CASE("every key of training.federated refuses bad input, naming its path", "[federated][bad_input]")
{
  const nlohmann::json good = federated({client("c", "Jetson-AGX-Orin", 2, 8, link("wifi", "100Mbps", "1ms"))});
  struct Case {
    std::string what;
    std::function<void(nlohmann::json&)> change;
    std::string expected;
  };
  const auto fed = [](nlohmann::json& d) -> nlohmann::json& { return d["training"]["federated"]; };
  const std::vector<Case> cases = {
      {"unknown key", [&](auto& d) { fed(d)["local_epoch"] = 1; }, "training.federated.local_epoch: unknown"},
      {"no clients", [&](auto& d) { fed(d)["clients"] = nlohmann::json::array(); }, "training.federated.clients: expected a non-empty array"},
      {"clients missing", [&](auto& d) { fed(d).erase("clients"); }, "training.federated.clients"},
      {"count 0", [&](auto& d) { fed(d)["clients"][0]["count"] = 0; }, "training.federated.clients[0].count"},
      {"count huge", [&](auto& d) { fed(d)["clients"][0]["count"] = 100000; }, "training.federated.clients[0].count"},
      {"samples missing", [&](auto& d) { fed(d)["clients"][0].erase("samples"); }, "training.federated.clients[0].samples"},
      {"samples negative", [&](auto& d) { fed(d)["clients"][0]["samples"] = -5; }, "training.federated.clients[0].samples"},
      {"unknown device", [&](auto& d) { fed(d)["clients"][0]["device"] = "Jetson-AGX-Orinn"; }, "training.federated.clients[0].device"},
      {"device without the precision", [&](auto& d) { d["training"]["precision"] = "fp8"; },
       "training.precision: Jetson-AGX-Orin (training.federated.clients[0].device) does not run"},
      {"client key", [&](auto& d) { fed(d)["clients"][0]["bandwith"] = 1; }, "training.federated.clients[0].bandwith: unknown"},
      {"two groups named alike",
       [&](auto& d) { fed(d)["clients"].push_back({{"device", "Jetson-AGX-Orin"}, {"samples", 8}, {"link", link("wired", "1Gbps", "1ms")}});
                      fed(d)["clients"].push_back({{"device", "Jetson-AGX-Orin"}, {"samples", 8}, {"link", link("wired", "1Gbps", "1ms")}}); },
       "training.federated.clients[2].device: the group is named \"Jetson-AGX-Orin\", as training.federated.clients[1]"},
      {"empty name", [&](auto& d) { fed(d)["clients"][0]["name"] = ""; }, "training.federated.clients[0].name"},
      {"link missing", [&](auto& d) { fed(d)["clients"][0].erase("link"); }, "training.federated.clients[0].link"},
      {"link kind", [&](auto& d) { fed(d)["clients"][0]["link"]["kind"] = "5g"; }, "training.federated.clients[0].link.kind"},
      {"link bandwidth unit", [&](auto& d) { fed(d)["clients"][0]["link"]["bandwidth"] = "100Mbits"; }, "training.federated.clients[0].link.bandwidth"},
      {"link bandwidth tiny", [&](auto& d) { fed(d)["clients"][0]["link"]["bandwidth"] = "1bps"; }, "training.federated.clients[0].link.bandwidth"},
      {"link latency missing", [&](auto& d) { fed(d)["clients"][0]["link"].erase("latency"); }, "training.federated.clients[0].link.latency"},
      {"link key", [&](auto& d) { fed(d)["clients"][0]["link"]["jitter"] = "1ms"; }, "training.federated.clients[0].link.jitter: unknown"},
      {"Wi-Fi latencies differ",
       [&](auto& d) { fed(d)["clients"].push_back(client("d", "Jetson-AGX-Orin", 1, 8, link("wifi", "100Mbps", "3ms"))); },
       "training.federated.clients[1].link.latency"},
      {"epochs and steps", [&](auto& d) { fed(d)["local_steps"] = 3; }, "training.federated: expected either"},
      {"neither epochs nor steps", [&](auto& d) { fed(d).erase("local_epochs"); }, "training.federated: expected either"},
      {"epochs 0", [&](auto& d) { fed(d)["local_epochs"] = 0; }, "training.federated.local_epochs"},
      {"steps text", [&](auto& d) { fed(d).erase("local_epochs"); fed(d)["local_steps"] = "ten"; }, "training.federated.local_steps"},
      {"participation 0", [&](auto& d) { fed(d)["participation"] = 0; }, "training.federated.participation"},
      {"participation above 1", [&](auto& d) { fed(d)["participation"] = 1.5; }, "training.federated.participation"},
      {"seed negative", [&](auto& d) { fed(d)["seed"] = -1; }, "training.federated.seed"},
      {"aggregation kind", [&](auto& d) { fed(d)["aggregation"] = {{"kind", "fedprox"}}; }, "training.federated.aggregation.kind"},
      {"edge servers under fedavg", [&](auto& d) { fed(d)["aggregation"] = {{"edge_servers", 2}}; }, "training.federated.aggregation.edge_servers"},
      {"hierarchical without edges",
       [&](auto& d) { fed(d)["aggregation"] = {{"kind", "hierarchical"}, {"device", "A100-PCIe-80GB"}, {"link", link("wired", "1Gbps", "1ms")}}; },
       "training.federated.aggregation.edge_servers"},
      {"more edges than clients",
       [&](auto& d) { fed(d)["aggregation"] = {{"kind", "hierarchical"}, {"edge_servers", 3}, {"device", "A100-PCIe-80GB"}, {"link", {{"bandwidth", "1Gbps"}, {"latency", "1ms"}}}}; },
       "training.federated.aggregation.edge_servers"},
      {"edge link not wired",
       [&](auto& d) { fed(d)["aggregation"] = {{"kind", "hierarchical"}, {"edge_servers", 1}, {"device", "A100-PCIe-80GB"}, {"link", link("wifi", "1Gbps", "1ms")}}; },
       "training.federated.aggregation.link.kind"},
      {"server link not wired", [&](auto& d) { fed(d)["server"]["link"]["kind"] = "cellular"; }, "training.federated.server.link.kind"},
      {"edge device unknown",
       [&](auto& d) { fed(d)["aggregation"] = {{"kind", "hierarchical"}, {"edge_servers", 1}, {"device", "Xeon"}, {"link", {{"bandwidth", "1Gbps"}, {"latency", "1ms"}}}}; },
       "training.federated.aggregation.device"},
      {"compression 0", [&](auto& d) { fed(d)["compression"] = 0; }, "training.federated.compression"},
      {"compression above 1", [&](auto& d) { fed(d)["compression"] = 2; }, "training.federated.compression"},
      {"deadline unit", [&](auto& d) { fed(d)["deadline"] = "30 parsecs"; }, "training.federated.deadline"},
      {"deadline 0", [&](auto& d) { fed(d)["deadline"] = "0s"; }, "training.federated.deadline"},
      {"deadline without a unit", [&](auto& d) { fed(d)["deadline"] = 30; }, "training.federated.deadline"},
      {"deadline beyond a week", [&](auto& d) { fed(d)["deadline"] = "1000000s"; }, "training.federated.deadline"},
      {"server missing", [&](auto& d) { fed(d).erase("server"); }, "training.federated.server"},
      {"server device unknown", [&](auto& d) { fed(d)["server"]["device"] = "A100"; }, "training.federated.server.device"},
      {"server link bandwidth", [&](auto& d) { fed(d)["server"]["link"]["bandwidth"] = -1; }, "training.federated.server.link.bandwidth"},
      {"a global batch", [&](auto& d) { d["training"]["global_batch_size"] = 8; }, "training.global_batch_size: a federated round has no global batch"},
      {"a platform", [&](auto& d) { d["platform"] = {{"preset", "jetson-wifi-edge"}}; }, "platform: a federated scenario has no platform"},
      {"parallelism", [&](auto& d) { d["parallelism"] = {{"data", 2}}; }, "parallelism.data: 2, but in a federated round"},
      {"not an object", [&](auto& d) { d["training"]["federated"] = true; }, "training.federated"},
      {"batch does not fit", [&](auto& d) { d["training"]["micro_batch_size"] = 4096; }, "training.federated.clients[0].device: one local step"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    nlohmann::json doc = good;
    c.change(doc);
    const std::string file = testing::write_temp_file("federated-bad.json", doc.dump(2));
    const auto result      = testing::run_stepsim("run " + file + " --quiet");
    INFO(result.output);
    CHECK(result.exit_code == 2);
    CHECK(result.output.find("error: " + c.expected) != std::string::npos);
  }
}

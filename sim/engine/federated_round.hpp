// The replay of one federated round on SimGrid: the server sends the model to the selected
// clients, each trains for its local compute time and sends its update back, and the server
// averages what arrived by the deadline. The platform is built here from the links of
// training.federated (not from platform.*):
//
//   FedAvg                                  hierarchical
//
//   server ─ server link ─┬─ client link ─ client       server ─ server link ─┬─ edge link ─ edge server 0 ─┬─ client
//                         ├─ client link ─ client                             │                             └─ (its AP) ─ air ─ client
//                         └─ AP ─ air ─┬─ client                              └─ edge link ─ edge server 1 ─ ...
//                                      └─ client
//
// Wired and cellular clients have a link of their own; the Wi-Fi clients of the server (or of one
// edge server) are the stations of one SimGrid WIFI zone and share its air (as
// topologies/fabrics/wifi.cpp builds it). Plain data in, plain data out; one SimGrid engine per
// call, so one call per process (sim/simulate.hpp, run_in_child).
#pragma once

#include "sim/core/federated.hpp"

#include <string>
#include <vector>

namespace stepsim {

struct RoundClient {
  std::string name;
  FederatedLinkSpec link;
  int edge_server  = -1; // hierarchical: the edge server it reports to
  bool selected    = false;
  double compute_s = 0;  // its local training, all steps
};

struct RoundPlan {
  std::vector<RoundClient> clients;
  FederatedLinkSpec server_link;
  int edge_servers = 0; // 0: FedAvg at the server
  FederatedLinkSpec edge_link;
  double model_bytes  = 0; // down to each client (and each edge server)
  double update_bytes = 0; // up from each client; an edge server sends model_bytes (its average)
  double deadline_s   = 0; // 0: none
  // The time to average k updates, index k (0..the most that can arrive), at the server and at
  // an edge server.
  std::vector<double> server_aggregation_s, edge_aggregation_s;
};

struct RoundClientResult {
  double download_s = 0, compute_s = 0, upload_s = 0;
  double finish_s   = 0; // when its update arrived, or when it was dropped
  bool dropped      = false;
};

struct RoundResult {
  std::vector<RoundClientResult> clients; // as plan.clients; zeros for those not selected
  double round_time_s  = 0;
  double aggregation_s = 0; // the server's, at the end
  double bytes_down = 0, bytes_up = 0;
};

// Builds the platform and runs the round (see the top of this file). The deadline, when set,
// works as the reporting phase of Bonawitz et al. 2019 ("Towards Federated Learning at Scale",
// arXiv 1902.01046, section 2.1): the server (or edge server) waits for updates until the
// deadline, counted from the round's start, and drops those that have not arrived by then; the
// transfers still running are cancelled. When every selected client reported earlier it does not
// wait for the deadline. (FedCS, Nishio & Yonetani 2019, arXiv 1804.08333, instead predicts at
// selection who would be late and does not select them; here every selected client starts.)
RoundResult replay_round(const RoundPlan& plan);

// FedAvg's m = max(ceil(C·K), 1) clients of `clients`, chosen uniformly without replacement by a
// generator seeded with `seed`: the same choice on every machine. true for the chosen.
std::vector<bool> choose_participants(int clients, double fraction, unsigned seed);

} // namespace stepsim

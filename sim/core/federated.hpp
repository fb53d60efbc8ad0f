// training.federated: one round of federated learning on edge devices instead of one step of a
// data-centre job. Plain data in SI units, read and checked by read_federated
// (sim/input/federated_parse.hpp); simulated by simulate_federated (sim/federated.cpp).
//
// FedAvg (McMahan et al. 2017, "Communication-Efficient Learning of Deep Networks from
// Decentralized Data", arXiv 1602.05629, Algorithm 1): each round the server picks a fraction C
// of the K clients (m = max(ceil(C·K), 1)), sends them the model, each runs E local epochs of
// SGD in batches of B on its own n_k samples (u_k = E·n_k/B updates) and sends its weights back;
// the server averages them weighted by n_k. Here C is `participation`, E `local_epochs` (or the
// updates directly, `local_steps`), B training.micro_batch_size.
#pragma once

#include <string>
#include <vector>

namespace stepsim {

// A client's (or a server's) network link. Wired and cellular links are the client's own;
// Wi-Fi clients share the air of one access point (SimGrid's WIFI zone: sim/engine/federated_round.cpp).
struct FederatedLinkSpec {
  std::string kind;           // wired | cellular | wifi (servers' links: wired)
  double bandwidth_Bps = 0;   // per direction; for Wi-Fi the station's rate measured alone (iperf)
  double latency_s     = 0;   // one way
};

// `count` alike clients: the same device, data and link.
struct FederatedClientGroup {
  std::string name;       // the rows of the report are name-0, name-1, ...; default the device
  std::string device;     // configs/devices/NAME.json
  int count         = 1;
  long long samples = 0;  // n_k, the client's own training samples
  FederatedLinkSpec link;
};

struct FederatedSpec {
  bool enabled = false; // training.federated is present
  std::vector<FederatedClientGroup> clients;
  int local_epochs      = 0; // E; 0 when local_steps is given
  long long local_steps = 0; // u_k given directly; 0 when local_epochs is given
  double participation  = 1; // C in (0, 1]
  unsigned seed         = 1; // the choice of participants
  // "fedavg": every client reports to the server; "hierarchical": to one of `edge_servers` edge
  // servers (clients dealt round-robin in list order), which average their clients' updates and
  // send one update each to the server (HierFAVG: Liu et al. 2020, "Client-Edge-Cloud
  // Hierarchical Federated Learning", arXiv 1905.06641).
  std::string aggregation = "fedavg";
  int edge_servers = 0;
  std::string edge_device;
  FederatedLinkSpec edge_link; // each edge server's own wired link to the server
  // Fraction of the update's bytes a client sends up (quantisation or sparsification); the
  // download is the whole model.
  double compression = 1;
  // Updates that have not arrived this long after the round starts are dropped; 0 = no deadline.
  double deadline_s = 0;
  std::string server_device;
  FederatedLinkSpec server_link; // the server's wired link, shared by everything it sends and receives

  int total_clients() const
  {
    int n = 0;
    for (const auto& g : clients)
      n += g.count;
    return n;
  }
};

} // namespace stepsim

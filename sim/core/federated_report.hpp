// The report of one federated round (training.federated): Report::federated, present only for
// such a scenario, so that the reports of other scenarios keep their keys.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace stepsim {

struct Report;

// One client over the round. Times are seconds of the round, which starts when the server
// starts sending the model. A client not selected for the round idles through all of it.
struct FederatedClientReport {
  std::string name;
  std::string device;
  std::string link;     // "wifi 400 Mb/s, 2 ms"
  int edge_server = -1; // hierarchical aggregation: the edge server it reports to; -1 for none
  bool selected   = false;
  bool dropped    = false; // selected, but its update had not arrived by the deadline
  double local_steps = 0;
  double download_s  = 0;  // receiving the model (from the server, or its edge server)
  double compute_s   = 0;  // local training, cut at the deadline when dropped
  double upload_s    = 0;  // sending its update, cut at the deadline when dropped
  double finish_s    = 0;  // when its update arrived (or when it was dropped)
  double idle_s      = 0;  // the round time less download, compute and upload
};

struct FederatedReport {
  std::string aggregation; // fedavg | hierarchical
  int clients  = 0;
  int selected = 0;
  int dropped  = 0;
  double round_time_s  = 0;
  double aggregation_s = 0;     // the server's average of the updates it kept, at the end of the round
  double deadline_s    = 0;     // 0: none
  double model_bytes   = 0;     // sent down to each selected client
  double update_bytes  = 0;     // sent up by each client (model_bytes × compression)
  double bytes_down    = 0;     // over every link: the model to clients (and to edge servers)
  double bytes_up      = 0;     // updates that arrived, the parts of dropped ones sent, edge aggregates
  std::vector<FederatedClientReport> client_rows;
};

nlohmann::json federated_to_json(const FederatedReport& f);
FederatedReport federated_from_json(const nlohmann::json& j);
// The whole table of `stepsim run` for a federated round (to_table calls it).
std::string federated_table(const Report& r);

} // namespace stepsim

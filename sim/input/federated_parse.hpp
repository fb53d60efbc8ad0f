// Reads training.federated (sim/core/federated.hpp) through JsonReader, and refuses what a
// federated round contradicts: a global batch, a platform, parallel degrees above 1.
#pragma once

#include "sim/core/scenario.hpp"
#include "sim/input/json_reader.hpp"

namespace stepsim {

// Reads `training.federated` (present) into t.federated, and the training.global_batch_size a
// round has none of (refused when given).
void read_federated(JsonReader& training, TrainingSpec& t);

// For a scenario with training.federated, after the other sections are read: refuses a
// `platform` (the clients and servers are the platform) and parallelism above 1 (each client
// trains alone), and sets the global batch to one local batch, so that the one-device step each
// client's compute is costed from is a valid scenario.
void check_federated_scenario(JsonReader& top, Scenario& s);

} // namespace stepsim

// The report's figures for the host side of a step (training.input and training.checkpoint):
// present only when the scenario asks for them, so that other reports keep their keys.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace stepsim {

struct InputReport {
  double step_without_input_s = 0; // the step as replayed with its data always ready
  double input_path_s         = 0; // the data loader alone: the time it takes to supply one step
  double stall_s              = 0; // how much longer the steady-state step is for waiting on data
  bool input_bound            = false;
  // The closed-form time per step of each resource the loader uses, for the one that limits it.
  std::string limited_by; // "CPU", "storage", "NVMe", "host link"
  int loaders = 0, workers = 0;
};

struct CheckpointReport {
  int every_steps = 0;
  std::string mode, layout;
  double bytes        = 0; // model and optimizer state written
  double gather_s     = 0; // gathered: onto the writing GPU
  double snapshot_s   = 0; // copies to host memory
  double write_s      = 0; // to storage
  double stall_s      = 0; // async: waiting for the previous write at the next checkpoint
  double step_s       = 0; // the step that writes a checkpoint
  double amortized_s  = 0; // its extra time spread over every_steps steps
};

nlohmann::json input_to_json(const InputReport& r);
InputReport input_from_json(const nlohmann::json& j);
std::string input_table(const InputReport& r);
nlohmann::json checkpoint_to_json(const CheckpointReport& r);
CheckpointReport checkpoint_from_json(const nlohmann::json& j);
std::string checkpoint_table(const CheckpointReport& r);

} // namespace stepsim

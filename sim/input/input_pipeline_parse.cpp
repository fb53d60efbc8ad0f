#include "sim/input/input_pipeline_parse.hpp"

#include <fmt/format.h>

namespace stepsim {

namespace {
// Past these a figure is a typo, not a data loader: PyTorch runs a worker per process, and a
// node has at most a few hundred cores.
constexpr long long kMaxWorkers        = 1024;
constexpr long long kMaxPrefetch       = 1024;
constexpr double kMaxSampleBytes       = 1LL << 40; // 1 TiB per sample
constexpr long long kMaxCheckpointEvery = 1LL << 30;
} // namespace

void read_input_pipeline(JsonReader& training, InputPipelineSpec& in)
{
  if (!training.has("input"))
    return;
  JsonReader r       = training.object("input");
  in.enabled         = true;
  in.workers         = static_cast<int>(r.integer("workers", 2, 1, kMaxWorkers));
  in.prefetch_factor = static_cast<int>(r.integer("prefetch_factor", 2, 1, kMaxPrefetch));
  in.source          = r.text("source", std::string("nvme"), {"nvme", "storage"});
  in.sample_bytes    = r.bytes("sample_bytes");
  if (in.sample_bytes > kMaxSampleBytes)
    r.problems().add(r.path_of("sample_bytes"),
                     fmt::format("{:g} bytes per sample is beyond {:g}; expected the bytes one sample reads",
                                 in.sample_bytes, kMaxSampleBytes));
  // Decode cost as CPU seconds per sample, or as a rate one core decodes sample bytes at.
  const bool seconds = r.has("decode_cpu_seconds"), rate = r.has("decode_rate");
  if (seconds == rate)
    r.problems().add(r.path_of(seconds ? "decode_rate" : "decode_cpu_seconds"),
                     "expected exactly one of decode_cpu_seconds (CPU seconds per sample) and decode_rate "
                     "(bytes per second one core decodes)");
  if (seconds) {
    in.decode_cpu_s = r.time("decode_cpu_seconds"); // at most a minute, as every time read
  } else if (rate) {
    const double bps = r.bandwidth("decode_rate");
    if (bps > 0)
      in.decode_cpu_s = in.sample_bytes / bps;
    else
      r.problems().add(r.path_of("decode_rate"), "expected a rate above 0, e.g. \"200MBps\"");
  }
  if (r.has("device_bytes")) {
    in.device_bytes = r.bytes("device_bytes");
    if (in.device_bytes > kMaxSampleBytes)
      r.problems().add(r.path_of("device_bytes"),
                       fmt::format("{:g} bytes per sample is beyond {:g}", in.device_bytes, kMaxSampleBytes));
  }
  r.reject_unknown_keys();
}

void read_checkpoint(JsonReader& training, CheckpointSpec& c)
{
  if (!training.has("checkpoint"))
    return;
  JsonReader r  = training.object("checkpoint");
  c.every_steps = static_cast<int>(r.integer("every_steps", std::nullopt, 1, kMaxCheckpointEvery));
  c.mode        = r.text("mode", std::string("sync"), {"sync", "async"});
  c.layout      = r.text("layout", std::string("sharded"), {"sharded", "gathered"});
  r.reject_unknown_keys();
}

void check_input_and_checkpoint(const Scenario& s, Problems& problems)
{
  const auto& in = s.training.input;
  if (in.enabled) {
    for (size_t g = 0; g < s.platform.node_groups.size(); ++g) {
      const HostSpec& host = s.platform.node_groups[g].host;
      const std::string at = fmt::format("platform.node_groups[{}].host", g);
      if (host.cpu_cores <= 0)
        problems.add(at + ".cpu_cores", "training.input runs data-loader workers on each node's CPU: expected the "
                                        "node's CPU cores, e.g. \"cpu_cores\": 128");
      if (in.source == "nvme" && host.nvme_bandwidth_Bps <= 0)
        problems.add(at + ".nvme_bandwidth", "training.input.source \"nvme\" reads each node's local disks: "
                                             "expected their read bandwidth, e.g. \"nvme_bandwidth\": \"25GBps\"");
    }
    if (in.source == "storage" && s.platform.storage.bandwidth_Bps <= 0)
      problems.add("platform.storage.bandwidth", "training.input.source \"storage\" reads a shared file system: "
                                                 "expected its bandwidth, e.g. \"storage\": {\"bandwidth\": "
                                                 "\"100GBps\"}");
  }
  if (s.training.checkpoint.every_steps > 0 && s.platform.storage.bandwidth_Bps <= 0)
    problems.add("platform.storage.bandwidth", "training.checkpoint writes to shared storage: expected its "
                                               "bandwidth, e.g. \"storage\": {\"bandwidth\": \"100GBps\"}");
}

} // namespace stepsim

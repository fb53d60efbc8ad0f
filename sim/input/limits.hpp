// Upper bounds on sizes, far above any real job, so that absurd values become a clear error where
// they are read instead of an int overflow, a huge allocation or a lowering that never ends
// downstream. Shared by the scenario parser and the model kinds that read their own fields.
#pragma once

namespace stepsim::limits {

constexpr long long kMaxGpus        = 1LL << 20; // each parallel degree and node group count (int-safe)
// GPUs of one platform: 65,536, four times the largest job users plan (16,384). Building the
// SimGrid platform grows with the square of its links (SimGrid 3.32 checks each new link's name
// against every link made before, NetZoneImpl::get_link_by_name_or_null): 32,768 GPUs ran in 19 s
// and 65,536 in 92 s here (`make bench` times the bound), while 131,072 took 66 s on a faster
// machine and 2^20 did not end in 15 minutes (issue 23).
constexpr long long kMaxPlatformGpus = 1LL << 16;
constexpr long long kMaxWidth       = 1LL << 20; // hidden, FFN, heads
constexpr long long kMaxLayers      = 1LL << 16;
constexpr long long kMaxTokens      = 1LL << 24; // sequence length, vocabulary
constexpr long long kMaxExperts     = 1LL << 16;
constexpr long long kMaxGpusPerNode = 1LL << 10;
constexpr long long kMaxCpuCores    = 1LL << 14; // per node (host.cpu_cores)
// A GPU-hour price (platform.node_groups[].price_per_gpu_hour, plan --price-per-gpu-hour): a
// bound against slips of the keyboard, far above cloud list prices (units to tens per GPU-hour).
constexpr double kMaxPricePerGpuHour = 1e4;
constexpr double kMaxParameters     = 1e15;      // a thousand times the largest published models
constexpr double kMaxBucketBytes    = 1LL << 50; // 1 PiB
constexpr double kMaxMicroBatchTokens = 1LL << 31;
// The lowering builds about a dozen tasks per (simulated rank, micro-batch, layer): with
// out-edges only in the graphs (sim/core/task_graph.hpp) about 2.5 kB per triple in all, where
// it was 3.8 kB. 1,008 layers x 496 micro-batches (5e5 triples) took 1.25 GB here, the default
// scenario at full fidelity (64 ranks per stage x 192 micro-batches x 96 layers, 1.18e6) 3.1 GB
// and 47 s. One and a quarter million lets that run and keeps every run near 3 GB.
constexpr double kMaxLayerPasses = 1.25e6;
// The replay engine numbers the messages across one stage boundary (micro-batch × virtual stage,
// forward and backward) in 20 bits.
constexpr double kMaxPipelineMessages = 1LL << 19;
// A layer of a layer list, per sample: a thousand times a GPT-3 sequence's forward (7e14), and 1 PiB.
constexpr double kMaxLayerFlops = 1e18;
constexpr double kMaxLayerBytes = 1LL << 50;
// One given kernel covers a micro-batch: a thousand samples at the per-sample bound. Beyond it a
// step would run for years of simulated time and report zero throughput instead of an error.
constexpr double kMaxKernelFlops = 1e21;
// Every bandwidth (links, NICs, memories): the slowest Wi-Fi rate (802.11b, 1 Mbps). Below it a
// gradient exchange takes years ("1e-10" gave a step of 3e17 s).
constexpr double kMinBandwidthBps = 1e6 / 8;
// And at most 1 EB/s (1000000TBps): 10^5 times the fastest link or memory of a GPU today (HBM3e
// about 8 TB/s, NVLink 5 1.8 TB/s both ways), room for the idealised network that isolates
// compute (a NIC of "1000000TBps", as the tests' small scenarios and `stepsim platform`'s
// "unlimited" from 1 PB/s take it). Above it a figure is a misprint ("1e300Gbps" ran).
constexpr double kMaxBandwidthBps = 1e18;
// Every latency and per-kernel overhead: a minute, a hundred times a geostationary satellite hop.
// Beyond it the replay's clock loses the nanoseconds of the other work ("1e300s" deadlocked it).
constexpr double kMaxLatencySeconds = 60;
// Points of one sweep: each is a simulation of its own (a day of CPU at a third of a second
// each), and the runner keeps every result in memory.
constexpr double kMaxSweepPoints = 1 << 18;
// A journal or shard output: every point of the largest sweep at 4 kB of JSON each. Read whole,
// so /dev/zero or a stray huge file is refused instead of filling memory.
constexpr unsigned long long kMaxResultFileBytes = 1ULL << 30;
// GPUs of one `stepsim collective` platform. A ring replays its first member for all, and a
// tree over more than 256 GPUs on a non-blocking fabric runs by its closed form, but the platform
// holds every GPU and the closed form follows every member's every step: nccl-tests' table over
// 16,384 GPUs of the A100 SuperPOD preset takes about 40 s with -j 2 and 0.3 GB per process
// (`make bench`), the largest job the issue that asked for it names.
constexpr long long kMaxCollectiveBenchGpus = 16384;

} // namespace stepsim::limits

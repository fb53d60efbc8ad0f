// Upper bounds on sizes, far above any real job, so that absurd values become a clear error where
// they are read instead of an int overflow, a huge allocation or a lowering that never ends
// downstream. Shared by the scenario parser and the model kinds that read their own fields.
#pragma once

namespace stepsim::limits {

constexpr long long kMaxGpus        = 1LL << 20; // GPUs of a platform, and each parallel degree
constexpr long long kMaxWidth       = 1LL << 20; // hidden, FFN, heads
constexpr long long kMaxLayers      = 1LL << 16;
constexpr long long kMaxTokens      = 1LL << 24; // sequence length, vocabulary
constexpr long long kMaxExperts     = 1LL << 16;
constexpr long long kMaxGpusPerNode = 1LL << 10;
constexpr double kMaxParameters     = 1e15;      // a thousand times the largest published models
constexpr double kMaxBucketBytes    = 1LL << 50; // 1 PiB
constexpr double kMaxMicroBatchTokens = 1LL << 31;
// The lowering builds about a dozen tasks per (simulated rank, micro-batch, layer); beyond this
// many triples the graphs would need tens of GB.
constexpr double kMaxLayerPasses = 4e6;
// The replay engine numbers the messages across one stage boundary (micro-batch × virtual stage,
// forward and backward) in 20 bits.
constexpr double kMaxPipelineMessages = 1LL << 19;
// A layer of a layer list, per sample: a thousand times a GPT-3 sequence's forward (7e14), and 1 PiB.
constexpr double kMaxLayerFlops = 1e18;
constexpr double kMaxLayerBytes = 1LL << 50;
// One given kernel covers a micro-batch: a thousand samples at the per-sample bound. Beyond it a
// step would run for years of simulated time and report zero throughput instead of an error.
constexpr double kMaxKernelFlops = 1e21;

} // namespace stepsim::limits

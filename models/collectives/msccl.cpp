// RCCL's MSCCL programs on an AMD Instinct node (ROCm/rccl src/misc/msccl/msccl_lifecycle.cc):
// with RCCL_MSCCL_ENABLE on (its default, RCCL_PARAM(MscclEnabled, "MSCCL_ENABLE", 1)) and one
// rank per process, RCCL loads the XML programs of its msccl-algorithms directory and hands a
// collective to the first whose rank count, operation, placement and size window hold it
// (mscclInternalSchedulerSelectAlgo), before its tuner picks a ring or a tree.
//
// For an out-of-place all-reduce over 8 GPUs the programs are all-pairs exchanges
// (tools/msccl-algorithms/allreduce-allpairs-8n-*-op.xml): every GPU sends each peer its share,
// reduces what it receives, and sends the reduced share to every peer, all peers at once over
// their own xGMI links: the steps of `direct` inside one full-mesh node (two steps of S/8 on seven
// links side by side), registered here as "msccl_allpairs". Their windows: LL from 0 to 64 KiB
// (allreduce-allpairs-8n-ll-32tb-op.xml, maxBytes 65536; the one-pass LL program to 25,599
// bytes), Simple from 512 KiB to 16 MiB (allreduce-allpairs-8n-simple-op.xml, minBytes 524288,
// maxBytes 16777216). The 64-512 KiB programs were not read here: they are taken as LL, the
// protocol below the Simple program's window, as the published MI300X node's rows do (its time
// steps from 17 to 27 us at 512 KiB, configs/calibration/nccl_tests_published.json
// amd_aac8_mi300x_1node_allreduce). The program's own kernel costs more than its protocol's base
// latency: links.json msccl.base_latency, fitted on that node's small rows.
//
// Only under `auto` with the protocol left to it: a forced algorithm or protocol is what the user
// asked for. intra_node.msccl false stands for RCCL_MSCCL_ENABLE=0.
#include "models/collectives/protocol.hpp"

#include <stdexcept>

namespace stepsim {
namespace {

constexpr int kProgramRanks       = 8;        // the all-pairs programs' ngpus
constexpr double kLargestBytes    = 16777216; // the Simple program's maxBytes
constexpr double kSimpleFromBytes = 524288;   // the Simple program's minBytes

const CollectiveAlgorithm& direct() { return CollectiveRegistry::get("direct", "simulation.collective_algorithm"); }

void check(CollectiveOp op, const GroupShape& g)
{
  if (op != CollectiveOp::AllReduce)
    throw std::invalid_argument(std::string("the msccl_allpairs algorithm does not implement ") + collective_name(op));
  if (g.n > 1 && (!g.full_mesh || g.nodes() != 1))
    throw std::invalid_argument("the msccl_allpairs algorithm runs inside one node whose GPUs are joined pairwise "
                                "(intra_node.type xgmi_mesh)");
}

int lanes(CollectiveOp op, const GroupShape& g, double bytes) { return lanes_of(direct(), op, g, bytes); }

int steps(CollectiveOp op, const GroupShape& g, double bytes)
{
  check(op, g);
  return direct().steps(op, g, bytes);
}

CollectiveStep step(CollectiveOp op, const GroupShape& g, double bytes, int lane, int member, int k)
{
  return direct().step(op, g, bytes, lane, member, k);
}

const bool registered = CollectiveRegistry::add(
    kMscclAllPairs,
    "RCCL's all-pairs MSCCL all-reduce inside one AMD Instinct node (xgmi_mesh): every peer at once, reduce-scatter "
    "then all-gather, two steps",
    CollectiveAlgorithm{kMscclAllPairs, lanes, steps, step, {}});

} // namespace

const CollectiveAlgorithm* msccl_program(CollectiveOp op, const GroupShape& g, double bytes)
{
  if (!g.msccl || op != CollectiveOp::AllReduce || g.n != kProgramRanks || g.nodes() != 1 || !(bytes > 0) ||
      bytes > kLargestBytes)
    return nullptr;
  const Protocol p = bytes < kSimpleFromBytes ? Protocol::LL : Protocol::Simple;
  return &with_protocol(CollectiveRegistry::get(kMscclAllPairs, "simulation.collective_algorithm"), p);
}

} // namespace stepsim

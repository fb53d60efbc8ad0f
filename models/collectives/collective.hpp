// A collective algorithm: how the members of a group exchange data, as steps on one or several
// lanes (NCCL's channels: rings or trees that run side by side, each on its share of the buffer).
//
// In step k of a lane, member m sends `bytes` to each member of `send_to` and receives from each
// member of `recv_from`. Member m's step k starts when all its sends of step k-1 on that lane
// have finished and every receive it lists in steps before k has arrived. Messages between two
// members arrive in the order they were sent: the i-th receive member m lists from member p is
// the i-th send p lists to m. So a step may pair a receive of chunk c with a send of chunk c-1
// (a pipeline), and a tree node may wait for two children at once. Registered by name ("ring",
// ...); the engine (sim/engine/replay.cpp) turns each send into a SimGrid transfer.
//
// An algorithm that picks another one per collective ("auto") sets `pick`; the engine then runs
// the picked one. Algorithms throw std::invalid_argument for a collective or a group they cannot
// run (the driver turns that into bad input).
#pragma once

#include "sim/core/registry.hpp"
#include "sim/core/task_graph.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace stepsim {

struct CollectiveStep {
  static constexpr int kMaxPeers = 4; // a tree node: its parent, two child nodes and its node's chain
  std::array<int, kMaxPeers> send_to{};
  std::array<int, kMaxPeers> recv_from{};
  int sends = 0, recvs = 0;
  double bytes = 0; // of each send

  void send(int member) { send_to[static_cast<size_t>(sends++)] = member; }
  void recv(int member) { recv_from[static_cast<size_t>(recvs++)] = member; }
};

// Latency and bottleneck bandwidth of the path between two members.
struct PathCost {
  double latency_s = 0, bandwidth_Bps = 0;
  // The part of latency_s that is a NIC kind's transport (NicSpec::transport_latency_s: EFA's,
  // TCPX's, TCP's beyond InfiniBand's step). NCCL keeps NCCL_STEPS chunks of a connection in
  // flight, so a ring's sender does not wait for it step after step: a ring pays it on its first
  // step and once more per further crossing of its data path (protocol.cpp launch_seconds), as
  // NCCL's tuner charges a ring's network latency on 2(nNodes-1) of an all-reduce's steps and
  // nNodes-1 of an all-gather's (v2.20.3 src/graph/tuning.cc, nInterSteps). Every other algorithm
  // pays the whole latency per step.
  double transport_s = 0;
};

// The group as an algorithm sees it: its size, which members share a node, and what the engine
// measured of the platform's paths.
struct GroupShape {
  int n = 0;
  std::vector<int> node_of_member;            // 0, 1, ... in order of first appearance
  std::vector<int> local_rank;                // position among the members of its node
  std::vector<std::vector<int>> node_members; // per node, its members in group order
  int per_node = 0; // members on each node when every node holds the same number, else 0
  // Every member's node has an NVSwitch that reduces in the switch: NVLS on one node, NVLS-tree
  // across nodes.
  bool in_switch_reduction = false;
  // The rate at which that NVSwitch reduces what one GPU pushes into it, bytes per second (the
  // slowest of the members' nodes; 0: links.json's nvswitch.in_switch_reduction). nvls_reduction.
  double in_switch_reduction_Bps = 0;
  // The fabric between the nodes reduces in its switches (InfiniBand SHARP, platform.network.sharp):
  // CollNet.
  bool in_network_reduction = false;
  int channels              = 0; // NCCL channels asked for; 0 = the algorithm's default
  // The members' PCIe link to a NIC over that NIC's bandwidth (the lowest of the members'; 0 =
  // unknown). NCCL's tree search raises a tree's bandwidth inside the node up to twice its
  // bandwidth across while the node's paths carry it; a GPU's data reaches its NIC over PCIe
  // (protocol.cpp, tree_graph_factor).
  double nic_feed_ratio = 0;
  // Every member's node has AMD CPUs (host.cpu_vendor): NCCL's tuner then caps LL's bandwidth
  // across nodes lower (protocol.cpp, ll_max_bus_bandwidth).
  bool amd_hosts = false;
  // The NIC each member's flows across nodes leave and enter by (any integers; members of a node
  // that share one NIC share an id), as built on the platform: the closed forms share a NIC's
  // bandwidth among the flows of all its members (AWS p4d: two GPUs a NIC). Empty: each member
  // its own.
  std::vector<int> nic_of_member;
  // The fabric's thinned uplinks above the members' NICs (an oversubscribed leaf's, a pod's under
  // an oversubscribed core: topologies/fabrics/fat_tree.cpp, rail.cpp): each member's, bottom to
  // top, as indices into uplink_Bps, each uplink's bandwidth in either direction. A flow between
  // two members climbs the sender's uplinks that the receiver is not under and comes down the
  // receiver's that the sender is not under; the flows of one step that cross an uplink in one
  // direction share it (uncontended_seconds with `shared_uplinks`). Empty: none (a non-blocking
  // fabric, one node).
  std::vector<std::vector<int>> uplinks_of_member;
  std::vector<double> uplink_Bps;
  PathCost intra, inter;         // a path inside a node and one between nodes (0 when none)
  // One node whose GPUs are joined by direct links of different reach (DGX-1's NVLink cube mesh):
  // the rings over all members that NCCL's search finds on those links (find_rings), each a
  // member order; "ring" runs one lane on each. Across such nodes the rings of one node, as local
  // ranks, from which node_orders (below) are cut. On a full mesh (below) the directed rings of
  // mesh_rings. Empty: any order crosses the same links.
  std::vector<std::vector<int>> rings;
  // Every member's node joins each two of its GPUs by a link of their own (an xGMI mesh,
  // NodeType::full_mesh): flows to different peers leave by different links.
  bool full_mesh = false;
  // The members' one full-mesh node runs RCCL's MSCCL programs (Group::msccl; msccl.cpp).
  bool msccl = false;
  // A group over several full-mesh nodes, or nodes of direct links of different reach: the order
  // in which ring lane l visits the members of a node, as local ranks from the one it enters by to
  // the one it leaves by (mesh_paths; on a DGX-1 the rings of one node cut before l, group_shape),
  // one per lane. Empty: ring lane l starts at local rank l and goes up (a switch: any order alike).
  std::vector<std::vector<int>> node_orders;
  // What the platform's NCCL_ALGO and NCCL_PROTO leave to the tuner (platform.nccl_env): `auto`
  // picks among those algorithms and protocols only (auto.cpp, protocol.cpp).
  NcclChoices nccl{};
  int nodes() const { return static_cast<int>(node_members.size()); }
};

// A group of n members, each on a node of its own.
GroupShape group_shape(int n);
// `node` = a node id per member (any integers); shared ids share a node.
// The NVSwitch's reduction rate per GPU for the group (GroupShape::in_switch_reduction_Bps, else
// links.json's figure), bytes per second; 0 = no limit beyond the links.
double nvls_reduction(const GroupShape& g);
GroupShape group_shape(const std::vector<int>& node, bool in_switch_reduction = false, int channels = 0);
// The shape of a workload group; `path` measures the platform between two members (may be null).
GroupShape group_shape(const Group& g, const std::function<PathCost(int member_a, int member_b)>& path = {});

// Which of NCCL's algorithms an algorithm is to NCCL's tuner, whose costs are per algorithm
// (models/collectives/protocol.cpp: base latency per protocol, the tree's bandwidth factor and
// extra latency between nodes); Other for what NCCL does not have (direct, halving-doubling,
// hierarchical). NvlsTree and CollNet are NCCL_ALGO_NVLS_TREE and NCCL_ALGO_COLLNET_DIRECT.
enum class NcclAlgorithm : uint8_t { Ring, Tree, Nvls, NvlsTree, CollNet, Other };

struct CollectiveAlgorithm {
  std::string name;
  // Lanes that run side by side, each over bytes / lanes; null = one.
  std::function<int(CollectiveOp op, const GroupShape& g, double bytes)> lanes;
  // Steps of each lane; `bytes` is each member's whole buffer.
  std::function<int(CollectiveOp op, const GroupShape& g, double bytes)> steps;
  std::function<CollectiveStep(CollectiveOp op, const GroupShape& g, double bytes, int lane, int member, int step)> step;
  // Set by algorithms that choose another per collective ("auto", per-type choices).
  std::function<const CollectiveAlgorithm&(CollectiveOp op, const GroupShape& g, double bytes)> pick;
  // Set by "auto" (and per-type choices that hold it): the concrete algorithms it chooses among,
  // so that a protocol choice can time each with each protocol (models/collectives/protocol.hpp).
  std::function<std::vector<const CollectiveAlgorithm*>(CollectiveOp op, const GroupShape& g)> candidates{};
  // Set on an algorithm run with one of NCCL's protocols (models/collectives/protocol.hpp): the protocol's
  // index and the algorithm it runs. -1 / null for a bare algorithm.
  int protocol = -1;
  const CollectiveAlgorithm* bare = nullptr;
  NcclAlgorithm nccl = NcclAlgorithm::Other;
  // NCCL runs it with the Simple protocol only (NVLS: multimem loads and stores).
  bool simple_protocol_only = false;
  // NCCL runs it as point-to-point sends and receives (an all-to-all): with LL up to its P2P LL
  // threshold, Simple above, never LL128 (src/enqueue.cc: a p2p's protocol is LL or SIMPLE).
  bool point_to_point = false;
  // True where, for `op`, every member sends to one peer and receives from one, the same peers
  // and bytes at every step (a ring's all-reduce, all-gather, reduce-scatter): uncontended_seconds
  // then takes its closed form instead of walking every member's every step. null = never.
  std::function<bool(CollectiveOp op, const GroupShape& g)> uniform_steps{};
  // Set where the lanes are rotations of their first d: there are d × (members per node) lanes,
  // and lane l runs lane l % d with the members of every node rotated by l / d places (the
  // tree's channels, each starting its nodes' chains at another member). Returns d, or 0 where
  // that does not hold. Where every rotated pair's path costs what its pair costs (always on
  // paths that depend only on whether two members share a node), a rotated lane takes exactly as
  // long as the lane it rotates, and the flows a member starts over all lanes are those its whole
  // node starts over the first d: uncontended_seconds then walks d lanes instead of all of them.
  // null = never.
  std::function<int(CollectiveOp op, const GroupShape& g, double bytes)> rotated_lanes{};
  // Where a member's lanes put it at every place of a chain inside its node (the tree's rotated
  // chains): the chain's places, k. A chain forwards a chunk one hop after another, so the
  // member's sends at different places leave at different times, and uncontended_seconds counts
  // only about min(1, C / k) of the flows it starts inside the node in one step as sharing its
  // link (C chunks per phase). null or 0 = every flow of a step shares the link with the others.
  std::function<int(CollectiveOp op, const GroupShape& g, double bytes)> chain_places{};
  // Steps whose sends a member may have on the wire at once on a lane: 1 = each step waits until
  // the sends of the step before have arrived. NCCL's pipelined algorithms keep up to NCCL_STEPS
  // = 8 slots of a connection in flight (src/include/device.h; src/device/prims_simple.h
  // waitPeer: a sender waits only `while (connStepCache + NCCL_STEPS < step + StepPerSlice)`, the
  // receiver's head 8 slots behind), so a chunk's latency overlaps the chunks before it: a tree of
  // C chunks and depth H pays H latencies, not C + H. Their sends still share the sender's link, one
  // after the other. A step still waits for the receives it needs (a chunk is forwarded only once
  // it has arrived).
  int pipeline_slots = 1;
  // Set where, on a large group, every step of a lane may be costed as its first while the
  // members' peers differ from step to step: each step a permutation in which every member sends
  // S/n through its own links (direct's rotation over the other nodes' members). uncontended_seconds
  // then takes uniform_steps' closed form, each lane for lane_steps of its steps, instead of
  // walking every member's every step (8,000 members of an all-to-all: 64 million member-steps,
  // minutes and gigabytes). Exact where the fabric does not tell one node from another (a
  // non-blocking fat tree); on thinned uplinks or rails the first step's paths stand for all.
  // null = never. The engine's flow replay does not read it.
  std::function<bool(CollectiveOp op, const GroupShape& g)> steps_alike{};
  // With steps_alike: the steps lane `lane` runs (fewer than steps() where a lane idles after its
  // last: direct's rotation over a node's own p-1 members). null = every lane runs them all.
  std::function<int(CollectiveOp op, const GroupShape& g, double bytes, int lane)> lane_steps{};
};

// NCCL_STEPS (src/include/device.h): the slots of a connection's buffer a sender may fill ahead.
inline constexpr int kNcclSteps = 8;

using CollectiveRegistry = Registry<CollectiveAlgorithm>;

// The algorithm that runs a collective: `a` itself or the one it picks.
const CollectiveAlgorithm& concrete_algorithm(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g,
                                              double bytes);
int lanes_of(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes);
// For an algorithm that picks another per collective (a per-type choice, a protocol choice): its
// lanes, steps and step become those of what c.pick returns.
void follow_pick(CollectiveAlgorithm& c);

// Bytes one member sends / receives in the whole collective (for tests and reports).
double bytes_sent_per_member(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes,
                             int member = 0);
// The same for n members each on a node of its own.
double bytes_sent_per_member(const CollectiveAlgorithm& a, CollectiveOp op, int n, double bytes);
double bytes_received_per_member(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes,
                                 int member = 0);

// The flows of each step of a collective that cross each of the fabric's thinned uplinks, up and
// down (GroupShape::uplinks_of_member), counted flow by flow with add(): a flow gets the share of
// the most crowded uplink it crosses. The closed forms (uncontended_seconds) and the lone
// member's hops (sim/engine/collective_timing.hpp) time the flows across those uplinks by it.
class UplinkLoad {
public:
  // Over `steps` steps; counts nothing (and answers 0) unless `on` and `g` has thinned uplinks.
  // `g` must outlive it.
  UplinkLoad(const GroupShape& g, int steps, bool on = true);
  bool empty() const { return uplinks_ == 0; }
  // One flow from member `from` to member `to` in step k.
  void add(int from, int to, int k);
  // Seconds per byte that the uplinks a flow from `from` to `to` crosses in step k give it: the
  // most crowded one's flows over its bandwidth; 0 where it crosses none.
  double seconds_per_byte(int from, int to, int k) const;

private:
  // Dense below 16 M counters (a tree's 130 steps over 2,048 leaves take 0.5 M); an all-to-all's
  // n - 1 steps over many leaves go to a map.
  static constexpr size_t kDense = size_t{1} << 24;
  // Calls f(uplink, direction) for each uplink a flow between two nodes crosses: up the sender's
  // that the receiver is not under (0), down the receiver's that the sender is not under (1).
  template <typename F>
  void crossed(int from, int to, F&& f) const
  {
    if (uplinks_ == 0 || g_->node_of_member[static_cast<size_t>(from)] == g_->node_of_member[static_cast<size_t>(to)])
      return; // inside a node its flows take the node's own links
    const auto& a = g_->uplinks_of_member[static_cast<size_t>(from)];
    const auto& b = g_->uplinks_of_member[static_cast<size_t>(to)];
    for (int u : a)
      if (std::find(b.begin(), b.end(), u) == b.end())
        f(static_cast<size_t>(u), size_t{0});
    for (int u : b)
      if (std::find(a.begin(), a.end(), u) == a.end())
        f(static_cast<size_t>(u), size_t{1});
  }
  size_t index(int k, size_t u, size_t d) const { return (static_cast<size_t>(k) * uplinks_ + u) * 2 + d; }
  const GroupShape* g_;
  size_t uplinks_;
  std::vector<long long> dense_;
  std::unordered_map<size_t, long long> sparse_;
};

// The collective's duration on idle paths: each lane's steps with their dependencies (a longest
// path), a transfer taking the path latency plus its bytes over the path bandwidth, shared with
// the flows of the same kind (inside the node, or across nodes) that the member starts (receives)
// in the same step on every lane, since those leave (enter) through the same link. Used by the
// analytic network fidelity and by "auto". Rotated lanes (CollectiveAlgorithm::rotated_lanes)
// are not walked where their pairs' paths cost what the pairs they rotate cost: checked pair by
// pair, unless `paths_by_node` says that the caller's `path` depends only on whether the two
// members share a node (g.intra, g.inter).
// With `shared_uplinks`, a flow that crosses the fabric's thinned uplinks (GroupShape::uplinks_of_member)
// also shares each of them with the step's other flows that cross it in that direction, every
// member's and every lane's: what the collective achieves on an oversubscribed fabric. Without it,
// what NCCL's tuner sees (it does not know the fabric), as `auto` picks.
double uncontended_seconds(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes,
                           const std::function<PathCost(int member_a, int member_b)>& path, bool paths_by_node = false,
                           bool shared_uplinks = false);

// The algorithm of simulation.collective_algorithm: `all` for every type, except the types named
// in `per_op` ("all_reduce" -> "tree"). Throws InputError at `path` for an unknown name or type.
CollectiveAlgorithm collective_choice(const std::string& all, const std::map<std::string, std::string>& per_op,
                                      const std::string& path);

// NCCL's ring search on a node whose GPUs are joined by direct links (src/graph/search.cc,
// ncclTopoSearchRec): `cost[a][b]` is the measured path between members a and b. Pairs at the
// lowest latency are joined directly, by as many links as their bandwidth holds of the narrowest
// direct pair's. Returns the largest set of rings over all members that use each link at most once
// per direction, each ring run in both directions; empty when every pair is joined alike (a
// switch: any order is as good), when some member has no direct link, or for fewer than 3 members.
std::vector<std::vector<int>> find_rings(const std::vector<std::vector<PathCost>>& cost);

// The rings on a full mesh of n GPUs (a link per pair, both directions, all alike): the largest set
// found of directed rings over all n that share no link in one direction, as RCCL lays its rings
// over an MI300X's xGMI links (seven on eight GPUs, each link once each way: a single ring would
// use one of each GPU's seven links). At most 8 members (the search is exhaustive, with a budget);
// empty below 3.
std::vector<std::vector<int>> mesh_rings(int n);
// The orders in which the rings of a group spanning full-mesh nodes cross a node of k members:
// k directed paths over all k (as local ranks) that share no link in one direction, each entering
// by a different member and leaving by a different one, so that every member's NIC carries one
// ring each way and every xGMI link one ring each way. Empty when none is found (k < 2 or k > 8).
std::vector<std::vector<int>> mesh_paths(int k);

// Chunks a pipelined algorithm cuts a lane's share into: NCCL moves a channel's data in slots of
// NCCL_BUFFSIZE / NCCL_STEPS = 4 MiB / 8 = 512 KiB; capped to keep the replay small.
int pipeline_chunks(double lane_bytes);

// The slots a flow replay gives a lane of `a` (at most a.pipeline_slots). NCCL sends a
// connection's slots one after the other, so a chunk takes its own time on the link whatever
// follows it, and its latency hides behind the chunks before it. Flows that share a link share
// it fairly instead: W slots in flight hide the latency W-fold but stretch each chunk's time on
// the link W-fold, and with it the pipeline's fill over its hops. So the replay takes the W that
// costs least, sqrt(chunks x latency / (hops x chunk time)) on the path kind that needs most.
int flow_slots(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes);

} // namespace stepsim

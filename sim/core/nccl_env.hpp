// NCCL's environment as a platform's software image sets it (platform.nccl_env): which of NCCL's
// algorithms and protocols NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE and NCCL_COLLNET_ENABLE leave
// to NCCL's tuner, per collective function. Cloud images set them: Google's GPUDirect-TCPX runs
// Ring and Simple only, its TCPXO profile Ring and Tree without NVLS.
//
// Plain data: sim/input/nccl_env_parse.cpp reads NCCL's own syntax into it, and
// models/collectives/protocol.cpp (with_protocol_choice) applies it to `auto`.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <string>

namespace stepsim {

// NCCL's algorithms and protocols, one bit each, in NCCL's order (ncclAlgoStr, ncclProtoStr).
enum NcclAlgorithmBit : uint8_t {
  kNcclTree          = 1 << 0,
  kNcclRing          = 1 << 1,
  kNcclCollNetDirect = 1 << 2,
  kNcclCollNetChain  = 1 << 3,
  kNcclNvls          = 1 << 4,
  kNcclNvlsTree      = 1 << 5,
  kNcclPat           = 1 << 6,
};
inline constexpr uint8_t kEveryNcclAlgorithm = (1 << 7) - 1;
enum NcclProtocolBit : uint8_t { kNcclLL = 1 << 0, kNcclLL128 = 1 << 1, kNcclSimple = 1 << 2 };
inline constexpr uint8_t kEveryNcclProtocol = (1 << 3) - 1;

// Per collective type, in CollectiveOp's order (all-reduce, all-gather, reduce-scatter,
// all-to-all, broadcast, reduce): the algorithms and protocols NCCL's tuner may pick. All bits:
// NCCL's defaults. All-to-all is point-to-point in NCCL, which NCCL_ALGO does not touch.
struct NcclChoices {
  std::array<uint8_t, 6> algorithms{kEveryNcclAlgorithm, kEveryNcclAlgorithm, kEveryNcclAlgorithm,
                                    kEveryNcclAlgorithm, kEveryNcclAlgorithm, kEveryNcclAlgorithm};
  std::array<uint8_t, 6> protocols{kEveryNcclProtocol, kEveryNcclProtocol, kEveryNcclProtocol,
                                   kEveryNcclProtocol, kEveryNcclProtocol, kEveryNcclProtocol};
  bool operator==(const NcclChoices&) const = default;
  auto operator<=>(const NcclChoices&) const = default;
};

struct NcclEnv {
  // The variables as the platform gives them, by name (what `stepsim platform` prints).
  std::map<std::string, std::string> variables;
  NcclChoices choices;
};

} // namespace stepsim

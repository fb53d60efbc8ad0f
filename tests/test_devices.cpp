// The device catalogue (configs/devices/): a GPU asked for by the name NVML prints, a device that
// takes another's calibration (the same silicon with other links), an NVSwitch node whose links
// are its GPU's own, and the device files that are refused.
#include "support.hpp"

#include "models/device.hpp"
#include "sim/core/input_error.hpp"
#include "topologies/nodes/node_type.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>

using namespace stepsim;
namespace fs = std::filesystem;

namespace {

// The report of a small tensor-parallel job on one NVSwitch node of `gpu`, its NVLink bandwidth
// `nvlink` ("" = not given).
nlohmann::json report_on(const std::string& gpu, const std::string& nvlink = "300GBps")
{
  auto s = nlohmann::json::parse(
      testing::read_text_file(std::string(STEPSIM_SOURCE_DIR) + "/configs/scenarios/default.json"));
  s["model"]["num_layers"]                  = 4;
  s["training"]["global_batch_size"]        = 16;
  s["parallelism"]["pipeline"]              = 1;
  s["parallelism"]["tensor"]                = 8;
  s["parallelism"]["data"]                  = 1;
  auto& group                               = s["platform"]["node_groups"][0];
  group["count"]                            = 1;
  group["gpu"]                              = gpu;
  group["intra_node"]                       = {{"type", "nvswitch"}, {"latency", "1us"}};
  if (!nvlink.empty())
    group["intra_node"]["bandwidth"] = nvlink;
  const std::string scenario = testing::write_temp_file("device_scenario.json", s.dump());
  const std::string out      = testing::write_temp_file("device_report.json", "");
  auto r                     = testing::run_stepsim("run " + scenario + " --quiet --json " + out);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(testing::read_text_file(out));
}

// The message of the InputError that loading `name` from a catalogue of `files` raises ("" if none).
std::string load_error(const std::map<std::string, nlohmann::json>& files, const std::string& name)
{
  const fs::path dir = fs::temp_directory_path() / "stepsim_device_catalogue";
  fs::remove_all(dir);
  fs::create_directories(dir / "devices");
  for (const auto& [file, doc] : files)
    std::ofstream(dir / "devices" / (file + ".json")) << doc.dump();
  setenv("STEPSIM_CONFIG_DIR", dir.c_str(), 1);
  std::string message;
  try {
    load_device(name, "device");
  } catch (const InputError& e) {
    message = e.what();
  }
  unsetenv("STEPSIM_CONFIG_DIR");
  return message;
}

nlohmann::json shipped(const std::string& name)
{
  return nlohmann::json::parse(
      testing::read_text_file((fs::path(STEPSIM_SOURCE_DIR) / "configs" / "devices" / (name + ".json")).string()));
}

} // namespace

TEST_CASE("A GPU named as nvidia-smi prints it is its catalogue device", "[devices]")
{
  // As NVML prints them, and with other case and separators.
  const std::pair<const char*, const char*> known[] = {
      {"NVIDIA H100 80GB HBM3", "H100-SXM"},     {"NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"},
      {"Tesla V100-SXM2-32GB", "V100-SXM2-32GB"}, {"NVIDIA GeForce RTX 4090", "RTX-4090"},
      {"AMD Instinct MI300X", "MI300X"},          {"Tesla P40", "Tesla-P40"},
      {"nvidia a100 80gb pcie", "A100-PCIe-80GB"}, {"h100_sxm", "H100-SXM"},
      {"NVIDIA H100 NVL", "H100-NVL"},            {"NVIDIA GH200 480GB", "GH200"},
      {"NVIDIA L40S", "L40S"},                    {"NVIDIA H20", "H20"},
      {"NVIDIA GeForce RTX 3090", "RTX-3090"},    {"NVIDIA RTX A6000", "RTX-A6000"},
      {"NVIDIA A100-PCIE-40GB", "A100-PCIe-40GB"}, {"Tesla V100-PCIE-32GB", "V100-PCIe-32GB"},
      {"NVIDIA L40", "L40"},                      {"NVIDIA A30", "A30"},
      {"NVIDIA H200 NVL", "H200-NVL"},            {"AMD Instinct MI325X", "MI325X"},
      {"NVIDIA A10G", "A10G"},                    {"NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada"},
      {"NVIDIA GeForce RTX 5090", "RTX-5090"},    {"NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX-PRO-6000"},
      {"Tesla P100-SXM2-16GB", "P100-SXM2-16GB"}, {"AMD Instinct MI210", "MI210"},
      {"AMD Instinct MI300A", "MI300A"}};
  for (const auto& [asked, device] : known) {
    INFO(asked);
    CHECK(catalogue_device_name(asked) == device);
  }
  // Names of no device come back as they are (the device check then lists the closest).
  for (const char* unknown : {"NVIDIA RTX PRO 9000", "NVIDIA"})
    CHECK(catalogue_device_name(unknown) == unknown);

  // The run is the catalogue device's, and its report names it so.
  const auto by_product   = report_on("NVIDIA H100 80GB HBM3");
  const auto by_catalogue = report_on("H100-SXM");
  CHECK(by_product["step_time_s"] == by_catalogue["step_time_s"]);
  CHECK(by_product["device"] == "H100-SXM");

  auto r = testing::run_stepsim("run " + std::string(STEPSIM_SOURCE_DIR) +
                                "/configs/scenarios/default.json --set \"platform.node_groups.0.gpu=NVIDIA RTX PRO 9000\"");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("platform.node_groups[0].gpu: unknown device \"NVIDIA RTX PRO 9000\"") != std::string::npos);
}

TEST_CASE("Every product name of the catalogue is its own device's", "[devices]")
{
  int names = 0;
  for (const auto& device : device_names()) {
    const auto doc = shipped(device);
    CHECK(catalogue_device_name(device) == device);
    if (doc.contains("product_names"))
      for (const auto& p : doc["product_names"]) {
        INFO(device << ": " << p);
        CHECK(catalogue_device_name(p.get<std::string>()) == device);
        CHECK(doc["sources"].contains("product_names"));
        ++names;
      }
  }
  CHECK(names >= 4);
}

TEST_CASE("A device of another's silicon takes that device's calibration, fitted figures included", "[devices]")
{
  const Device a800 = load_device("A800-SXM4-80GB", "device");
  const Device a100 = load_device("A100-SXM4-80GB", "device");
  CHECK(a800.calibration_of == "A100-SXM4-80GB");
  CHECK(a100.calibration_of.empty());
  // The fitted calibration (configs/calibration/A100-SXM4-80GB.json) and the per-framework one.
  CHECK(a800.calibration.gemm_efficiency == a100.calibration.gemm_efficiency);
  CHECK(a800.calibration.attention_efficiency == a100.calibration.attention_efficiency);
  const Device a800_ds = load_device("A800-SXM4-80GB", "deepspeed-megatron", "device");
  const Device a100_ds = load_device("A100-SXM4-80GB", "deepspeed-megatron", "device");
  CHECK(a800_ds.calibration.gemm_efficiency == a100_ds.calibration.gemm_efficiency);
  REQUIRE(a100_ds.calibration.gemm_efficiency != a100.calibration.gemm_efficiency); // the framework file applies
  // What differs is the links: NVLink 400 GB/s both ways against 600.
  CHECK(a800.nvlink_bandwidth_Bps == 200e9);
  CHECK(a100.nvlink_bandwidth_Bps == 300e9);
  CHECK(a800.peak("bf16") == a100.peak("bf16"));
  CHECK(a800.memory_bytes == a100.memory_bytes);

  const Device h800 = load_device("NVIDIA H800 80GB HBM3", "device");
  const Device h100 = load_device("H100-SXM", "device");
  CHECK(h800.name == "H800-SXM");
  CHECK(h800.calibration.gemm_efficiency == h100.calibration.gemm_efficiency);
  CHECK(h800.calibration.attention_efficiency_of("cudnn") == h100.calibration.attention_efficiency_of("cudnn"));
  CHECK(h800.nvlink_bandwidth_Bps == 200e9);
  CHECK(load_device("V100-SXM2-16GB", "device").memory_bytes == 16e9);
}

TEST_CASE("An NVSwitch node without a bandwidth takes its GPU's NVLink bandwidth", "[devices][platform]")
{
  PlatformSpec spec;
  for (const char* gpu : {"H800-SXM", "H100-SXM", "A100-SXM4-80GB", "T4"}) {
    NodeGroupSpec g;
    g.gpu                      = gpu;
    g.intra_node.type          = "nvswitch";
    g.intra_node.bandwidth_Bps = 0; // not given, as the parser leaves it
    spec.node_groups.push_back(g);
  }
  NodeGroupSpec given;
  given.gpu                      = "H100-SXM";
  given.intra_node.type          = "nvswitch";
  given.intra_node.bandwidth_Bps = 123e9;
  spec.node_groups.push_back(given);
  apply_rated_bandwidths(spec);
  CHECK(spec.node_groups[0].intra_node.bandwidth_Bps == 200e9);
  CHECK(spec.node_groups[1].intra_node.bandwidth_Bps == 450e9);
  CHECK(spec.node_groups[2].intra_node.bandwidth_Bps == 300e9);
  // A device file without an NVLink figure: the node type's rated one (NVLink3's 300 GB/s).
  CHECK(spec.node_groups[3].intra_node.bandwidth_Bps == 300e9);
  CHECK(spec.node_groups[4].intra_node.bandwidth_Bps == 123e9); // given: kept

  // So an H800 node runs a tensor-parallel job slower than an H100 node, as fast as an H100 node
  // given the H800's 200 GB/s.
  const auto h800 = report_on("NVIDIA H800 80GB HBM3", "");
  CHECK(h800["step_time_s"] == report_on("H100-SXM", "200GBps")["step_time_s"]);
  CHECK(h800["step_time_s"].get<double>() > report_on("H100-SXM", "")["step_time_s"].get<double>());
  CHECK(report_on("H100-SXM", "")["step_time_s"] == report_on("H100-SXM", "450GBps")["step_time_s"]);
}

TEST_CASE("Device files that name another's calibration wrongly, or another's product, are refused", "[devices]")
{
  nlohmann::json base = shipped("A100-SXM4-80GB");
  nlohmann::json variant = shipped("A800-SXM4-80GB");

  // An unknown device.
  auto unknown = variant;
  unknown["calibration_of"] = "A100-SXM9";
  std::string m = load_error({{"A100-SXM4-80GB", base}, {"A800-SXM4-80GB", unknown}}, "A800-SXM4-80GB");
  INFO(m);
  CHECK(m.find("calibration_of") != std::string::npos);
  CHECK(m.find("A100-SXM9") != std::string::npos);

  // Itself.
  auto itself = variant;
  itself["calibration_of"] = "A800-SXM4-80GB";
  m = load_error({{"A100-SXM4-80GB", base}, {"A800-SXM4-80GB", itself}}, "A800-SXM4-80GB");
  CHECK(m.find("calibration_of: expected another device than this one") != std::string::npos);

  // A calibration of its own beside it.
  auto both           = variant;
  both["calibration"] = base["calibration"];
  m = load_error({{"A100-SXM4-80GB", base}, {"A800-SXM4-80GB", both}}, "A800-SXM4-80GB");
  CHECK(m.find("calibration: expected no calibration of its own beside calibration_of") != std::string::npos);

  // A device that takes a third's: a chain, and a cycle, end with an error, not a recursion.
  auto chained              = base;
  chained.erase("calibration");
  chained["calibration_of"] = "A800-SXM4-80GB";
  m = load_error({{"A100-SXM4-80GB", chained}, {"A800-SXM4-80GB", variant}}, "A800-SXM4-80GB");
  CHECK(m.find("expected a device with a calibration of its own") != std::string::npos);

  // Another device's product name.
  auto stealing             = variant;
  stealing["product_names"] = {"NVIDIA A100-SXM4-80GB"};
  m = load_error({{"A100-SXM4-80GB", base}, {"A800-SXM4-80GB", stealing}}, "A800-SXM4-80GB");
  CHECK(m.find("product_names[0]: expected a name of this device only") != std::string::npos);
  auto not_names             = variant;
  not_names["product_names"] = "NVIDIA A800";
  m = load_error({{"A100-SXM4-80GB", base}, {"A800-SXM4-80GB", not_names}}, "A800-SXM4-80GB");
  CHECK(m.find("product_names: expected an array of names") != std::string::npos);
}

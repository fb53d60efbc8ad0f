// The built-in CNNs: layer counts as torchgpipe flattens them, FLOPs and parameters against the
// published figures, the pipeline split, memory and FLOPs in the report, and bad plans.
#include "support.hpp"

#include "sim/simulate.hpp"
#include "workloads/models/cnn.hpp"
#include "workloads/lower.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

using namespace stepsim;

namespace {

nlohmann::json cnn_scenario(const std::string& architecture, int pipeline, int micro_batches, int micro_batch)
{
  nlohmann::json doc = testing::small_scenario(pipeline, 1, micro_batches);
  doc["model"]       = {{"architecture", architecture}, {"image_size", 224}, {"num_classes", 1000}};
  doc["training"]    = {{"global_batch_size", micro_batches * micro_batch},
                        {"micro_batch_size", micro_batch},
                        {"precision", "fp32"},
                        {"recompute", "none"},
                        {"optimizer", "sgd"}};
  doc["parallelism"]["schedule"] = "gpipe";
  return doc;
}

} // namespace

TEST_CASE("CNN layer counts match torchgpipe's flattened nn.Sequential")
{
  ModelSpec m;
  m.architecture = "resnet101";
  CHECK(cnn_layers(m, 1, 4).size() == 370); // the sum of every balance in torchgpipe's resnet101 benchmark
  m.architecture = "resnet50";
  CHECK(cnn_layers(m, 1, 4).size() == 183); // 4 + 16 bottlenecks × 11 + 3
  m.architecture = "vgg16";
  CHECK(cnn_layers(m, 1, 4).size() == 40); // 13 conv + 13 ReLU + 5 pools, avgpool, flatten, 7 classifier modules
}

TEST_CASE("CNN FLOPs and parameters match the published figures")
{
  struct Case {
    const char* architecture;
    double gmacs, million_parameters;
  };
  // torchvision's model cards: ResNet-50 4.09 GFLOPS (multiply-adds) and 25.6 M parameters,
  // ResNet-101 7.80 and 44.5 M, VGG-16 15.47 and 138.4 M.
  auto c = GENERATE(Case{"resnet50", 4.09, 25.557}, Case{"resnet101", 7.80, 44.549}, Case{"vgg16", 15.47, 138.358});
  ModelSpec m;
  m.architecture = c.architecture;
  INFO(c.architecture);
  CHECK(cnn_forward_flops_per_sample(m) / 2 / 1e9 == Approx(c.gmacs).epsilon(0.02));
  CHECK(cnn_parameters(m) / 1e6 == Approx(c.million_parameters).epsilon(0.001));
}

TEST_CASE("CNN pipeline split: torchgpipe's balance as given, else balanced by forward FLOPs")
{
  Scenario s = scenario_from_json(cnn_scenario("resnet101", 4, 8, 8));
  const auto layers = cnn_layers(s.model, 8, 4);
  auto split        = cnn_stage_split(s, layers);
  REQUIRE(split.size() == 4);
  CHECK(std::accumulate(split.begin(), split.end(), 0) == 370);
  double total = 0, largest_layer = 0;
  for (const auto& l : layers) {
    total += l.forward_flops;
    largest_layer = std::max(largest_layer, l.forward_flops);
  }
  size_t next = 0;
  for (int count : split) {
    CHECK(count >= 1);
    double part = 0;
    for (int i = 0; i < count; ++i)
      part += layers[next++].forward_flops;
    CHECK(part <= total / 4 + largest_layer); // no part more than one layer above an even share
  }
  s.parallelism.stage_layers = {44, 92, 124, 110};
  CHECK(cnn_stage_split(s, layers) == std::vector<int>{44, 92, 124, 110});
}

TEST_CASE("CNN report: FLOPs, memory and a pipeline that speeds training up")
{
  Scenario one  = scenario_from_json(cnn_scenario("resnet50", 1, 8, 32));
  Report r      = analytic_report(one);
  CHECK(r.model_flops_per_step == Approx(3 * 256 * cnn_forward_flops_per_sample(one.model)));
  CHECK(std::isfinite(r.memory_peak_bytes));
  CHECK(r.memory_peak_bytes > 1e9); // a ResNet-50 batch of 32 keeps gigabytes of fp32 activations
  CHECK(r.memory.weights == Approx(4 * cnn_parameters(one.model)));
  one.training.recompute = "full";
  CHECK(hardware_flops_per_step(one) == Approx(4.0 / 3.0 * model_flops_per_step(one)));
  CHECK(analytic_report(one).memory_peak_bytes < r.memory_peak_bytes); // recompute keeps only stage inputs

  Report single = simulate_isolated(scenario_from_json(cnn_scenario("resnet50", 1, 8, 32)));
  Report piped  = simulate_isolated(scenario_from_json(cnn_scenario("resnet50", 4, 8, 32)));
  CHECK(single.samples_per_s > 0);
  CHECK(single.hardware_tflops_per_gpu > 0);
  CHECK(piped.samples_per_s > 1.5 * single.samples_per_s);
  CHECK(piped.samples_per_s < 4.0 * single.samples_per_s); // fill and drain cost at least the textbook bubble
  for (const auto& st : piped.stages) {
    CHECK(st.compute_s > 0);
    CHECK(st.memory_bytes > 0);
  }
}

TEST_CASE("CNN plans that cannot run are input errors naming the path")
{
  nlohmann::json doc                    = cnn_scenario("resnet101", 4, 8, 8);
  doc["parallelism"]["stage_layers"]    = {44, 92, 124, 100};
  auto file                             = testing::write_temp_file("cnn-bad.json", doc.dump());
  auto result                           = testing::run_stepsim("validate " + file);
  CHECK(result.exit_code == 2);
  CHECK(result.output.find("parallelism.stage_layers") != std::string::npos);
  CHECK(result.output.find("370") != std::string::npos);

  doc = cnn_scenario("resnet50", 1, 8, 8);
  doc["model"]["architecture"] = "resnet152";
  result = testing::run_stepsim("validate " + testing::write_temp_file("cnn-bad2.json", doc.dump()));
  CHECK(result.exit_code == 2);
  CHECK(result.output.find("model.architecture") != std::string::npos);
}

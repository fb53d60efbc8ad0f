// The HTML pages of `run --html` and `sweep --html`: self-contained, escaped, deterministic,
// complete. tools/pictures/check_html.sh renders them in headless Chromium (ctest html_pages).
#include "support.hpp"

#include "sim/output/html_page.hpp"
#include "sim/output/html_run_report.hpp"
#include "tools/driver/html_sweep_report.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>

using namespace stepsim;

namespace {

size_t count(const std::string& text, const std::string& what)
{
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size()))
    ++n;
  return n;
}

// Anything a browser would fetch: an address in src/href/url(), a stylesheet link, an import,
// a frame, a script request. (SVG's xmlns="http://www.w3.org/2000/svg" is a name, not a fetch.)
std::string external_reference(const std::string& page)
{
  static const std::regex fetch(R"((src|href|srcset|action|poster|data)\s*=\s*["']?\s*(https?:|//|ftp:))"
                                R"(|url\(\s*["']?\s*(https?:|//)|@import|<link\b|<iframe\b|<object\b|<embed\b)"
                                R"(|\bfetch\s*\(|XMLHttpRequest|\bimport\s*\(|WebSocket|EventSource)",
                                std::regex::icase);
  std::smatch m;
  return std::regex_search(page, m, fetch) ? m.str() : "";
}

Report hand_made_report(const std::string& name)
{
  Report r;
  r.name = name;
  r.gpus = 8;
  r.device = "A100-SXM4-80GB";
  r.schedule = "1f1b";
  r.fidelity = "reduced";
  r.framework = "megatron";
  r.micro_batches = 8;
  r.step_time_s = 1.25;
  r.tokens_per_s = 123456;
  r.samples_per_s = 60.3;
  r.mfu = 0.41;
  r.bubble_fraction = 0.2;
  r.memory_peak_bytes = 50e9;
  r.memory_capacity_bytes = 80e9;
  r.memory = {10e9, 10e9, 20e9, 8e9, 2e9};
  for (int s = 0; s < 2; ++s) {
    StageReport st;
    st.stage = s;
    st.rank = 4 * s;
    st.compute_s = 1;
    st.memory_bytes = s == 0 ? 50e9 : 40e9;
    st.device = r.device;
    r.stages.push_back(st);
  }
  r.links.push_back({"link <0>", 1e9, 0.5, 0.4});
  return r;
}

nlohmann::json result(size_t point, const std::string& status, double tokens_per_s, double memory_bytes,
                      const std::string& name = "sweep")
{
  nlohmann::json j = {{"point", point}, {"of", 5}, {"sweep_digest", "d"}, {"parameters", {{"training.x", point}}},
                      {"status", status}, {"reason", status == "ok" ? "" : "no <room> here"}};
  if (status == "ok") {
    Report r = hand_made_report(name);
    r.tokens_per_s = tokens_per_s;
    r.memory_peak_bytes = memory_bytes;
    r.energy_j_per_token = 1e6 / tokens_per_s;
    j["report"] = to_json(r);
  }
  return j;
}

std::vector<nlohmann::json> five_results()
{
  return {result(0, "ok", 1000, 40e9), result(1, "ok", 2000, 60e9), result(2, "infeasible", 0, 0),
          result(3, "ok", 900, 50e9), result(4, "error", 0, 0)};
}

} // namespace

TEST_CASE("html: data embedded as JSON cannot close its script element", "[html]")
{
  const std::string s = html::json_script("d", {{"name", "</script><b>x</b><!--"}});
  CHECK(count(s, "</script>") == 1);
  CHECK(s.find("<b>") == std::string::npos);
  CHECK(s.find("<!--") == std::string::npos);
  CHECK(s.find("\\u003c/script\\u003e") != std::string::npos);
  CHECK(html::escape("a&b<c>\"d'") == "a&amp;b&lt;c&gt;&quot;d&#39;");
}

TEST_CASE("html: a run page escapes the scenario's name, fetches nothing and is the same bytes twice", "[html]")
{
  const Report r = hand_made_report("evil</script><b>bold</b>");
  const std::string page = html_run_report(r, nullptr);
  INFO(external_reference(page));
  CHECK(external_reference(page).empty());
  CHECK(page.find("<b>bold") == std::string::npos);
  CHECK(page.find("evil&lt;/script&gt;&lt;b&gt;bold") != std::string::npos);
  // Only the page's own two script elements close: the embedded report and the code.
  CHECK(count(page, "</script>") == 2);
  CHECK(page.find("link &lt;0&gt;") != std::string::npos); // link names are escaped too
  CHECK(html_run_report(r, nullptr) == page);
}

TEST_CASE("html: a simulated run's page has every section, and twice the same bytes", "[html]")
{
  std::string file = testing::write_temp_file("html-run.scenario.json", testing::small_scenario(2, 2, 4).dump());
  std::string a = testing::write_temp_file("html-run-a.html", ""), b = testing::write_temp_file("html-run-b.html", "");
  std::string json = testing::write_temp_file("html-run.json", "");
  auto first = testing::run_stepsim("run " + file + " -q --html " + a + " --json " + json);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  REQUIRE(testing::run_stepsim("run " + file + " -q --html " + b).exit_code == 0);
  const std::string page = testing::read_text_file(a);
  CHECK(page == testing::read_text_file(b));
  CHECK(external_reference(page).empty());
  for (const char* section : {"id=\"summary\"", "id=\"stages\"", "id=\"timeline\"", "id=\"memory\"", "id=\"links\"",
                              "id=\"stepsim-report\"", "<svg"})
    CHECK(page.find(section) != std::string::npos);
  CHECK(page.find("<h1>small</h1>") != std::string::npos);
  CHECK(count(page, "<g class=\"stage\"") == 2); // the Gantt chart, one group per stage
  // --html collects links for the page only: the JSON report stays as without it.
  CHECK(!nlohmann::json::parse(testing::read_text_file(json)).contains("links"));
}

TEST_CASE("html: a sweep page has one row per point, plots only the simulated ones and marks the front", "[html]")
{
  const auto results = five_results();
  const std::string page = html_sweep_report("my</script><b>sweep", {"training.x"}, results);
  INFO(external_reference(page));
  CHECK(external_reference(page).empty());
  CHECK(page.find("<b>sweep") == std::string::npos);
  CHECK(page.find("my&lt;/script&gt;&lt;b&gt;sweep") != std::string::npos);
  CHECK(count(page, "</script>") == 2);
  CHECK(count(page, "<tr id=\"point-") == results.size());
  for (size_t p = 0; p < results.size(); ++p)
    CHECK(page.find(fmt::format("<tr id=\"point-{}\"", p)) != std::string::npos);
  // Three simulated points in each of the two plots; 0 and 1 are the memory front, 3 is beaten by 0.
  CHECK(count(page, "<circle") == 6);
  CHECK(page.find("class=\"h-ok h-front\"") != std::string::npos);
  CHECK(page.find("<tr id=\"point-3\" data-point=\"3\" class=\"h-ok\">") != std::string::npos);
  CHECK(page.find("no &lt;room&gt; here") != std::string::npos); // the infeasible point's reason, listed
  for (const char* section : {"id=\"pareto\"", "id=\"excluded\"", "id=\"points\"", "id=\"stepsim-sweep\""})
    CHECK(page.find(section) != std::string::npos);
  CHECK(html_sweep_report("my</script><b>sweep", {"training.x"}, results) == page);
}

TEST_CASE("html: sweep --html writes the page of the points it ran", "[html]")
{
  std::string base = testing::write_temp_file("html-sweep-base.json", testing::small_scenario(2, 2, 8).dump());
  nlohmann::json sweep = {{"base", std::filesystem::path(base).filename().string()},
                          {"grid", {{"parallelism.schedule", {"1f1b", "interleaved_1f1b"}},
                                    {"training.micro_batch_size", {1, 2}}}}};
  std::string file = testing::write_temp_file("html-sweep.json", sweep.dump());
  std::string dir  = std::filesystem::path(file).parent_path().string();
  auto run = testing::run_stepsim("sweep " + file + " -q -o " + dir + "/html-sweep --html " + dir + "/html-sweep.html");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const std::string page = testing::read_text_file(dir + "/html-sweep.html");
  CHECK(count(page, "<tr id=\"point-") == 4);
  CHECK(page.find("interleaved_1f1b") != std::string::npos);
  CHECK(external_reference(page).empty());
}

// Reports recorded before the code moved into the layout of issue 19 (tests/golden/manifest.json):
// every shipped scenario, every validation case and a few variants that take other roads through
// the engine (full fidelity, the analytic network, jitter, stragglers, link accounting). A
// restructuring must leave each JSON report byte-identical; a change of prediction is made on
// purpose, by re-recording with STEPSIM_RECORD_GOLDEN=1 and saying why in the commit.
#include "support.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

using namespace stepsim;

namespace {

// The shell word for `text` in single quotes (the --set values hold JSON).
std::string quoted(const std::string& text)
{
  std::string q = "'";
  for (char c : text)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

} // namespace

TEST_CASE("every recorded report is reproduced byte for byte", "[golden]")
{
  const std::string root     = STEPSIM_SOURCE_DIR;
  const auto manifest        = nlohmann::json::parse(testing::read_text_file(root + "/tests/golden/manifest.json"));
  const bool record          = std::getenv("STEPSIM_RECORD_GOLDEN") != nullptr;
  const auto& entries        = manifest.at("entries");
  REQUIRE(entries.size() >= 40); // the 17 scenarios, the 19 validation cases and the variants
  for (const auto& e : entries) {
    const std::string expected_file = root + "/tests/golden/" + e.at("report").get<std::string>();
    SECTION(e.at("report").get<std::string>())
    {
      std::string arguments = "run ";
      arguments += root + "/" + e.at("scenario").get<std::string>() + " --quiet";
      // Appended piece by piece: GCC 12 sees a false -Wstringop-overflow in `" " + std::string`.
      for (const auto& a : e.at("set")) {
        arguments += " --set ";
        arguments += quoted(a.get<std::string>());
      }
      for (const auto& o : e.at("options")) {
        arguments += ' ';
        arguments += quoted(o.get<std::string>());
      }
      const std::string out = testing::write_temp_file("golden.json", "");
      const auto result     = testing::run_stepsim(arguments + " --json " + out);
      INFO(arguments << "\n" << result.output);
      REQUIRE(result.exit_code == 0);
      const std::string actual = testing::read_text_file(out);
      if (record) {
        std::ofstream(expected_file, std::ios::binary) << actual;
        continue;
      }
      CHECK(actual == testing::read_text_file(expected_file));
    }
  }
}

// The bad-input corpus (tests/bad_inputs/README.md): every NAME.json goes through the real
// `stepsim run` and must exit with 2, print every line of NAME.expected on stderr, and name a
// JSON path (or, for malformed JSON, a line and column) in each of its error lines.
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cctype>
#include <cstdio>
#include <sstream>
#include <sys/wait.h>

using namespace stepsim;
namespace fs = std::filesystem;

namespace {

const fs::path kCorpus = fs::path(STEPSIM_SOURCE_DIR) / "tests" / "bad_inputs";

std::vector<std::string> corpus_cases()
{
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kCorpus))
    if (entry.path().extension() == ".json")
      names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> lines_of(const std::string& text)
{
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty())
      lines.push_back(line);
  return lines;
}

std::string read_file(const fs::path& path)
{
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool is_identifier(const std::string& s)
{
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])))
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// "tensor", "node_groups[0]", "a[1][2]".
bool is_path_part(const std::string& part)
{
  size_t bracket = part.find('[');
  if (!is_identifier(part.substr(0, bracket)))
    return false;
  while (bracket != std::string::npos) {
    size_t close = part.find(']', bracket);
    if (close == std::string::npos || close == bracket + 1)
      return false;
    for (size_t i = bracket + 1; i < close; ++i)
      if (!std::isdigit(static_cast<unsigned char>(part[i])))
        return false;
    if (close + 1 == part.size())
      return true;
    if (part[close + 1] != '[')
      return false;
    bracket = close + 1;
  }
  return true;
}

// "error: parallelism.tensor: ...", "error: platform.node_groups[0].nic.count: ...",
// "error: (top level): ...", or "error: FILE.json: malformed JSON at line L, column C: ...".
bool names_a_location(const std::string& error_line)
{
  const std::string prefix = "error: ";
  if (error_line.rfind(prefix, 0) != 0)
    return false;
  std::string rest = error_line.substr(prefix.size());
  if (rest.rfind("(top level): ", 0) == 0)
    return true;
  size_t malformed = rest.find(".json: malformed JSON at line ");
  if (malformed != std::string::npos) {
    int line = 0, column = 0;
    return std::sscanf(rest.c_str() + malformed, ".json: malformed JSON at line %d, column %d: ", &line, &column) == 2 &&
           line >= 1 && column >= 1;
  }
  size_t colon = rest.find(": ");
  if (colon == std::string::npos || colon == 0)
    return false;
  std::string path = rest.substr(0, colon);
  for (size_t start = 0;;) {
    size_t dot = path.find('.', start);
    if (!is_path_part(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start)))
      return false;
    if (dot == std::string::npos)
      return true;
    start = dot + 1;
  }
}

// Runs `stepsim ARGUMENTS` and keeps only its stderr (the error lines must be there, not on stdout).
testing::CommandResult run_for_stderr(const std::string& arguments)
{
  std::string command = std::string(STEPSIM_BINARY) + " " + arguments + " 2>&1 1>/dev/null";
  FILE* pipe          = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;)
    output.append(buffer, n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

} // namespace

TEST_CASE("an error line names a JSON path, the top level, or a line and column", "[bad_inputs]")
{
  CHECK(names_a_location("error: parallelism.tensor: expected a positive integer"));
  CHECK(names_a_location("error: platform.node_groups[0].nic.count: 3 NICs"));
  CHECK(names_a_location("error: (top level): expected an object"));
  CHECK(names_a_location("error: /tmp/x.json: malformed JSON at line 4, column 3: syntax error"));
  CHECK_FALSE(names_a_location("error: the simulation ended at nan s"));
  CHECK_FALSE(names_a_location("error: cannot open: the file"));
  CHECK_FALSE(names_a_location("error: platform.node_groups[].gpu: unknown"));
  CHECK_FALSE(names_a_location("warning: parallelism.tensor: x"));
}

TEST_CASE("the bad-input corpus has at least 40 cases, each with its expected message", "[bad_inputs]")
{
  auto names = corpus_cases();
  CHECK(names.size() >= 40);
  for (const auto& name : names) {
    INFO(name);
    REQUIRE(fs::exists(kCorpus / (name + ".expected")));
    CHECK_FALSE(lines_of(read_file(kCorpus / (name + ".expected"))).empty());
  }
}

TEST_CASE("the corpus's base scenario is valid, so each case fails for its own change", "[bad_inputs]")
{
  auto r = testing::run_stepsim("validate " + (kCorpus / "base.scenario").string());
  INFO(r.output);
  CHECK(r.exit_code == 0);
}

TEST_CASE("every bad input exits with 2 and names the JSON path", "[bad_inputs]")
{
  for (const auto& name : corpus_cases()) {
    auto r              = run_for_stderr("run " + (kCorpus / (name + ".json")).string());
    const auto& stderr_ = r.output;
    INFO(name << "\nstderr:\n" << stderr_);
    CHECK(r.exit_code == 2);
    for (const auto& expected : lines_of(read_file(kCorpus / (name + ".expected"))))
      CHECK(stderr_.find(expected) != std::string::npos);
    auto error_lines = lines_of(stderr_);
    // Under `make sanitize`, ASan warns (three lines) when SimGrid switches an actor's stack: a
    // real sanitizer error aborts instead of exiting 2, so its warnings are not stepsim's lines.
    error_lines.erase(std::remove_if(error_lines.begin(), error_lines.end(),
                                     [](const std::string& l) {
                                       return l.rfind("==", 0) == 0 || l == "False positive error reports may follow" ||
                                              l.rfind("For details see https://github.com/google/sanitizers/", 0) == 0;
                                     }),
                      error_lines.end());
    CHECK_FALSE(error_lines.empty());
    for (const auto& line : error_lines) {
      INFO(line);
      CHECK(names_a_location(line));
    }
  }
}

TEST_CASE("a scenario that does not fit in memory runs with --allow-oom", "[bad_inputs]")
{
  auto file = (kCorpus / "out_of_memory.json").string();
  auto json = testing::write_temp_file("oom-report.json", "");
  auto r    = testing::run_stepsim("run " + file + " --allow-oom --quiet --json " + json);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto report = nlohmann::json::parse(read_file(json));
  CHECK(report["fits_in_memory"] == false);
  CHECK(report["memory_peak_bytes"].get<double>() > report["memory_capacity_bytes"].get<double>());
  CHECK(report["step_time_s"].get<double>() > 0);
}

TEST_CASE("validate takes a scenario that does not fit when it sets simulation.allow_oom, and says so",
          "[bad_inputs]")
{
  auto file   = (kCorpus / "out_of_memory.json").string();
  auto refused = testing::run_stepsim("validate " + file);
  CHECK(refused.exit_code == 2);
  CHECK(refused.output.find("does not fit in memory") != std::string::npos);
  auto allowed = testing::run_stepsim("validate " + file + " --set simulation.allow_oom=true");
  INFO(allowed.output);
  CHECK(allowed.exit_code == 0);
  CHECK(allowed.output.find("valid; ") != std::string::npos);
  CHECK(allowed.output.find("does not fit in memory") != std::string::npos);
}

TEST_CASE("a field refused once is not refused again for the value the reader kept in its place", "[bad_inputs]")
{
  // hidden_size 10^12 is out of range; the reader carries on with a stand-in so that the other
  // fields are still checked, and that stand-in is not divisible by the 8 heads. Only the first
  // problem is the user's.
  auto r = run_for_stderr("run " + (kCorpus / "huge_hidden_size.json").string());
  INFO(r.output);
  CHECK(r.exit_code == 2);
  size_t lines = 0;
  for (const auto& line : lines_of(r.output))
    lines += line.find("model.hidden_size:") != std::string::npos ? 1 : 0;
  CHECK(lines == 1);
  CHECK(r.output.find("not divisible") == std::string::npos);
}

// Running a simulation in a child process: SimGrid allows one engine per process.
#include "sim/simulate.hpp"

#include "sim/core/input_error.hpp"

#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace stepsim {

void die_with_parent(int parent_pid)
{
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent_pid)
    _exit(1);
}

std::string run_in_child(const std::function<std::string()>& body, long* peak_rss_kb)
{
  int fds[2];
  if (pipe(fds) != 0)
    throw std::runtime_error("cannot create a pipe for the simulation process");
  std::fflush(nullptr); // else the child would write the parent's buffered output a second time
  const pid_t parent = getpid();
  pid_t pid          = fork();
  if (pid < 0)
    throw std::runtime_error("cannot fork the simulation process");
  if (pid == 0) {
    die_with_parent(parent);
    close(fds[0]);
    std::string text = body();
    size_t written   = 0;
    while (written < text.size()) {
      ssize_t n = write(fds[1], text.data() + written, text.size() - written);
      if (n <= 0)
        break;
      written += static_cast<size_t>(n);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buffer[65536];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof buffer)) > 0)
    text.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  if (peak_rss_kb != nullptr)
    *peak_rss_kb = usage.ru_maxrss;
  if (text.empty())
    throw std::runtime_error(fmt::format("the simulation process died (status {})", status));
  return text;
}

Report simulate_isolated(const Scenario& s)
{
  nlohmann::json out = nlohmann::json::parse(run_in_child([&] {
    nlohmann::json result;
    try {
      result["report"] = to_json(simulate(s));
    } catch (const InputError& e) {
      result["input_error"] = e.problems();
    } catch (const std::exception& e) {
      result["error"] = e.what();
    }
    return result.dump();
  }));
  if (out.contains("input_error"))
    throw InputError(out["input_error"].get<std::vector<std::string>>());
  if (out.contains("error"))
    throw std::runtime_error(out["error"].get<std::string>());
  return report_from_json(out["report"]);
}

} // namespace stepsim

#include "tools/data_parallel_setup.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/status.h"

namespace sluice::tools {

namespace {

extern "C" void OnStopSignal(int) { ep::ccl::World::RequestStop(); }

}  // namespace

absl::StatusOr<std::shared_ptr<ep::ccl::World>> JoinWorld(absl::string_view command,
                                                          double timeout_s) {
  ep::ccl::WorldOptions options;
  options.timeout = absl::Seconds(timeout_s);
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<ep::ccl::World> world,
                          ep::ccl::World::FromEnvironment(options));
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  std::printf("%s: data parallel: rank %d of %d (pid %d, %s)\n", std::string(command).c_str(),
              world->rank(), world->size(), static_cast<int>(getpid()),
              std::string(world->backend()).c_str());
  std::fflush(stdout);
  if (world->rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) {
    return absl::InternalError("could not silence the stdout of a rank other than 0");
  }
  return world;
}

std::string PerRankPath(const std::string& path, int rank) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
    return absl::StrCat(path, ".rank", rank);
  }
  return absl::StrCat(path.substr(0, dot), ".rank", rank, path.substr(dot));
}

}  // namespace sluice::tools

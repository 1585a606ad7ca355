#include "ep/ccl/world.h"

#include <atomic>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ep/ccl/internal/backends.h"
#include "ep/ccl/internal/local_communicator.h"
#include "ep/ccl/nccl/nccl_communicator.h"
#include "ep/device.h"

namespace sluice::ep::ccl {

namespace {

// Set by RequestStop, from a signal handler: lock-free, and read with relaxed loads by
// waits that poll it (nothing else is published through it).
std::atomic<bool> stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

class LocalWorld final : public World {
 public:
  explicit LocalWorld(WorldOptions options) : World(options) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::string_view backend() const override { return "local"; }
  absl::StatusOr<std::unique_ptr<Communicator>> NewCommunicator(const Device& device) override {
    return std::make_unique<internal::LocalCommunicator>(
        /*host_memory=*/device.id().type() != DeviceType::kCuda);
  }
  [[noreturn]] void Abort(int code) override { std::_Exit(code); }
};

absl::Status CheckOptions(const WorldOptions& options) {
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the collective timeout must be positive; it is ", absl::FormatDuration(options.timeout)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<World>> World::FromEnvironment(WorldOptions options) {
  SLUICE_RETURN_IF_ERROR(CheckOptions(options));
  if (!LaunchedByMpi()) return Local(options);
  return internal::GetMpiWorld(options);
}

std::shared_ptr<World> World::Local(WorldOptions options) {
  return std::make_shared<LocalWorld>(options);
}

bool World::LaunchedByMpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

bool World::MpiBuilt() { return internal::MpiBuilt(); }
bool World::NcclBuilt() { return internal::NcclBuilt(); }

void World::RequestStop() { stop_requested.store(true, std::memory_order_relaxed); }
bool World::StopRequested() { return stop_requested.load(std::memory_order_relaxed); }

}  // namespace sluice::ep::ccl

// A minimal embedder: runs one host task on sim:0's compute stream through the installed
// Sluice package, then prints OK. Built and run by scripts/install_test.sh.
#include <cstdio>
#include <utility>

#include "core/status.h"
#include "ep/runtime.h"

namespace {

absl::Status Run() {
  SLUICE_ASSIGN_OR_RETURN(auto runtime, sluice::ep::Runtime::Create());
  SLUICE_ASSIGN_OR_RETURN(sluice::ep::Device * device, runtime->GetDevice("sim:0"));
  SLUICE_ASSIGN_OR_RETURN(sluice::ep::Stream * stream,
                          device->GetStream(sluice::StreamType::kCompute));
  bool ran = false;  // written on the stream's thread; Sync() orders it before the read
  SLUICE_RETURN_IF_ERROR(stream->Launch([&ran]() -> absl::Status {
    ran = true;
    return absl::OkStatus();
  }));
  SLUICE_RETURN_IF_ERROR(stream->Sync());
  return ran ? absl::OkStatus() : absl::InternalError("the host task did not run");
}

}  // namespace

int main() {
  const absl::Status status = Run();
  if (!status.ok()) {
    std::fprintf(stderr, "consumer: %s\n", status.ToString().c_str());
    return 1;
  }
  std::puts("OK");
  return 0;
}

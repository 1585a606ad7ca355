// CompileToPtx over NVRTC. Compiled only with the CUDA toolkit; ptx_compiler_stub.cc otherwise.
#include "ep/cuda/ptx_compiler.h"

#include <nvrtc.h>

#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"

namespace sluice::ep {
namespace {

absl::Status NvrtcError(nvrtcResult result, absl::string_view call) {
  return absl::InternalError(absl::StrCat(call, " failed: ", nvrtcGetErrorString(result)));
}

// Owns one NVRTC program (RAII for nvrtcCreateProgram / nvrtcDestroyProgram).
class Program {
 public:
  Program() = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program() {
    if (program_ != nullptr) nvrtcDestroyProgram(&program_);
  }
  nvrtcProgram* out() { return &program_; }
  nvrtcProgram get() const { return program_; }

 private:
  nvrtcProgram program_ = nullptr;
};

std::string Log(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size == 0) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

absl::Status CheckArchitecture(int arch) {
  int count = 0;
  nvrtcResult result = nvrtcGetNumSupportedArchs(&count);
  if (result != NVRTC_SUCCESS) return NvrtcError(result, "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(static_cast<size_t>(count));
  result = nvrtcGetSupportedArchs(archs.data());
  if (result != NVRTC_SUCCESS) return NvrtcError(result, "nvrtcGetSupportedArchs");
  for (int a : archs) {
    if (a == arch) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("NVRTC cannot compile for compute_", arch,
                                                 "; it supports ", absl::StrJoin(archs, ", ")));
}

}  // namespace

absl::StatusOr<NvrtcVersion> GetNvrtcVersion() {
  NvrtcVersion version;
  const nvrtcResult result = nvrtcVersion(&version.major, &version.minor);
  if (result != NVRTC_SUCCESS) return NvrtcError(result, "nvrtcVersion");
  return version;
}

absl::StatusOr<std::string> CompileToPtx(const std::string& source, const std::string& name,
                                         int compute_capability_major,
                                         int compute_capability_minor) {
  if (compute_capability_major < 0 || compute_capability_minor < 0 ||
      compute_capability_minor > 9) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad compute capability ", compute_capability_major, ".", compute_capability_minor));
  }
  const int arch = compute_capability_major * 10 + compute_capability_minor;
  SLUICE_RETURN_IF_ERROR(CheckArchitecture(arch));

  Program program;
  nvrtcResult result =
      nvrtcCreateProgram(program.out(), source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (result != NVRTC_SUCCESS) return NvrtcError(result, "nvrtcCreateProgram");

  const std::string arch_option = absl::StrCat("--gpu-architecture=compute_", arch);
  const char* options[] = {arch_option.c_str(), "--std=c++17",      "--fmad=false",
                           "--prec-div=true",   "--prec-sqrt=true", "--ftz=false"};
  result = nvrtcCompileProgram(program.get(), static_cast<int>(std::size(options)), options);
  if (result == NVRTC_ERROR_COMPILATION || result == NVRTC_ERROR_INVALID_OPTION) {
    return absl::InvalidArgumentError(absl::StrCat("NVRTC could not compile ", name, " (",
                                                   nvrtcGetErrorString(result), "):\n",
                                                   Log(program.get())));
  }
  if (result != NVRTC_SUCCESS) {
    return absl::InternalError(absl::StrCat("nvrtcCompileProgram of ", name, " failed: ",
                                            nvrtcGetErrorString(result), "\n", Log(program.get())));
  }

  size_t size = 0;
  result = nvrtcGetPTXSize(program.get(), &size);
  if (result != NVRTC_SUCCESS) return NvrtcError(result, "nvrtcGetPTXSize");
  std::string ptx(size, '\0');
  result = nvrtcGetPTX(program.get(), ptx.data());
  if (result != NVRTC_SUCCESS) return NvrtcError(result, "nvrtcGetPTX");
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();  // the size counts the terminator
  return ptx;
}

}  // namespace sluice::ep

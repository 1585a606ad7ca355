#include "core/stream_id.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace sluice {

std::string StreamKey::ToString() const {
  std::string out = absl::StrCat(device.ToString(), "/", StreamTypeName(type));
  if (index != 0) absl::StrAppend(&out, ":", index);
  return out;
}

absl::StatusOr<StreamKey> StreamKey::Parse(absl::string_view text) {
  StreamKey key;
  const size_t slash = text.find('/');
  SLUICE_ASSIGN_OR_RETURN(key.device, Device::Parse(text.substr(0, slash)));
  if (slash == absl::string_view::npos) return key;
  absl::string_view rest = text.substr(slash + 1);
  const size_t colon = rest.find(':');
  absl::StatusOr<StreamType> type = ParseStreamType(rest.substr(0, colon));
  if (!type.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid stream '", text, "': ", type.status().message()));
  }
  key.type = *type;
  if (colon != absl::string_view::npos) {
    const absl::string_view digits = rest.substr(colon + 1);
    if (digits.empty() || digits.size() > 4 ||
        digits.find_first_not_of("0123456789") != absl::string_view::npos ||
        !absl::SimpleAtoi(digits, &key.index)) {
      return absl::InvalidArgumentError(absl::StrCat("invalid stream '", text, "': index '", digits,
                                                     "' is not a non-negative integer"));
    }
  }
  return key;
}

StreamIdTable::StreamIdTable() : keys_(new StreamKey[kCapacity]) {}

absl::StatusOr<StreamId> StreamIdTable::Intern(const StreamKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = ids_.find(key);
  if (it != ids_.end()) return it->second;
  const int next = size_.load(std::memory_order_relaxed);
  if (next >= kCapacity) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot create stream ", key.ToString(),
                                                     ": the limit of ", kCapacity,
                                                     " streams is reached"));
  }
  keys_[next] = key;
  const StreamId id(next);
  ids_.emplace(key, id);
  size_.store(next + 1, std::memory_order_release);
  return id;
}

absl::StatusOr<StreamId> StreamIdTable::Find(const StreamKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = ids_.find(key);
  if (it == ids_.end()) {
    return absl::NotFoundError(absl::StrCat("stream ", key.ToString(), " was never created"));
  }
  return it->second;
}

}  // namespace sluice

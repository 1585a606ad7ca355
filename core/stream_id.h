// StreamId: a dense small integer naming one stream (device, stream type, index), so that
// the VM can compare streams with one instruction and index per-stream arrays directly.
// StreamIdTable interns keys into ids; a Runtime owns one.
#ifndef SLUICE_CORE_STREAM_ID_H_
#define SLUICE_CORE_STREAM_ID_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/device.h"
#include "core/stream_type.h"

namespace sluice {

// What a stream is: (device, role, index among streams of that role on that device).
struct StreamKey {
  Device device;
  StreamType type = StreamType::kCompute;
  int index = 0;

  // "sim:0/compute:1"; the index is omitted when 0 ("cpu/compute").
  std::string ToString() const;
  // Parses ToString()'s output; also accepts "DEVICE" alone (compute stream 0) and
  // "DEVICE/TYPE".
  static absl::StatusOr<StreamKey> Parse(absl::string_view text);

  friend bool operator==(const StreamKey& a, const StreamKey& b) {
    return a.device == b.device && a.type == b.type && a.index == b.index;
  }
  template <typename H>
  friend H AbslHashValue(H h, const StreamKey& k) {
    return H::combine(std::move(h), k.device, k.type, k.index);
  }
};

// An interned StreamKey. Value type; trivially copyable.
class StreamId {
 public:
  constexpr StreamId() = default;
  constexpr explicit StreamId(int32_t value) : value_(value) {}
  constexpr int32_t value() const { return value_; }
  constexpr bool valid() const { return value_ >= 0; }
  friend constexpr bool operator==(StreamId a, StreamId b) { return a.value_ == b.value_; }
  friend constexpr bool operator!=(StreamId a, StreamId b) { return a.value_ != b.value_; }
  friend constexpr bool operator<(StreamId a, StreamId b) { return a.value_ < b.value_; }
  template <typename H>
  friend H AbslHashValue(H h, StreamId s) {
    return H::combine(std::move(h), s.value_);
  }

 private:
  int32_t value_ = -1;
};

// Interns StreamKeys into dense ids 0, 1, 2, ... in first-seen order.
// Thread-safe. Intern takes a mutex; key() is lock-free: an id can only be obtained from
// Intern/Find, whose caller therefore happens-after the entry was written.
class StreamIdTable {
 public:
  static constexpr int kCapacity = 4096;

  StreamIdTable();
  StreamIdTable(const StreamIdTable&) = delete;
  StreamIdTable& operator=(const StreamIdTable&) = delete;

  // The id of `key`, creating it on first use. ResourceExhausted past kCapacity streams.
  absl::StatusOr<StreamId> Intern(const StreamKey& key);
  // The id of `key` if it was interned.
  absl::StatusOr<StreamId> Find(const StreamKey& key) const;
  // The key of an id returned by this table. Requires id.valid() && id < size().
  const StreamKey& key(StreamId id) const { return keys_[id.value()]; }
  // Number of interned ids (all ids are below it).
  int size() const { return size_.load(std::memory_order_acquire); }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<StreamKey, StreamId> ids_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<StreamKey[]> keys_;  // entries [0, size_) are immutable once written
  std::atomic<int> size_{0};           // release on Intern, acquire in size()
};

}  // namespace sluice

#endif  // SLUICE_CORE_STREAM_ID_H_

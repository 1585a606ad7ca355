// AttrMap: the named, typed attributes an OpCall passes to its kernel (a fill value, a
// scale factor, an axis list). Attributes are part of an instruction, so the recorder writes
// them and the replayer reads them back: every value has a one-line text form.
#ifndef SLUICE_VM_ATTRS_H_
#define SLUICE_VM_ATTRS_H_

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::vm {

// A reference to another graph of the same program by index (a Program's sub-block): the
// attribute type of control-flow ops (`cond`'s branches, `while`'s condition and body).
// Nothing in the VM follows it; the interpreter lowers the block it names. Text form
// `b:INDEX`.
struct BlockRef {
  int64_t index = 0;
  friend bool operator==(const BlockRef& a, const BlockRef& b) { return a.index == b.index; }
};

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, BlockRef>;

// Value type; thread-compatible. Ordered by name so that the text form is canonical.
class AttrMap {
 public:
  AttrMap() = default;

  AttrMap& Set(std::string name, AttrValue value) {
    values_[std::move(name)] = std::move(value);
    return *this;
  }
  bool empty() const { return values_.empty(); }
  // Removes `name`; false when it was absent.
  bool Erase(absl::string_view name) {
    auto it = values_.find(name);
    if (it == values_.end()) return false;
    values_.erase(it);
    return true;
  }
  const std::map<std::string, AttrValue, std::less<>>& values() const { return values_; }

  // NotFound naming the attribute when absent; InvalidArgument when it has another type.
  absl::StatusOr<int64_t> GetInt(absl::string_view name) const;
  absl::StatusOr<double> GetFloat(absl::string_view name) const;
  absl::StatusOr<std::string> GetString(absl::string_view name) const;
  absl::StatusOr<std::vector<int64_t>> GetInts(absl::string_view name) const;
  absl::StatusOr<BlockRef> GetBlock(absl::string_view name) const;

  // `name=i:3,alpha=f:0.5,mode=s:fast,axes=v:0;2,body=b:1`; empty for no attributes. Doubles are
  // written with 17 significant digits, so Parse(ToString()) reproduces them exactly.
  // Strings may not contain ',', '=' or whitespace (InvalidArgument from Parse otherwise).
  std::string ToString() const;
  static absl::StatusOr<AttrMap> Parse(absl::string_view text);

  // Value by value, with one exception to the doubles' ==: NaN equals NaN, so that a map (or
  // a program) holding a NaN attribute equals itself and what Parse(ToString()) gives back.
  friend bool operator==(const AttrMap& a, const AttrMap& b);

 private:
  std::map<std::string, AttrValue, std::less<>> values_;
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_ATTRS_H_

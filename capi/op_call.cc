// Attribute lists and op calls by name.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "capi/internal/handles.h"
#include "capi/sluice_c_api.h"
#include "core/status.h"

using sluice::capi::Guard;
using sluice::capi::NotNull;

namespace {

// Sets `name` to `value` in `attrs` after checking both handles.
absl::Status SetAttr(SluiceAttrs* attrs, const char* name, sluice::vm::AttrValue value,
                     const char* function) {
  SLUICE_RETURN_IF_ERROR(NotNull(attrs, function, "attrs"));
  SLUICE_RETURN_IF_ERROR(NotNull(name, function, "name"));
  if (*name == '\0') {
    return absl::InvalidArgumentError(absl::StrCat(function, ": name is empty"));
  }
  attrs->attrs.Set(name, std::move(value));
  return absl::OkStatus();
}

}  // namespace

extern "C" {

SluiceStatus* sluice_attrs_create(SluiceAttrs** out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    *out = new SluiceAttrs;
    return absl::OkStatus();
  });
}

void sluice_attrs_release(SluiceAttrs* attrs) { delete attrs; }

SluiceStatus* sluice_attrs_set_int(SluiceAttrs* attrs, const char* name, int64_t value) {
  return Guard(__func__, [&, fn = __func__] { return SetAttr(attrs, name, value, fn); });
}

SluiceStatus* sluice_attrs_set_float(SluiceAttrs* attrs, const char* name, double value) {
  return Guard(__func__, [&, fn = __func__] { return SetAttr(attrs, name, value, fn); });
}

SluiceStatus* sluice_attrs_set_bool(SluiceAttrs* attrs, const char* name, int value) {
  return Guard(__func__, [&, fn = __func__] {
    return SetAttr(attrs, name, int64_t{value != 0 ? 1 : 0}, fn);
  });
}

SluiceStatus* sluice_attrs_set_string(SluiceAttrs* attrs, const char* name, const char* value) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(value, fn, "value"));
    return SetAttr(attrs, name, std::string(value), fn);
  });
}

SluiceStatus* sluice_attrs_set_ints(SluiceAttrs* attrs, const char* name, const int64_t* values,
                                    size_t count) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    if (count > 0) SLUICE_RETURN_IF_ERROR(NotNull(values, fn, "values"));
    return SetAttr(attrs, name, std::vector<int64_t>(values, values + count), fn);
  });
}

SluiceStatus* sluice_op_call(SluiceContext* context, const char* op,
                             const SluiceTensor* const* inputs, const size_t* slot_sizes,
                             size_t num_slots, const SluiceAttrs* attrs, const char* device,
                             SluiceTensor** outputs, size_t capacity, size_t* num_outputs) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(context, fn, "context"));
    SLUICE_RETURN_IF_ERROR(NotNull(op, fn, "op"));
    SLUICE_RETURN_IF_ERROR(NotNull(num_outputs, fn, "num_outputs"));
    if (capacity > 0) SLUICE_RETURN_IF_ERROR(NotNull(outputs, fn, "outputs"));
    std::vector<std::vector<sluice::eager::Tensor>> slots(num_slots);
    size_t next = 0;
    for (size_t s = 0; s < num_slots; ++s) {
      const size_t count = slot_sizes == nullptr ? 1 : slot_sizes[s];
      for (size_t k = 0; k < count; ++k, ++next) {
        SLUICE_RETURN_IF_ERROR(NotNull(inputs, fn, "inputs"));
        if (inputs[next] == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat(fn, ": op '", op, "': inputs[", next, "] (slot ", s, ") is NULL"));
        }
        slots[s].push_back(inputs[next]->tensor);
      }
    }
    std::optional<sluice::Device> where;
    if (device != nullptr) {
      SLUICE_ASSIGN_OR_RETURN(where, sluice::capi::ParseDevice(device, fn, "device"));
    }
    const sluice::vm::AttrMap none;
    SLUICE_ASSIGN_OR_RETURN(
        std::vector<sluice::eager::Tensor> results,
        context->context.Call(op, slots, attrs == nullptr ? none : attrs->attrs, where));
    if (results.size() > capacity) {
      return absl::OutOfRangeError(absl::StrCat(fn, ": op '", op, "' has ", results.size(),
                                                " outputs; capacity is ", capacity));
    }
    // Every handle made before any is handed out: a throw on the way (out of memory) frees
    // those made so far, and the outputs stay unchanged, as the header promises.
    std::vector<std::unique_ptr<SluiceTensor>> handles;
    handles.reserve(results.size());
    for (sluice::eager::Tensor& t : results) {
      handles.emplace_back(sluice::capi::NewTensor(std::move(t)));
    }
    for (size_t i = 0; i < handles.size(); ++i) outputs[i] = handles[i].release();
    *num_outputs = results.size();
    return absl::OkStatus();
  });
}

}  // extern "C"

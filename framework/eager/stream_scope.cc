#include "framework/eager/stream_scope.h"

namespace sluice::eager {
namespace {

thread_local const StreamScope* current_scope = nullptr;

}  // namespace

StreamScope::StreamScope(StreamKey stream) : stream_(stream), previous_(current_scope) {
  current_scope = this;
}

StreamScope::~StreamScope() { current_scope = previous_; }

const StreamKey* StreamScope::Current() {
  return current_scope != nullptr ? &current_scope->stream_ : nullptr;
}

}  // namespace sluice::eager

// StreamScope: the stream this thread's eager ops run on, for a scope. Ops placed on the
// scope's device run on its stream instead of that device's compute stream 0; ops placed
// elsewhere are unaffected. Soft sync orders what crosses streams, as always. Eager
// autograd records the scope an op ran in and runs the op's gradient in it (an op run
// outside any scope has its gradient run in whatever scope the backward pass is in).
//
//   { eager::StreamScope side(StreamKey{Device(DeviceType::kSim, 0), StreamType::kCompute, 1});
//     ... ops here run on sim:0/compute:1 ... }
//
// Thread-compatible: a scope belongs to the thread that made it; scopes nest (the
// innermost wins) and must end in reverse order.
#ifndef SLUICE_FRAMEWORK_EAGER_STREAM_SCOPE_H_
#define SLUICE_FRAMEWORK_EAGER_STREAM_SCOPE_H_

#include "core/stream_id.h"

namespace sluice::eager {

class StreamScope {
 public:
  explicit StreamScope(StreamKey stream);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

  // The innermost scope's stream on this thread, or null outside every scope.
  static const StreamKey* Current();

 private:
  const StreamKey stream_;
  const StreamScope* const previous_;
};

}  // namespace sluice::eager

#endif  // SLUICE_FRAMEWORK_EAGER_STREAM_SCOPE_H_

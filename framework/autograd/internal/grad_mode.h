// Whether eager ops on this thread record gradients: NoGradGuard's thread-local switch.
// A backward pass turns recording off while it issues grad ops (no higher-order
// gradients).
#ifndef SLUICE_FRAMEWORK_AUTOGRAD_INTERNAL_GRAD_MODE_H_
#define SLUICE_FRAMEWORK_AUTOGRAD_INTERNAL_GRAD_MODE_H_

namespace sluice::autograd::internal {

// Nesting depth of recording-off scopes on this thread; recording is on at 0.
inline thread_local int no_grad_depth = 0;

inline bool Recording() { return no_grad_depth == 0; }

}  // namespace sluice::autograd::internal

#endif  // SLUICE_FRAMEWORK_AUTOGRAD_INTERNAL_GRAD_MODE_H_

// The functional front end, one API for both modes: every op takes Values (value.h), each
// either a static Var of a Program or an eager Tensor, and has an overload over eager
// Tensors that returns Tensors. Static operands append the op to their Program (AppendOp)
// and return its output Vars; eager operands run the op at once through their
// eager::Context and return Tensors. Both modes send the same op name and the same
// attributes, so a model written once against these functions builds a program inside a
// ProgramGuard and computes directly outside one.
//
// The ops are generated from one table (framework/builder/op_api.toml, docs/ops.md):
// functional_ops.h. Control flow is in control_flow.h, losses in losses.h, gradients in
// framework/autograd/gradients.h.
//
// Mixing static and eager operands in one call is InvalidArgument naming the op; every
// other error is the mode's own (AppendOp's or Context::Call's), naming the op and operand.
// Thread-compatible (a Program is built on one thread; an eager Context accepts calls from
// any thread).
#ifndef SLUICE_FRAMEWORK_BUILDER_FUNCTIONAL_H_
#define SLUICE_FRAMEWORK_BUILDER_FUNCTIONAL_H_

#include "framework/builder/functional_ops.h"  // IWYU pragma: export
#include "framework/builder/value.h"           // IWYU pragma: export

#endif  // SLUICE_FRAMEWORK_BUILDER_FUNCTIONAL_H_

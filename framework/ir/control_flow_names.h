// The names of the control-flow ops of the Program IR (`cond`, `while`, `yield`), of their
// slots and of their attributes: what control_flow.h's ops are called in a ProgramDesc.
// Apart from control_flow.h so that ProgramDesc::Validate (program_desc.h), which checks
// the control-flow rules, can name the ops without the queries over them.
//
// Constants only; thread-safe.
#ifndef SLUICE_FRAMEWORK_IR_CONTROL_FLOW_NAMES_H_
#define SLUICE_FRAMEWORK_IR_CONTROL_FLOW_NAMES_H_

#include "absl/strings/string_view.h"

namespace sluice::framework::ir {

inline constexpr absl::string_view kCondOp = "cond";
inline constexpr absl::string_view kWhileOp = "while";
inline constexpr absl::string_view kYieldOp = "yield";

// Slots.
inline constexpr absl::string_view kCondSlot = "Cond";
inline constexpr absl::string_view kLoopVarsSlot = "X";  // while's loop-carried values; yield's
inline constexpr absl::string_view kCapturedSlot = "Input";
inline constexpr absl::string_view kOutSlot = "Out";

// Attributes.
inline constexpr absl::string_view kTrueBlockAttr = "true_block";
inline constexpr absl::string_view kFalseBlockAttr = "false_block";
inline constexpr absl::string_view kCondBlockAttr = "cond_block";
inline constexpr absl::string_view kBodyBlockAttr = "body_block";
inline constexpr absl::string_view kMaxIterationsAttr = "max_iterations";
inline constexpr absl::string_view kParallelIterationsAttr = "parallel_iterations";

}  // namespace sluice::framework::ir

#endif  // SLUICE_FRAMEWORK_IR_CONTROL_FLOW_NAMES_H_

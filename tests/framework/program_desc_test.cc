// The Program IR and its text form: building blocks, variables and ops; the canonical text
// (pinned byte for byte and by its hash); FromText(ToText(p)) == p across every dtype,
// attribute type and awkward name; every parse error with its line and token, and every
// proper prefix of a file rejected as truncated; Validate naming the op and variable at
// fault; Save/Load through a file.
#include "framework/ir/program_desc.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::framework::ir::program_desc_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

VarDesc Var(std::string name, DataType dtype, const Shape& shape) {
  VarDesc var;
  var.name = std::move(name);
  var.dtype = dtype;
  var.shape = shape;
  return var;
}

OpDesc Op(std::string type, OpSlots inputs, OpSlots outputs, vm::AttrMap attrs = {}) {
  OpDesc op;
  op.type = std::move(type);
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.attrs = std::move(attrs);
  return op;
}

void MustAdd(BlockDesc& block, VarDesc var) { ASSERT_TRUE(block.AddVar(std::move(var)).ok()); }

// The small program whose text the canonical-form test spells out.
ProgramDesc SmallProgram() {
  ProgramDesc program;
  BlockDesc& root = program.mutable_global_block();
  VarDesc x = Var("x", DataType::kF32, Shape({2, 3}));
  x.stop_gradient = true;
  MustAdd(root, x);
  VarDesc w = Var("w", DataType::kF32, Shape({3}));
  w.persistable = true;
  w.is_parameter = true;
  MustAdd(root, w);
  MustAdd(root, Var("y", DataType::kF32, Shape({2, 3})));
  MustAdd(root, Var("s", DataType::kF32, Shape()));
  root.AppendOp(Op("add", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"y"}}}));
  root.AppendOp(
      Op("reduce_sum", {{"X", {"y"}}}, {{"Out", {"s"}}},
         vm::AttrMap().Set("keep_dims", int64_t{0}).Set("axes", std::vector<int64_t>{0, 1})));
  const int sub = program.AppendBlock(0);
  VarDesc i = Var("i", DataType::kI64, Shape());
  i.stop_gradient = true;
  MustAdd(program.mutable_block(sub), i);
  program.mutable_block(sub).AppendOp(
      Op("fill", {}, {{"Out", {"i"}}}, vm::AttrMap().Set("value", 0.5)));
  return program;
}

constexpr absl::string_view kSmallProgramText =
    "sluice-program 2\n"
    "block 0 parent -1\n"
    "var x dtype=f32 shape=[2,3] persistable=0 parameter=0 stop_gradient=1\n"
    "var w dtype=f32 shape=[3] persistable=1 parameter=1 stop_gradient=0\n"
    "var y dtype=f32 shape=[2,3] persistable=0 parameter=0 stop_gradient=0\n"
    "var s dtype=f32 shape=[] persistable=0 parameter=0 stop_gradient=0\n"
    "op add in X=x Y=w out Out=y attrs\n"
    "op reduce_sum in X=y out Out=s attrs axes=v:0;1,keep_dims=i:0\n"
    "block 1 parent 0\n"
    "var i dtype=i64 shape=[] persistable=0 parameter=0 stop_gradient=1\n"
    "op fill in out Out=i attrs value=f:0.5\n"
    "end\n";

// Three nested blocks, every dtype and rank 0..4, every attribute type (including empty
// strings and lists and extreme numbers), ops with no inputs, several names per slot and
// empty slots, operands from ancestor blocks.
ProgramDesc RichProgram() {
  ProgramDesc program;
  BlockDesc& root = program.mutable_global_block();
  VarDesc x = Var("x", DataType::kF32, Shape({4, 8}));
  x.stop_gradient = true;
  MustAdd(root, x);
  VarDesc w = Var("fc.w", DataType::kF32, Shape({8, 16}));
  w.persistable = true;
  w.is_parameter = true;
  MustAdd(root, w);
  VarDesc b = Var("fc.b", DataType::kF64, Shape({16}));
  b.persistable = true;
  b.is_parameter = true;
  MustAdd(root, b);
  VarDesc label = Var("label", DataType::kI64, Shape({4, 1}));
  label.stop_gradient = true;
  MustAdd(root, label);
  VarDesc step = Var("step", DataType::kI32, Shape());
  step.persistable = true;
  MustAdd(root, step);
  MustAdd(root, Var("mask", DataType::kBool, Shape({2, 0, 3, 1})));
  MustAdd(root, Var("h", DataType::kF32, Shape({4, 16})));
  MustAdd(root, Var("loss", DataType::kF32, Shape()));
  MustAdd(root, Var("done", DataType::kBool, Shape()));
  root.AppendOp(Op("fill", {}, {{"Out", {"step"}}}, vm::AttrMap().Set("value", int64_t{0})));
  root.AppendOp(Op("matmul", {{"X", {"x"}}, {"Y", {"fc.w"}}}, {{"Out", {"h"}}},
                   vm::AttrMap().Set("transpose_x", int64_t{0}).Set("transpose_y", int64_t{1})));
  root.AppendOp(Op("sum", {{"X", {"h", "h", "x"}}, {"Bias", {}}}, {{"Out", {"h"}}}));
  root.AppendOp(Op("softmax_xent", {{"Logits", {"h"}}, {"Label", {"label"}}}, {{"Loss", {"loss"}}},
                   vm::AttrMap()
                       .Set("axis", int64_t{-1})
                       .Set("big", std::numeric_limits<int64_t>::min())
                       .Set("eps", 1e-7)
                       .Set("tiny", 1e-300)
                       .Set("huge", std::numeric_limits<double>::max())
                       .Set("neg_inf", -std::numeric_limits<double>::infinity())
                       .Set("third", 1.0 / 3.0)
                       .Set("mode", std::string("mean"))
                       .Set("none", std::string())
                       .Set("axes", std::vector<int64_t>{0, -1, 7})
                       .Set("no_axes", std::vector<int64_t>{})));
  const int loop = program.AppendBlock(0);
  BlockDesc& body = program.mutable_block(loop);
  MustAdd(body, Var("tmp", DataType::kF32, Shape({4, 16})));
  body.AppendOp(Op("scale", {{"X", {"h"}}}, {{"Out", {"tmp"}}}, vm::AttrMap().Set("scale", 0.5)));
  const int inner = program.AppendBlock(loop);
  BlockDesc& leaf = program.mutable_block(inner);
  MustAdd(leaf, Var("flag", DataType::kBool, Shape({1})));
  leaf.AppendOp(Op("less", {{"X", {"tmp"}}, {"Y", {"x"}}}, {{"Out", {"flag", "done"}}}));
  program.mutable_global_block().AppendOp(
      Op("repeat", {{"Cond", {"done"}}}, {}, vm::AttrMap().Set("sub_block", vm::BlockRef{loop})));
  return program;
}

absl::StatusOr<ProgramDesc> RoundTrip(const ProgramDesc& program) {
  return ProgramDesc::FromText(program.ToText());
}

// ---------------------------------------------------------------------------------------
// Building.

TEST(ProgramDescTest, NewProgramHasOneEmptyRootBlock) {
  const ProgramDesc program;
  ASSERT_EQ(program.num_blocks(), 1);
  EXPECT_EQ(program.global_block().idx(), 0);
  EXPECT_EQ(program.global_block().parent_idx(), -1);
  EXPECT_TRUE(program.global_block().vars().empty());
  EXPECT_TRUE(program.global_block().ops().empty());
  EXPECT_TRUE(program.Validate().ok());
}

TEST(ProgramDescTest, AppendBlockNumbersBlocksInOrder) {
  ProgramDesc program;
  EXPECT_EQ(program.AppendBlock(0), 1);
  EXPECT_EQ(program.AppendBlock(1), 2);
  EXPECT_EQ(program.AppendBlock(0), 3);
  EXPECT_EQ(program.block(2).idx(), 2);
  EXPECT_EQ(program.block(2).parent_idx(), 1);
  EXPECT_EQ(program.block(3).parent_idx(), 0);
}

TEST(ProgramDescBlockTest, AddVarKeepsOrderAndFindsByName) {
  BlockDesc block(0, -1);
  for (const char* name : {"b", "a", "c"}) MustAdd(block, Var(name, DataType::kF32, Shape({1})));
  ASSERT_EQ(block.vars().size(), 3u);
  EXPECT_EQ(block.vars()[0].name, "b");
  EXPECT_EQ(block.vars()[2].name, "c");
  ASSERT_NE(block.FindVar("a"), nullptr);
  EXPECT_EQ(block.FindVar("a")->name, "a");
  EXPECT_EQ(block.FindVar("zz"), nullptr);
  EXPECT_TRUE(block.HasVar("c"));
  block.FindMutableVar("c")->persistable = true;
  EXPECT_TRUE(block.FindVar("c")->persistable);
  EXPECT_EQ(block.FindMutableVar("nope"), nullptr);
}

TEST(ProgramDescBlockTest, AddVarReturnsTheStoredVariable) {
  BlockDesc block(0, -1);
  absl::StatusOr<VarDesc*> var = block.AddVar(Var("v", DataType::kI32, Shape({2})));
  ASSERT_TRUE(var.ok());
  (*var)->stop_gradient = true;
  EXPECT_TRUE(block.FindVar("v")->stop_gradient);
}

TEST(ProgramDescBlockTest, AddVarRejectsDuplicatesAndSeparatorsInNames) {
  BlockDesc block(3, 0);
  MustAdd(block, Var("x", DataType::kF32, Shape()));
  const absl::Status dup = block.AddVar(Var("x", DataType::kI64, Shape())).status();
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(dup.message()), HasSubstr("'x'"));
  EXPECT_THAT(std::string(dup.message()), HasSubstr("block 3"));
  EXPECT_EQ(block.FindVar("x")->dtype, DataType::kF32);

  for (const char* bad : {"", "a b", "a\tb", "a\nb", "a,b", "a=b", "a;b"}) {
    const absl::Status status = block.AddVar(Var(bad, DataType::kF32, Shape())).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
  EXPECT_EQ(block.vars().size(), 1u);
  // Anything else is a name, and the text form escapes what it must.
  for (const char* odd : {"a%b", "a:b", "grad@x", "\xc3\xa9t\xc3\xa9", "#x"}) {
    EXPECT_TRUE(block.AddVar(Var(odd, DataType::kF32, Shape())).ok()) << odd;
  }
}

TEST(ProgramDescBlockTest, AppendOpReturnsIndices) {
  BlockDesc block(0, -1);
  EXPECT_EQ(block.AppendOp(Op("a", {}, {})), 0);
  EXPECT_EQ(block.AppendOp(Op("b", {}, {})), 1);
  block.mutable_ops()[0].type = "c";
  EXPECT_EQ(block.ops()[0].type, "c");
}

TEST(ProgramDescOpTest, SlotAccessors) {
  const OpDesc op = Op("sum", {{"X", {"a", "b"}}, {"Y", {}}, {"Z", {"c"}}},
                       {{"Out", {"d"}}, {"Aux", {"e", "f"}}});
  EXPECT_THAT(op.Input("X"), ::testing::ElementsAre("a", "b"));
  EXPECT_TRUE(op.Input("Y").empty());
  EXPECT_TRUE(op.Input("missing").empty());
  EXPECT_THAT(op.Output("Aux"), ::testing::ElementsAre("e", "f"));
  EXPECT_TRUE(op.Output("X").empty());
  EXPECT_THAT(op.InputNames(), ::testing::ElementsAre("a", "b", "c"));
  EXPECT_THAT(op.OutputNames(), ::testing::ElementsAre("d", "e", "f"));
}

// ---------------------------------------------------------------------------------------
// Text form.

TEST(ProgramDescTextTest, CanonicalTextIsPinned) {
  EXPECT_EQ(SmallProgram().ToText(), kSmallProgramText);
}

TEST(ProgramDescTextTest, RoundTripOfARichProgram) {
  const ProgramDesc program = RichProgram();
  ASSERT_TRUE(program.Validate().ok()) << program.Validate();
  const absl::StatusOr<ProgramDesc> back = RoundTrip(program);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << program.ToText();
  EXPECT_TRUE(*back == program) << program.ToText() << "\n---\n" << back->ToText();
  EXPECT_EQ(back->ToText(), program.ToText());
  EXPECT_EQ(back->Hash(), program.Hash());
  // The parsed program is usable, not just equal: the index answers lookups.
  ASSERT_NE(back->block(1).FindVar("tmp"), nullptr);
  EXPECT_EQ(back->global_block().FindVar("mask")->shape, Shape({2, 0, 3, 1}));
  EXPECT_TRUE(back->Validate().ok());
}

TEST(ProgramDescTextTest, RoundTripKeepsEveryDtypeAndRank) {
  ProgramDesc program;
  int n = 0;
  for (const DataType dtype :
       {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64, DataType::kBool}) {
    for (const Shape& shape : {Shape(), Shape({5}), Shape({0}), Shape({2, 3}), Shape({1, 2, 3}),
                               Shape({int64_t{1} << 40, 2})}) {
      for (int flags = 0; flags < 8; ++flags) {
        VarDesc var = Var(absl::StrCat("v", n++), dtype, shape);
        var.persistable = flags & 1;
        var.is_parameter = flags & 2;
        var.stop_gradient = flags & 4;
        MustAdd(program.mutable_global_block(), var);
      }
    }
  }
  const absl::StatusOr<ProgramDesc> back = RoundTrip(program);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == program);
}

TEST(ProgramDescTextTest, RoundTripKeepsExactDoubles) {
  vm::AttrMap attrs;
  const double values[] = {0.1,           -2.5e-300,
                           6.02214076e23, std::numeric_limits<double>::max(),
                           -0.0,          std::numeric_limits<double>::infinity(),
                           1.0 / 7.0,     std::numeric_limits<double>::min()};
  for (size_t i = 0; i < std::size(values); ++i) attrs.Set(absl::StrCat("d", i), values[i]);
  ProgramDesc program;
  program.mutable_global_block().AppendOp(Op("consts", {}, {}, attrs));
  const absl::StatusOr<ProgramDesc> back = RoundTrip(program);
  ASSERT_TRUE(back.ok()) << back.status();
  const vm::AttrMap& got = back->global_block().ops()[0].attrs;
  for (size_t i = 0; i < std::size(values); ++i) {
    const double v = got.GetFloat(absl::StrCat("d", i)).value();
    EXPECT_EQ(std::memcmp(&v, &values[i], sizeof(double)), 0) << values[i];
  }
  EXPECT_TRUE(std::signbit(got.GetFloat("d4").value()));
}

TEST(ProgramDescTextTest, AwkwardNamesAreEscapedAndRoundTrip) {
  ProgramDesc program;
  BlockDesc& root = program.mutable_global_block();
  MustAdd(root, Var("100%", DataType::kF32, Shape()));
  MustAdd(root, Var("\xc3\xa9t\xc3\xa9", DataType::kF32, Shape()));
  MustAdd(root, Var("ctrl\x01", DataType::kF32, Shape()));
  // Op fields are data: any string survives, including separators, keywords and "".
  root.AppendOp(Op("my op,=;%", {{"in", {"100%", "", "a b"}}, {"", {}}, {"out", {""}}},
                   {{"attrs", {"\xc3\xa9t\xc3\xa9"}}},
                   vm::AttrMap()
                       .Set("s", std::string("a b,c=d;e%f\tg\n"))
                       .Set("empty", std::string())
                       .Set("percent", std::string("%"))
                       .Set("key with space", int64_t{3})
                       .Set("", 1.5)));
  root.AppendOp(Op("", {}, {}));
  const std::string text = program.ToText();
  EXPECT_THAT(text, HasSubstr("var 100%25 dtype=f32"));
  EXPECT_THAT(text, HasSubstr("var %C3%A9t%C3%A9 dtype=f32"));
  EXPECT_THAT(text, HasSubstr("var ctrl%01 dtype=f32"));
  EXPECT_THAT(text, HasSubstr("op my%20op%2C%3D%3B%25 in in=100%25,%,a%20b %= out=% out "
                              "attrs=%C3%A9t%C3%A9 attrs %=f:1.5,empty=s:%,"));
  EXPECT_THAT(text, HasSubstr("op % in out attrs\n"));
  const absl::StatusOr<ProgramDesc> back = ProgramDesc::FromText(text);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << text;
  EXPECT_TRUE(*back == program) << text << "\n---\n" << back->ToText();
}

TEST(ProgramDescTextTest, EqualProgramsGiveEqualTextWhateverTheBuildOrderOfAttrs) {
  ProgramDesc a = SmallProgram();
  ProgramDesc b = SmallProgram();
  // Attributes are a map: the order they were set in is not part of the program.
  a.mutable_global_block().mutable_ops()[0].attrs.Set("p", int64_t{1}).Set("q", int64_t{2});
  b.mutable_global_block().mutable_ops()[0].attrs.Set("q", int64_t{2}).Set("p", int64_t{1});
  ASSERT_TRUE(a == b);
  EXPECT_EQ(a.ToText(), b.ToText());
  EXPECT_EQ(a.Hash(), b.Hash());
}

TEST(ProgramDescTextTest, ReaderAcceptsCommentsBlankLinesSpacingAndFieldOrder) {
  const absl::StatusOr<ProgramDesc> program = ProgramDesc::FromText(
      "sluice-program 1\r\n"
      "# a comment\n"
      "\n"
      "block 0   parent -1\n"
      "  var x stop_gradient=1 shape=[2,3] parameter=0 persistable=0 dtype=float32\n"
      "var y dtype=f32 shape=[] persistable=0 parameter=0 stop_gradient=0\n"
      "\top add in X=%78 out Out=y attrs\n"
      "op mark in out attrs label=s:\n"
      "end\n"
      "\n"
      "# trailing comment\n");
  ASSERT_TRUE(program.ok()) << program.status();
  const VarDesc* x = program->global_block().FindVar("x");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->shape, Shape({2, 3}));
  EXPECT_TRUE(x->stop_gradient);
  EXPECT_EQ(program->global_block().ops()[0].Input("X")[0], "x");
  EXPECT_EQ(program->global_block().ops()[1].attrs.GetString("label").value(), "");
}

TEST(ProgramDescTextTest, VersionOneFilesStillRead) {
  // The same program as written before block references existed.
  std::string v1(kSmallProgramText);
  v1.replace(0, std::string("sluice-program 2").size(), "sluice-program 1");
  const absl::StatusOr<ProgramDesc> old = ProgramDesc::FromText(v1);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_TRUE(*old == SmallProgram());
  EXPECT_EQ(old->ToText(), kSmallProgramText);  // written back as version 2
}

TEST(ProgramDescTextTest, HashIsPinned) {
  // FNV-1a 64 over kSmallProgramText. A change here is a format change: bump the version.
  EXPECT_EQ(SmallProgram().Hash(), 0xf62bf62a1503c868ull);
  EXPECT_EQ(ProgramDesc::FromText(kSmallProgramText)->Hash(), 0xf62bf62a1503c868ull);
}

TEST(ProgramDescTextTest, HashChangesWithAnyChange) {
  const ProgramDesc base = SmallProgram();
  std::vector<std::pair<std::string, ProgramDesc>> variants;
  const auto variant = [&](std::string what, auto edit) {
    ProgramDesc p = SmallProgram();
    edit(p);
    variants.emplace_back(std::move(what), std::move(p));
  };
  variant("var flag", [](ProgramDesc& p) {
    p.mutable_global_block().FindMutableVar("y")->stop_gradient = true;
  });
  variant("persistable",
          [](ProgramDesc& p) { p.mutable_global_block().FindMutableVar("x")->persistable = true; });
  variant("parameter", [](ProgramDesc& p) {
    p.mutable_global_block().FindMutableVar("w")->is_parameter = false;
  });
  variant("dtype", [](ProgramDesc& p) {
    p.mutable_global_block().FindMutableVar("s")->dtype = DataType::kF64;
  });
  variant("shape", [](ProgramDesc& p) {
    p.mutable_global_block().FindMutableVar("w")->shape = Shape({3, 1});
  });
  variant("scalar vs [1]",
          [](ProgramDesc& p) { p.mutable_global_block().FindMutableVar("s")->shape = Shape({1}); });
  variant("attr value", [](ProgramDesc& p) {
    p.mutable_global_block().mutable_ops()[1].attrs.Set("keep_dims", int64_t{1});
  });
  variant("attr type", [](ProgramDesc& p) {
    p.mutable_global_block().mutable_ops()[1].attrs.Set("keep_dims", 0.0);
  });
  variant("float attr", [](ProgramDesc& p) {
    p.mutable_block(1).mutable_ops()[0].attrs.Set("value", 0.5000000000000001);
  });
  variant("op order", [](ProgramDesc& p) {
    auto& ops = p.mutable_global_block().mutable_ops();
    std::swap(ops[0], ops[1]);
  });
  variant("operand", [](ProgramDesc& p) {
    p.mutable_global_block().mutable_ops()[0].inputs[1].second[0] = "x";
  });
  variant("slot name",
          [](ProgramDesc& p) { p.mutable_global_block().mutable_ops()[0].inputs[1].first = "Z"; });
  variant("op type",
          [](ProgramDesc& p) { p.mutable_global_block().mutable_ops()[0].type = "sub"; });
  variant("extra block", [](ProgramDesc& p) { p.AppendBlock(1); });
  variant("extra var", [](ProgramDesc& p) {
    ASSERT_TRUE(p.mutable_block(1).AddVar(Var("j", DataType::kI64, Shape())).ok());
  });
  std::set<uint64_t> hashes = {base.Hash()};
  for (const auto& [what, p] : variants) {
    EXPECT_FALSE(p == base) << what;
    EXPECT_NE(p.Hash(), base.Hash()) << what;
    hashes.insert(p.Hash());
  }
  EXPECT_EQ(hashes.size(), variants.size() + 1);
}

// ---------------------------------------------------------------------------------------
// Parse errors.

struct BadText {
  const char* what;
  std::string text;
  absl::StatusCode code;
  std::vector<std::string> message_parts;
};

constexpr absl::string_view kHeader = "sluice-program 1\n";
constexpr absl::string_view kRoot = "block 0 parent -1\n";
constexpr absl::string_view kVarX =
    "var x dtype=f32 shape=[2] persistable=0 parameter=0 stop_gradient=0\n";

std::string Text(std::initializer_list<absl::string_view> lines) {
  std::string text;
  for (absl::string_view line : lines) absl::StrAppend(&text, line);
  return text;
}

TEST(ProgramDescParseTest, EveryErrorNamesLineAndToken) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const auto kDataLoss = absl::StatusCode::kDataLoss;
  const std::vector<BadText> cases = {
      {"empty", "", kDataLoss, {"line 1: empty input"}},
      {"wrong magic",
       "sluice-instructions 1\nend\n",
       kInvalid,
       {"line 1: not a Sluice program", "'sluice-instructions'"}},
      {"no version", "sluice-program\nend\n", kInvalid, {"line 1: missing version"}},
      {"bad version", "sluice-program one\nend\n", kInvalid, {"line 1: bad version 'one'"}},
      {"future version",
       Text({"sluice-program 7\n", kRoot, "end\n"}),
       kInvalid,
       {"line 1: unsupported version 7 (this build reads 1 to 2)"}},
      {"version 0",
       Text({"sluice-program 0\n", kRoot, "end\n"}),
       kInvalid,
       {"line 1: unsupported version 0"}},
      {"block reference in a version 1 file",
       Text({kHeader, kRoot, "op repeat in out attrs body=b:1\n", "end\n"}),
       kInvalid,
       {"line 3:", "'body' needs format version 2"}},
      {"junk after version", "sluice-program 1 extra\n", kInvalid, {"line 1:", "'extra'"}},
      {"unknown directive",
       Text({kHeader, kRoot, "variable x\n", "end\n"}),
       kInvalid,
       {"line 3: unknown directive 'variable'"}},
      {"op before block",
       Text({kHeader, "op add in out attrs\n", "end\n"}),
       kInvalid,
       {"line 2: 'op' before any 'block'"}},
      {"var before block",
       Text({kHeader, kVarX, kRoot, "end\n"}),
       kInvalid,
       {"line 2: 'var' before any 'block'"}},
      {"end before block", Text({kHeader, "end\n"}), kInvalid, {"line 2: 'end' before any"}},
      {"first block not 0",
       Text({kHeader, "block 1 parent -1\n", "end\n"}),
       kInvalid,
       {"line 2: block 1 out of order (expected block 0)"}},
      {"block skipped",
       Text({kHeader, kRoot, "block 2 parent 0\n", "end\n"}),
       kInvalid,
       {"line 3: block 2 out of order (expected block 1)"}},
      {"block repeated",
       Text({kHeader, kRoot, "block 0 parent -1\n", "end\n"}),
       kInvalid,
       {"line 3: block 0 out of order (expected block 1)"}},
      {"malformed block",
       Text({kHeader, "block 0 -1\n", "end\n"}),
       kInvalid,
       {"line 2: malformed block line"}},
      {"bad block index",
       Text({kHeader, "block zero parent -1\n", "end\n"}),
       kInvalid,
       {"line 2: bad block index 'zero'"}},
      {"bad parent",
       Text({kHeader, "block 0 parent -2\n", "end\n"}),
       kInvalid,
       {"line 2: bad parent block index '-2'"}},
      {"bad dtype",
       Text({kHeader, kRoot,
             "var x dtype=f16 shape=[2] persistable=0 parameter=0 stop_gradient=0\n", "end\n"}),
       kInvalid,
       {"line 3: ", "'f16'"}},
      {"negative dim",
       Text({kHeader, kRoot,
             "var x dtype=f32 shape=[2,-1] persistable=0 parameter=0 "
             "stop_gradient=0\n",
             "end\n"}),
       kInvalid,
       {"line 3: bad shape '[2,-1]'", "'-1'"}},
      {"shape without brackets",
       Text({kHeader, kRoot,
             "var x dtype=f32 shape=2,3 persistable=0 parameter=0 "
             "stop_gradient=0\n",
             "end\n"}),
       kInvalid,
       {"line 3: bad shape '2,3'"}},
      {"shape with a word",
       Text({kHeader, kRoot,
             "var x dtype=f32 shape=[2,x] persistable=0 parameter=0 "
             "stop_gradient=0\n",
             "end\n"}),
       kInvalid,
       {"line 3: bad shape '[2,x]'", "'x'"}},
      {"shape overflow",
       Text({kHeader, kRoot,
             "var x dtype=f32 shape=[4294967296,4294967296] persistable=0 "
             "parameter=0 stop_gradient=0\n",
             "end\n"}),
       kInvalid,
       {"line 3: bad shape", "too many elements"}},
      {"duplicate variable",
       Text({kHeader, kRoot, kVarX, kVarX, "end\n"}),
       kInvalid,
       {"line 4: variable 'x' already exists in block 0"}},
      {"missing field",
       Text({kHeader, kRoot, "var x dtype=f32 shape=[2] persistable=0\n", "end\n"}),
       kInvalid,
       {"line 3: variable 'x' has no parameter= field"}},
      {"unknown field",
       Text({kHeader, kRoot,
             "var x dtype=f32 shape=[2] persistable=0 parameter=0 "
             "stop_gradient=0 color=red\n",
             "end\n"}),
       kInvalid,
       {"line 3: unknown variable field 'color'"}},
      {"field twice",
       Text({kHeader, kRoot,
             "var x dtype=f32 dtype=f64 shape=[2] persistable=0 parameter=0 "
             "stop_gradient=0\n",
             "end\n"}),
       kInvalid,
       {"line 3: variable field 'dtype' given twice"}},
      {"bad flag",
       Text({kHeader, kRoot,
             "var x dtype=f32 shape=[2] persistable=yes parameter=0 stop_gradient=0\n", "end\n"}),
       kInvalid,
       {"line 3: bad value 'yes' for persistable"}},
      {"field without =",
       Text({kHeader, kRoot, "var x dtype\n", "end\n"}),
       kInvalid,
       {"line 3: bad variable field 'dtype'"}},
      {"var name with separator",
       Text({kHeader, kRoot,
             "var a%2Cb dtype=f32 shape=[] persistable=0 parameter=0 "
             "stop_gradient=0\n",
             "end\n"}),
       kInvalid,
       {"line 3: variable name 'a,b' contains ','"}},
      {"op without in",
       Text({kHeader, kRoot, kVarX, "op relu X=x out Out=x attrs\n", "end\n"}),
       kInvalid,
       {"line 4: malformed op line"}},
      {"op without out",
       Text({kHeader, kRoot, kVarX, "op relu in X=x attrs\n", "end\n"}),
       kInvalid,
       {"line 4: bad slot 'attrs'", "'out'"}},
      {"op without attrs",
       Text({kHeader, kRoot, kVarX, "op relu in X=x out Out=x\n", "end\n"}),
       kInvalid,
       {"line 4: op line has no 'attrs'"}},
      {"slot without =",
       Text({kHeader, kRoot, kVarX, "op relu in x out attrs\n", "end\n"}),
       kInvalid,
       {"line 4: bad slot 'x'"}},
      {"empty operand",
       Text({kHeader, kRoot, kVarX, "op relu in X=x,,x out attrs\n", "end\n"}),
       kInvalid,
       {"line 4: empty name"}},
      {"bad escape",
       Text({kHeader, kRoot, kVarX, "op relu in X=a%G1 out attrs\n", "end\n"}),
       kInvalid,
       {"line 4: bad escape in 'a%G1'"}},
      {"short escape",
       Text({kHeader, kRoot, kVarX, "op relu in X=a%4 out attrs\n", "end\n"}),
       kInvalid,
       {"line 4: bad escape in 'a%4'"}},
      {"unescaped =",
       Text({kHeader, kRoot, kVarX, "op relu in X=a=b out attrs\n", "end\n"}),
       kInvalid,
       {"line 4: character '=' in 'a=b' must be escaped"}},
      {"bad attribute",
       Text({kHeader, kRoot, kVarX, "op relu in out attrs alpha=q:1\n", "end\n"}),
       kInvalid,
       {"line 4: ", "alpha", "'q'"}},
      {"bad int attribute",
       Text({kHeader, kRoot, kVarX, "op relu in out attrs n=i:x\n", "end\n"}),
       kInvalid,
       {"line 4: ", "bad int 'x'"}},
      {"attribute twice",
       Text({kHeader, kRoot, kVarX, "op relu in out attrs n=i:1,n=i:2\n", "end\n"}),
       kInvalid,
       {"line 4: ", "twice"}},
      {"attribute twice after unescaping",
       Text({kHeader, kRoot, kVarX, "op relu in out attrs n=i:1,%6E=i:2\n", "end\n"}),
       kInvalid,
       {"line 4: ", "'n' twice"}},
      {"junk after attrs",
       Text({kHeader, kRoot, kVarX, "op relu in out attrs a=i:1 b=i:2\n", "end\n"}),
       kInvalid,
       {"line 4: unexpected 'b=i:2' after the attributes"}},
      {"junk after end",
       Text({kHeader, kRoot, "end now\n"}),
       kInvalid,
       {"line 3: unexpected 'now' after 'end'"}},
      {"line after end",
       Text({kHeader, kRoot, "end\n", kVarX}),
       kInvalid,
       {"line 4: 'var' after 'end'"}},
      {"no end",
       Text({kHeader, kRoot, kVarX}),
       kDataLoss,
       {"line 3: the text ends after this line without 'end'"}},
      {"cut mid-line",
       Text({kHeader, kRoot, "var x dtype=f3"}),
       kDataLoss,
       {"line 3: line 'var x dtype=f3' has no newline"}},
      {"end without newline",
       Text({kHeader, kRoot, "end"}),
       kDataLoss,
       {"line 3: line 'end' has no newline"}},
  };
  for (const BadText& c : cases) {
    const absl::StatusOr<ProgramDesc> program = ProgramDesc::FromText(c.text);
    ASSERT_FALSE(program.ok()) << c.what;
    EXPECT_EQ(program.status().code(), c.code) << c.what << ": " << program.status();
    for (const std::string& part : c.message_parts) {
      EXPECT_THAT(std::string(program.status().message()), HasSubstr(part)) << c.what;
    }
  }
}

TEST(ProgramDescParseTest, EveryProperPrefixIsDataLoss) {
  for (const std::string& text : {std::string(kSmallProgramText), RichProgram().ToText()}) {
    ASSERT_TRUE(ProgramDesc::FromText(text).ok());
    for (size_t n = 0; n < text.size(); ++n) {
      const absl::StatusOr<ProgramDesc> program = ProgramDesc::FromText(text.substr(0, n));
      ASSERT_FALSE(program.ok()) << "prefix of " << n << " bytes parsed";
      EXPECT_EQ(program.status().code(), absl::StatusCode::kDataLoss)
          << n << ": " << program.status();
      EXPECT_THAT(std::string(program.status().message()), StartsWith("line ")) << n;
    }
  }
}

TEST(ProgramDescParseTest, CorruptedBytesNeverCrash) {
  // Every position overwritten by each of a few troublesome bytes: the reader answers with
  // a status, and whatever it accepts is a program that prints and parses again.
  const std::string text(kSmallProgramText);
  for (size_t i = 0; i < text.size(); ++i) {
    for (const char c : {'\0', ' ', '\n', '=', ',', '%', '[', '-', '9', 'x', '\xff'}) {
      std::string corrupt = text;
      corrupt[i] = c;
      const absl::StatusOr<ProgramDesc> program = ProgramDesc::FromText(corrupt);
      if (!program.ok()) continue;
      const absl::StatusOr<ProgramDesc> again = RoundTrip(*program);
      ASSERT_TRUE(again.ok()) << i << " " << again.status();
      EXPECT_TRUE(*again == *program) << i;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Validate.

TEST(ProgramDescValidateTest, AcceptsOperandsFromAncestorBlocks) {
  EXPECT_TRUE(SmallProgram().Validate().ok());
  EXPECT_TRUE(RichProgram().Validate().ok());
}

TEST(ProgramDescValidateTest, NamesTheUndefinedVariable) {
  ProgramDesc program = SmallProgram();
  BlockDesc& root = program.mutable_global_block();
  root.AppendOp(Op("relu", {{"X", {"y"}}}, {{"Out", {"y"}}}));
  root.AppendOp(Op("add", {{"X", {"x", "foo"}}}, {{"Out", {"y"}}}));
  const absl::Status status = program.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "block 0 op #3 'add': input X names undefined variable 'foo'");
}

TEST(ProgramDescValidateTest, NamesTheUndefinedOutput) {
  ProgramDesc program = SmallProgram();
  program.mutable_block(1).AppendOp(Op("copy", {{"X", {"i"}}}, {{"Out", {"nowhere"}}}));
  EXPECT_EQ(program.Validate().message(),
            "block 1 op #1 'copy': output Out names undefined variable 'nowhere'");
}

TEST(ProgramDescValidateTest, ChildAndSiblingVariablesAreOutOfScope) {
  ProgramDesc program = SmallProgram();  // block 1 (child of 0) defines 'i'
  program.mutable_global_block().AppendOp(Op("use", {{"X", {"i"}}}, {}));
  EXPECT_THAT(std::string(program.Validate().message()),
              HasSubstr("block 0 op #2 'use': input X names undefined variable 'i'"));

  ProgramDesc siblings = SmallProgram();
  const int other = siblings.AppendBlock(0);
  siblings.mutable_block(other).AppendOp(Op("use", {{"X", {"i"}}}, {}));
  EXPECT_THAT(std::string(siblings.Validate().message()),
              HasSubstr("block 2 op #0 'use': input X names undefined variable 'i'"));
}

TEST(ProgramDescValidateTest, OpWithoutType) {
  ProgramDesc program = SmallProgram();
  program.mutable_global_block().mutable_ops()[1].type.clear();
  EXPECT_EQ(program.Validate().message(), "block 0 op #1 has no type");
}

TEST(ProgramDescValidateTest, DuplicateOrEmptySlot) {
  ProgramDesc program = SmallProgram();
  program.mutable_global_block().mutable_ops()[0].inputs.push_back({"X", {"w"}});
  EXPECT_EQ(program.Validate().message(), "block 0 op #0 'add': input slot X appears twice");
  program = SmallProgram();
  program.mutable_global_block().mutable_ops()[0].outputs.push_back({"", {"y"}});
  EXPECT_EQ(program.Validate().message(), "block 0 op #0 'add': output slot with an empty name");
}

TEST(ProgramDescValidateTest, BlockStructure) {
  ProgramDesc bad_parent = SmallProgram();
  bad_parent.AppendBlock(7);
  EXPECT_EQ(bad_parent.Validate().message(), "block 2 has parent 7, which is not an earlier block");

  ProgramDesc self_parent = SmallProgram();
  self_parent.AppendBlock(2);
  EXPECT_THAT(std::string(self_parent.Validate().message()), HasSubstr("block 2 has parent 2"));

  ProgramDesc orphan = SmallProgram();
  orphan.AppendBlock(-1);
  EXPECT_THAT(std::string(orphan.Validate().message()), HasSubstr("block 2 has parent -1"));

  ProgramDesc rooted = SmallProgram();
  rooted.mutable_global_block() = BlockDesc(0, 1);
  EXPECT_EQ(rooted.Validate().message(), "block 0 (the root) has parent 1, expected -1");

  ProgramDesc renumbered = SmallProgram();
  renumbered.mutable_block(1) = BlockDesc(4, 0);
  EXPECT_EQ(renumbered.Validate().message(), "block at position 1 has index 4");
}

TEST(ProgramDescValidateTest, VariableInvariants) {
  ProgramDesc renamed = SmallProgram();
  renamed.mutable_global_block().FindMutableVar("y")->name = "z";
  EXPECT_THAT(std::string(renamed.Validate().message()),
              HasSubstr("block 0 variable #2 'z' is not indexed"));

  ProgramDesc spaced = SmallProgram();
  spaced.mutable_global_block().FindMutableVar("y")->name = "y y";
  EXPECT_THAT(std::string(spaced.Validate().message()),
              HasSubstr("block 0 variable #2: variable name 'y y'"));

  ProgramDesc negative = SmallProgram();
  negative.mutable_global_block().FindMutableVar("w")->shape = Shape({3, -1});
  EXPECT_THAT(std::string(negative.Validate().message()),
              HasSubstr("block 0 variable 'w': shape [3, -1] has negative dimension 1"));
}

TEST(ProgramDescValidateTest, ParsedProgramsAreCheckedOnlyWhenAsked) {
  // The reader takes a program with unknown variables and bad parents; Validate reports them.
  const absl::StatusOr<ProgramDesc> program = ProgramDesc::FromText(
      Text({kHeader, kRoot, "block 1 parent 5\n", "op mystery in X=ghost out attrs\n", "end\n"}));
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->Validate().message(), "block 1 has parent 5, which is not an earlier block");
}

// ---------------------------------------------------------------------------------------
// Files.

std::string TempPath(absl::string_view name) {
  return absl::StrCat(::testing::TempDir(), "/program_desc_test_", name);
}

TEST(ProgramDescFileTest, SaveAndLoad) {
  const std::string path = TempPath("rich.txt");
  const ProgramDesc program = RichProgram();
  ASSERT_TRUE(program.Save(path).ok());
  const absl::StatusOr<ProgramDesc> back = ProgramDesc::Load(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == program);
  // Save replaces the file rather than appending to it.
  ASSERT_TRUE(SmallProgram().Save(path).ok());
  const absl::StatusOr<ProgramDesc> small = ProgramDesc::Load(path);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE(*small == SmallProgram());
  std::remove(path.c_str());
}

TEST(ProgramDescFileTest, LoadOfAMissingFileIsNotFound) {
  const std::string path = TempPath("does_not_exist.txt");
  const absl::StatusOr<ProgramDesc> program = ProgramDesc::Load(path);
  EXPECT_EQ(program.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(program.status().message()), HasSubstr(path));
}

TEST(ProgramDescFileTest, SaveIntoAMissingDirectoryNamesThePath) {
  const std::string path = TempPath("no_such_dir/program.txt");
  const absl::Status status = SmallProgram().Save(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
}

TEST(ProgramDescFileTest, ParseErrorsNamePathAndLine) {
  const std::string path = TempPath("broken.txt");
  std::string text(kSmallProgramText);
  text[text.find("dtype=i64") + 8] = '5';  // i64 -> i65
  {
    std::FILE* file = std::fopen(path.c_str(), "wb");
    ASSERT_NE(file, nullptr);
    std::fwrite(text.data(), 1, text.size(), file);
    std::fclose(file);
  }
  absl::StatusOr<ProgramDesc> program = ProgramDesc::Load(path);
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(program.status().message()), StartsWith(absl::StrCat(path, ":10: ")));
  EXPECT_THAT(std::string(program.status().message()), HasSubstr("'i65'"));

  {
    std::FILE* file = std::fopen(path.c_str(), "wb");
    ASSERT_NE(file, nullptr);
    std::fwrite(kSmallProgramText.data(), 1, 100, file);
    std::fclose(file);
  }
  program = ProgramDesc::Load(path);
  EXPECT_EQ(program.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(program.status().message()), StartsWith(absl::StrCat(path, ":3: ")));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace sluice::framework::ir::program_desc_test

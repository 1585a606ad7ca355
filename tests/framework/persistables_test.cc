// SavePersistables / LoadPersistables: a directory of NAME.npy files round-trips a program's
// persistable variables; errors name the variable and the file, and neither call leaves a
// partial result (no half-written directory, no half-loaded scope). The atomic swap and
// partial loads: persistables_atomic_test.cc.
#include "framework/io/persistables.h"

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/io/npy.h"
#include "framework/ir/program_desc.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/program_test_util.h"

namespace sluice::framework::io::persistables_test {
namespace {

namespace fs = std::filesystem;
using program_test::AddVar;
using program_test::Fill;
using program_test::Op;
using program_test::Var;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

const Shape kW({2, 3});
const Shape kB({3});

// Declares w [2,3] and b [3] (persistable) and x (not) in `program`.
void DeclareVars(ir::ProgramDesc& program) {
  ir::BlockDesc& block = program.mutable_global_block();
  AddVar(block, Var("x", kB));
  AddVar(block, Var("w", kW, /*persistable=*/true));
  AddVar(block, Var("b", kB, /*persistable=*/true));
}

// w = w_value, b = b_value.
ir::ProgramDesc Startup(double w_value, double b_value) {
  ir::ProgramDesc program;
  DeclareVars(program);
  ir::BlockDesc& block = program.mutable_global_block();
  block.AppendOp(Op("fill_constant", {}, {{"Out", {"w"}}}, Fill(kW, w_value)));
  block.AppendOp(Op("fill_constant", {}, {{"Out", {"b"}}}, Fill(kB, b_value)));
  return program;
}

// The variables alone (what `sluice run` loads into and saves from).
ir::ProgramDesc Main() {
  ir::ProgramDesc program;
  DeclareVars(program);
  return program;
}

std::set<std::string> Entries(const std::string& dir) {
  std::set<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    names.insert(entry.path().filename().string());
  }
  return names;
}

class PersistablesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context_ = program_test::NewContext();
    ASSERT_NE(context_, nullptr);
    executor_ = std::make_unique<Executor>(&context_->registry(), context_->vm());
  }

  void TearDown() override {
    std::error_code ignored;
    for (const std::string& dir : dirs_) fs::remove_all(dir, ignored);
  }

  // A path under the test's temporary directory that does not exist (yet); removed after
  // the test. The process id keeps concurrent runs of the binary apart.
  std::string FreshDir(const std::string& name) {
    const std::string dir =
        absl::StrCat(::testing::TempDir(), "/persistables_test_", getpid(), "_", name);
    fs::remove_all(dir);
    dirs_.push_back(dir);
    return dir;
  }

  void RunStartup(Scope* scope, double w_value, double b_value) {
    absl::StatusOr<RunResult> init = executor_->Run(Startup(w_value, b_value), {}, {}, scope);
    ASSERT_TRUE(init.ok()) << init.status();
  }

  // The values of w and b in `scope`.
  std::vector<HostTensor> Fetch(Scope* scope) {
    absl::StatusOr<RunResult> result = executor_->Run(Main(), {}, {"w", "b"}, scope);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? result->fetches : std::vector<HostTensor>{};
  }

  std::unique_ptr<eager::Context> context_;
  std::unique_ptr<Executor> executor_;
  std::vector<std::string> dirs_;
};

TEST_F(PersistablesTest, ListsPersistablesInDeclarationOrder) {
  const std::vector<ir::VarDesc> vars = PersistableVars(Main());
  ASSERT_EQ(vars.size(), 2u);
  EXPECT_EQ(vars[0].name, "w");
  EXPECT_EQ(vars[1].name, "b");
  EXPECT_EQ(PersistablePath("some/dir", "linear_0.w"), "some/dir/linear_0.w.npy");
}

TEST_F(PersistablesTest, SaveThenLoadRoundTrips) {
  Scope saved_scope;
  RunStartup(&saved_scope, 0.5, 2.0);
  const std::string dir = FreshDir("round_trip") + "/nested/params";
  ASSERT_TRUE(SavePersistables(*executor_, Main(), &saved_scope, dir).ok());

  // One NAME.npy per persistable, holding its dtype, shape and values; nothing else.
  EXPECT_THAT(Entries(dir), UnorderedElementsAre("w.npy", "b.npy"));
  absl::StatusOr<NpyArray> w = ReadNpy(dir + "/w.npy");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->dtype, DataType::kF32);
  EXPECT_EQ(w->shape, kW);
  EXPECT_EQ(HostTensor({w->dtype, w->shape, w->bytes}).ToVector<float>(),
            std::vector<float>(6, 0.5f));

  Scope loaded_scope;
  ASSERT_TRUE(LoadPersistables(*executor_, Main(), &loaded_scope, dir).ok());
  const std::vector<HostTensor> values = Fetch(&loaded_scope);
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0].ToVector<float>(), std::vector<float>(6, 0.5f));
  EXPECT_EQ(values[1].ToVector<float>(), std::vector<float>(3, 2.0f));
}

TEST_F(PersistablesTest, LoadReplacesValuesAlreadyInTheScope) {
  Scope scope;
  RunStartup(&scope, 0.5, 2.0);
  const std::string dir = FreshDir("replace_in_scope");
  ASSERT_TRUE(SavePersistables(*executor_, Main(), &scope, dir).ok());
  RunStartup(&scope, 7.0, 8.0);
  ASSERT_TRUE(LoadPersistables(*executor_, Main(), &scope, dir).ok());
  const std::vector<HostTensor> values = Fetch(&scope);
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0].ToVector<float>(), std::vector<float>(6, 0.5f));
  EXPECT_EQ(values[1].ToVector<float>(), std::vector<float>(3, 2.0f));
}

TEST_F(PersistablesTest, SaveReplacesFilesAndLeavesOthersAlone) {
  const std::string dir = FreshDir("replace_files");
  fs::create_directories(dir);
  ASSERT_TRUE(
      WriteNpy(dir + "/w.npy", {DataType::kF64, Shape({1}), std::vector<uint8_t>(8, 0)}).ok());
  ASSERT_TRUE(
      WriteNpy(dir + "/other.npy", {DataType::kF64, Shape({1}), std::vector<uint8_t>(8)}).ok());
  Scope scope;
  RunStartup(&scope, 1.0, 3.0);
  ASSERT_TRUE(SavePersistables(*executor_, Main(), &scope, dir).ok());
  EXPECT_THAT(Entries(dir), UnorderedElementsAre("w.npy", "b.npy", "other.npy"));
  absl::StatusOr<NpyArray> w = ReadNpy(dir + "/w.npy");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->dtype, DataType::kF32);
  EXPECT_EQ(w->shape, kW);
}

TEST_F(PersistablesTest, SaveOfAVariableTheScopeLacksWritesNothing) {
  Scope empty;
  const std::string dir = FreshDir("missing_in_scope") + "/params";
  const absl::Status saved = SavePersistables(*executor_, Main(), &empty, dir);
  EXPECT_EQ(saved.code(), absl::StatusCode::kFailedPrecondition) << saved;
  EXPECT_THAT(saved.message(), HasSubstr("persistable 'w'"));
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_FALSE(fs::exists(fs::path(dir).parent_path()));
}

TEST_F(PersistablesTest, SaveThatCannotWriteRemovesTheDirectoryItCreated) {
  // A file name longer than any file system allows: w is written, then this one fails.
  const std::string long_name(300, 'p');
  ir::ProgramDesc startup;
  AddVar(startup.mutable_global_block(), Var("w", kW, /*persistable=*/true));
  AddVar(startup.mutable_global_block(), Var(long_name, kB, /*persistable=*/true));
  startup.mutable_global_block().AppendOp(Op("fill_constant", {}, {{"Out", {"w"}}}, Fill(kW, 1.0)));
  startup.mutable_global_block().AppendOp(
      Op("fill_constant", {}, {{"Out", {long_name}}}, Fill(kB, 1.0)));
  Scope scope;
  absl::StatusOr<RunResult> init = executor_->Run(startup, {}, {}, &scope);
  ASSERT_TRUE(init.ok()) << init.status();
  ir::ProgramDesc program;
  AddVar(program.mutable_global_block(), Var("w", kW, /*persistable=*/true));
  AddVar(program.mutable_global_block(), Var(long_name, kB, /*persistable=*/true));

  const std::string root = FreshDir("cannot_write");
  const absl::Status saved = SavePersistables(*executor_, program, &scope, root + "/a/b");
  ASSERT_FALSE(saved.ok());
  EXPECT_THAT(saved.message(), HasSubstr(absl::StrCat("variable '", long_name, "'")));
  EXPECT_FALSE(fs::exists(root));
}

TEST_F(PersistablesTest, SaveReplacesADirectoryInTheWayOfAFile) {
  Scope scope;
  RunStartup(&scope, 1.0, 3.0);
  // b.npy is taken by a directory: it belongs to the old set, which the save replaces whole.
  const std::string dir = FreshDir("directory_in_the_way");
  fs::create_directories(dir + "/b.npy/inside");
  ASSERT_TRUE(SavePersistables(*executor_, Main(), &scope, dir).ok());
  EXPECT_THAT(Entries(dir), UnorderedElementsAre("w.npy", "b.npy"));
  absl::StatusOr<NpyArray> b = ReadNpy(dir + "/b.npy");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->shape, kB);
  // No sibling is left beside the directory.
  for (const std::string& entry : Entries(fs::path(dir).parent_path().string())) {
    EXPECT_THAT(entry, ::testing::Not(HasSubstr(".saving-")));
  }
}

TEST_F(PersistablesTest, LoadOfAMissingFileNamesTheVariableAndTheFile) {
  Scope scope;
  RunStartup(&scope, 0.5, 2.0);
  const std::string dir = FreshDir("missing_file");
  ASSERT_TRUE(SavePersistables(*executor_, Main(), &scope, dir).ok());
  fs::remove(dir + "/b.npy");
  Scope fresh;
  const absl::Status loaded = LoadPersistables(*executor_, Main(), &fresh, dir);
  EXPECT_EQ(loaded.code(), absl::StatusCode::kNotFound) << loaded;
  EXPECT_THAT(loaded.message(), HasSubstr("variable 'b'"));
  EXPECT_THAT(loaded.message(), HasSubstr(dir + "/b.npy"));
  // Nothing was loaded, not even w, whose file was there.
  EXPECT_EQ(fresh.FindLocal("w"), nullptr);
}

TEST_F(PersistablesTest, LoadOfAnotherDtypeNamesTheVariableAndTheFile) {
  const std::string dir = FreshDir("dtype_mismatch");
  fs::create_directories(dir);
  ASSERT_TRUE(WriteNpy(dir + "/w.npy", {DataType::kF64, kW, std::vector<uint8_t>(6 * 8, 0)}).ok());
  ASSERT_TRUE(WriteNpy(dir + "/b.npy", {DataType::kF32, kB, std::vector<uint8_t>(3 * 4, 0)}).ok());
  Scope scope;
  const absl::Status loaded = LoadPersistables(*executor_, Main(), &scope, dir);
  EXPECT_EQ(loaded.code(), absl::StatusCode::kInvalidArgument) << loaded;
  EXPECT_THAT(loaded.message(), HasSubstr("variable 'w'"));
  EXPECT_THAT(loaded.message(), HasSubstr(dir + "/w.npy"));
  EXPECT_THAT(loaded.message(), HasSubstr("f64"));
  EXPECT_THAT(loaded.message(), HasSubstr("f32"));
  EXPECT_EQ(scope.FindLocal("b"), nullptr);
}

TEST_F(PersistablesTest, LoadOfAnotherShapeNamesTheVariableAndTheFile) {
  const std::string dir = FreshDir("shape_mismatch");
  fs::create_directories(dir);
  ASSERT_TRUE(WriteNpy(dir + "/w.npy", {DataType::kF32, kW, std::vector<uint8_t>(6 * 4, 0)}).ok());
  ASSERT_TRUE(
      WriteNpy(dir + "/b.npy", {DataType::kF32, Shape({4}), std::vector<uint8_t>(4 * 4, 0)}).ok());
  Scope scope;
  const absl::Status loaded = LoadPersistables(*executor_, Main(), &scope, dir);
  EXPECT_EQ(loaded.code(), absl::StatusCode::kInvalidArgument) << loaded;
  EXPECT_THAT(loaded.message(), HasSubstr("variable 'b'"));
  EXPECT_THAT(loaded.message(), HasSubstr(dir + "/b.npy"));
  EXPECT_THAT(loaded.message(), HasSubstr(Shape({4}).ToString()));
  EXPECT_THAT(loaded.message(), HasSubstr(kB.ToString()));
  EXPECT_EQ(scope.FindLocal("w"), nullptr);
}

TEST_F(PersistablesTest, NameThatIsNotAFileNameIsRefused) {
  ir::ProgramDesc program;
  AddVar(program.mutable_global_block(), Var("..", kB, /*persistable=*/true));
  Scope scope;
  const std::string dir = FreshDir("bad_name");
  for (const absl::Status& status : {SavePersistables(*executor_, program, &scope, dir),
                                     LoadPersistables(*executor_, program, &scope, dir)}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr("variable '..'"));
  }
  EXPECT_FALSE(fs::exists(dir));
}

}  // namespace
}  // namespace sluice::framework::io::persistables_test

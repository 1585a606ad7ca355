// SavePersistables replaces the set in one step (a sibling directory swapped in by
// renameat2), keeps the files that name no persistable, and cleans up after saves that were
// killed; LoadPersistables names every missing file, and with allow_missing loads only the
// files present. A process killed in the middle of a save: tests/tools/save_kill_test.sh.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/io/internal/staged_directory.h"
#include "framework/io/npy.h"
#include "framework/io/persistables.h"
#include "framework/ir/program_desc.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/program_test_util.h"

namespace sluice::framework::io::persistables_atomic_test {
namespace {

namespace fs = std::filesystem;
using internal::StagedDirectory;
using program_test::AddVar;
using program_test::Fill;
using program_test::Op;
using program_test::Var;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

const Shape kW({2, 3});
const Shape kB({3});
const Shape kC({4});

// w [2,3], b [3] and c [4], all persistable.
void DeclareVars(ir::ProgramDesc& program) {
  ir::BlockDesc& block = program.mutable_global_block();
  AddVar(block, Var("w", kW, /*persistable=*/true));
  AddVar(block, Var("b", kB, /*persistable=*/true));
  AddVar(block, Var("c", kC, /*persistable=*/true));
}

// Every variable filled with `value`.
ir::ProgramDesc Startup(double value) {
  ir::ProgramDesc program;
  DeclareVars(program);
  ir::BlockDesc& block = program.mutable_global_block();
  block.AppendOp(Op("fill_constant", {}, {{"Out", {"w"}}}, Fill(kW, value)));
  block.AppendOp(Op("fill_constant", {}, {{"Out", {"b"}}}, Fill(kB, value)));
  block.AppendOp(Op("fill_constant", {}, {{"Out", {"c"}}}, Fill(kC, value)));
  return program;
}

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

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The first value of each variable the file of which `dir` holds, by name.
std::map<std::string, float> FirstValues(const std::string& dir) {
  std::map<std::string, float> values;
  for (const char* name : {"w", "b", "c"}) {
    absl::StatusOr<NpyArray> array = ReadNpy(PersistablePath(dir, name));
    if (array.ok())
      values[name] = HostTensor{array->dtype, array->shape, array->bytes}.ToVector<float>().front();
  }
  return values;
}

// The process id of a process that has exited (and been reaped).
pid_t DeadPid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

class PersistablesAtomicTest : public ::testing::Test {
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

  // A fresh directory under the test's temporary directory, removed after the test; the
  // parameters go into its subdirectory "params" (so siblings are easy to list).
  std::string FreshRoot(const std::string& name) {
    const std::string dir =
        absl::StrCat(::testing::TempDir(), "/persistables_atomic_test_", getpid(), "_", name);
    fs::remove_all(dir);
    fs::create_directories(dir);
    dirs_.push_back(dir);
    return dir;
  }

  // A scope whose variables all hold `value`.
  std::unique_ptr<Scope> ScopeOf(double value) {
    auto scope = std::make_unique<Scope>();
    absl::StatusOr<RunResult> init = executor_->Run(Startup(value), {}, {}, scope.get());
    EXPECT_TRUE(init.ok()) << init.status();
    return scope;
  }

  absl::Status Save(double value, const std::string& dir) {
    std::unique_ptr<Scope> scope = ScopeOf(value);
    return SavePersistables(*executor_, Main(), scope.get(), dir);
  }

  // The first value of w, b and c in `scope`.
  std::vector<float> Fetch(Scope* scope) {
    absl::StatusOr<RunResult> result = executor_->Run(Main(), {}, {"w", "b", "c"}, scope);
    EXPECT_TRUE(result.ok()) << result.status();
    std::vector<float> firsts;
    if (result.ok()) {
      for (const HostTensor& t : result->fetches) firsts.push_back(t.ToVector<float>().front());
    }
    return firsts;
  }

  std::unique_ptr<eager::Context> context_;
  std::unique_ptr<Executor> executor_;
  std::vector<std::string> dirs_;
};

TEST_F(PersistablesAtomicTest, DirectoryHoldsTheOldSetUntilTheSwapAndTheNewSetAfter) {
  const std::string root = FreshRoot("swap");
  const std::string dir = root + "/params";
  ASSERT_TRUE(Save(1.0, dir).ok());
  const std::map<std::string, float> old_set = {{"w", 1.0f}, {"b", 1.0f}, {"c", 1.0f}};
  EXPECT_EQ(FirstValues(dir), old_set);

  // A save stopped anywhere before its swap: the new files exist beside DIR only.
  absl::StatusOr<StagedDirectory> staged = StagedDirectory::Begin(dir);
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ(fs::path(staged->staging()).parent_path(), fs::path(root));
  EXPECT_TRUE(absl::StartsWith(fs::path(staged->staging()).filename().string(),
                               StagedDirectory::SiblingPrefix("params")));
  std::set<std::string> written;
  for (const char* name : {"w", "b", "c"}) {
    const Shape shape = name[0] == 'w' ? kW : (name[0] == 'b' ? kB : kC);
    std::vector<float> twos(static_cast<size_t>(shape.NumElements()), 2.0f);
    const auto* bytes = reinterpret_cast<const uint8_t*>(twos.data());
    ASSERT_TRUE(WriteNpy(PersistablePath(staged->staging(), name),
                         {DataType::kF32, shape, {bytes, bytes + twos.size() * 4}})
                    .ok());
    written.insert(absl::StrCat(name, ".npy"));
    EXPECT_EQ(FirstValues(dir), old_set) << "after writing " << name;
  }
  ASSERT_TRUE(staged->Commit(written).ok());
  EXPECT_EQ(FirstValues(dir),
            (std::map<std::string, float>{{"w", 2.0f}, {"b", 2.0f}, {"c", 2.0f}}));
  // The sibling, which held the old set after the swap, is gone.
  EXPECT_THAT(Entries(root), ElementsAre("params"));
}

TEST_F(PersistablesAtomicTest, AbandonedStagingLeavesTheDirectoryAsItWas) {
  const std::string root = FreshRoot("abandon");
  const std::string dir = root + "/params";
  ASSERT_TRUE(Save(1.0, dir).ok());
  {
    absl::StatusOr<StagedDirectory> staged = StagedDirectory::Begin(dir);
    ASSERT_TRUE(staged.ok()) << staged.status();
    Write(staged->staging() + "/w.npy", "half a file");
  }
  EXPECT_EQ(FirstValues(dir),
            (std::map<std::string, float>{{"w", 1.0f}, {"b", 1.0f}, {"c", 1.0f}}));
  EXPECT_THAT(Entries(root), ElementsAre("params"));
}

TEST_F(PersistablesAtomicTest, FilesThatNameNoPersistableSurvive) {
  const std::string dir = FreshRoot("others") + "/params";
  fs::create_directories(dir + "/notes/deeper");
  Write(dir + "/README", "kept");
  Write(dir + "/notes/deeper/log.txt", "kept too");
  Write(dir + "/w.npy", "an old w, replaced");
  fs::create_symlink("README", dir + "/link");
  ASSERT_TRUE(chmod(dir.c_str(), 0750) == 0);

  ASSERT_TRUE(Save(3.0, dir).ok());
  EXPECT_THAT(Entries(dir),
              UnorderedElementsAre("w.npy", "b.npy", "c.npy", "README", "notes", "link"));
  EXPECT_EQ(Contents(dir + "/README"), "kept");
  EXPECT_EQ(Contents(dir + "/notes/deeper/log.txt"), "kept too");
  EXPECT_TRUE(fs::is_symlink(dir + "/link"));
  EXPECT_EQ(Contents(dir + "/link"), "kept");
  EXPECT_EQ(FirstValues(dir).at("w"), 3.0f);
  // The directory's permission bits are the old directory's, not the sibling's.
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
}

TEST_F(PersistablesAtomicTest, SaveRemovesSiblingsOfKilledSavesOnly) {
  const std::string root = FreshRoot("leftovers");
  const std::string dir = root + "/params";
  ASSERT_TRUE(Save(1.0, dir).ok());
  const std::string prefix = StagedDirectory::SiblingPrefix("params");
  // What a save killed before its swap leaves: a sibling with some of the new files.
  const std::string killed = absl::StrCat(root, "/", prefix, DeadPid(), "-aB3xYz");
  fs::create_directories(killed);
  Write(killed + "/w.npy", "half");
  // A sibling whose writer still runs (this process), one of another directory whose name
  // starts alike, and one whose name only looks alike: none is touched.
  absl::StatusOr<StagedDirectory> running = StagedDirectory::Begin(dir);
  ASSERT_TRUE(running.ok()) << running.status();
  const std::string other = absl::StrCat(
      root, "/", StagedDirectory::SiblingPrefix("params.saving-1-abcdef"), DeadPid(), "-abcdef");
  const std::string odd = absl::StrCat(root, "/", prefix, "not-a-pid");
  fs::create_directories(other);
  fs::create_directories(odd);

  ASSERT_TRUE(Save(2.0, dir).ok());
  EXPECT_FALSE(fs::exists(killed));
  EXPECT_TRUE(fs::exists(running->staging()));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(odd));
  EXPECT_EQ(FirstValues(dir).at("w"), 2.0f);
  // Loads never look at siblings.
  std::unique_ptr<Scope> scope = ScopeOf(0.0);
  ASSERT_TRUE(LoadPersistables(*executor_, Main(), scope.get(), dir).ok());
  EXPECT_THAT(Fetch(scope.get()), ElementsAre(2.0f, 2.0f, 2.0f));
}

TEST_F(PersistablesAtomicTest, SiblingStillLockedIsKept) {
  const std::string root = FreshRoot("locked");
  const std::string dir = root + "/params";
  // A writer in another process whose pid looks dead here (another pid namespace, say) but
  // that holds its flock: its sibling must survive.
  const std::string sibling =
      absl::StrCat(root, "/", StagedDirectory::SiblingPrefix("params"), DeadPid(), "-Lk0000");
  fs::create_directories(sibling);
  const int fd = open(sibling.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  ASSERT_TRUE(Save(1.0, dir).ok());
  EXPECT_TRUE(fs::exists(sibling));
  close(fd);
  ASSERT_TRUE(Save(2.0, dir).ok());
  EXPECT_FALSE(fs::exists(sibling));
}

TEST_F(PersistablesAtomicTest, SaveThroughASymbolicLinkReplacesItsTargetAndKeepsTheLink) {
  const std::string root = FreshRoot("symlink");
  ASSERT_TRUE(Save(1.0, root + "/run1").ok());
  fs::create_directory_symlink("run1", root + "/latest");
  ASSERT_TRUE(Save(2.0, root + "/latest").ok());
  EXPECT_TRUE(fs::is_symlink(root + "/latest"));
  EXPECT_EQ(FirstValues(root + "/run1").at("b"), 2.0f);
  EXPECT_THAT(Entries(root), UnorderedElementsAre("run1", "latest"));
}

TEST_F(PersistablesAtomicTest, SaveOntoAFileFailsAndLeavesIt) {
  const std::string root = FreshRoot("onto_file");
  Write(root + "/params", "not a directory");
  const absl::Status saved = Save(1.0, root + "/params");
  EXPECT_EQ(saved.code(), absl::StatusCode::kFailedPrecondition) << saved;
  EXPECT_THAT(saved.message(), HasSubstr(root + "/params"));
  EXPECT_EQ(Contents(root + "/params"), "not a directory");
  EXPECT_THAT(Entries(root), ElementsAre("params"));
}

TEST_F(PersistablesAtomicTest, LoadNamesEveryMissingVariable) {
  const std::string dir = FreshRoot("missing") + "/params";
  ASSERT_TRUE(Save(1.0, dir).ok());
  fs::remove(dir + "/b.npy");
  fs::remove(dir + "/c.npy");
  std::unique_ptr<Scope> scope = ScopeOf(5.0);
  const absl::Status loaded = LoadPersistables(*executor_, Main(), scope.get(), dir);
  EXPECT_EQ(loaded.code(), absl::StatusCode::kNotFound) << loaded;
  EXPECT_THAT(loaded.message(), HasSubstr("variable 'b' (" + dir + "/b.npy)"));
  EXPECT_THAT(loaded.message(), HasSubstr("variable 'c' (" + dir + "/c.npy)"));
  EXPECT_THAT(loaded.message(), HasSubstr("2 of the program's 3"));
  EXPECT_THAT(loaded.message(), Not(HasSubstr("'w'")));
  // Nothing was loaded, not even w.
  EXPECT_THAT(Fetch(scope.get()), ElementsAre(5.0f, 5.0f, 5.0f));
}

TEST_F(PersistablesAtomicTest, PartialLoadLoadsThePresentFilesAndLeavesTheOthers) {
  const std::string dir = FreshRoot("partial") + "/params";
  ASSERT_TRUE(Save(1.0, dir).ok());
  fs::remove(dir + "/b.npy");
  std::unique_ptr<Scope> scope = ScopeOf(5.0);
  absl::StatusOr<LoadReport> report =
      LoadPersistables(*executor_, Main(), scope.get(), dir, LoadOptions{.allow_missing = true});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->loaded, ElementsAre("w", "c"));
  EXPECT_THAT(report->skipped, ElementsAre("b"));
  EXPECT_THAT(Fetch(scope.get()), ElementsAre(1.0f, 5.0f, 1.0f));

  // With every file there, nothing is skipped.
  ASSERT_TRUE(Save(2.0, dir).ok());
  report =
      LoadPersistables(*executor_, Main(), scope.get(), dir, LoadOptions{.allow_missing = true});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->skipped, IsEmpty());
  EXPECT_THAT(Fetch(scope.get()), ElementsAre(2.0f, 2.0f, 2.0f));
}

TEST_F(PersistablesAtomicTest, PartialLoadErrorsLeaveTheScopeUnchanged) {
  const std::string dir = FreshRoot("partial_error") + "/params";
  ASSERT_TRUE(Save(1.0, dir).ok());
  fs::remove(dir + "/b.npy");
  ASSERT_TRUE(
      WriteNpy(dir + "/c.npy", {DataType::kF32, Shape({5}), std::vector<uint8_t>(5 * 4, 0)}).ok());
  std::unique_ptr<Scope> scope = ScopeOf(5.0);
  absl::StatusOr<LoadReport> report =
      LoadPersistables(*executor_, Main(), scope.get(), dir, LoadOptions{.allow_missing = true});
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument) << report.status();
  EXPECT_THAT(report.status().message(), HasSubstr("variable 'c'"));
  EXPECT_THAT(report.status().message(), HasSubstr(dir + "/c.npy"));
  EXPECT_THAT(Fetch(scope.get()), ElementsAre(5.0f, 5.0f, 5.0f));

  // A missing directory is an error even when files may be missing: it names the directory.
  report = LoadPersistables(*executor_, Main(), scope.get(), dir + "-typo",
                            LoadOptions{.allow_missing = true});
  EXPECT_EQ(report.status().code(), absl::StatusCode::kNotFound) << report.status();
  EXPECT_THAT(report.status().message(), HasSubstr(dir + "-typo"));
  EXPECT_THAT(Fetch(scope.get()), ElementsAre(5.0f, 5.0f, 5.0f));
}

}  // namespace
}  // namespace sluice::framework::io::persistables_atomic_test

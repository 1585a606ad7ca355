// A new version of a directory, built beside it and swapped in whole: what makes
// SavePersistables (persistables.h) replace a set of files atomically. Linux only
// (renameat2, flock).
//
// Begin creates the empty sibling PARENT/.NAME.saving-PID-XXXXXX (DIR's permission bits,
// locked with flock for as long as this object lives) after removing the siblings that
// earlier saves of DIR left behind when they were killed. The caller writes its files into
// staging(); Commit carries over the entries of DIR it did not write, flushes everything to
// disk and exchanges the sibling with DIR in one rename. Destroying an uncommitted
// StagedDirectory removes the sibling and the parents Begin created, so DIR is as it was.
//
// Move-only; thread-compatible. Two of them for the same DIR (in one process or several)
// are safe: each swap is atomic, the last one wins, and neither removes the other's sibling.
#ifndef SLUICE_FRAMEWORK_IO_INTERNAL_STAGED_DIRECTORY_H_
#define SLUICE_FRAMEWORK_IO_INTERNAL_STAGED_DIRECTORY_H_

#include <filesystem>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::framework::io::internal {

class StagedDirectory {
 public:
  // Prepares to replace `dir` (created, with its parents, when missing; a symbolic link is
  // resolved to the directory it names). Errors name `dir`: FailedPrecondition when it is
  // not a directory, is a root, or is a mount point (no rename can swap it); the file
  // system's error when the sibling cannot be made.
  static absl::StatusOr<StagedDirectory> Begin(const std::string& dir);

  StagedDirectory(StagedDirectory&& other) noexcept;
  StagedDirectory& operator=(StagedDirectory&&) = delete;
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;
  ~StagedDirectory();

  // Where the new version is built (the sibling), until Commit.
  const std::string& staging() const { return staging_; }

  // Swaps the new version in. Entries of the old `dir` whose names are not in `written`
  // (the names the caller put into staging()) are hard-linked, or copied where linking
  // fails, into the new version first. Then every file and the sibling are fsynced, the
  // sibling is exchanged with `dir` (renamed onto it when `dir` did not exist), the parent
  // is fsynced and the old version removed. Errors name `dir` or the entry; on error `dir`
  // is unchanged (FailedPrecondition when the file system cannot exchange the two).
  // At most once.
  absl::Status Commit(const std::set<std::string>& written);

  // The name prefix of `dir_name`'s siblings (".NAME.saving-"), for tests.
  static std::string SiblingPrefix(absl::string_view dir_name);

 private:
  StagedDirectory() = default;
  void Abandon();

  std::string dir_;                // as the caller spelled it, for messages
  std::filesystem::path target_;   // resolved, absolute
  std::filesystem::path created_;  // the topmost parent Begin created; empty if none
  std::string staging_;
  int staging_fd_ = -1;  // holds the flock that marks the sibling as in use
  bool done_ = false;
};

}  // namespace sluice::framework::io::internal

#endif  // SLUICE_FRAMEWORK_IO_INTERNAL_STAGED_DIRECTORY_H_

#include "framework/io/internal/staged_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <random>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice::framework::io::internal {
namespace {

namespace fs = std::filesystem;

constexpr int kRandomChars = 6;

absl::Status Errno(int err, absl::string_view what, absl::string_view doing) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, ": ", doing));
}

// The topmost directory among `dir` and its ancestors that does not exist yet (what
// create_directories(dir) would create first); empty when `dir` exists.
fs::path FirstMissing(const fs::path& dir) {
  fs::path missing;
  std::error_code ec;
  for (fs::path p = dir; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing = p;
    if (p == p.parent_path()) break;
  }
  return missing;
}

// fsync of the file or directory at `path`.
absl::Status Sync(const fs::path& path, bool directory) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) return Errno(errno, path.string(), "cannot open to flush");
  const int err = fsync(fd) == 0 ? 0 : errno;
  close(fd);
  if (err != 0) return Errno(err, path.string(), "fsync failed");
  return absl::OkStatus();
}

// True when `entry` (a name in the parent) is a sibling of the directory `dir_name` left by a
// save whose process is gone and that nobody holds: "PREFIX<pid>-<6 letters or digits>",
// the pid not a live process, the flock free. Taking the flock without waiting is what
// proves its writer is gone (the kernel drops it when a process dies, even by SIGKILL); the
// pid check covers the moment between a writer's mkdir and its flock.
bool IsAbandonedSibling(const fs::path& parent, absl::string_view dir_name,
                        const std::string& entry) {
  const std::string prefix = StagedDirectory::SiblingPrefix(dir_name);
  if (!absl::StartsWith(entry, prefix)) return false;
  absl::string_view rest = absl::string_view(entry).substr(prefix.size());
  const size_t dash = rest.find('-');
  if (dash == absl::string_view::npos || rest.size() - dash - 1 != kRandomChars) return false;
  for (char c : rest.substr(dash + 1)) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) return false;
  }
  int pid = 0;
  if (!absl::SimpleAtoi(rest.substr(0, dash), &pid) || pid <= 0) return false;
  if (pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) return false;
  const int fd = open((parent / entry).c_str(), O_RDONLY | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW);
  if (fd < 0) return false;
  // The lock is kept until the caller has removed the directory: close() releases it.
  const bool free = flock(fd, LOCK_EX | LOCK_NB) == 0;
  close(fd);
  return free;
}

}  // namespace

std::string StagedDirectory::SiblingPrefix(absl::string_view dir_name) {
  return absl::StrCat(".", dir_name, ".saving-");
}

absl::StatusOr<StagedDirectory> StagedDirectory::Begin(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("the directory name is empty");
  std::error_code ec;
  fs::path target = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  if (ec) return Errno(ec.value(), dir, "cannot resolve the path");
  if (target.filename().empty()) target = target.parent_path();  // a trailing '/'
  if (target == target.root_path() || target.filename() == "..") {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ": a root directory cannot be replaced; save into a subdirectory"));
  }
  const fs::path parent = target.parent_path();
  const std::string name = target.filename().string();

  StagedDirectory staged;
  staged.dir_ = dir;
  staged.target_ = target;
  staged.created_ = FirstMissing(parent);
  fs::create_directories(parent, ec);
  if (ec) {
    staged.Abandon();
    return Errno(ec.value(), dir, absl::StrCat("cannot create ", parent.string()));
  }
  struct stat parent_stat {};
  struct stat target_stat {};
  if (stat(parent.c_str(), &parent_stat) != 0) {
    const int err = errno;
    staged.Abandon();
    return Errno(err, dir, absl::StrCat("cannot stat ", parent.string()));
  }
  mode_t mode = 0;
  if (lstat(target.c_str(), &target_stat) == 0) {
    if (!S_ISDIR(target_stat.st_mode)) {
      staged.Abandon();
      return absl::FailedPreconditionError(absl::StrCat(dir, ": not a directory"));
    }
    // Found early, before anything is written: a rename cannot move a mount point.
    if (target_stat.st_dev != parent_stat.st_dev) {
      staged.Abandon();
      return absl::FailedPreconditionError(
          absl::StrCat(dir,
                       ": is a mount point, which cannot be replaced atomically; save into a "
                       "subdirectory of it"));
    }
    mode = target_stat.st_mode & 07777;
  } else if (errno != ENOENT) {
    const int err = errno;
    staged.Abandon();
    return Errno(err, dir, "cannot stat");
  }

  // Siblings of killed saves; removing them is best effort (they never confuse a load).
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    if (IsAbandonedSibling(parent, name, entry)) {
      std::error_code ignored;
      fs::remove_all(it->path(), ignored);
    }
  }

  std::random_device random;
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::uniform_int_distribution<int> pick(0, sizeof(kChars) - 2);
  for (int attempt = 0;; ++attempt) {
    std::string suffix;
    for (int i = 0; i < kRandomChars; ++i) suffix.push_back(kChars[pick(random)]);
    const fs::path staging = parent / absl::StrCat(SiblingPrefix(name), getpid(), "-", suffix);
    if (mkdir(staging.c_str(), 0777) == 0) {
      staged.staging_ = staging.string();
      break;
    }
    if (errno != EEXIST || attempt == 100) {
      const int err = errno;
      staged.Abandon();
      return Errno(err, dir, absl::StrCat("cannot create ", staging.string()));
    }
  }
  staged.staging_fd_ = open(staged.staging_.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECTORY);
  if (staged.staging_fd_ < 0 || flock(staged.staging_fd_, LOCK_EX) != 0 ||
      (mode != 0 && fchmod(staged.staging_fd_, mode) != 0)) {
    const int err = errno;
    staged.Abandon();
    return Errno(err, dir, absl::StrCat("cannot prepare ", staged.staging_));
  }
  return staged;
}

StagedDirectory::StagedDirectory(StagedDirectory&& other) noexcept
    : dir_(std::move(other.dir_)),
      target_(std::move(other.target_)),
      created_(std::move(other.created_)),
      staging_(std::move(other.staging_)),
      staging_fd_(std::exchange(other.staging_fd_, -1)),
      done_(std::exchange(other.done_, true)) {}

StagedDirectory::~StagedDirectory() {
  if (!done_) Abandon();
}

void StagedDirectory::Abandon() {
  done_ = true;
  std::error_code ignored;
  if (!staging_.empty()) fs::remove_all(staging_, ignored);
  if (!created_.empty()) fs::remove_all(created_, ignored);
  if (staging_fd_ >= 0) close(staging_fd_);
  staging_fd_ = -1;
}

absl::Status StagedDirectory::Commit(const std::set<std::string>& written) {
  if (done_) return absl::FailedPreconditionError(absl::StrCat(dir_, ": committed already"));
  // Every error below leaves `dir` untouched; Abandon then removes the sibling.
  auto fail = [this](absl::Status status) {
    Abandon();
    return status;
  };
  std::error_code ec;
  const fs::path staging(staging_);
  struct stat target_stat {};
  const bool exists = lstat(target_.c_str(), &target_stat) == 0;
  if (exists) {
    for (fs::directory_iterator it(target_, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string entry = it->path().filename().string();
      if (written.count(entry) != 0) continue;
      const fs::path to = staging / entry;
      // A hard link costs no copy and keeps the bytes; directories and file systems without
      // hard links get a copy.
      if (link(it->path().c_str(), to.c_str()) == 0) continue;
      std::error_code copy_ec;
      fs::copy(it->path(), to, fs::copy_options::recursive | fs::copy_options::copy_symlinks,
               copy_ec);
      if (copy_ec) {
        return fail(
            Errno(copy_ec.value(), it->path().string(),
                  absl::StrCat("cannot carry over into ", staging_, ": ", copy_ec.message())));
      }
    }
    if (ec) return fail(Errno(ec.value(), dir_, "cannot list"));
  }

  // The data must reach the disk before the rename does, or a crash could expose a
  // directory of empty files.
  for (fs::recursive_directory_iterator it(staging, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_symlink()) continue;
    if (it->is_regular_file() || it->is_directory()) {
      if (absl::Status synced = Sync(it->path(), it->is_directory()); !synced.ok()) {
        return fail(synced);
      }
    }
  }
  if (ec) return fail(Errno(ec.value(), staging_, "cannot list"));
  if (fsync(staging_fd_) != 0) return fail(Errno(errno, staging_, "fsync failed"));

  if (exists) {
    if (renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) != 0) {
      const int err = errno;
      if (err == EXDEV || err == EBUSY || err == EINVAL || err == ENOSYS || err == ENOTSUP) {
        return fail(absl::FailedPreconditionError(absl::StrCat(
            dir_,
            ": cannot be replaced atomically (renameat2 RENAME_EXCHANGE: ", std::strerror(err),
            "); it is left unchanged. Save into a subdirectory on a local file system")));
      }
      return fail(Errno(err, dir_, absl::StrCat("cannot exchange with ", staging_)));
    }
  } else if (rename(staging.c_str(), target_.c_str()) != 0) {
    return fail(Errno(errno, dir_, absl::StrCat("cannot rename ", staging_, " onto it")));
  }
  // `dir` holds the new version now: nothing below may undo that.
  done_ = true;
  created_.clear();
  const absl::Status parent_synced = Sync(target_.parent_path(), /*directory=*/true);
  // The sibling holds the old version (or nothing, after a plain rename). Should removing it
  // fail, the next save of `dir` removes it.
  std::error_code ignored;
  if (exists) fs::remove_all(staging, ignored);
  close(staging_fd_);
  staging_fd_ = -1;
  return parent_synced;
}

}  // namespace sluice::framework::io::internal

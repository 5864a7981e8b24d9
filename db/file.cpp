#include "db/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "db/sqlite.hpp"
#include "ktune/error.hpp"
#include "runtime/core/types.hpp"

namespace fs = std::filesystem;

namespace ktune::db {
namespace {

const char* role_of(const char* suffix) {
  if (std::strcmp(suffix, "-wal") == 0) return "write-ahead log";
  if (std::strcmp(suffix, "-shm") == 0) return "WAL index";
  return "rollback journal";
}

// The type of what `path` leads to (symlinks followed); errno on failure.
int file_type(const fs::path& path, struct stat* st) {
#ifdef O_PATH
  // An O_PATH descriptor neither opens the file (no waiting on a FIFO, no device side effects)
  // nor, when closed, drops the fcntl locks this process's SQLite connections hold on the same
  // file, as closing an ordinary descriptor would (POSIX): another process could then checkpoint
  // and rewrite the file under them.
  const int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return errno;
  const int rc = fstat(fd, st);
  const int err = errno;
  close(fd);
  return rc == 0 ? 0 : err;
#else
  return stat(path.c_str(), st) == 0 ? 0 : errno;
#endif
}

}  // namespace

const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "a special file";
}

std::optional<std::string> text_input_problem(const fs::path& path, const char* what) {
  struct stat st {};
  const std::string name = std::string(what) + " " + ktune::quoted(path.string(), 200);
  if (::stat(path.c_str(), &st) != 0) return "cannot read " + name + ": " + std::strerror(errno);
  // A character device reads as a file does (/dev/null: an empty input); a FIFO or a socket
  // would block the reader, a directory cannot be read.
  if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode))
    return name + " is " + file_kind(st.st_mode) + ", not a regular file";
  return std::nullopt;
}

fs::path sibling(const fs::path& db, const char* suffix) {
  fs::path p = db;
  p += suffix;
  return p;
}

DiskState inspect_disk(const fs::path& path, bool must_exist) {
  const std::string at = where(path.string());
  DiskState state;
  state.resolved = path;
  struct stat st {};
  if (const int err = file_type(path, &st); err != 0) {
    if (err != ENOENT) throw DatabaseError(at + "cannot open it: " + std::strerror(err));
    if (must_exist) throw DatabaseError(at + "no such file");
  } else {
    if (!S_ISREG(st.st_mode))
      throw DatabaseError(at + "is " + file_kind(st.st_mode) + ", not a regular file");
    state.exists = true;
    std::error_code ec;
    fs::path resolved = fs::canonical(path, ec);
    if (!ec) state.resolved = resolved;
  }
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    const fs::path side = sibling(state.resolved, suffix);
    if (lstat(side.c_str(), &st) != 0) continue;
    if (!S_ISREG(st.st_mode))
      throw DatabaseError(at + ktune::quoted(side.string(), 512) + " is " + file_kind(st.st_mode) +
                          ", not a regular file; SQLite would open it as this database's " +
                          role_of(suffix) + ": move it aside");
    if (std::strcmp(suffix, "-wal") == 0) {
      state.wal_exists = true;
      state.wal_size = static_cast<std::uintmax_t>(st.st_size);
    } else if (std::strcmp(suffix, "-shm") == 0) {
      state.shm_exists = true;
    }
  }
  return state;
}

}  // namespace ktune::db

// The database file on disk, looked at without SQLite: its type and the journal files beside it.
// Checked before SQLite opens anything, because SQLite blocks forever opening a FIFO for reading.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace ktune::db {

/// What lies at a database path.
struct DiskState {
  bool exists = false;              // a regular file (after following symlinks) is there
  std::filesystem::path resolved;   // symlinks resolved: SQLite puts -wal and -shm beside this
  bool wal_exists = false;          // <resolved>-wal
  std::uintmax_t wal_size = 0;
  bool shm_exists = false;          // <resolved>-shm
};

/// Checks that `path` is a regular file (a symlink to one is fine), or absent when `must_exist` is
/// false, and that any -wal, -shm or -journal beside it is a regular file too (not even a symlink:
/// SQLite would create or write whatever it points to). Nothing here opens a file for reading or
/// writing, so nothing waits on a FIFO or wakes a device. Throws DatabaseError naming the file and
/// what it is instead ("is a FIFO, not a regular file"). SQLite opens the path again afterwards:
/// a FIFO swapped in between can still block it, which no check outside SQLite can prevent.
DiskState inspect_disk(const std::filesystem::path& path, bool must_exist);

/// What a file of this mode is, for messages: "a FIFO", "a directory", "a character device"...
const char* file_kind(mode_t mode);

/// Why `path` cannot be read as a text input (a plan, a miss log): it does not exist or cannot
/// be examined (strerror), or is neither a regular file nor a character device (/dev/null): a
/// directory, or a FIFO or socket, which would block a reader; nullopt when it can be read. `what` names the input in the message ("the plan").
std::optional<std::string> text_input_problem(const std::filesystem::path& path, const char* what);

/// `db` with `suffix` ("-wal", "-shm", "-journal") appended to its file name.
std::filesystem::path sibling(const std::filesystem::path& db, const char* suffix);

}  // namespace ktune::db

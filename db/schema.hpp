// Opening and closing a tuning database: the schema, the connection hardening, the checks of an
// existing file, and the journal mode ("WAL while writing, rollback journal at rest"). Private to
// db/.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

struct sqlite3;

namespace ktune::db {

/// Opens the database at `path` for writing, creating it (and its schema) when the path is absent
/// or an empty file, and switches it to write-ahead logging so that many writers and readers can
/// share it. Refuses a non-regular file, a foreign, newer, older or altered database, and places
/// where SQLite cannot create -wal/-shm. Close the handle with close_writable().
sqlite3* open_writable(const std::filesystem::path& path);

/// Opens the database at `path` for reading without creating any file beside it: SQLite's
/// mode=ro when the file is in rollback-journal mode or a writer's -wal and -shm are there,
/// immutable=1 when the header says WAL and no log holds pending changes (then *immutable is set).
/// Refuses what open_writable refuses, and a -wal with pending changes but no -shm.
sqlite3* open_readable(const std::filesystem::path& path, bool* immutable);

/// The schema version of an open file (PRAGMA user_version; open_* checked it).
std::int64_t schema_version(sqlite3* db, const std::string& label);

/// Closes a handle from open_writable. The last writer to close returns the file to rollback-
/// journal mode, so that readers need no -wal/-shm; while other connections use the file it stays
/// in WAL mode and nobody waits. Never throws.
void close_writable(sqlite3* db) noexcept;

}  // namespace ktune::db

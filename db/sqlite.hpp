// Small RAII types over the SQLite C API, private to db/ and its tests. Like store.hpp this header
// only forward-declares SQLite's handles; the implementation lives in sqlite.cpp (only db/*.cpp
// include sqlite3.h). Every value reaches SQL through a bound `?`, never through the SQL text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace ktune::db {

/// "tuning database PATH: ", the start of every message about a file (the path made printable,
/// and truncated when absurdly long, so that a message stays one line).
std::string where(const std::string& label);
/// Throws DatabaseError "tuning database PATH: what SQLite said: what to do (during WHAT)".
[[noreturn]] void fail(sqlite3* db, int rc, const std::string& label, const std::string& what);
/// The start of an SQL text on one line, to say which statement failed.
std::string sql_excerpt(std::string_view sql);

/// How a connection opens its file.
enum class OpenMode {
  read_write_create,  // read and write, creating the file if it is missing
  read_only,          // SQLITE_OPEN_READONLY through a `file:` URI with mode=ro
  immutable,          // read-only with immutable=1: no locks, no -wal/-shm (read-only media)
};

/// Owns one connection; closes it at destruction. Opening alone applies no settings: Store adds
/// the hardening and pragmas, tests use the raw connection to build foreign or hostile files.
class Connection {
 public:
  Connection(const std::filesystem::path& path, OpenMode mode);
  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  sqlite3* get() const { return db_; }
  /// Gives up ownership (the caller closes the handle with sqlite3_close_v2).
  sqlite3* release() noexcept;
  /// Runs SQL that takes no values (schema, constant pragmas); throws DatabaseError.
  void exec(const char* sql) const;
  /// The path, for error messages.
  const std::string& label() const { return label_; }

 private:
  sqlite3* db_ = nullptr;
  std::string label_;
};

/// One prepared statement. Values bind to ?1, ?2... in order; columns read by index.
class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql, std::string label);
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  void bind(int index, std::int64_t value);
  void bind(int index, int value) { bind(index, static_cast<std::int64_t>(value)); }
  void bind(int index, double value);
  void bind(int index, std::string_view value);
  void bind(int index, const std::string& value) { bind(index, std::string_view(value)); }
  void bind(int index, const char* value) { bind(index, std::string_view(value)); }
  void bind(int index, std::nullptr_t);
  void bind(int index, bool) = delete;  // would be picked for pointers; say what you mean

  /// Binds every argument, the first to ?1.
  template <class... T>
  Statement& bind_all(const T&... values) {
    int index = 0;
    (bind(++index, values), ...);
    return *this;
  }

  /// Advances; true while a row is ready. Throws DatabaseError on failure.
  bool step();
  /// Steps to completion (INSERT/UPDATE/DELETE).
  void run();
  /// Steps once and requires a row (a scalar query).
  Statement& row();

  /// Makes the statement ready to step again from the start; bound values stay.
  void reset();
  sqlite3_stmt* get() const { return stmt_; }
  const std::string& label() const { return label_; }

  bool is_null(int column) const;
  std::int64_t int64(int column) const;
  /// An int64 column that must fit in int; DatabaseError otherwise.
  int int32(int column) const;
  double real(int column) const;
  std::string text(int column) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string label_;
};

/// BEGIN IMMEDIATE (or DEFERRED) ... COMMIT; rolls back unless committed. Never throws from the
/// destructor.
class Transaction {
 public:
  enum class Kind { deferred, immediate };
  Transaction(sqlite3* db, std::string label, Kind kind = Kind::immediate);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void commit();

 private:
  sqlite3* db_;
  std::string label_;
  bool open_ = false;
};

}  // namespace ktune::db

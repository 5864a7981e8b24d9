// The RAII types of db/sqlite.hpp and the one way database errors are worded.
#include "db/sqlite.hpp"

#include <sqlite3.h>

#include <limits>
#include <system_error>
#include <utility>

#include "ktune/error.hpp"
#include "runtime/core/types.hpp"

namespace fs = std::filesystem;

namespace ktune::db {
namespace {

// What a user can do about the common failures; SQLite's own text says what happened.
const char* hint_for(int rc) {
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return ": the file is corrupt or not a SQLite database; restore a copy or move it aside";
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return ": another process kept it locked for longer than the 10 s busy timeout";
    case SQLITE_READONLY:
      return ": the file or its directory is not writable";
    case SQLITE_FULL:
      return ": the disk is full";
    case SQLITE_CANTOPEN:
      return ": the file cannot be opened (missing, a directory, or no permission)";
    case SQLITE_CONSTRAINT:
      if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
        return ": the sweep_id or trial_id does not exist in this database";
      return "";
    default:
      return "";
  }
}

// A `file:` URI for read-only opens. Every byte outside the unreserved set is percent-encoded, so a
// path holding '?', '#' or '%' cannot smuggle in URI parameters.
std::string file_uri(const fs::path& path, bool immutable) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  if (ec) absolute = path;
  static const char hex[] = "0123456789ABCDEF";
  std::string uri = "file://";
  for (const unsigned char c : absolute.string()) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
    if (plain) {
      uri += static_cast<char>(c);
    } else {
      uri += '%';
      uri += hex[c >> 4];
      uri += hex[c & 15];
    }
  }
  uri += immutable ? "?mode=ro&immutable=1" : "?mode=ro";
  return uri;
}

}  // namespace

std::string where(const std::string& label) {
  // A path can hold control characters and be thousands of bytes long.
  constexpr std::size_t kLongest = 512;
  const std::string shown =
      label.size() > kLongest ? ktune::quoted(label, kLongest) : printable(label);
  return "tuning database " + shown + ": ";
}

[[noreturn]] void fail(sqlite3* db, int rc, const std::string& label, const std::string& what) {
  std::string message = where(label);
  message += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  message += hint_for(rc);
  message += " (during " + what + ")";
  throw DatabaseError(message);
}

std::string sql_excerpt(std::string_view sql) {
  std::string out;
  for (const char c : sql) {
    const bool space = c == ' ' || c == '\n' || c == '\t';
    if (space && (out.empty() || out.back() == ' ')) continue;
    if (out.size() == 48) return out + "...";
    out += space ? ' ' : c;
  }
  return out;
}

Connection::Connection(const fs::path& path, OpenMode mode) : label_(path.string()) {
  int flags = SQLITE_OPEN_FULLMUTEX;
  std::string name;
  if (mode == OpenMode::read_write_create) {
    // No URI flag: the name is taken literally, whatever characters it holds.
    flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    name = path.string();
  } else {
    flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
    name = file_uri(path, mode == OpenMode::immutable);
  }
  const int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    // Even a failed open may hand back a handle, which carries the message and must be closed.
    sqlite3* failed = std::exchange(db_, nullptr);
    std::string message = where(label_);
    message += failed != nullptr ? sqlite3_errmsg(failed) : sqlite3_errstr(rc);
    message += hint_for(rc);
    message += " (during open)";
    sqlite3_close_v2(failed);
    throw DatabaseError(message);
  }
  sqlite3_extended_result_codes(db_, 1);
}

Connection::Connection(Connection&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), label_(std::move(other.label_)) {}

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    label_ = std::move(other.label_);
  }
  return *this;
}

Connection::~Connection() { sqlite3_close_v2(db_); }

sqlite3* Connection::release() noexcept { return std::exchange(db_, nullptr); }

void Connection::exec(const char* sql) const {
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(db_, rc, label_, sql_excerpt(sql));
}

Statement::Statement(sqlite3* db, std::string_view sql, std::string label)
    : db_(db), label_(std::move(label)) {
  const int rc =
      sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), 0, &stmt_, nullptr);
  if (rc != SQLITE_OK) fail(db_, rc, label_, sql_excerpt(sql));
  if (stmt_ == nullptr) throw DatabaseError(where(label_) + "empty SQL statement");
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

void Statement::bind(int index, std::int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) fail(db_, rc, label_, "binding a value");
}

void Statement::bind(int index, double value) {
  const int rc = sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK) fail(db_, rc, label_, "binding a value");
}

void Statement::bind(int index, std::string_view value) {
  const int rc = sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT,
                                     SQLITE_UTF8);
  if (rc != SQLITE_OK) fail(db_, rc, label_, "binding a value");
}

void Statement::bind(int index, std::nullptr_t) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) fail(db_, rc, label_, "binding a value");
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail(db_, rc, label_, sql_excerpt(sqlite3_sql(stmt_)));
}

void Statement::run() {
  while (step()) {
  }
}

Statement& Statement::row() {
  if (!step())
    throw DatabaseError(where(label_) + sql_excerpt(sqlite3_sql(stmt_)) + ": returned no row");
  return *this;
}

// sqlite3_reset repeats the error of the last step, which the caller has already seen.
void Statement::reset() { (void)sqlite3_reset(stmt_); }

bool Statement::is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::int64_t Statement::int64(int column) const { return sqlite3_column_int64(stmt_, column); }

int Statement::int32(int column) const {
  const std::int64_t v = sqlite3_column_int64(stmt_, column);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    const char* name = sqlite3_column_name(stmt_, column);
    throw DatabaseError(where(label_) + "column " + (name != nullptr ? name : "?") + " holds " +
                        std::to_string(v) + ", outside the range of int");
  }
  return static_cast<int>(v);
}

double Statement::real(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::text(int column) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  if (p == nullptr) return {};
  return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

Transaction::Transaction(sqlite3* db, std::string label, Kind kind)
    : db_(db), label_(std::move(label)) {
  const char* sql = kind == Kind::immediate ? "BEGIN IMMEDIATE" : "BEGIN";
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(db_, rc, label_, sql);
  open_ = true;
}

Transaction::~Transaction() {
  // A failed statement may already have rolled the transaction back; only roll back what is open.
  if (open_ && sqlite3_get_autocommit(db_) == 0)
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  const int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(db_, rc, label_, "COMMIT");
  open_ = false;
}

}  // namespace ktune::db

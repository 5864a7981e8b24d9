// Where tuning databases live: the user's writable one and the shipped read-only ones under it.
#include <dlfcn.h>

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "db/store.hpp"
#include "ktune/error.hpp"

#ifndef KTUNE_INSTALL_DB_DIR
#define KTUNE_INSTALL_DB_DIR ""
#endif
#ifndef KTUNE_SOURCE_DB_DIR
#define KTUNE_SOURCE_DB_DIR ""
#endif

namespace fs = std::filesystem;

namespace ktune {
namespace {

// An unset and an empty variable mean the same, as in the XDG rules.
std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

// No HOME (daemons, some batch systems): ask the password database.
std::optional<std::string> home_directory() {
  long size = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<std::size_t>(size) : 16384);
  passwd entry{};
  passwd* found = nullptr;
  if (getpwuid_r(getuid(), &entry, buf.data(), buf.size(), &found) == 0 && found != nullptr &&
      found->pw_dir != nullptr && *found->pw_dir != '\0')
    return std::string(found->pw_dir);
  return std::nullopt;
}

// The *.db files of a directory in name order; nothing when it is missing or unreadable.
void add_directory(const fs::path& dir, std::vector<fs::path>& out) {
  std::error_code ec;
  std::vector<fs::path> found;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->path().extension() == ".db" && it->is_regular_file(type_ec))
      found.push_back(it->path());
  }
  std::sort(found.begin(), found.end());
  out.insert(out.end(), found.begin(), found.end());
}

// An entry of $KTUNE_DB_PATH: a directory's databases, else the path itself whatever is there
// (missing, a FIFO, a dangling link), so that the runtime's report lists it with its reason
// rather than a typo disappearing.
void add_entry(const fs::path& entry, std::vector<fs::path>& out) {
  std::error_code ec;
  if (fs::is_directory(entry, ec))
    add_directory(entry, out);
  else
    out.push_back(entry);
}

}  // namespace

std::string DbLocation::describe() const {
  std::string text = ktune::quoted(path.string(), 200);
  if (source != "--db") text += " (from " + source + ")";
  return text;
}

DbLocation default_db_location() {
  if (auto path = env("KTUNE_DB")) return {fs::path(*path), "$KTUNE_DB", false};
  // The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored.
  if (auto data = env("XDG_DATA_HOME"); data && fs::path(*data).is_absolute())
    return {fs::path(*data) / "ktune" / "ktune.db", "$XDG_DATA_HOME", true};
  if (auto home = env("HOME"))
    return {fs::path(*home) / ".local" / "share" / "ktune" / "ktune.db", "$HOME", true};
  if (auto home = home_directory())
    return {fs::path(*home) / ".local" / "share" / "ktune" / "ktune.db",
            "the home directory in the password database", true};
  throw DatabaseError(
      "cannot place the tuning database: KTUNE_DB, XDG_DATA_HOME and HOME are unset "
      "and the user has no home directory; set KTUNE_DB to a file path");
}

fs::path default_db_path() { return default_db_location().path; }

std::vector<fs::path> shipped_db_paths() {
  std::vector<fs::path> candidates;
  if (auto list = env("KTUNE_DB_PATH")) {
    std::size_t start = 0;
    while (start <= list->size()) {
      std::size_t end = list->find(':', start);
      if (end == std::string::npos) end = list->size();
      if (end > start) add_entry(list->substr(start, end - start), candidates);
      start = end + 1;
    }
  }
  // Relative to the binary holding this code (libktune.so or an executable in <prefix>/bin), so
  // an installed tree still finds its databases after it is moved.
  Dl_info info;
  if (dladdr(reinterpret_cast<const void*>(&shipped_db_paths), &info) != 0 && info.dli_fname) {
    std::error_code ec;
    fs::path self = fs::canonical(info.dli_fname, ec);
    if (!ec) add_directory(self.parent_path().parent_path() / "share" / "ktune" / "db", candidates);
  }
  if (*KTUNE_INSTALL_DB_DIR != '\0') add_directory(KTUNE_INSTALL_DB_DIR, candidates);
  if (*KTUNE_SOURCE_DB_DIR != '\0') add_directory(KTUNE_SOURCE_DB_DIR, candidates);

  // The same file reached twice (an install prefix inside the source tree, a repeated entry) is
  // listed once, at its first position.
  std::vector<fs::path> out;
  std::vector<fs::path> seen;
  for (const fs::path& p : candidates) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(p, ec);
    if (ec) canonical = p;
    if (std::find(seen.begin(), seen.end(), canonical) != seen.end()) continue;
    seen.push_back(canonical);
    out.push_back(p);
  }
  return out;
}

}  // namespace ktune

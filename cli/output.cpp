#include "cli/output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "db/file.hpp"
#include "ktune/error.hpp"
#include "runtime/core/types.hpp"

namespace fs = std::filesystem;

namespace ktune::cli {

namespace {


void append_u_escape(std::string& o, unsigned code) {
  char b[16];
  std::snprintf(b, sizeof b, "\\u%04x", code);
  o += b;
}

}  // namespace

std::string json_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': o += "\\\""; break;
        case '\\': o += "\\\\"; break;
        case '\n': o += "\\n"; break;
        case '\t': o += "\\t"; break;
        case '\r': o += "\\r"; break;
        default:
          if (c < 0x20 || c == 0x7f)
            append_u_escape(o, c);
          else
            o += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0) {
      o += "\\ufffd";  // not UTF-8: JSON text must be
      ++i;
      continue;
    }
    const auto b1 = static_cast<unsigned char>(s[i + 1]);
    // C1 controls act on terminals like ESC sequences; U+2028/2029 end lines in JavaScript.
    if (n == 2 && c == 0xc2 && b1 < 0xa0) {
      append_u_escape(o, b1);
    } else if (n == 3 && c == 0xe2 && b1 == 0x80 &&
               (static_cast<unsigned char>(s[i + 2]) == 0xa8 ||
                static_cast<unsigned char>(s[i + 2]) == 0xa9)) {
      append_u_escape(o, 0x2000u + (static_cast<unsigned char>(s[i + 2]) & 0x3fu));
    } else {
      o.append(s, i, n);
    }
    i += n;
  }
  return o;
}

void Json::comma() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ",";
    first_.back() = false;
  }
}

Json& Json::begin_object() {
  comma();
  out_ += "{";
  first_.push_back(true);
  return *this;
}
Json& Json::end_object() {
  out_ += "}";
  first_.pop_back();
  return *this;
}
Json& Json::begin_array() {
  comma();
  out_ += "[";
  first_.push_back(true);
  return *this;
}
Json& Json::end_array() {
  out_ += "]";
  first_.pop_back();
  return *this;
}
Json& Json::key(const std::string& k) {
  comma();
  out_ += "\"" + json_escape(k) + "\":";
  after_key_ = true;
  return *this;
}
Json& Json::value(const std::string& v) {
  comma();
  out_ += "\"" + json_escape(v) + "\"";
  return *this;
}
Json& Json::value(double v) {
  comma();
  if (!std::isfinite(v)) {
    out_ += "null";
  } else {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", v);
    out_ += b;
  }
  return *this;
}
Json& Json::value(long long v) {
  comma();
  out_ += std::to_string(v);
  return *this;
}
Json& Json::value(bool v) {
  comma();
  out_ += v ? "true" : "false";
  return *this;
}
Json& Json::null() {
  comma();
  out_ += "null";
  return *this;
}

std::string fmt(const char* format, double v) {
  char b[64];
  std::snprintf(b, sizeof b, format, v);
  return b;
}

std::string shown(std::string_view text, std::size_t max) {
  std::string p = printable(text);
  if (p.size() <= max) return p;
  std::size_t cut = max;
  // printable() output is ASCII except valid UTF-8: back up to the start of a character.
  while (cut > 0 && (static_cast<unsigned char>(p[cut]) & 0xc0) == 0x80) --cut;
  return p.substr(0, cut) + "... (" + std::to_string(text.size()) + " bytes)";
}

std::string table(const std::vector<std::vector<std::string>>& raw) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(raw.size());
  for (const auto& r : raw) {
    std::vector<std::string> cells;
    cells.reserve(r.size());
    for (const std::string& c : r) cells.push_back(shown(c));
    rows.push_back(std::move(cells));
  }
  std::vector<std::size_t> width;
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

namespace {

// The directory part resolved (symbolic links, "." and ".."), the last name kept: two spellings
// of one directory entry compare equal, whether or not the entry exists.
fs::path entry_name(const fs::path& p) {
  std::error_code ec;
  const fs::path abs = fs::absolute(p, ec);
  if (ec) return p.lexically_normal();
  const fs::path dir = fs::weakly_canonical(abs.parent_path(), ec);
  if (ec) return abs.lexically_normal();
  return dir / abs.filename();
}

}  // namespace

void write_file_replacing(const std::string& option, const fs::path& target,
                          std::string_view text, const std::vector<fs::path>& inputs) {
  if (target.empty()) throw InvalidArgument(option + " \"\": the output path is empty");
  const std::string name = option + " " + ktune::quoted(target.string(), 200);

  struct stat st {};
  bool exists = false;
  if (::lstat(target.c_str(), &st) == 0) {
    exists = true;
    if (S_ISLNK(st.st_mode))
      throw InvalidArgument(name + " is a symbolic link; refusing to write through it (name a "
                                   "regular file or a new one)");
    if (!S_ISREG(st.st_mode))
      throw InvalidArgument(name + " is " + db::file_kind(st.st_mode) +
                            ", not a regular file; refusing to write to it");
  } else if (errno != ENOENT) {
    throw InvalidArgument("cannot examine " + name + ": " + std::strerror(errno));
  }

  // Never over an input: the same file (any link to it) or the name SQLite gives its side files.
  const fs::path target_entry = entry_name(target);
  for (const fs::path& input : inputs) {
    std::vector<fs::path> bases{input};
    std::error_code ec;
    fs::path canonical = fs::canonical(input, ec);
    if (!ec && canonical != input) bases.push_back(canonical);
    for (const fs::path& base : bases)
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        fs::path p = base;
        p += suffix;
        struct stat ps {};
        const bool same_file = exists && ::stat(p.c_str(), &ps) == 0 && ps.st_dev == st.st_dev &&
                               ps.st_ino == st.st_ino;
        if (same_file || entry_name(p) == target_entry)
          throw InvalidArgument(name + " is " +
                                (*suffix ? "the " + std::string(suffix + 1) + " file of " : "") +
                                "the database being read (" + ktune::quoted(input.string(), 200) +
                                "); refusing to write over it (choose another file)");
      }
  }

  // Never over a database: an SQLite file (the 16-byte header every one starts with) is a
  // user's data, never a text output's.
  if (exists) {
    char header[16] = {};
    if (std::FILE* f = std::fopen(target.c_str(), "rb")) {
      const std::size_t got = std::fread(header, 1, sizeof header, f);
      std::fclose(f);
      if (got == sizeof header && std::memcmp(header, "SQLite format 3", 16) == 0)
        throw InvalidArgument(name + " is an SQLite database; refusing to replace it with text "
                                     "(choose another file)");
    }
  }

  mode_t mode = 0;
  if (exists) {
    mode = st.st_mode & 0777;
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }

  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::string temp = (dir / ".ktune-tmp-XXXXXX").string();
  int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0)
    throw Error("cannot write " + name + ": cannot create a temporary file in " +
                ktune::quoted(dir.string(), 200) + ": " + std::strerror(errno));
  const auto fail = [&](const char* step) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    throw Error("cannot write " + name + ": " + step + ": " + std::strerror(err) +
                " (the old file, if any, is unchanged)");
  };
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, mode) != 0) fail("chmod");
  if (::fsync(fd) != 0) fail("fsync");
  const int closing = fd;
  fd = -1;
  if (::close(closing) != 0) fail("close");
  if (::rename(temp.c_str(), target.c_str()) != 0) fail("rename");
  // The rename itself is durable once the directory is synced; a failure here loses nothing.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

std::string duration_text(double s) {
  if (s < 90) return fmt("%.0f s", s);
  if (s < 5400) return fmt("%.0f min", s / 60);
  return fmt("%.1f h", s / 3600);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace ktune::cli

// Small output helpers for the CLI: a JSON writer, number formatting, terminal-safe text and
// files written without destroying what they replace.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ktune::cli {

/// `s` as the inside of a JSON string: valid UTF-8 always (a byte that is not becomes U+FFFD);
/// control characters, DEL, C1 controls and U+2028/U+2029 escaped as \uXXXX.
std::string json_escape(const std::string& s);

/// Builds one JSON value; objects and arrays nest with begin/end.
class Json {
 public:
  Json& begin_object();
  Json& end_object();
  Json& begin_array();
  Json& end_array();
  Json& key(const std::string& k);
  Json& value(const std::string& v);
  Json& value(const char* v) { return value(std::string(v)); }
  Json& value(double v);
  Json& value(long long v);
  Json& value(int v) { return value(static_cast<long long>(v)); }
  Json& value(bool v);
  Json& null();
  template <typename T>
  Json& field(const std::string& k, const T& v) {
    return key(k).value(v);
  }
  const std::string& str() const { return out_; }

 private:
  void comma();
  std::string out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

std::string fmt(const char* format, double v);
/// `text` for a human-readable line: printable() (control characters escaped) and cut to `max`
/// bytes with the full size noted. Every string from a database, a file or the user goes
/// through it (or through table()) before it reaches a terminal.
std::string shown(std::string_view text, std::size_t max = 200);
/// A duration for progress lines: "42 s", "12 min" or "1.5 h".
std::string duration_text(double seconds);
/// Seconds from `t` to now.
double seconds_since(std::chrono::steady_clock::time_point t);
/// Pads each cell to the column width; first row is the header. Cells pass through shown().
std::string table(const std::vector<std::vector<std::string>>& rows);

/// Writes `text` to `target` through a temporary file in the target's directory (flushed,
/// fsync-ed, every write checked) and an atomic rename, so a failure leaves the old file as it
/// was. Refuses (InvalidArgument) a symbolic link, anything but a regular file or a new name, and
/// any of `inputs` or its -wal, -shm or -journal file, by device and inode and by name. An
/// existing target keeps its permission bits; a new file gets 0666 & ~umask. `option` names the
/// target in messages ("-o"). Throws ktune::Error when writing fails.
void write_file_replacing(const std::string& option, const std::filesystem::path& target,
                          std::string_view text, const std::vector<std::filesystem::path>& inputs);

}  // namespace ktune::cli

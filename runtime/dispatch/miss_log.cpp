#include "runtime/dispatch/miss_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <tuple>

#include "db/file.hpp"
#include "ktune/error.hpp"
#include "templates/op.hpp"

namespace ktune {

std::string miss_line(const MissEntry& e) {
  return e.op + "\t" + dtype_name(e.dtype) + "\t" + e.problem_key + "\t" + e.device_key + "\t" +
         e.match + "\n";
}

std::optional<std::string> append_line(const std::string& path, const std::string& line) {
  // Whatever is there already must be a regular file before it is opened at all: opening a
  // device for writing can act on it (a tape rewinds, a terminal takes the line).
  struct stat before {};
  if (::stat(path.c_str(), &before) == 0 && !S_ISREG(before.st_mode))
    return "it is not a regular file";
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) return std::string("cannot open it: ") + std::strerror(errno);
  struct stat st {};
  std::optional<std::string> why;
  if (::fstat(fd, &st) != 0) {
    why = std::string("cannot examine it: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    why = "it is not a regular file";
  } else {
    const ssize_t n = ::write(fd, line.data(), line.size());
    if (n < 0) why = std::string("cannot write to it: ") + std::strerror(errno);
    else if (static_cast<std::size_t>(n) != line.size()) why = "a short write";
  }
  ::close(fd);
  return why;
}

std::vector<MissEntry> read_miss_log(const std::string& path, std::vector<std::string>& skipped) {
  if (std::optional<std::string> why = db::text_input_problem(path, "the miss log"))
    throw InvalidArgument(*why);
  std::ifstream in(path);
  if (!in) throw InvalidArgument("cannot read the miss log " + quoted(path, 200) + ": " + std::strerror(errno));
  std::vector<MissEntry> out;
  std::set<std::tuple<std::string, int, std::string>> seen;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::size_t at = 0;
    for (;;) {
      const std::size_t tab = line.find('\t', at);
      f.push_back(line.substr(at, tab == std::string::npos ? std::string::npos : tab - at));
      if (tab == std::string::npos) break;
      at = tab + 1;
    }
    const std::string where = "line " + std::to_string(number) + ": ";
    if (f.size() != 5) {
      skipped.push_back(where + "expected 5 tab-separated fields (op, dtype, problem, device, "
                                "match), got " + std::to_string(f.size()));
      continue;
    }
    MissEntry e{f[0], DType::bf16, f[2], f[3], f[4]};
    const Op* op = find_op(e.op);
    if (!op) {
      skipped.push_back(where + "unknown op " + quoted(e.op, 60));
      continue;
    }
    const std::optional<DType> t = parse_dtype(f[1]);
    if (!t) {
      skipped.push_back(where + "unknown dtype " + quoted(f[1], 60));
      continue;
    }
    e.dtype = *t;
    try {
      const Problem p = op->parse_problem(e.problem_key);
      op->check_problem(p);
      e.problem_key = op->problem_key(p);
    } catch (const InvalidArgument& err) {
      skipped.push_back(where + err.what());
      continue;
    }
    if (seen.insert({e.op, static_cast<int>(e.dtype), e.problem_key}).second) out.push_back(e);
  }
  return out;
}

}  // namespace ktune

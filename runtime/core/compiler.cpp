#include "runtime/core/compiler.hpp"

#include <fcntl.h>
#include <nvrtc.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "ktune/error.hpp"
#include "runtime/core/hash.hpp"
#include "runtime/core/types.hpp"
#include "templates/embedded.hpp"

#ifndef KTUNE_VERSION
#error "KTUNE_VERSION must be defined by the build"
#endif

namespace ktune {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kMainName = "ktune_main.cu";
constexpr char kEntryMagic[8] = {'K', 'T', 'U', 'N', 'E', 'C', 'B', '\n'};
constexpr std::uint32_t kEntryFormat = 1;
constexpr std::size_t kMaxEntryBytes = std::size_t{1} << 30;  // far beyond any real CUBIN

// ---- embedded headers, prepared once for NVRTC ----

struct Headers {
  std::vector<std::string> names;
  std::vector<std::string> texts;  // owned copies: NVRTC wants NUL-terminated strings
  std::vector<const char*> name_ptrs;
  std::vector<const char*> text_ptrs;
  std::string digest;  // sha256 over every (path, text), for the cache key
};

const Headers& headers() {
  static const Headers h = [] {
    Headers r;
    Sha256 sha;
    for (const EmbeddedFile& f : embedded_files()) {
      r.names.emplace_back(f.path);
      r.texts.emplace_back(f.text);
      sha.field(f.path).field(f.text);
    }
    for (std::size_t i = 0; i < r.names.size(); ++i) {
      r.name_ptrs.push_back(r.names[i].c_str());
      r.text_ptrs.push_back(r.texts[i].c_str());
    }
    r.digest = sha.hex();
    return r;
  }();
  return h;
}

// ---- what one job compiles: the main text and the option list ----

struct Prepared {
  std::string main_text;
  std::vector<std::string> options;
};

bool valid_arch(std::string_view a) {
  if (a.size() < 4 || a.substr(0, 3) != "sm_") return false;
  std::size_t i = 3;
  while (i < a.size() && a[i] >= '0' && a[i] <= '9') ++i;
  if (i == 3 || i > 6) return false;
  return i == a.size() || (i + 1 == a.size() && (a[i] == 'a' || a[i] == 'f'));
}

Prepared prepare(const CompileJob& job) {
  if (!valid_arch(job.arch)) {
    throw InvalidArgument("compile target '" + job.arch +
                          "' is not valid: expected sm_<digits> with an optional 'a' or 'f' "
                          "suffix, e.g. sm_80 or sm_90a");
  }
  if (job.source.name_expression.empty()) {
    throw InvalidArgument("compile job for " + job.arch + " has an empty name expression");
  }
  if (job.source_text.empty() && job.source.file.empty()) {
    throw InvalidArgument("compile job '" + job.source.name_expression +
                          "' has neither a source file nor source text");
  }
  Prepared p;
  p.main_text =
      job.source_text.empty() ? "#include \"" + job.source.file + "\"\n" : job.source_text;
  p.options = {"--gpu-architecture=" + job.arch, "-std=c++17", "--ptxas-options=-v",
               "-DKTUNE_NVRTC=1"};
  return p;
}

std::string key_of(const Prepared& p, const CompileJob& job) {
  Sha256 sha;
  sha.field("ktune compile cache").field(KTUNE_VERSION);
  sha.field(std::to_string(kEntryFormat)).field(std::to_string(Compiler::nvrtc_version()));
  sha.field(job.arch).field(job.source.name_expression).field(p.main_text);
  sha.field(headers().digest);
  for (const std::string& o : p.options) sha.field(o);
  return sha.hex();
}

std::string describe(const CompileJob& job) {
  std::string s = job.source.name_expression + " for " + job.arch;
  if (job.source_text.empty()) s += " (from " + job.source.file + ")";
  return s;
}

// ---- NVRTC ----

class Program {
 public:
  Program() = default;
  ~Program() {
    if (p_ != nullptr) nvrtcDestroyProgram(&p_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram* out() { return &p_; }
  nvrtcProgram get() const { return p_; }

 private:
  nvrtcProgram p_ = nullptr;
};

std::string program_log(nvrtcProgram p) {
  std::size_t n = 0;
  if (nvrtcGetProgramLogSize(p, &n) != NVRTC_SUCCESS || n == 0) return {};
  std::string log(n, '\0');
  if (nvrtcGetProgramLog(p, log.data()) != NVRTC_SUCCESS) return {};
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// The first line of the log that reports an error, so that one-line summaries say what broke.
std::string first_error_line(const std::string& log) {
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string_view line(log.data() + start, end - start);
    if (line.find("error") != std::string_view::npos) return std::string(line);
    start = end + 1;
  }
  return {};
}

[[noreturn]] void fail(const CompileJob& job, const std::string& what, nvrtcResult r,
                       std::string log) {
  std::string message = "NVRTC could not compile " + describe(job) + ": " + what + ": " +
                        nvrtcGetErrorString(r);
  const std::string first = first_error_line(log);
  if (!first.empty()) message += ": " + first;
  throw CompileError(message, std::move(log));
}

// The number written just before `suffix` in `text` ("Used 12 registers" -> 12), or 0.
int number_before(std::string_view text, std::string_view suffix) {
  const std::size_t at = text.find(suffix);
  if (at == std::string_view::npos) return 0;
  std::size_t begin = at;
  while (begin > 0 && text[begin - 1] >= '0' && text[begin - 1] <= '9') --begin;
  long long v = 0;
  for (std::size_t i = begin; i < at && v < (1LL << 31); ++i) v = v * 10 + (text[i] - '0');
  return v < (1LL << 31) ? static_cast<int>(v) : 0;
}

// ptxas -v reports every entry point of the program; only the section of `lowered` counts.
KernelResources parse_resources(const std::string& log, const std::string& lowered) {
  KernelResources r;
  const std::string entry = "Compiling entry function '" + lowered + "'";
  std::size_t begin = log.find(entry);
  if (begin == std::string::npos) return r;
  std::size_t end = log.find("Compiling entry function '", begin + entry.size());
  if (end == std::string::npos) end = log.size();
  const std::string_view section(log.data() + begin, end - begin);

  const std::size_t used = section.find("Used ");
  if (used != std::string_view::npos) {
    const std::string_view line = section.substr(used, section.find('\n', used) - used);
    r.registers = number_before(line, " registers");
    r.shared_bytes = number_before(line, " bytes smem");
  }
  const std::string props = "Function properties for " + lowered + "\n";
  const std::size_t p = section.find(props);
  if (p != std::string_view::npos) {
    const std::size_t line_begin = p + props.size();
    const std::string_view line =
        section.substr(line_begin, section.find('\n', line_begin) - line_begin);
    r.local_bytes = number_before(line, " bytes stack frame");
    r.spill_stores = number_before(line, " bytes spill stores");
    r.spill_loads = number_before(line, " bytes spill loads");
  }
  return r;
}

CompiledKernel build(const Prepared& p, const CompileJob& job) {
  const auto start = std::chrono::steady_clock::now();
  const Headers& h = headers();
  Program prog;
  nvrtcResult r = nvrtcCreateProgram(prog.out(), p.main_text.c_str(), kMainName.data(),
                                     static_cast<int>(h.names.size()), h.text_ptrs.data(),
                                     h.name_ptrs.data());
  if (r != NVRTC_SUCCESS) fail(job, "nvrtcCreateProgram", r, {});
  r = nvrtcAddNameExpression(prog.get(), job.source.name_expression.c_str());
  if (r != NVRTC_SUCCESS) fail(job, "nvrtcAddNameExpression", r, {});
  std::vector<const char*> options;
  for (const std::string& o : p.options) options.push_back(o.c_str());
  r = nvrtcCompileProgram(prog.get(), static_cast<int>(options.size()), options.data());
  CompiledKernel k;
  k.log = program_log(prog.get());
  if (r != NVRTC_SUCCESS) fail(job, "compilation failed", r, std::move(k.log));

  const char* lowered = nullptr;
  r = nvrtcGetLoweredName(prog.get(), job.source.name_expression.c_str(), &lowered);
  if (r != NVRTC_SUCCESS || lowered == nullptr) {
    fail(job, "the name expression was not instantiated", r, std::move(k.log));
  }
  k.lowered_name = lowered;
  std::size_t size = 0;
  r = nvrtcGetCUBINSize(prog.get(), &size);
  if (r != NVRTC_SUCCESS || size == 0) fail(job, "no CUBIN was produced", r, std::move(k.log));
  k.cubin.resize(size);
  r = nvrtcGetCUBIN(prog.get(), k.cubin.data());
  if (r != NVRTC_SUCCESS) fail(job, "nvrtcGetCUBIN", r, std::move(k.log));
  k.resources = parse_resources(k.log, k.lowered_name);
  k.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return k;
}

// ---- cache entries ----
//
// Layout (integers little-endian): magic[8], u32 format, sha256[32] of everything after it,
// then str key, str lowered name, 5 x i32 resources, str log, str cubin (each str: u64 length
// then bytes). Any mismatch makes the entry a miss; it is then rebuilt and overwritten.

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_str(std::string& out, std::string_view s) {
  put_u64(out, s.size());
  out.append(s);
}

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == s_.size(); }
  std::string_view bytes(std::size_t n) {
    if (!ok_ || n > s_.size() - pos_) {
      ok_ = false;
      return {};
    }
    const std::string_view v = s_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  std::uint64_t u64() { return little_endian(bytes(8)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(little_endian(bytes(4))); }
  std::string_view str() { return bytes(static_cast<std::size_t>(u64())); }

 private:
  static std::uint64_t little_endian(std::string_view b) {
    std::uint64_t v = 0;
    for (std::size_t i = b.size(); i > 0; --i) v = v << 8 | static_cast<unsigned char>(b[i - 1]);
    return v;
  }
  std::string_view s_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

std::string encode_entry(const std::string& key, const CompiledKernel& k) {
  std::string body;
  put_str(body, key);
  put_str(body, k.lowered_name);
  for (int v : {k.resources.registers, k.resources.shared_bytes, k.resources.local_bytes,
                k.resources.spill_stores, k.resources.spill_loads}) {
    put_u32(body, static_cast<std::uint32_t>(v));
  }
  put_str(body, k.log);
  put_str(body, k.cubin);
  std::string out(kEntryMagic, sizeof kEntryMagic);
  put_u32(out, kEntryFormat);
  const auto digest = Sha256().update(body).digest();
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return out + body;
}

std::optional<CompiledKernel> decode_entry(std::string_view data, const std::string& key) {
  Reader in(data);
  if (in.bytes(sizeof kEntryMagic) != std::string_view(kEntryMagic, sizeof kEntryMagic)) {
    return std::nullopt;
  }
  if (in.u32() != kEntryFormat) return std::nullopt;
  const std::string_view digest = in.bytes(32);
  if (!in.ok()) return std::nullopt;
  const std::string_view body = data.substr(sizeof kEntryMagic + 4 + 32);
  const auto actual = Sha256().update(body).digest();
  if (digest != std::string_view(reinterpret_cast<const char*>(actual.data()), actual.size())) {
    return std::nullopt;
  }
  if (in.str() != key) return std::nullopt;
  CompiledKernel k;
  k.lowered_name = std::string(in.str());
  int* fields[] = {&k.resources.registers, &k.resources.shared_bytes, &k.resources.local_bytes,
                   &k.resources.spill_stores, &k.resources.spill_loads};
  for (int* f : fields) *f = static_cast<int>(in.u32());
  k.log = std::string(in.str());
  k.cubin = std::string(in.str());
  if (!in.ok() || !in.at_end() || k.lowered_name.empty() || k.cubin.empty()) return std::nullopt;
  k.from_cache = true;
  return k;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Opens a file of the cache directory only if it is a regular file. O_NONBLOCK: a FIFO planted
// under an entry's name would otherwise block open() until some writer appears; the type is
// checked on the opened descriptor, so a swap after a check cannot matter.
Fd open_regular(int dir, const std::string& name, int flags) {
  Fd fd(::openat(dir, name.c_str(), flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return Fd(-1);
  return fd;
}

std::optional<std::string> read_file(int dir, const std::string& name) {
  const Fd fd = open_regular(dir, name, O_RDONLY);
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || st.st_size < 0 ||
      static_cast<std::uint64_t>(st.st_size) > kMaxEntryBytes) {
    return std::nullopt;
  }
  std::string data(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::read(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    done += static_cast<std::size_t>(n);
  }
  return data;
}

std::optional<CompiledKernel> load_entry(int dir, const std::string& name,
                                         const std::string& key) {
  const std::optional<std::string> data = read_file(dir, name);
  if (!data) return std::nullopt;
  return decode_entry(*data, key);
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// A new temporary file beside the entries (mkstemp has no *at form): O_EXCL with a name made
// unique by process, counter and clock.
Fd create_temp(int dir, const std::string& key, std::string& name) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 16; ++attempt) {
    const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
    name = key + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++) + "." +
           std::to_string(ticks % 1000000007);
    Fd fd(::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (fd.get() >= 0 || errno != EEXIST) return fd;
  }
  return Fd(-1);
}

// Best effort: a cache that cannot be written (disk full, read-only) only costs a recompile.
void store_entry(int dir, const std::string& name, const std::string& key,
                 const CompiledKernel& k) {
  std::string temp;
  Fd fd = create_temp(dir, key, temp);
  if (fd.get() < 0) return;
  const bool written = write_all(fd.get(), encode_entry(key, k)) && ::fsync(fd.get()) == 0 &&
                       ::close(fd.release()) == 0;
  if (!written || ::renameat(dir, temp.c_str(), dir, name.c_str()) != 0) {
    ::unlinkat(dir, temp.c_str(), 0);
    return;
  }
  // Make the rename itself durable, so a power loss cannot leave a torn directory entry.
  ::fsync(dir);
}

// An exclusive flock on <key>.lock, held while one process builds the entry. Lock files are
// never removed: removing them would let two builders lock different inodes. Anything but a
// regular file there (a FIFO, a directory) leaves the build unlocked: at worst two processes
// build the same entry.
class EntryLock {
 public:
  EntryLock(int dir, const std::string& name) : fd_(open_regular(dir, name, O_RDWR | O_CREAT)) {
    if (fd_.get() < 0) return;
    while (::flock(fd_.get(), LOCK_EX) != 0 && errno == EINTR) {
    }
  }

 private:
  Fd fd_;  // closing it releases the lock
};

std::string errno_text(int e) { return std::strerror(e); }

std::string octal_mode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// Opens the cache directory, creating missing components with mode 0700 (less under a stricter
// umask). The mode of an existing directory is never changed: it may be /tmp or a shared
// directory that other users depend on. The checks run on the opened descriptor, which every
// later access goes through, so the directory cannot be swapped after the check. Returns the
// descriptor, or -1 with `why` set to one line naming the directory.
int open_cache_dir(const fs::path& dir, std::string& why) {
  const std::string name = "compile cache " + quoted(dir.string(), 256) + " not used: ";
  if (dir.empty()) {
    why = "compile cache not used: the directory path is empty";
    return -1;
  }
  fs::path prefix;
  for (const fs::path& part : dir) {
    prefix /= part;
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      why = name + "cannot create " + quoted(prefix.string(), 256) + ": " + errno_text(errno);
      return -1;
    }
  }
  // Follows a symlink: what is checked and used is its target.
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    why = name + (errno == ENOTDIR ? std::string("not a directory") : errno_text(errno));
    return -1;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    why = name + "cannot stat it: " + errno_text(errno);
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    why = name + "not a directory";
    return -1;
  }
  if (st.st_uid != ::geteuid()) {
    why = name + "owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
          std::to_string(::geteuid()) + ")";
    return -1;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    why = name + "writable by group or others (mode " + octal_mode(st.st_mode) + ")";
    return -1;
  }
  if (::faccessat(fd.get(), ".", R_OK | W_OK | X_OK, AT_EACCESS) != 0) {
    why = name + "not usable by this user (mode " + octal_mode(st.st_mode) + "): " +
          errno_text(errno);
    return -1;
  }
  return fd.release();
}

}  // namespace

struct Compiler::OpenDir {
  explicit OpenDir(int f) : fd(f) {}
  ~OpenDir() { ::close(fd); }
  OpenDir(const OpenDir&) = delete;
  OpenDir& operator=(const OpenDir&) = delete;
  int fd;
};

Compiler::Compiler(std::optional<fs::path> cache_dir, Builder builder)
    : builder_(std::move(builder)) {
  if (!cache_dir) {
    cache_disabled_reason_ =
        "no compile cache directory (none given, or none of $KTUNE_CACHE_DIR, $XDG_CACHE_HOME, "
        "$HOME is set)";
    return;
  }
  const int fd = open_cache_dir(*cache_dir, cache_disabled_reason_);
  if (fd < 0) return;
  dir_ = std::make_shared<const OpenDir>(fd);
  cache_dir_ = std::move(cache_dir);
}

CompiledKernel Compiler::compile(const CompileJob& job) const {
  const Prepared p = prepare(job);
  const auto build_one = [&] {
    CompiledKernel k = builder_ ? builder_(job) : build(p, job);
    k.from_cache = false;
    return k;
  };
  if (!dir_) return build_one();
  const std::string key = key_of(p, job);
  const std::string entry = key + ".cubin";
  if (auto hit = load_entry(dir_->fd, entry, key)) return *std::move(hit);
  const EntryLock lock(dir_->fd, key + ".lock");
  // Another process may have built it while we waited for the lock.
  if (auto hit = load_entry(dir_->fd, entry, key)) return *std::move(hit);
  CompiledKernel k = build_one();
  store_entry(dir_->fd, entry, key, k);
  return k;
}

std::string Compiler::cache_key(const CompileJob& job) const { return key_of(prepare(job), job); }

int Compiler::nvrtc_version() {
  static const int version = [] {
    int major = 0;
    int minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return 0;
    return major * 1000 + minor * 10;
  }();
  return version;
}

std::optional<fs::path> Compiler::default_cache_dir() {
  if (const char* v = std::getenv("KTUNE_CACHE_DIR"); v != nullptr && *v != '\0') {
    return fs::path(v);
  }
  // The XDG spec says relative values are invalid and must be ignored.
  if (const char* v = std::getenv("XDG_CACHE_HOME"); v != nullptr && *v == '/') {
    return fs::path(v) / "ktune";
  }
  if (const char* v = std::getenv("HOME"); v != nullptr && *v != '\0') {
    return fs::path(v) / ".cache" / "ktune";
  }
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr &&
      found->pw_dir != nullptr && found->pw_dir[0] != '\0') {
    return fs::path(found->pw_dir) / ".cache" / "ktune";
  }
  return std::nullopt;
}

std::vector<CompileOutcome> compile_parallel(const Compiler& compiler,
                                             const std::vector<CompileJob>& jobs, int threads,
                                             const std::function<void(std::size_t)>& on_done) {
  std::vector<CompileOutcome> outcomes(jobs.size());
  if (jobs.empty()) return outcomes;
  std::size_t workers = threads > 0 ? static_cast<std::size_t>(threads)
                                    : std::max(1u, std::thread::hardware_concurrency());
  workers = std::min(workers, jobs.size());

  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex done_mutex;
  std::exception_ptr callback_error;

  auto work = [&] {
    for (std::size_t i = next++; i < jobs.size() && !stop; i = next++) {
      CompileOutcome& out = outcomes[i];
      try {
        out.kernel = compiler.compile(jobs[i]);
      } catch (const CompileTimeout& e) {
        out.error = e.what();
        out.timed_out = true;
      } catch (const CompileError& e) {
        out.error = std::string(e.what()) + "\n" + e.log();
      } catch (const std::exception& e) {
        out.error = e.what();
      } catch (...) {
        out.error = "unknown error while compiling " + jobs[i].source.name_expression;
      }
      if (!on_done) continue;
      std::lock_guard<std::mutex> lock(done_mutex);
      if (stop) break;
      try {
        on_done(i);
      } catch (...) {
        // Stop handing out jobs and rethrow in the caller's thread once every worker is done.
        callback_error = std::current_exception();
        stop = true;
      }
    }
  };

  // The calling thread works too, so a failure to start extra threads only slows the batch.
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < workers; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;
    }
  }
  work();
  for (std::thread& t : pool) t.join();
  if (callback_error) std::rethrow_exception(callback_error);
  return outcomes;
}

}  // namespace ktune

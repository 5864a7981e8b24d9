// Tests of what lies at a database path (db/file.cpp): anything but a regular file is refused at
// once, before SQLite could block on it (finding 3), in one line that says what it is (finding 11).
#include "db/file.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <set>
#include <string>

#include "db_test_support.hpp"

namespace ktune::test {
namespace {

using namespace std::chrono_literals;

/// Store::open's error message, from a child process that must finish within a few seconds: a
/// regression that blocks on a FIFO fails here instead of hanging the suite.
std::string open_error(const fs::path& p, Mode mode) {
  const std::optional<std::string> m =
      run_with_deadline([&] { return error_of([&] { Store::open(p, mode); }); }, 5s);
  if (!m) {
    ADD_FAILURE() << "Store::open(" << p << ") did not return within 5 s";
    return "(hung)";
  }
  return *m;
}

void expect_refused(const fs::path& p, const std::string& what, const fs::path& named) {
  for (Mode mode : {Mode::read_only, Mode::read_write}) {
    const std::string m = open_error(p, mode);
    EXPECT_CONTAINS(m, named.string());
    EXPECT_CONTAINS(m, what);
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(DbFiles, FifoIsRefusedAtOnce) {
  ScratchDir dir;
  const fs::path p = dir / "p.db";
  ASSERT_EQ(mkfifo(p.c_str(), 0600), 0);
  expect_refused(p, "is a FIFO, not a regular file", p);
  // Through a symlink too: what counts is what the link leads to.
  const fs::path link = dir / "link.db";
  fs::create_symlink(p, link);
  expect_refused(link, "is a FIFO, not a regular file", link);
  EXPECT_EQ(listing(dir.path()), (std::set<std::string>{"link.db", "p.db"}));
}

TEST(DbFiles, SocketsDevicesAndDirectoriesAreRefused) {
  ScratchDir dir;
  const fs::path sock = dir / "s.db";
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.string().size(), sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sock.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  expect_refused(sock, "is a socket, not a regular file", sock);
  close(fd);

  // Before: /dev/urandom read as "the file is empty"; a read-write open of /dev/null would put
  // -wal and -shm files in /dev.
  for (const char* device : {"/dev/null", "/dev/urandom", "/dev/zero"}) {
    if (!file_exists(device)) continue;
    expect_refused(device, "is a character device, not a regular file", device);
    for (const char* suffix : {"-wal", "-shm", "-journal"})
      EXPECT_FALSE(file_exists(sibling(device, suffix))) << device << suffix;
  }

  expect_refused(dir.path(), "is a directory, not a regular file", dir.path());
  EXPECT_EQ(listing(dir.path()), std::set<std::string>{"s.db"});
}

TEST(DbFiles, SymlinkToADatabaseOpens) {
  ScratchDir dir;
  fs::create_directories(dir / "data");
  const fs::path real = dir.path() / "data" / "real.db";
  populate(real, 3);
  const fs::path link = dir / "link.db";
  fs::create_symlink(real, link);
  {
    Store w = Store::open(link, Mode::read_write);
    w.record_trial(make_trial("n=9", "via-link", 1.0));
    // SQLite keeps its log beside the file the link leads to.
    EXPECT_TRUE(file_exists(sibling(real, "-wal")));
    EXPECT_FALSE(file_exists(sibling(link, "-wal")));
  }
  Store r = Store::open(link, Mode::read_only);
  EXPECT_EQ(r.all_trials().rows.size(), 4u);
  EXPECT_EQ(listing(dir.path()), (std::set<std::string>{"data", "link.db"}));
  EXPECT_EQ(listing(dir / "data"), std::set<std::string>{"real.db"});
}

TEST(DbFiles, JournalFilesBesideThatAreNotRegularAreRefused) {
  ScratchDir dir;
  const fs::path p = dir / "j.db";
  populate(p, 2);
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    const fs::path side = sibling(p, suffix);
    ASSERT_EQ(mkfifo(side.c_str(), 0600), 0);
    expect_refused(p, "is a FIFO, not a regular file", side);
    fs::remove(side);
    // A symlink would let SQLite create or write a file wherever it points.
    fs::create_symlink(dir / "elsewhere", side);
    expect_refused(p, "is a symbolic link, not a regular file", side);
    fs::remove(side);
    EXPECT_FALSE(file_exists(dir / "elsewhere"));
  }
  EXPECT_EQ(listing(dir.path()), std::set<std::string>{"j.db"});
  EXPECT_EQ(Store::open(p, Mode::read_only).all_trials().rows.size(), 2u);
}

TEST(DbFiles, InspectReportsTheJournalState) {
  ScratchDir dir;
  const fs::path p = dir / "s.db";
  db::DiskState absent = db::inspect_disk(p, /*must_exist=*/false);
  EXPECT_FALSE(absent.exists);
  EXPECT_THROW(db::inspect_disk(p, /*must_exist=*/true), DatabaseError);
  populate(p, 1);
  db::DiskState rest = db::inspect_disk(p, true);
  EXPECT_TRUE(rest.exists);
  EXPECT_FALSE(rest.wal_exists || rest.shm_exists);
  // A writer's log is there as soon as the open returns, before its first write.
  Store w = Store::open(p, Mode::read_write);
  EXPECT_TRUE(db::inspect_disk(p, true).wal_exists);
  w.record_trial(make_trial("n=1", "x", 1.0));
  db::DiskState live = db::inspect_disk(p, true);
  EXPECT_TRUE(live.wal_exists && live.shm_exists);
  EXPECT_GT(live.wal_size, 0u);
}

}  // namespace
}  // namespace ktune::test

// Tests of where the databases live (db/paths.cpp).
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "db/store.hpp"
#include "db_test_support.hpp"

namespace ktune::test {
namespace {

/// Sets environment variables for one test and restores them after.
class EnvGuard {
 public:
  explicit EnvGuard(std::vector<std::string> names) : names_(std::move(names)) {
    for (const std::string& n : names_) {
      const char* v = std::getenv(n.c_str());
      saved_.push_back(v != nullptr ? std::optional<std::string>(v) : std::nullopt);
    }
  }
  ~EnvGuard() {
    for (std::size_t i = 0; i < names_.size(); ++i) {
      if (saved_[i])
        setenv(names_[i].c_str(), saved_[i]->c_str(), 1);
      else
        unsetenv(names_[i].c_str());
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  std::vector<std::string> names_;
  std::vector<std::optional<std::string>> saved_;
};

TEST(DbPaths, DefaultPathFollowsTheEnvironment) {
  EnvGuard guard({"KTUNE_DB", "XDG_DATA_HOME", "HOME"});
  setenv("KTUNE_DB", "/data/mine.db", 1);
  setenv("XDG_DATA_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(default_db_path(), fs::path("/data/mine.db"));
  unsetenv("KTUNE_DB");
  EXPECT_EQ(default_db_path(), fs::path("/xdg/ktune/ktune.db"));
  setenv("XDG_DATA_HOME", "relative/dir", 1);  // invalid per the XDG spec: ignored
  EXPECT_EQ(default_db_path(), fs::path("/home/u/.local/share/ktune/ktune.db"));
  setenv("XDG_DATA_HOME", "", 1);
  setenv("KTUNE_DB", "", 1);  // empty means unset
  EXPECT_EQ(default_db_path(), fs::path("/home/u/.local/share/ktune/ktune.db"));
  unsetenv("HOME");
  EXPECT_FALSE(default_db_path().empty());  // from the password database
}

TEST(DbPaths, ShippedPathsAreFilesThenSortedDirectories) {
  EnvGuard guard({"KTUNE_DB_PATH"});
  ScratchDir dir;
  const fs::path shipped = dir / "shipped";
  fs::create_directories(shipped / "nested.db");  // a directory, not a database
  for (const char* name : {"b_h100.db", "a_a100.db", "notes.txt", "b_h100.db-wal"})
    write_bytes(shipped / name, "x");
  const fs::path single = dir / "single.sqlite";
  write_bytes(single, "x");

  unsetenv("KTUNE_DB_PATH");
  const auto baseline = shipped_db_paths();  // install and source-tree directories only

  const std::string list = single.string() + ":" + shipped.string() +
                           "::" + (dir / "missing").string() + ":" + shipped.string();
  setenv("KTUNE_DB_PATH", list.c_str(), 1);
  const auto paths = shipped_db_paths();
  ASSERT_GE(paths.size(), 4u);
  EXPECT_EQ(paths[0], single);
  EXPECT_EQ(paths[1], shipped / "a_a100.db");
  EXPECT_EQ(paths[2], shipped / "b_h100.db");
  // A missing entry stays listed: the runtime's report says "missing (no such file)" of it.
  EXPECT_EQ(paths[3], dir / "missing");
  EXPECT_EQ(std::vector<fs::path>(paths.begin() + 4, paths.end()), baseline);
}

}  // namespace
}  // namespace ktune::test

// Tests of the RAII types over SQLite (db/sqlite.cpp).
#include "db/sqlite.hpp"

#include "db_test_support.hpp"

namespace ktune::test {
namespace {

TEST(DbSqlite, TransactionRollsBackUnlessCommitted) {
  ScratchDir dir;
  const fs::path p = dir / "raw.db";
  db::Connection c(p, db::OpenMode::read_write_create);
  c.exec("CREATE TABLE t (v TEXT)");
  auto insert = [&](const char* value) {
    db::Statement s(c.get(), "INSERT INTO t (v) VALUES (?1)", c.label());
    s.bind(1, value);
    s.run();
  };
  auto count = [&] {
    return db::Statement(c.get(), "SELECT count(*) FROM t", c.label()).row().int64(0);
  };
  {
    db::Transaction t(c.get(), c.label());
    insert("dropped");
  }
  EXPECT_EQ(count(), 0);
  {
    db::Transaction t(c.get(), c.label());
    insert("'); DROP TABLE t; --");  // a value, never SQL
    t.commit();
  }
  EXPECT_EQ(count(), 1);
  EXPECT_EQ(db::Statement(c.get(), "SELECT v FROM t", c.label()).row().text(0),
            "'); DROP TABLE t; --");
  EXPECT_THROW(db::Statement(c.get(), "SELECT nope FROM t", c.label()), DatabaseError);
}

}  // namespace
}  // namespace ktune::test

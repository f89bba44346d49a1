// Tests for MultiRow (src/fanout/store/detail/multi_row.hpp): every row goes in, in order, in
// chunks of 64, 8 and 1, and a later row of an upsert wins.
#include "fanout/store/detail/multi_row.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "fanout/store/db.hpp"

#include "scratch_dir.hpp"

using fanout::store::Db;
using fanout::store::Statement;
using fanout::store::detail::MultiRow;
using fanout::test::ScratchDir;

namespace {

std::int64_t query(Db& db, const char* sql) { return db.query_int(sql); }

}  // namespace

TEST_CASE("store.multi_row.inserts_every_row_in_chunks") {
  ScratchDir dir;
  Db db(dir.file("t.db"), Db::Mode::ReadWriteCreate);
  db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)");
  MultiRow insert(db, "INSERT INTO t (id, v)", 2, "");
  for (const std::size_t n : {0, 1, 7, 8, 9, 63, 64, 65, 64 + 8 + 1, 200}) {
    CAPTURE(n);
    db.exec("DELETE FROM t");
    insert.run(n, [](Statement& st, int b, std::size_t i) {
      st.bind(b + 1, static_cast<std::uint64_t>(i)).bind(b + 2, static_cast<std::uint64_t>(2 * i));
    });
    CHECK(query(db, "SELECT count(*) FROM t") == static_cast<std::int64_t>(n));
    // Row i holds its own values: no row was bound at another row's place.
    CHECK(query(db, "SELECT count(*) FROM t WHERE v != 2 * id") == 0);
    if (n > 0) CHECK(query(db, "SELECT max(id) FROM t") == static_cast<std::int64_t>(n - 1));
  }
}

TEST_CASE("store.multi_row.later_row_of_an_upsert_wins") {
  ScratchDir dir;
  Db db(dir.file("t.db"), Db::Mode::ReadWriteCreate);
  db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)");
  MultiRow upsert(db, "INSERT INTO t (id, v)", 2, "ON CONFLICT (id) DO UPDATE SET v = excluded.v");
  // 73 rows (one chunk of each size) over ids 0..4: the last row for each id is kept.
  constexpr std::size_t kN = 64 + 8 + 1;
  upsert.run(kN, [](Statement& st, int b, std::size_t i) {
    st.bind(b + 1, static_cast<std::uint64_t>(i % 5)).bind(b + 2, static_cast<std::uint64_t>(i));
  });
  CHECK(query(db, "SELECT count(*) FROM t") == 5);
  for (std::uint64_t id = 0; id < 5; ++id) {
    CAPTURE(id);
    std::uint64_t last = 0;
    for (std::size_t i = 0; i < kN; ++i) {
      if (i % 5 == id) last = i;
    }
    Statement st(db, "SELECT v FROM t WHERE id = ?1");
    st.bind(1, id);
    REQUIRE(st.step());
    CHECK(st.column_uint64(0) == last);
  }
}

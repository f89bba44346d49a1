// Read-only connections. See read_only.hpp.
#include "fanout/store/detail/read_only.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <memory>
#include <system_error>

#include "fanout/store/schema.hpp"
#include "fanout/util/error.hpp"

namespace fanout::store::detail {

std::unique_ptr<Db> open_read_only(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw Failure(ErrorCode::NotFound, path + ": no such store");
  }
  // A 0-byte file (`sqlite3 STORE 'select ...'` before the first job leaves one) is a new store
  // with no jobs, as fanout-interchange also takes it: read an empty store of this version.
  if (std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) == 0 &&
      !ec) {
    auto empty = std::make_unique<Db>(":memory:", Db::Mode::ReadWriteCreate);
    apply_migrations(*empty, std::make_shared<spdlog::logger>("store", spdlog::sinks_init_list{}));
    return empty;
  }
  auto db = std::make_unique<Db>(path, Db::Mode::ReadOnly);
  db->exec("PRAGMA busy_timeout = 5000", "set busy_timeout");
  return db;
}

std::unique_ptr<Db> open_read_only_current(const std::string& path) {
  auto db = open_read_only(path);
  const auto version = db->query_int("PRAGMA user_version");
  if (version != kSchemaVersion) {
    throw Failure(ErrorCode::Version,
                  fmt::format("{}: store schema version {}; this fanout reads version {} (open "
                              "it once with this fanout-interchange to migrate it)",
                              path, version, kSchemaVersion));
  }
  return db;
}

}  // namespace fanout::store::detail

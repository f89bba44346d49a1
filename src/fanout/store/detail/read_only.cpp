// Read-only connections. See read_only.hpp.
#include "fanout/store/detail/read_only.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>

#include "fanout/store/schema.hpp"
#include "fanout/util/error.hpp"

namespace fanout::store::detail {

std::unique_ptr<Db> open_read_only(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw Failure(ErrorCode::NotFound, path + ": no such store");
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

// Opening a store file for reading, as every reader of the store does. Private to the store.
#pragma once

#include <memory>
#include <string>

#include "fanout/store/db.hpp"

namespace fanout::store::detail {

// Opens the existing store at `path` read-only, waiting up to 5 s for a lock. Never creates the
// file; a 0-byte file reads as an empty store of this schema version (a new store). Throws
// Failure{NotFound} "<path>: no such store" when it is missing, Failure{Database}
// naming the path when SQLite refuses. The caller checks the schema version.
[[nodiscard]] std::unique_ptr<Db> open_read_only(const std::string& path);

// open_read_only(), then checks that the store's schema is kSchemaVersion. Also throws
// Failure{Version} naming the path and both versions (used by the report and status queries).
[[nodiscard]] std::unique_ptr<Db> open_read_only_current(const std::string& path);

}  // namespace fanout::store::detail

// The store's schema: its version and the migrations that bring any older store up to it.
// The tables and views are described in docs/store.md.
#pragma once

#include "fanout/util/log.hpp"

namespace fanout::store {

class Db;

// The current schema version; migrations bring any older store up to it.
inline constexpr int kSchemaVersion = 10;

// Brings the store open on `db` (read-write) up to kSchemaVersion, one transaction per version,
// logging each at info. A store another process migrates meanwhile is not migrated twice.
// Throws Failure{Version} naming the path and both versions when the store is newer than
// kSchemaVersion, Failure{Database} when a migration fails (that version is then rolled back).
void apply_migrations(Db& db, const Logger& log);

}  // namespace fanout::store

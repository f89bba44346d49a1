// Tabular and partitioned inputs: which inputs are tables, the checks made before a job starts,
// and streaming their mini-batch descriptors. See docs/job-spec.md#tabular-input and
// docs/worker-pipe.md (the "kind": "tabular" detail).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fanout/config/job_spec.hpp"
#include "fanout/config/mltable.hpp"
#include "fanout/protocol/messages.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::client {

// The input named by input_data, or nullptr.
const config::InputSpec* data_input(const config::JobConfig& cfg);

// The table the job's input is read as: an mltable input with a read_delimited transformation; a
// uri_file/uri_folder input when mini_batch_size is a size or partition_keys are set without a
// partition_format. nullopt for a file-list input. Errors name the MLTable file and line.
[[nodiscard]] Expected<std::optional<config::TableSpec>> input_table(const config::JobConfig& cfg);

// An mltable input whose MLTable file has only `paths:` (no read_* transformation): Azure ML's
// table of files. Its files are the items, mini_batch_size counts them.
struct FileTable {
  std::vector<std::string> files{};  // in list_table_files order, never the MLTable file itself
  std::uint64_t per_batch = 10;      // files per mini-batch
};

// The input as a table of files, or nullopt when it is not one. Errors: the MLTable file's, a
// listed path missing, or a size ("10kb") as mini_batch_size, which a file table cannot use.
[[nodiscard]] Expected<std::optional<FileTable>> input_file_table(const config::JobConfig& cfg);

// Files per mini-batch of a table of files: mini_batch_size as a count ("1": one file), 10 when
// it is not written; a size is an error naming mini_batch_size.
[[nodiscard]] Expected<std::uint64_t> file_table_batch(const config::JobConfig& cfg);

// What a table looks like, found by reading only the first row of each file.
struct TableLayout {
  std::vector<std::string> files{};
  std::vector<std::string> columns{};  // the columns run() sees (after keep/drop), first file
};

// Lists the table's files and reads their headers; checks the encoding can be cut byte-wise and
// that every partition key is a column. Error{InvalidArgument} naming the job file and key, or
// the MLTable file and line, on failure. Reads no more than the first row of each file.
[[nodiscard]] Expected<TableLayout> check_table(const config::JobConfig& cfg,
                                                const config::TableSpec& table);

// Streams the table's mini-batches: by size (row boundaries, never across files), or with
// partition_keys one mini-batch per distinct combination of key values. Items are one empty
// string per row (so counts are rows); the detail describes the data. `emit` returns false to
// stop. Returns the number emitted.
[[nodiscard]] Expected<std::uint64_t> stream_table(
    const config::JobConfig& cfg, const config::TableSpec& table,
    const std::function<bool(proto::MiniBatch&&)>& emit);

// File input with a partition_format and partition_keys: one mini-batch per distinct combination
// of the named keys (items are the files; the detail carries partition_key_value).
[[nodiscard]] Expected<std::uint64_t> stream_file_partitions(
    const config::JobConfig& cfg, const config::InputSpec& input,
    const std::function<bool(proto::MiniBatch&&)>& emit);

}  // namespace fanout::client

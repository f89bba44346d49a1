// The CSV files of a job's report: header line, then one line per row of a store::ReportTable,
// streamed to the file in chunks. docs/store.md, section 8.
#pragma once

#include <string_view>

#include "fanout/store/report_source.hpp"
#include "fanout/util/atomic_file.hpp"

namespace fanout::report {

// The number of fields of a CSV header line.
[[nodiscard]] int csv_field_count(std::string_view header) noexcept;

// Writes `header`, a newline, then each of `rows` as a line of CSV fields (NULL as an empty
// field) to `file`, about a MiB at a time. `header` must have rows.columns() fields. Throws
// Failure{Io} naming the file, Failure{Database}.
void write_csv(store::ReportRows rows, std::string_view header, AtomicFile& file);

}  // namespace fanout::report

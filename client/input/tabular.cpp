// Tabular and partitioned inputs for `fanout run`. See tabular.hpp.
#include "client/input/tabular.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>

#include "client/input/listing.hpp"
#include "client/input/text_encoding.hpp"
#include "fanout/partition/row_cutter.hpp"
#include "fanout/util/json.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kChunk = 1 << 16;

struct CloseFile {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, CloseFile>;

Expected<File> open_at(const std::string& path, std::uint64_t offset) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) return make_error(ErrorCode::Io, path + ": cannot be read");
  if (offset > 0 && ::fseeko(f.get(), static_cast<off_t>(offset), SEEK_SET) != 0) {
    return make_error(ErrorCode::Io, path + ": cannot seek to byte " + std::to_string(offset));
  }
  return f;
}

// The table's conversion to UTF-8 (column names and key values travel as JSON text, and must be
// the text the worker decodes), or the error naming the encoding.
Expected<std::unique_ptr<ToUtf8>> converter(const config::TableSpec& t) {
  try {
    return std::make_unique<ToUtf8>(t.encoding);
  } catch (const Failure& f) {
    return make_error(ErrorCode::InvalidArgument,
                      t.source + ": read_delimited.encoding: " + f.error().message);
  }
}

// "<path>: row N: byte 0x81 at byte 3 is not valid windows1252": never a silent drop.
Error undecodable(const std::string& path, std::uint64_t row, const Error& e) {
  return Error{ErrorCode::InvalidArgument, fmt::format("{}: row {}: {}", path, row, e.message)};
}

// A file's layout: where its data starts and its column names (before keep/drop).
struct FileInfo {
  std::string path{};
  std::uint64_t data_start = 0;
  std::vector<std::string> columns{};
  std::vector<std::pair<std::string, std::string>> path_values{};
  std::uint64_t header_rows = 0;  // 1 when the file's first row is its header
  // What identifies the file's content as listed, taken before it is read: the worker that finds
  // another size or modification time fails the mini-batch as INPUT_CHANGED instead of reading
  // rows that are not the ones cut (docs/worker-pipe.md, "Changed input").
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
};

// Reads the first row of `path` from `offset` (the whole file if it has one row). Returns the
// row's bytes including its line break.
Expected<std::string> first_row(const std::string& path, std::uint64_t offset) {
  auto f = open_at(path, offset);
  if (!f) return Unexpected{f.error()};
  std::string buf;
  char chunk[kChunk];
  for (;;) {
    const std::size_t n = std::fread(chunk, 1, sizeof chunk, f->get());
    buf.append(chunk, n);
    if (auto end = part::first_row_end(buf); end != std::string_view::npos) {
      buf.resize(end);
      return buf;
    }
    if (n < sizeof chunk) return buf;
  }
}

std::uint64_t bom_size(const config::TableSpec& t, const std::string& path) {
  if (t.encoding != "utf8" && t.encoding != "utf8bom") return 0;
  auto f = open_at(path, 0);
  if (!f) return 0;
  unsigned char b[3] = {0, 0, 0};
  return std::fread(b, 1, 3, f->get()) == 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF ? 3 : 0;
}

// `first` is the first file's info (nullptr for the first file itself).
Expected<FileInfo> file_info(const config::TableSpec& t, const std::string& path,
                             const FileInfo* first) {
  FileInfo info;
  info.path = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return make_error(ErrorCode::Io, path + ": cannot be read");
  info.size = static_cast<std::uint64_t>(st.st_size);
  info.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  const std::uint64_t bom = bom_size(t, path);
  info.data_start = bom;
  // JSON lines have no header: each line names its own fields.
  if (t.format == config::TableFormat::JsonLines) return info;
  const bool own_header = t.header == "all_files_different_headers" ||
                          t.header == "all_files_same_headers" ||
                          (t.header == "from_first_file" && first == nullptr);
  if (own_header || (t.header == "no_header" && first == nullptr)) {
    auto row = first_row(path, bom);
    if (!row) return Unexpected{row.error()};
    auto fields = part::split_row(*row, t.delimiter[0]);
    if (t.header == "no_header") {
      for (std::size_t i = 0; i < fields.size(); ++i) {
        info.columns.push_back("Column" + std::to_string(i + 1));
      }
    } else {
      info.data_start += row->size();
      info.header_rows = 1;
      auto conv = converter(t);
      if (!conv) return Unexpected{conv.error()};
      for (auto& c : fields) {
        auto name = (**conv)(c);
        if (!name) return Unexpected{undecodable(path, 1, name.error())};
        info.columns.push_back(std::move(*name));
      }
    }
  }
  if (first != nullptr && t.header != "all_files_different_headers") {
    info.columns = first->columns;
  }
  if (!t.partition_format.empty()) {
    const std::string rel = fs::path(path).lexically_relative(t.base_dir).string();
    auto m = config::match_partition_format(t.partition_format, rel);
    if (!m.ok) {
      return make_error(ErrorCode::InvalidArgument,
                        t.source + ": extract_columns_from_partition_format: " + rel +
                            " does not fit the format \"" + t.partition_format + "\"");
    }
    info.path_values = std::move(m.values);
  }
  return info;
}

// The columns run() sees: the file's, the partition-format ones, Path, then keep and drop.
std::vector<std::string> final_columns(const config::TableSpec& t, const FileInfo& f) {
  std::vector<std::string> cols = f.columns;
  for (const auto& [k, v] : f.path_values) cols.push_back(k);
  if (t.include_path_column) cols.push_back("Path");
  if (!t.keep_columns.empty()) cols = t.keep_columns;
  std::erase_if(cols, [&](const std::string& c) {
    return std::find(t.drop_columns.begin(), t.drop_columns.end(), c) != t.drop_columns.end();
  });
  return cols;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

void json_list(std::string& j, const std::vector<std::string>& v) {
  j += "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) j += ",";
    json_quote(j, v[i]);
  }
  j += "]";
}

void json_pairs(std::string& j, const std::vector<std::pair<std::string, std::string>>& v) {
  j += "{";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) j += ",";
    json_quote(j, v[i].first);
    j += ":";
    json_quote(j, v[i].second);
  }
  j += "}";
}

struct Part {
  const FileInfo* file;
  std::uint64_t begin;
  std::uint64_t end;
  std::uint64_t line = 0;  // the file's line number of the first row, for messages (0: unknown)
};

// The "kind": "tabular" detail (docs/worker-pipe.md).
std::string tabular_detail(const config::TableSpec& t, const std::vector<Part>& parts,
                           std::uint64_t row_offset,
                           const std::vector<std::pair<std::string, std::string>>* keys) {
  std::string j = "{\"kind\":\"tabular\",\"parts\":[";
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) j += ",";
    j += "{\"file\":";
    json_quote(j, parts[i].file->path);
    j += ",\"begin\":" + std::to_string(parts[i].begin) +
         ",\"end\":" + std::to_string(parts[i].end) +
         ",\"size\":" + std::to_string(parts[i].file->size) +
         ",\"mtime_ns\":" + std::to_string(parts[i].file->mtime_ns) +
         ",\"line\":" + std::to_string(parts[i].line) + ",\"columns\":";
    json_list(j, parts[i].file->columns);
    j += ",\"path_values\":";
    json_pairs(j, parts[i].file->path_values);
    j += "}";
  }
  j += "],\"delimiter\":";
  json_quote(j, t.delimiter);
  j += ",\"encoding\":";
  json_quote(j, t.encoding);
  j += std::string(",\"empty_as_string\":") + (t.empty_as_string ? "true" : "false");
  j += std::string(",\"include_path_column\":") + (t.include_path_column ? "true" : "false");
  j += ",\"keep_columns\":";
  json_list(j, t.keep_columns);
  j += ",\"drop_columns\":";
  json_list(j, t.drop_columns);
  j += std::string(",\"format\":") +
       (t.format == config::TableFormat::JsonLines ? "\"json_lines\"" : "\"delimited\"");
  j += ",\"invalid_lines\":";
  json_quote(j, t.invalid_lines);
  j += ",\"column_steps\":" + t.column_steps;
  if (keys != nullptr) {
    j += ",\"partition_key_value\":";
    json_pairs(j, *keys);
  } else {
    j += ",\"global_row_offset\":" + std::to_string(row_offset);
  }
  j += "}";
  return j;
}

// Calls fn(row bytes, offset of the row) for each row from `offset` to the end of the file,
// honouring quotes unless `quotes` is false (JSON lines: a row is a line). A fn returning bool
// stops the reading by returning false.
template <typename F>
Expected<void> for_each_row(const std::string& path, std::uint64_t offset, bool quotes, F&& fn) {
  auto f = open_at(path, offset);
  if (!f) return Unexpected{f.error()};
  std::string row;
  std::uint64_t row_begin = offset;
  std::uint64_t pos = offset;  // file offset of buf[0]
  bool quoted = false;
  char buf[kChunk];
  for (;;) {
    const std::size_t n = std::fread(buf, 1, sizeof buf, f->get());
    std::size_t s = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (buf[i] == '"' && quotes) {
        quoted = !quoted;
      } else if (buf[i] == '\n' && !quoted) {
        row.append(buf + s, i + 1 - s);
        if constexpr (std::is_same_v<decltype(fn(std::string_view(), row_begin)), bool>) {
          if (!fn(std::string_view(row), row_begin)) return {};
        } else {
          fn(std::string_view(row), row_begin);
        }
        row.clear();
        s = i + 1;
        row_begin = pos + s;
      }
    }
    row.append(buf + s, n - s);
    pos += n;
    if (n < sizeof buf) break;
  }
  if (!row.empty()) (void)fn(std::string_view(row), row_begin);
  return {};
}

bool blank(std::string_view row) {
  return row.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// Cuts the table row by row, for row steps (take, skip, take_random_sample, which decide row by
// row) and for JSON lines (a row is a line: no quoting). Consecutive kept rows of a file form one
// part; a mini-batch holds parts of one file up to max_bytes (a larger single row alone). Blank
// rows are not rows, as pandas reads them.
Expected<std::uint64_t> stream_rows(const config::JobConfig& cfg, const config::TableSpec& t,
                                    const std::vector<std::string>& files,
                                    const std::function<bool(proto::MiniBatch&&)>& emit) {
  config::RowSelector selector(t.row_steps);
  const bool quotes = t.format != config::TableFormat::JsonLines;
  const std::uint64_t max_bytes = std::max<std::uint64_t>(cfg.mini_batch_bytes, 1);
  std::unique_ptr<FileInfo> first;
  std::uint64_t count = 0;
  std::uint64_t row_offset = 0;
  bool go_on = true;
  for (const auto& path : files) {
    if (selector.done() || !go_on) break;
    auto info = file_info(t, path, first.get());
    if (!info) return Unexpected{info.error()};
    auto fi = std::make_unique<FileInfo>(std::move(*info));
    std::vector<Part> parts;
    std::uint64_t bytes = 0;
    std::uint64_t rows = 0;
    auto flush = [&] {
      if (rows == 0) return;
      proto::MiniBatch mb;
      mb.index = count++;
      mb.items.assign(rows, std::string());
      mb.detail = tabular_detail(t, parts, row_offset, nullptr);
      row_offset += rows;
      parts.clear();
      bytes = rows = 0;
      go_on = emit(std::move(mb));
    };
    std::uint64_t line = fi->header_rows;
    auto r =
        for_each_row(path, fi->data_start, quotes, [&](std::string_view row, std::uint64_t begin) {
          ++line;
          if (blank(row)) return true;
          if (!selector.keep()) return !selector.done();
          if (rows > 0 && bytes + row.size() > max_bytes) flush();
          if (!go_on) return false;
          if (!parts.empty() && parts.back().end == begin) {
            parts.back().end = begin + row.size();
          } else {
            parts.push_back(Part{fi.get(), begin, begin + row.size(), line});
          }
          bytes += row.size();
          ++rows;
          return !selector.done();
        });
    if (!r) return Unexpected{r.error()};
    if (go_on) flush();
    // Only the first file's info is needed again (for the others' column names).
    if (!first) first = std::move(fi);
  }
  return count;
}

}  // namespace

Expected<std::uint64_t> file_table_batch(const config::JobConfig& cfg) {
  // Azure ML: mini_batch_size of a file table counts files ("1" is one file), default 10.
  if (!cfg.mini_batch_size_written) return std::uint64_t{10};
  auto size = config::parse_batch_size(cfg.mini_batch_size);
  if (size && size->files > 0) return size->files;
  return make_error(ErrorCode::InvalidArgument,
                    cfg.spec_path + ": mini_batch_size: expected a file count: inputs." +
                        cfg.input_data +
                        " is a table of files (its MLTable has paths and no read_delimited) "
                        "(got \"" +
                        cfg.mini_batch_size + "\")");
}

Expected<std::optional<FileTable>> input_file_table(const config::JobConfig& cfg) {
  const config::InputSpec* in = data_input(cfg);
  if (in == nullptr || in->type != "mltable") return std::optional<FileTable>{};
  auto t = config::load_mltable(in->path);
  if (!t) return Unexpected{t.error()};
  if (t->format != config::TableFormat::Files) return std::optional<FileTable>{};
  // The MLTable's own mistakes (a path naming nothing) first, then the job's mini_batch_size.
  auto files = list_table_files(*t);
  if (!files) return Unexpected{files.error()};
  auto per_batch = file_table_batch(cfg);
  if (!per_batch) return Unexpected{per_batch.error()};
  return std::optional<FileTable>{FileTable{std::move(*files), *per_batch}};
}

const config::InputSpec* data_input(const config::JobConfig& cfg) {
  for (const auto& in : cfg.inputs) {
    if (in.name == cfg.input_data) return &in;
  }
  return nullptr;
}

Expected<std::optional<config::TableSpec>> input_table(const config::JobConfig& cfg) {
  const config::InputSpec* in = data_input(cfg);
  if (in == nullptr) return std::optional<config::TableSpec>{};
  if (in->type == "mltable") {
    auto t = config::load_mltable(in->path);
    if (!t) return Unexpected{t.error()};
    // Only paths: a table of files (input_file_table), not rows.
    if (t->format == config::TableFormat::Files) {
      if (auto n = file_table_batch(cfg); !n) return Unexpected{n.error()};
      return std::optional<config::TableSpec>{};
    }
    return std::optional<config::TableSpec>{std::move(*t)};
  }
  const bool by_size = cfg.mini_batch_bytes > 0 && cfg.partition_keys.empty();
  const bool by_column = !cfg.partition_keys.empty() && in->partition_format.empty();
  if ((in->type == "uri_file" || in->type == "uri_folder") && (by_size || by_column)) {
    return std::optional<config::TableSpec>{plain_table(in->path, in->type == "uri_folder")};
  }
  return std::optional<config::TableSpec>{};
}

Expected<TableLayout> check_table(const config::JobConfig& cfg, const config::TableSpec& t) {
  TableLayout layout;
  if (t.encoding == "utf16" || t.encoding == "utf32") {
    return make_error(ErrorCode::InvalidArgument,
                      t.source + ": read_delimited.encoding: " + t.encoding +
                          " is not supported by fanout (rows are found byte-wise); convert the "
                          "files to utf8");
  }
  auto files = list_table_files(t);
  if (!files) return Unexpected{files.error()};
  if (files->empty()) {
    return make_error(ErrorCode::InvalidArgument, t.source + ": paths: no files found");
  }
  layout.files = std::move(*files);
  if (!cfg.partition_keys.empty() &&
      (!t.row_steps.empty() || t.format == config::TableFormat::JsonLines)) {
    return make_error(ErrorCode::InvalidArgument,
                      cfg.spec_path + ": partition_keys: not supported with " +
                          (t.row_steps.empty() ? "read_json_lines"
                                               : "take, skip or "
                                                 "take_random_sample") +
                          " (" + t.source + "); drop partition_keys or those steps");
  }
  // JSON lines name their fields line by line: the worker checks keep/drop_columns.
  if (t.format == config::TableFormat::JsonLines) return layout;
  auto first = file_info(t, layout.files.front(), nullptr);
  if (!first) return Unexpected{first.error()};
  std::vector<std::string> all = first->columns;
  for (const auto& [k, v] : first->path_values) all.push_back(k);
  if (t.include_path_column) all.push_back("Path");
  for (const auto* list : {&t.keep_columns, &t.drop_columns}) {
    for (const auto& c : *list) {
      if (std::find(all.begin(), all.end(), c) == all.end()) {
        return make_error(ErrorCode::InvalidArgument,
                          t.source + ": " +
                              (list == &t.keep_columns ? "keep_columns" : "drop_columns") + ": '" +
                              c + "' is not a column of " + layout.files.front() +
                              " (columns: " + join(all) + ")");
      }
    }
  }
  layout.columns = final_columns(t, *first);
  for (const auto& k : cfg.partition_keys) {
    if (std::find(layout.columns.begin(), layout.columns.end(), k) == layout.columns.end()) {
      std::string where = cfg.spec_path;
      if (cfg.partition_keys_line > 0) where += ":" + std::to_string(cfg.partition_keys_line);
      return make_error(ErrorCode::InvalidArgument,
                        where + ": partition_keys: '" + k + "' is not a column of inputs." +
                            cfg.input_data + " (columns: " + join(layout.columns) + ")");
    }
  }
  return layout;
}

// Long: the two cuts (by bytes, by partition key) share the file listing and the row offsets.
Expected<std::uint64_t> stream_table(const config::JobConfig& cfg, const config::TableSpec& t,
                                     const std::function<bool(proto::MiniBatch&&)>& emit) {
  auto files = list_table_files(t);
  if (!files) return Unexpected{files.error()};
  const bool by_row = !t.row_steps.empty() || t.format == config::TableFormat::JsonLines;
  if (by_row && cfg.partition_keys.empty()) return stream_rows(cfg, t, *files, emit);
  std::vector<std::unique_ptr<FileInfo>> infos;
  std::uint64_t count = 0;
  std::uint64_t row_offset = 0;

  if (cfg.partition_keys.empty()) {
    const std::uint64_t max_bytes = std::max<std::uint64_t>(cfg.mini_batch_bytes, 1);
    for (const auto& path : *files) {
      auto info = file_info(t, path, infos.empty() ? nullptr : infos.front().get());
      if (!info) return Unexpected{info.error()};
      infos.push_back(std::make_unique<FileInfo>(std::move(*info)));
      const FileInfo* fi = infos.back().get();
      auto f = open_at(path, fi->data_start);
      if (!f) return Unexpected{f.error()};
      part::RowCutter cutter(max_bytes, fi->data_start);
      std::vector<part::RowRange> ranges;
      bool go_on = true;
      auto send = [&](const part::RowRange& r) {
        proto::MiniBatch mb;
        mb.index = count++;
        mb.items.assign(r.rows, std::string());
        mb.detail = tabular_detail(t, {Part{fi, r.begin, r.end}}, row_offset, nullptr);
        row_offset += r.rows;
        go_on = emit(std::move(mb));
      };
      char buf[kChunk];
      for (std::size_t n = kChunk; go_on && n == kChunk;) {
        n = std::fread(buf, 1, sizeof buf, f->get());
        cutter.feed(std::string_view(buf, n), ranges);
        for (const auto& r : ranges) {
          if (go_on) send(r);
        }
        ranges.clear();
      }
      if (!go_on) return count;
      if (cutter.in_quotes()) {
        return make_error(ErrorCode::InvalidArgument,
                          path + ": a quoted field is not closed before the end of the file");
      }
      if (auto r = cutter.finish()) send(*r);
      if (!go_on) return count;
      // Only the first file's info is needed again (for the others' column names).
      if (infos.size() > 1) infos.pop_back();
    }
    return count;
  }

  // partition_keys: one mini-batch per distinct combination, in order of first appearance. Each
  // keeps, per file, the span from its first row to its last, so the worker reads only that
  // (the whole file when rows are interleaved, a small part when the data is sorted by key).
  struct Span {
    std::size_t file = 0;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
  };
  struct Group {
    std::vector<std::pair<std::string, std::string>> values{};
    std::uint64_t rows = 0;
    std::vector<Span> spans{};
  };
  std::vector<Group> groups;
  std::map<std::string, std::size_t> by_key;
  const char delim = t.delimiter[0];
  for (std::size_t fidx = 0; fidx < files->size(); ++fidx) {
    const std::string& path = (*files)[fidx];
    auto info = file_info(t, path, infos.empty() ? nullptr : infos.front().get());
    if (!info) return Unexpected{info.error()};
    infos.push_back(std::make_unique<FileInfo>(std::move(*info)));
    const FileInfo& fi = *infos.back();
    // Where each key's value comes from: a field of the row, or the file's path.
    std::vector<std::ptrdiff_t> field(cfg.partition_keys.size(), -1);
    std::vector<std::string> fixed(cfg.partition_keys.size());
    for (std::size_t k = 0; k < cfg.partition_keys.size(); ++k) {
      const std::string& key = cfg.partition_keys[k];
      auto it = std::find(fi.columns.begin(), fi.columns.end(), key);
      if (it != fi.columns.end()) {
        field[k] = it - fi.columns.begin();
        continue;
      }
      auto pv = std::find_if(fi.path_values.begin(), fi.path_values.end(),
                             [&](const auto& p) { return p.first == key; });
      if (pv != fi.path_values.end()) {
        fixed[k] = pv->second;
      } else if (key == "Path" && t.include_path_column) {
        fixed[k] = path;
      } else {
        return make_error(ErrorCode::InvalidArgument, cfg.spec_path + ": partition_keys: '" + key +
                                                          "' is not a column of " + path +
                                                          " (columns: " + join(fi.columns) + ")");
      }
    }
    std::string combo;
    std::vector<std::string> key_values(field.size());
    auto conv = converter(t);
    if (!conv) return Unexpected{conv.error()};
    std::optional<Error> bad;  // the first row that does not decode: the listing stops there
    std::uint64_t row_no = fi.header_rows;
    auto r =
        for_each_row(path, fi.data_start, true, [&](std::string_view row, std::uint64_t begin) {
          ++row_no;
          if (bad || blank(row)) return;
          // The whole row must decode, not only its keys: the worker decodes all of it.
          if (auto whole = (**conv)(row); !whole) {
            bad = undecodable(path, row_no, whole.error());
            return;
          }
          auto fields = part::split_row(row, delim);
          combo.clear();
          for (std::size_t k = 0; k < field.size(); ++k) {
            const auto col = static_cast<std::size_t>(field[k]);
            if (field[k] < 0) {
              key_values[k] = fixed[k];
            } else if (col < fields.size()) {
              auto v = (**conv)(fields[col]);
              key_values[k] = v ? std::move(*v) : std::string();
            } else {
              key_values[k].clear();
            }
            combo += key_values[k];
            combo += '\x1f';
          }
          auto [it, fresh] = by_key.try_emplace(combo, groups.size());
          if (fresh) {
            Group g;
            for (std::size_t k = 0; k < field.size(); ++k) {
              g.values.emplace_back(cfg.partition_keys[k], key_values[k]);
            }
            groups.push_back(std::move(g));
          }
          Group& g = groups[it->second];
          ++g.rows;
          const std::uint64_t end = begin + row.size();
          if (g.spans.empty() || g.spans.back().file != fidx) {
            g.spans.push_back(Span{fidx, begin, end});
          } else {
            g.spans.back().end = end;
          }
        });
    if (!r) return Unexpected{r.error()};
    if (bad) return Unexpected{*bad};
  }
  for (const auto& g : groups) {
    std::vector<Part> parts;
    for (const Span& sp : g.spans) parts.push_back(Part{infos[sp.file].get(), sp.begin, sp.end});
    proto::MiniBatch mb;
    mb.index = count++;
    mb.items.assign(g.rows, std::string());
    mb.detail = tabular_detail(t, parts, 0, &g.values);
    if (!emit(std::move(mb))) break;
  }
  return count;
}

Expected<std::uint64_t> stream_file_partitions(
    const config::JobConfig& cfg, const config::InputSpec& input,
    const std::function<bool(proto::MiniBatch&&)>& emit) {
  const auto keys_in_format = config::partition_format_keys(input.partition_format);
  for (const auto& k : cfg.partition_keys) {
    if (std::find(keys_in_format.begin(), keys_in_format.end(), k) == keys_in_format.end()) {
      return make_error(ErrorCode::InvalidArgument,
                        cfg.spec_path + ": partition_keys: '" + k + "' is not named by inputs." +
                            input.name + ".partition_format \"" + input.partition_format +
                            "\" (keys: " + join(keys_in_format) + ")");
    }
  }
  struct Group {
    std::vector<std::pair<std::string, std::string>> values{};
    std::vector<std::string> files{};
  };
  std::vector<Group> groups;
  std::map<std::string, std::size_t> by_key;
  config::TableSpec listing;  // every file of the input, whatever its name
  listing.source = input.path;
  listing.paths.push_back(
      config::TablePath{input.type == "uri_folder" ? "folder" : "file", input.path, 0});
  auto files = list_table_files(listing);
  if (!files) return Unexpected{files.error()};
  const std::string base =
      input.type == "uri_folder" ? input.path : fs::path(input.path).parent_path().string();
  for (const auto& f : *files) {
    const std::string rel = fs::path(f).lexically_relative(base).string();
    auto m = config::match_partition_format(input.partition_format, rel);
    if (!m.ok) {
      return make_error(ErrorCode::InvalidArgument,
                        cfg.spec_path + ": inputs." + input.name + ".partition_format: " + rel +
                            " does not fit \"" + input.partition_format + "\"");
    }
    std::vector<std::pair<std::string, std::string>> values;
    std::string combo;
    for (const auto& k : cfg.partition_keys) {
      for (const auto& [name, v] : m.values) {
        if (name == k) {
          values.emplace_back(k, v);
          combo += v + '\x1f';
          break;
        }
      }
    }
    auto [it, fresh] = by_key.try_emplace(combo, groups.size());
    if (fresh) groups.push_back(Group{std::move(values), {}});
    groups[it->second].files.push_back(f);
  }
  std::uint64_t count = 0;
  for (auto& g : groups) {
    proto::MiniBatch mb;
    mb.index = count++;
    mb.items = std::move(g.files);
    mb.detail = "{\"partition_key_value\":";
    json_pairs(mb.detail, g.values);
    mb.detail += "}";
    if (!emit(std::move(mb))) break;
  }
  return count;
}

}  // namespace fanout::client

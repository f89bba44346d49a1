// Ad-hoc runs: a command line turned into a command-runtime job file. See adhoc.hpp.
#include "client/commands/adhoc.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string_view>

#include "client/commands/adhoc_items.hpp"
#include "client/input/listing.hpp"
#include "fanout/config/adhoc_job.hpp"
#include "fanout/store/adhoc_queries.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/error.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

Unexpected bad(const std::string& what) { return make_error(ErrorCode::InvalidArgument, what); }

std::string program_name(const std::string& command) {
  const auto start = command.find_first_not_of(" \t");
  if (start == std::string::npos) return "adhoc";
  const auto end = command.find_first_of(" \t;|&", start);
  std::string prog = fs::path(command.substr(start, end - start)).filename().string();
  std::string clean;
  for (char c : prog) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') clean += c;
  }
  return clean.empty() ? "adhoc" : "adhoc-" + clean;
}

std::string stamp() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()) + "-" +
         std::to_string(::getpid());
}

// Narrows `folder` (ours, not a symbolic link) to mode 0700. Error{Io} naming it, its owner
// and mode when it is not ours.
Expected<void> private_folder(const std::string& folder) {
  struct stat st {};
  if (::lstat(folder.c_str(), &st) != 0) {
    return make_error(ErrorCode::Io, folder + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    return make_error(ErrorCode::Io,
                      fmt::format("{}: the ad-hoc folder is not a folder of this user (owner uid "
                                  "{}, mode {:04o}); remove it",
                                  folder, st.st_uid, st.st_mode & 07777));
  }
  if ((st.st_mode & 077) != 0 && ::chmod(folder.c_str(), 0700) != 0) {
    return make_error(ErrorCode::Io,
                      folder + ": cannot narrow to mode 0700: " + std::strerror(errno));
  }
  return {};
}

// The items of the ::: / :::: sources, GNU's way: linked sources (`:::+`) go together value by
// value (to the shorter one's end; with --link a shorter one wraps), and the groups are combined,
// the last one varying fastest. Each item's values are joined by kSourceSeparator.
std::vector<std::string> combine(const std::vector<InputSource>& sources) {
  std::vector<std::vector<std::string>> groups;  // each group: its items' joined values
  for (const auto& src : sources) {
    if (!src.linked || groups.empty()) {
      groups.emplace_back(src.values);
      continue;
    }
    auto& g = groups.back();
    const std::size_t n =
        src.wrap ? std::max(g.size(), src.values.size()) : std::min(g.size(), src.values.size());
    std::vector<std::string> linked;
    for (std::size_t i = 0; i < n && !g.empty() && !src.values.empty(); ++i) {
      linked.push_back(g[i % g.size()] + config::kSourceSeparator +
                       src.values[i % src.values.size()]);
    }
    g = std::move(linked);
  }
  std::vector<std::string> items = {""};
  bool first = true;
  for (const auto& g : groups) {
    std::vector<std::string> next;
    for (const auto& prefix : items) {
      for (const auto& v : g) next.push_back(first ? v : prefix + config::kSourceSeparator + v);
    }
    items = std::move(next);
    first = false;
  }
  return groups.empty() ? std::vector<std::string>{} : items;
}

// Reads the lines of stdin; a terminal is told what is awaited first.
std::vector<std::string> read_stdin_lines() {
  if (::isatty(0) != 0) {
    std::fprintf(stderr,
                 "fanout: reading the items from stdin (the terminal), one per line; end with "
                 "Ctrl-D\n");
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(std::cin, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(std::move(line));
  }
  return lines;
}

std::vector<std::string> split_values(const std::string& item) {
  std::vector<std::string> v;
  std::size_t at = 0;
  for (auto sep = item.find(config::kSourceSeparator); sep != std::string::npos;
       sep = item.find(config::kSourceSeparator, at)) {
    v.push_back(item.substr(at, sep - at));
    at = sep + 1;
  }
  v.push_back(item.substr(at));
  return v;
}

// The items, when the input is a list: stdin, ::: sources, a list file (its non-blank lines).
// A folder's files are listed only for --dry-run and a --halt percentage.
Expected<std::vector<std::string>> list_items(const AdhocOptions& o, bool& known, bool need) {
  known = true;
  if (!o.sources.empty()) return combine(o.sources);
  if (o.input == "-") return read_stdin_lines();
  std::error_code ec;
  if (fs::is_directory(o.input, ec)) {
    known = need;
    std::vector<std::string> files;
    if (need) {
      walk_folder(
          fs::absolute(o.input).lexically_normal().string(),
          [&files](const std::string& f) {
            if (fs::path(f).filename() != "MLTable") files.push_back(f);
            return true;
          },
          [](const std::string&, const std::string&) {});
    }
    return files;
  }
  std::ifstream f(o.input);
  if (!f) return bad("--input: " + o.input + " is neither a folder nor a readable list file");
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(std::move(line));
  }
  return lines;
}

Expected<void> check_options(const AdhocOptions& o) {
  if (o.command.find_first_not_of(" \t\n") == std::string::npos) {
    return bad("-c: expected a command (got nothing)");
  }
  // Refused before anything runs: a replacement string left in would run another command.
  if (auto why = config::unsupported_replacement(o.command)) return bad(*why);
  const bool grouped = o.max_args >= 0 || o.multi != 0;
  if (grouped && o.sources.size() > 1) {
    return bad(std::string(o.multi != 0 ? std::string("-") + o.multi : "-N") +
               " with several input sources is not supported: give one source, or use "
               "{1} {2} with ::: per source");
  }
  if (grouped && !o.colsep.empty() && !o.pipe) {
    return bad("--colsep with -N, -m or -X is not supported: use --colsep with {1}..{n}");
  }
  if ((grouped || !o.colsep.empty()) && !o.pipe && o.command.find('\n') != std::string::npos) {
    return bad("-N, -m, -X and --colsep take a one-line command (-c holds a newline)");
  }
  if (o.pipe && (!o.sources.empty() || (!o.input.empty() && o.input != "-"))) {
    return bad("--pipe reads stdin: leave out --input and ::: (or use --input - )");
  }
  if (o.pipe && o.multi != 0) return bad("--pipe with -m or -X: use --pipe with -N or --block");
  if (o.command.find("${{") != std::string::npos) {
    return bad("-c: ${{ is a job file's reference syntax and cannot appear in an ad-hoc command");
  }
  if (o.input.empty() && o.sources.empty()) {
    return bad(
        "-c needs --input DIR, a list FILE, - for stdin, or ::: VALUES (stdin is a "
        "terminal)");
  }
  if (!o.input.empty() && !o.sources.empty()) {
    return bad("--input " + o.input + " and ::: give the items twice; use one of them");
  }
  if (o.mini_batch_size == 0) return bad("--mini-batch-size: expected at least 1 (got 0)");
  for (const auto& kv : o.env) {
    if (kv.find('=') == std::string::npos || kv.front() == '=') {
      return bad("--env: expected NAME=VALUE (got '" + kv + "')");
    }
  }
  return {};
}

// The failed items --halt fail=N|P% allows, as the job's error_threshold (-1: no limit).
std::int64_t halt_threshold(const HaltRule& h, std::uint64_t items, std::int64_t fallback) {
  if (h.on != HaltRule::On::Fail) return fallback;
  if (h.percent >= 0) {
    const auto n = static_cast<std::uint64_t>(static_cast<double>(items) * h.percent / 100.0);
    return static_cast<std::int64_t>(n == 0 ? 0 : n - 1);
  }
  return static_cast<std::int64_t>(h.count == 0 ? 0 : h.count - 1);
}

// Saves `items` as the job's list file (one per line; a value's newline would split it).
Expected<void> save_items(const std::string& path, const std::vector<std::string>& items) {
  try {
    AtomicFile f(path, 0600);
    for (const auto& it : items) {
      if (it.find('\n') != std::string::npos) {
        return bad("an item holds a newline, which a list of lines cannot carry: '" + it + "'");
      }
      f.write(it);
      f.write("\n");
    }
    f.commit();
  } catch (const Failure& e) {
    return bad("cannot save the items: " + e.error().message);
  }
  return {};
}

// The rest of the job file's settings: the command's, the thresholds, the environment.
void fill_spec(const AdhocOptions& o, const AdhocJob& job, std::size_t sources,
               config::AdhocJob& spec) {
  std::error_code ec;
  spec.name = o.name.empty() ? program_name(o.command) : o.name;
  spec.description = "fanout run -c " + o.command;
  spec.shell = config::AdhocShell{.command = o.command,
                                  .mini_batch_size = o.mini_batch_size,
                                  .sources = sources,
                                  .quote_all = o.quote_all,
                                  .tag = o.tag,
                                  .results = !o.results.empty()};
  spec.output_path = job.rows;
  spec.code = fs::current_path(ec).string();
  spec.error_threshold = halt_threshold(job.halt, job.items, o.error_threshold);
  spec.max_retries = o.max_retries;
  spec.timeout_s = o.timeout_s;
  spec.env.emplace_back("FANOUT_ADHOC_STDERR", job.stderr_file);
  if (!o.results.empty()) {
    spec.env.emplace_back("FANOUT_ADHOC_RESULTS",
                          fs::absolute(o.results, ec).lexically_normal().string());
  }
  for (const auto& kv : o.env) {
    const auto eq = kv.find('=');
    spec.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
}

// --pipe: stdin read whole and cut into chunks (`chunks`); the items, one per chunk, are their
// files' paths once save_chunks wrote them.
Expected<std::vector<std::string>> read_chunks(const AdhocOptions& o,
                                               std::vector<std::string>& chunks) {
  auto block = parse_block(o.block);
  if (!block) return Unexpected{block.error()};
  const std::string data((std::istreambuf_iterator<char>(std::cin)),
                         std::istreambuf_iterator<char>());
  chunks = cut_chunks(data, o.max_args, *block);
  return std::vector<std::string>(chunks.size());
}

// Writes each chunk as a file of `folder` (made, mode 0700); returns their paths, in order.
Expected<std::vector<std::string>> save_chunks(const std::string& folder,
                                               const std::vector<std::string>& chunks) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec || ::chmod(folder.c_str(), 0700) != 0) {
    return bad("--pipe: cannot make " + folder + " for stdin's chunks");
  }
  std::vector<std::string> paths;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    paths.push_back(fmt::format("{}/{:09}", folder, i + 1));
    if (auto r = write_file_atomic(paths.back(), chunks[i], 0600); !r) {
      return bad("--pipe: cannot save a chunk of stdin: " + r.error().message);
    }
  }
  return paths;
}

// --colsep, -N, -m, -X: the items (their columns, or groups of them) become whole command lines
// (`precomputed`; `sources` is then 1).
Expected<void> reshape(const AdhocOptions& o, std::vector<std::string>& items, std::size_t& sources,
                       bool& precomputed) {
  if (o.pipe) return {};
  if (!o.colsep.empty()) {
    auto lines = column_lines(o, items);
    if (!lines) return Unexpected{lines.error()};
    items = std::move(*lines);
    precomputed = true;
    sources = 1;
  } else if (o.max_args >= 0 || o.multi != 0) {
    items = group_lines(o, items);
    precomputed = true;
    sources = 1;
  }
  return {};
}

// The command line an item runs (`slot` what {%} becomes): what --dry-run prints and --joblog's
// Command column.
std::string command_line(const AdhocOptions& o, const AdhocJob& job, const std::string& item,
                         std::uint64_t seq, std::string_view slot) {
  if (job.precomputed) {
    std::string line = item;
    const std::string mark = "\"$fanout_slot\"";
    for (auto at = line.find(mark); at != std::string::npos; at = line.find(mark, at + 1)) {
      line.replace(at, mark.size(), slot);
    }
    return line;
  }
  if (o.pipe)
    return config::adhoc_command_for(o.command, {}, seq, o.quote_all, config::AdhocArgs::Multi,
                                     slot);
  return config::adhoc_command_for(o.command, split_values(item), seq, o.quote_all,
                                   config::AdhocArgs::Sources, slot);
}

}  // namespace

Expected<HaltRule> parse_halt(const std::string& value) {
  HaltRule h;
  auto wrong = [&value]() {
    return bad("--halt: expected never, or soon|now,fail|success|done=N|P% (got '" + value + "')");
  };
  if (value.empty() || value == "never" || value == "0") return h;
  if (value == "1" || value == "2") {
    h.on = HaltRule::On::Fail;
    h.count = 1;
    return h;
  }
  std::string rule = value;
  if (rule.rfind("soon,", 0) == 0 || rule.rfind("now,", 0) == 0) {
    rule = rule.substr(rule.find(',') + 1);
  }
  const auto eq = rule.find('=');
  if (eq == std::string::npos) return wrong();
  const std::string on = rule.substr(0, eq);
  std::string n = rule.substr(eq + 1);
  h.on = on == "fail"      ? HaltRule::On::Fail
         : on == "success" ? HaltRule::On::Success
         : on == "done"    ? HaltRule::On::Done
                           : HaltRule::On::Never;
  if (h.on == HaltRule::On::Never || n.empty()) return wrong();
  const bool percent = n.back() == '%';
  if (percent) n.pop_back();
  if (n.empty() || n.find_first_not_of("0123456789.") != std::string::npos) return wrong();
  if (percent) {
    h.percent = std::stod(n);
  } else {
    if (n.find('.') != std::string::npos || std::stoull(n) == 0) return wrong();
    h.count = std::stoull(n);
  }
  return h;
}

Expected<AdhocJob> write_adhoc_job(const AdhocOptions& given, const std::string& folder) {
  AdhocOptions o = given;
  // GNU parallel reads stdin when no other source is given and it is not a terminal.
  if (o.input.empty() && o.sources.empty() && (o.pipe || ::isatty(0) == 0)) o.input = "-";
  if (auto r = check_options(o); !r) return Unexpected{r.error()};
  AdhocJob job;
  auto halt = parse_halt(o.halt);
  if (!halt) return Unexpected{halt.error()};
  job.halt = *halt;
  std::size_t sources = o.sources.empty() ? 1 : o.sources.size();
  const bool reshaped = !o.colsep.empty() || o.max_args >= 0 || o.multi != 0;
  const bool need_items = o.dry_run || halt->percent >= 0 || reshaped;
  std::vector<std::string> chunks;  // --pipe: stdin's chunks, written beside the job file
  auto items = o.pipe ? read_chunks(o, chunks) : list_items(o, job.items_known, need_items);
  if (!items) return Unexpected{items.error()};
  if (auto r = reshape(o, *items, sources, job.precomputed); !r) return Unexpected{r.error()};
  job.items = items->size();
  job.sources = sources;
  if (o.dry_run) {
    for (std::size_t i = 0; i < items->size(); ++i) {
      job.dry_run.push_back(command_line(o, job, (*items)[i], i + 1, "1"));
    }
    return job;
  }
  if (job.items_known && job.items == 0) return job;  // nothing to run: GNU exits 0

  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return bad("cannot make " + folder + " for the ad-hoc job file: " + ec.message());
  // The job file holds the --env values, and the items and rows are the user's data: the
  // folder is closed to other local users (also one an older fanout made 0755).
  if (auto r = private_folder(folder); !r) return Unexpected{r.error()};
  const std::string base = (fs::path(folder) / stamp()).string();

  config::AdhocJob spec;
  spec.input_type = "fanout_list";
  if (o.pipe) {
    auto paths = save_chunks(base + ".chunks", chunks);
    if (!paths) return Unexpected{paths.error()};
    *items = std::move(*paths);
  }
  if (o.input == "-" || !o.sources.empty() || reshaped || o.pipe) {
    spec.input_path = base + ".items.txt";
    if (auto r = save_items(spec.input_path, *items); !r) {
      return bad(std::string(o.sources.empty() ? "--input -" : ":::") + ": " + r.error().message);
    }
  } else {
    spec.input_path = fs::absolute(o.input, ec).lexically_normal().string();
    if (fs::is_directory(spec.input_path, ec)) spec.input_type = "uri_folder";
  }
  job.print_rows = o.output.empty() || o.output == "-";
  if (job.print_rows) {
    job.rows = base + ".rows.txt";
    // Made now, mode 0600, so that the store's writer appends to a private file.
    if (auto r = write_file_atomic(job.rows, "", 0600); !r) {
      return bad("cannot make the rows file: " + r.error().message);
    }
  } else {
    job.rows = fs::absolute(o.output, ec).lexically_normal().string();
    // Said here, naming the option: the job file's own check would name the generated file.
    if (const auto size = fs::file_size(job.rows, ec); !ec && size > 0 && !o.overwrite) {
      return bad(
          fmt::format("--output: {} holds {} bytes of an earlier job's rows; move it away, "
                      "or add --overwrite to replace it",
                      o.output, size));
    }
  }
  job.stderr_file = base + ".stderr.txt";
  if (auto r = write_file_atomic(job.stderr_file, "", 0600); !r) {
    return bad("cannot make the stderr file: " + r.error().message);
  }

  fill_spec(o, job, sources, spec);
  spec.shell.pipe = o.pipe;
  spec.shell.precomputed = job.precomputed;
  job.job_file = base + ".yaml";
  if (auto r = write_file_atomic(job.job_file, config::adhoc_job_yaml(spec), 0600); !r) {
    return bad("cannot write the ad-hoc job file: " + r.error().message);
  }
  return job;
}

std::string adhoc_error(const std::string& message, const std::string& job_file) {
  std::string m = message;
  const std::pair<std::string, std::string> swaps[] = {
      {job_file + ": ", ""},
      {job_file, "fanout run -c"},
      {"append_row_to: ", "--output: "},
      {"outputs.rows.path: ", "--output: "},
      {"outputs.rows: ", "--output: "},
      {"inputs.items.path: ", "--input: "},
      {"inputs.items: ", "--input: "},
      {"retry_settings.timeout", "--timeout"},
      {"retry_settings.max_retries", "--retries"},
      {"error_threshold", "--error-threshold"},
      {"mini_batch_size", "--mini-batch-size"},
  };
  for (const auto& [from, to] : swaps) {
    for (auto at = m.find(from); at != std::string::npos; at = m.find(from, at + to.size())) {
      m.replace(at, from.size(), to);
    }
  }
  return m;
}

// ---------------------------------------------------------------- streaming

std::unique_ptr<AdhocStream> adhoc_resume_stream(const std::string& db, std::uint64_t job_id) {
  std::optional<std::string> rows;
  try {
    if (!fs::exists(db)) return nullptr;
    store::AdhocQueries q(db);
    rows = q.output_of(job_id);
  } catch (const Failure&) {
    return nullptr;
  }
  const std::string suffix = ".rows.txt";
  if (!rows || rows->size() <= suffix.size() ||
      rows->compare(rows->size() - suffix.size(), suffix.size(), suffix) != 0 ||
      fs::path(*rows).parent_path().filename() != "adhoc") {
    return nullptr;
  }
  const std::string base = rows->substr(0, rows->size() - suffix.size());
  std::error_code ec;
  if (!fs::exists(base + ".yaml", ec)) return nullptr;
  AdhocJob job;
  job.rows = *rows;
  job.print_rows = true;
  job.stderr_file = base + ".stderr.txt";
  job.rows_from = fs::file_size(job.rows, ec);
  if (ec) job.rows_from = 0;
  job.stderr_from = fs::file_size(job.stderr_file, ec);
  if (ec) job.stderr_from = 0;
  return std::make_unique<AdhocStream>(job, db, false);
}

AdhocStream::AdhocStream(const AdhocJob& job, std::string db, bool keep_order)
    : job_(job),
      db_(std::move(db)),
      keep_order_(keep_order),
      rows_at_(job.rows_from),
      stderr_at_(job.stderr_from) {
  thread_ = std::thread([this] { loop(); });
}

AdhocStream::~AdhocStream() { stop(); }

void AdhocStream::stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  thread_.join();
  poll(true);
}

void AdhocStream::loop() {
  while (!stop_.load()) {
    poll(false);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void AdhocStream::poll(bool last) {
  poll_stderr();
  try {
    if (job_id_ == 0) {
      if (!fs::exists(db_)) return;
      store::AdhocQueries q(db_);
      job_id_ = q.job_writing(job_.rows).value_or(0);
    }
    if (job_.print_rows) {
      if (keep_order_) {
        poll_rows_ordered(last);
      } else {
        poll_rows_unordered();
      }
    }
    // Also once the job ended: a rule met by its last items still makes the run a success.
    check_halt();
  } catch (const Failure&) {
    // A store being created or migrated: read again on the next poll.
  }
  if (last && !row_tail_.empty()) {
    std::fwrite(row_tail_.data(), 1, row_tail_.size(), stdout);
    std::fputc('\n', stdout);
    row_tail_.clear();
  }
  std::fflush(stdout);
}

namespace {

// The bytes of `path` from `at` on (advancing `at`), up to the last newline; the rest is held in
// `tail` until its line is complete.
std::string read_lines_from(const std::string& path, std::uint64_t& at, std::string& tail) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  f.seekg(static_cast<std::streamoff>(at));
  std::string chunk((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  at += chunk.size();
  tail += chunk;
  const auto nl = tail.rfind('\n');
  if (nl == std::string::npos) return {};
  std::string out = tail.substr(0, nl + 1);
  tail.erase(0, nl + 1);
  return out;
}

std::string read_range(const std::string& path, std::uint64_t offset, std::uint64_t bytes) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  f.seekg(static_cast<std::streamoff>(offset));
  std::string out(bytes, '\0');
  f.read(out.data(), static_cast<std::streamsize>(bytes));
  out.resize(static_cast<std::size_t>(f.gcount()));
  return out;
}

}  // namespace

void AdhocStream::poll_stderr() {
  if (job_.stderr_file.empty()) return;
  const std::string text = read_lines_from(job_.stderr_file, stderr_at_, stderr_tail_);
  if (!text.empty()) std::fwrite(text.data(), 1, text.size(), stderr);
}

void AdhocStream::poll_rows_unordered() {
  // The store's writer appends each succeeded mini-batch's rows once; complete lines are shown.
  const std::string text = read_lines_from(job_.rows, rows_at_, row_tail_);
  if (!text.empty()) std::fwrite(text.data(), 1, text.size(), stdout);
}

void AdhocStream::poll_rows_ordered(bool last) {
  if (job_id_ == 0) return;
  store::AdhocQueries q(db_);
  for (const auto& b : q.batches_from(job_id_, next_batch_)) {
    // A mini-batch not yet recorded holds up the ones after it, unless the job has ended.
    if (b.id != next_batch_ && !last) return;
    if (b.state == "succeeded" && b.has_rows) {
      const std::string rows = read_range(job_.rows, b.offset, b.bytes);
      std::fwrite(rows.data(), 1, rows.size(), stdout);
    } else if (b.state != "failed" && !last) {
      return;  // still to run: the rows after it wait
    }
    next_batch_ = b.id + 1;
  }
}

void AdhocStream::check_halt() {
  const auto& h = job_.halt;
  if (halt_sent_ || job_id_ == 0 || (h.on != HaltRule::On::Success && h.on != HaltRule::On::Done)) {
    return;
  }
  store::AdhocQueries q(db_);
  const auto [ok, done] = q.items_done(job_id_);
  const std::uint64_t n = h.on == HaltRule::On::Success ? ok : done;
  const std::uint64_t want =
      h.percent >= 0
          ? static_cast<std::uint64_t>(static_cast<double>(job_.items) * h.percent / 100.0)
          : h.count;
  if (n >= std::max<std::uint64_t>(want, 1)) {
    halt_sent_ = true;
    const char* on = h.on == HaltRule::On::Success ? "success" : "done";
    const std::string rule =
        h.percent >= 0 ? fmt::format("{}={}%", on, h.percent) : fmt::format("{}={}", on, h.count);
    halt_reason_ = fmt::format("--halt {}: {} item{} {}", rule, n, n == 1 ? "" : "s",
                               h.on == HaltRule::On::Success ? "succeeded" : "done");
    halted_ok_.store(true, std::memory_order_release);
    // The session ends the job (RunOverrides::halt); the run ends as a success.
    std::fprintf(stderr, "fanout: %s; the job ends as a success\n", halt_reason_.c_str());
  }
}

// ---------------------------------------------------------------- --joblog

namespace {

// The exit status an item's failed attempt names ("... (#N) exited with status 3", N its sequence
// number), or that of the whole command; 0 if none is named.
int exit_of(const std::string& message, std::uint64_t seq, bool& named) {
  const std::string mark = fmt::format("(#{}) exited with status ", seq);
  named = false;
  if (auto at = message.find(mark); at != std::string::npos) {
    named = true;
    return std::atoi(message.c_str() + at + mark.size());
  }
  if (auto at = message.find("exit code "); at != std::string::npos) {
    return std::atoi(message.c_str() + at + 10);
  }
  return message.empty() ? 0 : -1;
}

}  // namespace

Expected<void> write_joblog(const std::string& db, const AdhocJob& job, const AdhocOptions& o) {
  std::string text = "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\n";
  try {
    if (fs::exists(db) && !job.rows.empty()) {
      store::AdhocQueries q(db);
      const auto id = q.job_writing(job.rows);
      for (const auto& e : id ? q.joblog(*id) : std::vector<store::JoblogEntry>{}) {
        auto detail = nlohmann::json::parse(e.detail, nullptr, false);
        if (detail.is_discarded() || !detail.contains("files")) continue;
        std::uint64_t seq = e.minibatch * o.mini_batch_size;
        // A failed mini-batch names its failing item: those before it succeeded, those after
        // it did not run. One that names none (a timeout, a lost pool) failed as a whole.
        const bool names_one = e.error_message.find(") exited with status ") != std::string::npos;
        for (const auto& f : detail["files"]) {
          ++seq;
          bool named = false;
          int rc = e.status == "RUN_DONE" ? 0 : exit_of(e.error_message, seq, named);
          if (names_one && !named) rc = 0;
          std::string item = f.get<std::string>();
          // One source: a value holding the separator is still one value.
          if (job.sources == 1)
            std::replace(item.begin(), item.end(), config::kSourceSeparator, ' ');
          text +=
              fmt::format("{}\t{}\t{:.3f}\t{:10.3f}\t0\t{}\t{}\t0\t{}\n", seq, ":", e.start,
                          e.elapsed_s, e.output_bytes, rc, command_line(o, job, item, seq, "1"));
          if (named) break;
        }
      }
    }
  } catch (const Failure& f) {
    return make_error(ErrorCode::Io, "--joblog " + o.joblog + ": " + f.error().message);
  }
  if (auto r = write_file_atomic(o.joblog, text, 0644); !r) {
    return make_error(ErrorCode::Io, "--joblog " + o.joblog + ": " + r.error().message);
  }
  return {};
}

}  // namespace fanout::client

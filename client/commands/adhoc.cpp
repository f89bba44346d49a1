// Ad-hoc runs: a command line turned into a command-runtime job file. See adhoc.hpp.
#include "client/commands/adhoc.hpp"

#include "fanout/config/adhoc_job.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string_view>

#include "fanout/util/atomic_file.hpp"
#include "fanout/util/error.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

// Long: the checks of each option and the YAML they become, in the order the file reads.
Expected<AdhocJob> write_adhoc_job(const AdhocOptions& o, const std::string& folder) {
  auto bad = [](const std::string& what) { return make_error(ErrorCode::InvalidArgument, what); };
  if (o.command.find_first_not_of(" \t\n") == std::string::npos) {
    return bad("-c: expected a command (got nothing)");
  }
  if (o.command.find("${{") != std::string::npos) {
    return bad("-c: ${{ is a job file's reference syntax and cannot appear in an ad-hoc command");
  }
  if (o.input.empty()) return bad("-c needs --input DIR, a list FILE, or - for stdin");
  if (o.mini_batch_size == 0) return bad("--mini-batch-size: expected at least 1 (got 0)");
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return bad("cannot make " + folder + " for the ad-hoc job file: " + ec.message());
  // The job file holds the --env values, and the items and rows are the user's data: the
  // folder is closed to other local users (also one an older fanout made 0755).
  if (auto r = private_folder(folder); !r) return Unexpected{r.error()};
  const std::string base = (fs::path(folder) / stamp()).string();

  AdhocJob job;
  std::string input_type = "fanout_list";
  std::string input_path;
  if (o.input == "-") {
    input_path = base + ".items.txt";
    try {
      AtomicFile items(input_path, 0600);
      std::string chunk(1 << 16, '\0');
      while (std::cin.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) ||
             std::cin.gcount() > 0) {
        items.write(std::string_view(chunk.data(), static_cast<std::size_t>(std::cin.gcount())));
      }
      items.commit();
    } catch (const Failure& f) {
      return bad("--input -: cannot save stdin: " + f.error().message);
    }
  } else {
    input_path = fs::absolute(o.input, ec).lexically_normal().string();
    if (fs::is_directory(input_path, ec)) {
      input_type = "uri_folder";
    } else if (!fs::is_regular_file(input_path, ec)) {
      return bad("--input: " + o.input + " is neither a folder nor a list file");
    }
  }
  std::string output_path;
  if (o.output.empty() || o.output == "-") {
    output_path = base + ".rows.txt";
    job.print_rows = output_path;
    // Made now, mode 0600, so that the store's writer appends to a private file.
    if (auto r = write_file_atomic(output_path, "", 0600); !r) {
      return bad("cannot make the rows file: " + r.error().message);
    }
  } else {
    output_path = fs::absolute(o.output, ec).lexically_normal().string();
  }
  for (const auto& kv : o.env) {
    if (kv.find('=') == std::string::npos || kv.front() == '=') {
      return bad("--env: expected NAME=VALUE (got '" + kv + "')");
    }
  }

  config::AdhocJob spec;
  spec.name = o.name.empty() ? program_name(o.command) : o.name;
  spec.description = "fanout run -c " + o.command;
  spec.command = o.command;
  spec.input_type = input_type;
  spec.input_path = input_path;
  spec.output_path = output_path;
  spec.code = fs::current_path(ec).string();
  spec.mini_batch_size = o.mini_batch_size;
  spec.error_threshold = o.error_threshold;
  spec.max_retries = o.max_retries;
  spec.timeout_s = o.timeout_s;
  for (const auto& kv : o.env) {
    const auto eq = kv.find('=');
    spec.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  job.job_file = base + ".yaml";
  if (auto r = write_file_atomic(job.job_file, config::adhoc_job_yaml(spec), 0600); !r) {
    return bad("cannot write the ad-hoc job file: " + r.error().message);
  }
  return job;
}

void print_rows_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (f) std::cout << f.rdbuf() << std::flush;
}

}  // namespace fanout::client

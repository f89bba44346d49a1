// Input listing and partitioning for `fanout run`. See inputs.hpp.
#include "client/input/inputs.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "client/input/listing.hpp"
#include "client/input/tabular.hpp"
#include "fanout/partition/file_batcher.hpp"
#include "fanout/util/json.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

proto::MiniBatch to_proto(part::Batch&& b) {
  return proto::MiniBatch{b.index, std::move(b.items), std::move(b.detail)};
}

// Warnings for refused entries: the first few in full, then only their count.
constexpr std::size_t kRefusalsSaid = 10;

// The walk's hooks for a uri_folder: refusals collected into `refused` (path, why), the job's own
// paths left out and said once each.
WalkHooks folder_hooks(const config::JobConfig& cfg, const std::vector<std::string>& own,
                       std::vector<std::pair<std::string, std::string>>& refused) {
  WalkHooks h;
  h.on_refused = [&refused](const std::string& path, const std::string& why) {
    if (refused.size() < kRefusalsSaid) {
      std::fprintf(stderr, "warning: %s; it fails its own mini-batch as INPUT_UNREADABLE\n",
                   why.c_str());
    }
    refused.emplace_back(path, why);
  };
  std::vector<std::string> paths = own;
  if (!cfg.append_row_to.empty()) paths.push_back(cfg.append_row_to);
  for (const auto& p : paths) {
    struct stat st {};
    if (p.empty() || ::stat(p.c_str(), &st) != 0) continue;
    h.excluded.emplace(st.st_dev, st.st_ino);
    if (!S_ISDIR(st.st_mode)) h.excluded_names.insert(fs::path(p).filename().string());
  }
  h.on_excluded = [](const std::string& path) {
    std::fprintf(stderr,
                 "warning: %s: is this job's own (its store, output or logs), reached through "
                 "its input folder; not listed as an input\n",
                 path.c_str());
  };
  return h;
}

}  // namespace

std::vector<std::string> own_paths(const std::string& db, const std::string& run_dir) {
  std::vector<std::string> out;
  if (!db.empty()) {
    for (const char* suffix : {"", "-wal", "-shm", "-journal", ".owner"})
      out.push_back(db + suffix);
  }
  if (!run_dir.empty()) out.push_back(run_dir);
  return out;
}

Expected<std::uint64_t> stream_minibatches(const config::JobConfig& cfg,
                                           const std::function<bool(proto::MiniBatch&&)>& emit,
                                           const std::vector<std::string>& own) {
  const config::InputSpec* input = nullptr;
  for (const auto& in : cfg.inputs) {
    if (in.name == cfg.input_data) input = &in;
  }
  if (input == nullptr) {
    return make_error(ErrorCode::InvalidArgument,
                      cfg.spec_path + ": input_data: no input named '" + cfg.input_data + "'");
  }
  // Tables are cut by rows (or grouped by key values); partitioned files are grouped by key.
  auto table = input_table(cfg);
  if (!table) return Unexpected{table.error()};
  if (*table) return stream_table(cfg, **table, emit);
  if (!cfg.partition_keys.empty() && !input->partition_format.empty()) {
    return stream_file_partitions(cfg, *input, emit);
  }
  part::FileBatcher batcher(std::max<std::uint64_t>(cfg.mini_batch_files, 1));
  std::vector<std::pair<std::string, std::string>> refused;  // path, why
  std::uint64_t count = 0;
  bool go_on = true;
  auto push = [&](std::string path) {
    if (auto b = batcher.push(std::move(path))) {
      ++count;
      go_on = emit(to_proto(std::move(*b)));
    }
    return go_on;
  };
  if (input->type == "mltable") {
    // An MLTable with only paths: its files are the items (input_table() took the others).
    auto ft = input_file_table(cfg);
    if (!ft) return Unexpected{ft.error()};
    if (!*ft) {
      return make_error(ErrorCode::InvalidArgument,
                        cfg.spec_path + ": inputs." + input->name + ": not a table of files");
    }
    batcher = part::FileBatcher((*ft)->per_batch);
    for (auto& f : (*ft)->files) {
      if (!push(std::move(f))) break;
    }
  } else if (input->type == "uri_file") {
    push(input->path);
  } else if (input->type == "fanout_list") {
    // One item per line, blank lines skipped; a trailing \r (a file from Windows) is not part of
    // the item.
    std::ifstream list(input->path);
    if (!list) {
      return make_error(ErrorCode::InvalidArgument,
                        cfg.spec_path + ": inputs." + input->name + ": cannot read " + input->path);
    }
    for (std::string line; go_on && std::getline(list, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) push(std::move(line));
    }
  } else if (input->type == "uri_folder") {
    const WalkHooks hooks = folder_hooks(cfg, own, refused);
    // An MLTable file describes its folder; it is never one of the folder's items.
    walk_folder(
        input->path,
        [&](const std::string& f) {
          // The name after the last '/': walk_folder joins with '/', and a path per file here
          // would parse every name again.
          const auto slash = f.rfind('/');
          const bool mltable = f.compare(slash == std::string::npos ? 0 : slash + 1,
                                         std::string::npos, "MLTable") == 0;
          return mltable ? true : push(f);
        },
        [](const std::string& entry, const std::string& first) {
          // Once per entry: the walk never enters a folder twice.
          std::fprintf(stderr,
                       "warning: %s: leads to the folder listed already as %s (a symbolic link "
                       "loop or a second link to it); its files are listed once\n",
                       entry.c_str(), first.c_str());
        },
        hooks);
  } else {
    return make_error(ErrorCode::InvalidArgument, cfg.spec_path + ": inputs." + input->name +
                                                      ".type: '" + input->type +
                                                      "' is not supported as input_data yet");
  }
  if (go_on) {
    if (auto b = batcher.finish()) {
      ++count;
      go_on = emit(to_proto(std::move(*b)));
    }
  }
  if (refused.size() > kRefusalsSaid) {
    std::fprintf(stderr, "warning: %zu more entries of the input could not be listed as inputs\n",
                 refused.size() - kRefusalsSaid);
  }
  // Each refused entry is a mini-batch of its own, after the inputs', so that it is counted and
  // reported as a failure instead of vanishing.
  for (auto& [path, why] : refused) {
    if (!go_on) break;
    proto::MiniBatch mb{count++, {path}, {}};
    mb.detail = "{\"files\": [";
    json_quote(mb.detail, path);
    mb.detail += "], \"refused\": ";
    json_quote(mb.detail, why);
    mb.detail += "}";
    mb.refused = std::move(why);
    go_on = emit(std::move(mb));
  }
  return count;
}

}  // namespace fanout::client

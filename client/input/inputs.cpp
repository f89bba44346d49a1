// Input listing and partitioning for `fanout run`. See inputs.hpp.
#include "client/input/inputs.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "client/input/listing.hpp"
#include "client/input/tabular.hpp"
#include "fanout/partition/file_batcher.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

proto::MiniBatch to_proto(part::Batch&& b) {
  return proto::MiniBatch{b.index, std::move(b.items), std::move(b.detail)};
}

}  // namespace

Expected<std::uint64_t> stream_minibatches(const config::JobConfig& cfg,
                                           const std::function<bool(proto::MiniBatch&&)>& emit) {
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
        });
  } else {
    return make_error(ErrorCode::InvalidArgument, cfg.spec_path + ": inputs." + input->name +
                                                      ".type: '" + input->type +
                                                      "' is not supported as input_data yet");
  }
  if (go_on) {
    if (auto b = batcher.finish()) {
      ++count;
      emit(to_proto(std::move(*b)));
    }
  }
  return count;
}

}  // namespace fanout::client

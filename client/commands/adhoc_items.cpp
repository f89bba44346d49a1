// The items of an ad-hoc run reshaped as GNU parallel's options ask. See adhoc_items.hpp.
#include "client/commands/adhoc_items.hpp"

#include <algorithm>
#include <cctype>
#include <regex>

#include "fanout/config/adhoc_job.hpp"
#include "fanout/util/error.hpp"

namespace fanout::client {

namespace {

// About what GNU parallel allows in one command line (its -s default is near 128 KiB).
constexpr std::size_t kMaxLine = 128 * 1024;

}  // namespace

Expected<std::vector<std::string>> column_lines(const AdhocOptions& o,
                                                const std::vector<std::string>& items) {
  std::regex re;
  try {
    re = std::regex(o.colsep);
  } catch (const std::regex_error& e) {
    return make_error(ErrorCode::InvalidArgument,
                      "--colsep: '" + o.colsep + "' is not a regular expression: " + e.what());
  }
  std::vector<std::string> lines;
  for (const auto& item : items) {
    // Every column, an empty one between or after separators included (GNU's split keeps
    // them); a match of nothing ends the splitting.
    std::vector<std::string> cols;
    auto from = item.cbegin();
    std::smatch m;
    while (std::regex_search(from, item.cend(), m, re) && m.length(0) > 0) {
      cols.emplace_back(from, m[0].first);
      from = m[0].second;
    }
    cols.emplace_back(from, item.cend());
    lines.push_back(config::adhoc_command_for(o.command, cols, lines.size() + 1, o.quote_all,
                                              config::AdhocArgs::Multi, "\"$fanout_slot\""));
  }
  return lines;
}

std::vector<std::string> group_lines(const AdhocOptions& o, const std::vector<std::string>& items) {
  const auto mode = o.multi == 'X' ? config::AdhocArgs::Context : config::AdhocArgs::Multi;
  std::size_t per = 1;
  if (o.max_args >= 0) {
    per = static_cast<std::size_t>(o.max_args);
  } else {
    // GNU parallel, having read every value, shares them out evenly among the job slots.
    const std::size_t jobs = std::max<std::uint32_t>(o.jobs, 1);
    per = std::max<std::size_t>(1, (items.size() + jobs - 1) / jobs);
  }
  std::vector<std::string> lines;
  std::vector<std::string> group;
  auto flush = [&] {
    lines.push_back(config::adhoc_command_for(o.command, group, lines.size() + 1, o.quote_all, mode,
                                              "\"$fanout_slot\""));
    group.clear();
  };
  if (per == 0) {
    // -N0: the command once per item, with none of its values.
    for (std::size_t i = 0; i < items.size(); ++i) flush();
    return lines;
  }
  std::size_t length = o.command.size();
  for (const auto& item : items) {
    const bool full = group.size() == per ||
                      (o.max_args < 0 && !group.empty() && length + item.size() + 3 > kMaxLine);
    if (full) {
      flush();
      length = o.command.size();
    }
    group.push_back(item);
    length += item.size() + 3;
  }
  if (!group.empty()) flush();
  return lines;
}

Expected<std::uint64_t> parse_block(const std::string& size) {
  if (size.empty()) return std::uint64_t{1024 * 1024};
  std::string digits = size;
  std::uint64_t unit = 1;
  const std::string units = "kKmMgG";
  if (const auto at = units.find(digits.back()); at != std::string::npos) {
    const std::uint64_t base =
        std::isupper(static_cast<unsigned char>(digits.back())) ? 1024 : 1000;
    for (std::size_t i = 0; i <= at / 2; ++i) unit *= base;
    digits.pop_back();
  }
  if (digits.empty() || digits.size() > 12 ||
      digits.find_first_not_of("0123456789") != std::string::npos || std::stoull(digits) == 0) {
    return make_error(ErrorCode::InvalidArgument,
                      "--block: expected a size in bytes > 0, with K, M or G (1024-based) or "
                      "k, m or g (1000-based) (got '" +
                          size + "')");
  }
  return std::stoull(digits) * unit;
}

std::vector<std::string> cut_chunks(const std::string& data, std::int64_t records,
                                    std::uint64_t block) {
  std::vector<std::string> chunks;
  std::size_t at = 0;
  while (at < data.size()) {
    std::size_t end = data.size();
    if (records > 0) {
      end = at;
      for (std::int64_t n = 0; n < records && end < data.size(); ++n) {
        const auto nl = data.find('\n', end);
        end = nl == std::string::npos ? data.size() : nl + 1;
      }
    } else if (data.size() - at > block) {
      const auto nl = data.rfind('\n', at + block - 1);
      if (nl != std::string::npos && nl >= at) {
        end = nl + 1;
      } else {
        const auto next = data.find('\n', at + block);
        end = next == std::string::npos ? data.size() : next + 1;
      }
    }
    chunks.push_back(data.substr(at, end - at));
    at = end;
  }
  return chunks;
}

}  // namespace fanout::client

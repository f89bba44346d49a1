// The run folder's name. See run_folder.hpp.
#include "fanout/protocol/run_folder.hpp"

namespace fanout::proto {

std::string run_folder_name(std::string_view job, std::time_t when, long pid,
                            std::uint64_t serial) {
  std::string name = job.empty() ? std::string("job") : std::string(job);
  for (char& c : name) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_';
    if (!safe) c = '_';
  }
  std::tm tm{};
  gmtime_r(&when, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  name += '-';
  name += stamp;
  name += '-';
  name += std::to_string(pid);
  if (serial > 0) {
    name += '-';
    name += std::to_string(serial);
  }
  return name;
}

}  // namespace fanout::proto

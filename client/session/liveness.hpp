// Whether a job's interchange still runs, from the ready file in the job's run folder
// (`client=`, `pool=`, `pid=`, `host=` lines): on the interchange's own host its process is
// checked directly (a dead one is known at once); elsewhere nothing can be told from the file.
// Used by `fanout wait`, `cancel` and `status`. See docs/architecture.md.
#pragma once

#include <sys/types.h>
#include <string>

namespace fanout::client {

struct InterchangeLiveness {
  enum class State : unsigned char {
    Unknown,  // no pid, or another host: only its silence can tell
    Alive,    // the process runs here and is a fanout-interchange
    Dead,     // on this host, and no fanout-interchange runs with that pid
  };
  State state = State::Unknown;
  pid_t pid = 0;
  std::string host{};
  double started =
      0;  // Unix seconds the ready file was written (interchange_liveness_in); 0: unknown
  // "the interchange (pid 123 on node7) is not running"; "" unless Dead.
  [[nodiscard]] std::string describe() const;
};

// Decides from a ready file's text, as seen from `this_host`; `is_interchange(pid)` says whether
// that pid is a running fanout-interchange (the default reads /proc). No other I/O.
InterchangeLiveness interchange_liveness(const std::string& ready_text,
                                         const std::string& this_host,
                                         bool (*is_interchange)(pid_t) = nullptr);

// True when `pid` runs and its command name is fanout-interchange's (a reused pid is not).
bool runs_interchange(pid_t pid);

// The liveness of the interchange named by `<run_dir>/interchange.ready` (Unknown when missing),
// with `started` from the file's time when it names a pid (the interchange wrote it).
InterchangeLiveness interchange_liveness_in(const std::string& run_dir);

}  // namespace fanout::client

// The worker pipe as pool/worker_pipe.hpp defines it, for
// tests/python/test_worker_pipe_catalogue.py to hold the Python shim against:
//   worker_pipe_catalogue                          the kinds, statuses and layouts, as JSON
//   worker_pipe_catalogue task ID INDEX DETAIL [ITEM...]   a T frame, in hex
//   worker_pipe_catalogue quit                     a Q frame, in hex
//   worker_pipe_catalogue decode HEX               the frames in HEX, decoded, as a JSON list
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fanout/util/json.hpp"
#include "pool/worker_pipe.hpp"

using namespace fanout;
using namespace fanout::pipe;

namespace {

std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string h;
  for (unsigned char c : bytes) {
    h.push_back(digits[c >> 4]);
    h.push_back(digits[c & 15]);
  }
  return h;
}

std::string from_hex(const char* h) {
  std::string bytes;
  for (std::size_t i = 0; h[i] != '\0' && h[i + 1] != '\0'; i += 2) {
    const char pair[3] = {h[i], h[i + 1], '\0'};
    bytes.push_back(static_cast<char>(std::strtoul(pair, nullptr, 16)));
  }
  return bytes;
}

std::string field(const char* name, std::size_t offset, const char* type) {
  return "\"" + std::string(name) + "\": [" + std::to_string(offset) + ", \"" + type + "\"]";
}

std::string kind_name(FrameKind k) { return std::string(1, static_cast<char>(k)); }

void print_catalogue() {
  std::string j = "{\n";
  j += "  \"length_bytes\": " + std::to_string(kLengthBytes) + ",\n";
  j += "  \"kind_offset\": " + std::to_string(kKindOffset) + ",\n";
  j += "  \"payload_offset\": " + std::to_string(kPayloadOffset) + ",\n";
  j += "  \"kinds\": {\"Task\": \"" + kind_name(FrameKind::Task) + "\", \"Quit\": \"" +
       kind_name(FrameKind::Quit) + "\", \"Ready\": \"" + kind_name(FrameKind::Ready) +
       "\", \"LoadError\": \"" + kind_name(FrameKind::LoadError) + "\", \"RunStarted\": \"" +
       kind_name(FrameKind::RunStarted) + "\", \"RunEnded\": \"" + kind_name(FrameKind::RunEnded) +
       "\", \"Done\": \"" + kind_name(FrameKind::Done) + "\"},\n";
  j += "  \"input_changed_category\": \"" + std::string(kInputChangedCategory) + "\",\n";
  j += "  \"done_status\": {\"Ok\": " + std::to_string(static_cast<int>(DoneStatus::Ok)) +
       ", \"Raised\": " + std::to_string(static_cast<int>(DoneStatus::Raised)) +
       ", \"BadReturn\": " + std::to_string(static_cast<int>(DoneStatus::BadReturn)) +
       ", \"Exiting\": " + std::to_string(static_cast<int>(DoneStatus::Exiting)) + "},\n";
  j += "  \"task\": {" + field("task_id", TaskLayout::kTaskId, "u64") + ", " +
       field("minibatch_index", TaskLayout::kIndex, "u64") + ", " +
       field("detail_len", TaskLayout::kDetailLen, "u32") + ", " +
       field("n_items", TaskLayout::kItemCount, "u32") +
       ", \"header_bytes\": " + std::to_string(TaskLayout::kHeaderBytes) + "},\n";
  j += "  \"done\": {" + field("task_id", DoneLayout::kTaskId, "u64") + ", " +
       field("status", DoneLayout::kStatus, "u8") + ", " +
       field("n_result", DoneLayout::kResultCount, "u64") + ", " +
       field("out_len", DoneLayout::kOutputLen, "u64") + ", " +
       field("run_seconds", DoneLayout::kRunSeconds, "f64") + ", " +
       field("cpu_seconds", DoneLayout::kCpuSeconds, "f64") +
       ", \"header_bytes\": " + std::to_string(DoneLayout::kHeaderBytes) + "},\n";
  j += "  \"marker\": {" + field("task_id", MarkerLayout::kTaskId, "u64") +
       ", \"frame_bytes\": " + std::to_string(MarkerLayout::kFrameBytes) + "}\n";
  j += "}\n";
  std::fputs(j.c_str(), stdout);
}

int decode(const std::string& bytes) {
  std::string j = "[";
  std::string_view rest = bytes;
  while (!rest.empty()) {
    const Cut c = cut_frame(rest, kMaxReplyLength);
    if (c.status != Cut::Status::Frame) {
      std::fprintf(stderr, "not a whole frame at byte %zu\n", bytes.size() - rest.size());
      return 1;
    }
    if (j.size() > 1) j += ", ";
    j += "{\"kind\": " + json_quote(kind_name(c.kind));
    switch (c.kind) {
      case FrameKind::Done: {
        auto d = decode_done(c.payload);
        if (!d) {
          std::fprintf(stderr, "%s\n", d.error().message.c_str());
          return 1;
        }
        j += ", \"task_id\": " + std::to_string(d->head.task_id) +
             ", \"status\": " + std::to_string(static_cast<int>(d->head.status)) +
             ", \"n_result\": " + std::to_string(d->head.n_result) +
             ", \"run_seconds\": " + std::to_string(d->head.run_s) +
             ", \"cpu_seconds\": " + std::to_string(d->head.cpu_s) +
             ", \"output\": " + json_quote(d->output) + ", \"error\": " + json_quote(d->error);
        break;
      }
      case FrameKind::RunStarted:
      case FrameKind::RunEnded: {
        auto id = decode_marker(c.payload);
        if (!id) {
          std::fprintf(stderr, "%s\n", id.error().message.c_str());
          return 1;
        }
        j += ", \"task_id\": " + std::to_string(*id);
        break;
      }
      case FrameKind::Task: {
        auto t = decode_task(c.payload);
        if (!t) {
          std::fprintf(stderr, "%s\n", t.error().message.c_str());
          return 1;
        }
        j += ", \"task_id\": " + std::to_string(t->task_id) +
             ", \"minibatch_index\": " + std::to_string(t->index) +
             ", \"n_items\": " + std::to_string(t->n_items) +
             ", \"detail\": " + json_quote(t->detail) + ", \"items\": " + json_quote(t->items);
        break;
      }
      default:
        j += ", \"text\": " + json_quote(c.payload);
        break;
    }
    j += "}";
    rest.remove_prefix(c.frame_bytes());
  }
  j += "]\n";
  std::fputs(j.c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 1) {
    print_catalogue();
    return 0;
  }
  const std::string mode = argv[1];
  if (mode == "task" && argc >= 5) {
    std::vector<std::string> items(argv + 5, argv + argc);
    std::string f;
    append_task(f, std::strtoull(argv[2], nullptr, 10), std::strtoull(argv[3], nullptr, 10),
                argv[4], items);
    std::printf("%s\n", to_hex(f).c_str());
    return 0;
  }
  if (mode == "quit") {
    std::string f;
    append_frame(f, FrameKind::Quit, {});
    std::printf("%s\n", to_hex(f).c_str());
    return 0;
  }
  if (mode == "decode" && argc == 3) return decode(from_hex(argv[2]));
  std::fprintf(stderr,
               "usage: worker_pipe_catalogue [task ID INDEX DETAIL [ITEM...] | quit | decode "
               "HEX]\n");
  return 2;
}

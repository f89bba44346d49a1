// Tests of the ready file's one writer and parser (src/fanout/protocol/ready_file.hpp).
#include "fanout/protocol/ready_file.hpp"

#include <doctest/doctest.h>

using fanout::proto::format_ready;
using fanout::proto::parse_ready;
using fanout::proto::ReadyFile;

TEST_CASE("protocol.ready_file.round_trips_every_field") {
  const ReadyFile r{.client = "tcp://127.0.0.1:4001",
                    .pool = "tcp://127.0.0.1:4002",
                    .pid = 4242,
                    .host = "node7",
                    .security = "curve",
                    .keys = "/home/u/.fanout/keys",
                    .job = 9};
  auto back = parse_ready(format_ready(r), "interchange.ready");
  REQUIRE(back.has_value());
  CHECK(back->client == r.client);
  CHECK(back->pool == r.pool);
  CHECK(back->pid == r.pid);
  CHECK(back->host == r.host);
  CHECK(back->security == r.security);
  CHECK(back->keys == r.keys);
  CHECK(back->job == r.job);
}

TEST_CASE("protocol.ready_file.writes_only_the_fields_that_are_set") {
  CHECK(format_ready(ReadyFile{.client = "ipc:///x/client"}) == "client=ipc:///x/client\n");
  CHECK(format_ready(ReadyFile{.client = "c", .pid = 7}) == "client=c\npid=7\n");
  CHECK(format_ready(ReadyFile{}).empty());
}

TEST_CASE("protocol.ready_file.reads_the_text_older_writers_wrote") {
  // The interchange's run-folder file and its owner file, as releases before this one wrote them.
  auto ready = parse_ready("client=ipc:///r/client\npool=ipc:///r/pool\npid=12\nhost=h\n", "f");
  REQUIRE(ready.has_value());
  CHECK(ready->pid == 12);
  CHECK(ready->host == "h");
  auto owner = parse_ready("client=c\npool=p\npid=13\nsecurity=curve\nkeys=/k\n", "f");
  REQUIRE(owner.has_value());
  CHECK(owner->keys == "/k");
  // A value may hold '='; no final newline; an empty text.
  auto odd = parse_ready("client=tcp://x:1?a=b", "f");
  REQUIRE(odd.has_value());
  CHECK(odd->client == "tcp://x:1?a=b");
  CHECK(parse_ready("", "f").has_value());
}

TEST_CASE("protocol.ready_file.skips_keys_a_newer_writer_adds") {
  auto r = parse_ready("client=c\nstarted=1700000000\npid=5\n", "f");
  REQUIRE(r.has_value());
  CHECK(r->client == "c");
  CHECK(r->pid == 5);
  // A key that is a prefix of a known one is another key.
  auto prefix = parse_ready("clien=x\n", "f");
  REQUIRE(prefix.has_value());
  CHECK(prefix->client.empty());
}

TEST_CASE("protocol.ready_file.refuses_malformed_text_naming_file_and_line") {
  auto no_eq = parse_ready("client=c\ngarbage\n", "/run/x/interchange.ready");
  REQUIRE_FALSE(no_eq.has_value());
  CHECK(no_eq.error().message.find("/run/x/interchange.ready: line 2") != std::string::npos);
  CHECK(no_eq.error().message.find("'garbage'") != std::string::npos);
  CHECK_FALSE(parse_ready("=value\n", "f").has_value());
  for (const char* pid : {"pid=\n", "pid=abc\n", "pid=12x\n", "pid=-3\n", "pid=0\n", "job=x\n"}) {
    CAPTURE(pid);
    auto r = parse_ready(pid, "f");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message.find("expected a positive number") != std::string::npos);
  }
}

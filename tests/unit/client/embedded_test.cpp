// The pure part of the embedded default (client/embedded.hpp): reading the endpoints an
// interchange writes to its ready file.
#include "client/launch/embedded.hpp"

#include <doctest/doctest.h>

#include <string>

using fanout::client::ready_value;

TEST_CASE("client.embedded.ready_value_reads_the_value_of_its_key_line") {
  const std::string text = "client=tcp://127.0.0.1:4001\npool=tcp://127.0.0.1:4002\njob=3\n";
  CHECK(ready_value(text, "client") == "tcp://127.0.0.1:4001");
  CHECK(ready_value(text, "pool") == "tcp://127.0.0.1:4002");
  CHECK(ready_value(text, "job") == "3");
  CHECK(ready_value(text, "clien").empty());  // a prefix of a key is not the key
  CHECK(ready_value(text, "missing").empty());
  CHECK(ready_value("client=tcp://x:1", "client") == "tcp://x:1");  // no final newline
  CHECK(ready_value("", "client").empty());
}

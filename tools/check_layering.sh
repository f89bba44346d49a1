#!/usr/bin/env bash
# Checks the include rules between the modules (docs/architecture.md, "Modules").
# Prints each violation as file:line: reason and exits 1; prints "layering: ok" and exits 0 when
# the tree is clean. Run from anywhere: it checks the repository it lives in.
#
#   util <- {partition, config, protocol} <- {store, net} <- report <- {interchange, pool, client}, tools
#
# - util includes nothing else of fanout; partition, config and protocol include only util and
#   themselves; store and net include util, partition, config, protocol and themselves; report
#   (the job's logs/ folder, written from the store) includes util, protocol, config, store and
#   itself, and nothing below it includes report.
# - interchange/, pool/ and client/ never include one another; tools/ includes only src/.
# - A detail/ folder is private to its module.
# - Each third-party header has one home: zmq in net/ (and tests/support/), sqlite3.h in
#   store/*.cpp, yaml-cpp in config/*.cpp and config/detail/*.hpp (private to config/), msgpack
#   in protocol/, CLI11 in */main.cpp and tools/, cpp-httplib in client/commands/dashboard.cpp,
#   prometheus-cpp in interchange/metrics_exporter.cpp.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

violations=0
report() {  # file line reason
  printf '%s:%s: %s\n' "$1" "$2" "$3"
  violations=$((violations + 1))
}

# The fanout modules each src/fanout/<module> may include, besides itself.
allowed_fanout() {
  case "$1" in
    util) echo "" ;;
    partition | config | protocol) echo "util" ;;
    store | net) echo "util partition config protocol" ;;
    report) echo "util partition config protocol store" ;;
    *) echo "" ;;
  esac
}

# Every #include line of the C and C++ files under the given folders, as file:line:text.
list_includes() {
  local dirs=()
  for d in "$@"; do [[ -d $d ]] && dirs+=("$d"); done
  ((${#dirs[@]} > 0)) || return 0
  grep -rnE --include='*.cpp' --include='*.cc' --include='*.hpp' --include='*.hh' \
    --include='*.h' --include='*.ipp' --include='*.inl' \
    '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "${dirs[@]}" || true
}

while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  text=${rest#*:}
  # The included name, without its quotes or angle brackets.
  name=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]*)[>"].*/\1/' <<<"$text")
  base=${file##*/}

  # Which part of the tree the including file belongs to.
  owner=""
  module=""
  case "$file" in
    src/fanout/*/*) owner=src; module=${file#src/fanout/}; module=${module%%/*} ;;
    src/*) owner=src ;;
    interchange/* | pool/* | client/* | tools/*) owner=${file%%/*} ;;
    tests/*) owner=tests ;;
  esac

  # ---- fanout's own headers ----
  if [[ $owner != tests && $name == fanout/* ]]; then
    target=${name#fanout/}
    target_module=${target%%/*}
    if [[ $owner == src && -n $module ]]; then
      if [[ $target_module != "$module" ]]; then
        ok=0
        for m in $(allowed_fanout "$module"); do [[ $m == "$target_module" ]] && ok=1; done
        if ((ok == 0)); then
          if [[ -z $(allowed_fanout "$module") ]]; then
            report "$file" "$line" "$module/ includes $name: $module/ may include only itself"
          else
            report "$file" "$line" \
              "$module/ includes $name: $module/ may include only itself and $(allowed_fanout "$module" | sed 's/ /, /g')"
          fi
        fi
      fi
    fi
    # A detail/ folder is private to its module (and that module's tests).
    if [[ $target == */detail/* ]]; then
      if [[ $owner != src || $module != "$target_module" ]]; then
        report "$file" "$line" "includes $name: detail/ is private to $target_module/"
      fi
    fi
  fi

  # ---- interchange/, pool/ and client/ never include one another; tools/ only src/ ----
  if [[ $owner != tests ]]; then
    for app in interchange pool client; do
      if [[ $name == "$app"/* || $name == */../"$app"/* || $name == ../"$app"/* ]]; then
        if [[ $owner == tools ]]; then
          report "$file" "$line" "tools/ includes $name: tools/ may include only src/"
        elif [[ $owner != "$app" ]]; then
          report "$file" "$line" \
            "$owner/ includes $name: interchange/, pool/ and client/ never include one another (move shared code into src/)"
        fi
      fi
    done
  fi

  # ---- third-party headers, each in its one home ----
  case "$name" in
    zmq.hpp | zmq.h | zmq_addon.hpp)
      if [[ $file != src/fanout/net/* && $file != tests/support/* ]]; then
        report "$file" "$line" "includes <$name>: ZeroMQ belongs in src/fanout/net/ (and tests/support/)"
      fi
      ;;
    sqlite3.h)
      if [[ $file != src/fanout/store/*.cpp ]]; then
        report "$file" "$line" "includes <$name>: SQLite belongs in src/fanout/store/*.cpp"
      fi
      ;;
    yaml-cpp/*)
      # config/detail/ headers are private to config/, so yaml-cpp still stays inside config/.
      if [[ $file != src/fanout/config/*.cpp && $file != src/fanout/config/detail/*.hpp ]]; then
        report "$file" "$line" "includes <$name>: yaml-cpp belongs in src/fanout/config/*.cpp"
      fi
      ;;
    msgpack.hpp | msgpack/*)
      if [[ $owner != tests && $file != src/fanout/protocol/* ]]; then
        report "$file" "$line" "includes <$name>: msgpack belongs in src/fanout/protocol/"
      fi
      ;;
    httplib.h)
      if [[ $owner != tests && $file != client/commands/dashboard.cpp ]]; then
        report "$file" "$line" "includes <$name>: cpp-httplib belongs in client/commands/dashboard.cpp"
      fi
      ;;
    prometheus/*)
      if [[ $owner != tests && $file != interchange/metrics_exporter.cpp ]]; then
        report "$file" "$line" "includes <$name>: prometheus-cpp belongs in interchange/metrics_exporter.cpp"
      fi
      ;;
    CLI/* | CLI11.hpp)
      if [[ $owner != tests && $base != main.cpp && ! ($owner == tools && $base == *.cpp) ]]; then
        report "$file" "$line" "includes <$name>: CLI11 belongs in */main.cpp (and tools/*.cpp)"
      fi
      ;;
  esac
done < <(
  list_includes src interchange pool client tools
  # tests/ may include anything, except that ZeroMQ stays in tests/support/.
  list_includes tests | grep -E '[<"]zmq(\.h|\.hpp|_addon\.hpp)[>"]' || true
)

if ((violations > 0)); then
  echo "layering: $violations violation(s); see the rules at the top of tools/check_layering.sh" >&2
  exit 1
fi
echo "layering: ok"

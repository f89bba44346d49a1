#!/usr/bin/env python3
"""`fanout run -c` prints what GNU parallel prints: command lines of parallel's man page and
tutorial about input sources, quoting and replacement strings, each run by Debian's `parallel`
and by fanout on the same input, their stdout compared byte for byte (sorted where parallel
promises no order) and their exit statuses where docs/adhoc.md says they agree. Skipped where
GNU parallel is not installed. Runner: gnu_table.py. Environment: FANOUT_BIN (tests/meson.build)."""

from gnu_table import run_table

ABC = "A\nB\nC\n"
DEF = "D\nE\nF\n"
FILES = {"abc-file": ABC, "def-file": DEF}
SIX = ["1", "2", "3", "4", "5", "6"]

CASES = [
    # Tutorial, "Input sources".
    dict(command="echo", rest=[":::", "A", "B", "C"]),
    dict(opts=["-a", "abc-file"], command="echo", files=FILES),
    dict(command="echo", stdin=ABC),
    dict(command="echo", rest=[":::", "A", "B", "C", ":::", "D", "E", "F"]),
    dict(opts=["-a", "abc-file", "-a", "def-file"], command="echo", files=FILES),
    dict(opts=["-a", "-", "-a", "def-file"], command="echo", stdin=ABC, files=FILES),
    dict(command="echo", rest=["::::", "-", "def-file"], stdin=ABC, files=FILES),
    dict(command="echo", rest=[":::", "A", "B", "C", "::::", "def-file"], files=FILES),
    dict(opts=["--link"], command="echo", rest=[":::", "A", "B", "C", ":::", "D", "E", "F"]),
    dict(opts=["--link"], command="echo", rest=[":::", "A", "B", "C", "D", "E", ":::", "F", "G"]),
    dict(command="echo", rest=["::::", "abc-file", ":::+", "G", "H", "I", "::::", "def-file"],
         files=FILES),
    dict(command="echo", rest=["::::", "abc-file", ":::", "G", "H", "I", "::::+", "def-file"],
         files=FILES),
    dict(command="echo", rest=[":::", "A", "B", "C", "D", "E", ":::+", "F", "G"]),
    # "The command": the value is the command line (a replacement string first is unquoted).
    dict(command="{}", rest=[":::", "echo foo", "echo bar baz"]),
    # Tutorial, "Replacement strings".
    dict(command="echo", rest=[":::", "A/B.C"]),
    dict(command="echo {}", rest=[":::", "A/B.C"]),
    dict(command="echo {.}", rest=[":::", "A/B.C"]),
    dict(command="echo {/}", rest=[":::", "A/B.C"]),
    dict(command="echo {//}", rest=[":::", "A/B.C"]),
    dict(command="echo {/.}", rest=[":::", "A/B.C"]),
    dict(opts=["-k"], command="echo {#}", rest=[":::", "A", "B", "C"], order=True),
    dict(command="echo {1} and {2}", rest=[":::", "A", "B", ":::", "C", "D"]),
    dict(command="echo /={1/} //={1//} /.={1/.} .={1.}", rest=[":::", "A/B.C", "D/E.F"]),
    dict(command="echo 1={1} 2={2} 3={3} -1={-1} -2={-2} -3={-3}",
         rest=[":::", "A", "B", ":::", "C", "D", ":::", "E", "F"]),
    dict(opts=["-k"], command="echo {.} {/} {//} {/.} {#}",
         rest=[":::", "dir/sub/file.tar.gz", "x.txt", "noext"], order=True),
    # Tutorial, "Quoting".
    dict(command="perl -e 'print \"@ARGV\\n\"'", rest=[":::", "This", "works"]),
    dict(command="echo \\={}", rest=[":::", "zsh", "bash", "ls"]),
    dict(command="printf '[%s]\\n'", rest=[":::", "a b", "it's", "x\"y", "$HOME", "*"]),
    dict(opts=["-q"], command="echo", rest=[":::", "1", "2"]),
    # Man page: shell arithmetic on the value, quoted only where the shell needs it.
    dict(command="echo $(( {} * {} ))", rest=[":::", *SIX]),
    dict(opts=["-k"], command="echo $(( {} * {} ))", rest=[":::", *SIX], order=True),
    dict(opts=["-k"], command="seq {}", stdin="3\n1\n2\n", order=True),
    dict(opts=["-k"], command="printf %s {} | wc -c", stdin="a\nbb\nccc\n", order=True),
    dict(command="true", rest=[":::", "1", "2"]),
    # -j and its GNU forms.
    dict(opts=["-j", "0"], command="echo {}", rest=[":::", "a", "b"]),
    dict(opts=["-j", "50%"], command="echo {}", rest=[":::", "a", "b"]),
    dict(opts=["-j", "+1"], command="echo {}", rest=[":::", "a", "b"]),
    dict(opts=["--jobs", "2"], command="echo {}", rest=[":::", "a", "b"]),
    dict(opts=["--dryrun"], command="echo {}", rest=[":::", "A", "B", "C"]),
    dict(opts=["--dry-run"], command="echo", rest=[":::", "a b", "it's", "1", "$x"]),
]


def main():
    n = run_table("adhoc-gnu", CASES)
    print("PASS: %d command lines of GNU parallel's man page and tutorial print the same" % n)


if __name__ == "__main__":
    main()

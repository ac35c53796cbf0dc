"""Run a command and write its own exit status, CPU seconds and peak RSS to a file
(``python measured.py REPORT CMD...``), for tests/test_hostile.py.

A child forked straight from pytest starts with pytest's current RSS as its high-water
mark (Linux copies it at fork, and exec keeps it in the process's maxrss): late in a full
run every measured command looked like 1.1 GiB. Forked from this small process instead,
the figures are the command's own."""

import os
import sys


def main() -> None:
    report, argv = sys.argv[1], sys.argv[2:]
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    with open(report, "w") as f:
        f.write(
            f"{os.waitstatus_to_exitcode(status)} {usage.ru_utime + usage.ru_stime} "
            f"{usage.ru_maxrss * 1024}\n"
        )


if __name__ == "__main__":
    main()

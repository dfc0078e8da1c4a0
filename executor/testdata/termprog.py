# termprog: a program for terminal tests. It reports its window size, whether
# it is in the terminal's foreground process group, and every resize; then,
# by mode:
#   raw:    raw mode; answers each keystroke with "key XX" (hex); q exits 7.
#   cooked: answers each line with "line ..."; Ctrl-D (EOF) exits 5; Ctrl-C
#           (SIGINT) exits 3; Ctrl-Z (SIGTSTP) is reported and ignored.
import os, signal, sys, tty


def out(s):
    os.write(1, (s + "\r\n").encode())


def size():
    cols, rows = os.get_terminal_size(0)
    return "%dx%d" % (rows, cols)


out("size " + size())
out("fg %s" % (os.tcgetpgrp(0) == os.getpgrp()))
signal.signal(signal.SIGWINCH, lambda *a: out("winch " + size()))
if sys.argv[1] == "raw":
    tty.setraw(0)
    out("ready")
    while True:
        b = os.read(0, 1)
        if b == b"q":
            sys.exit(7)
        out("key %02x" % b[0])
else:
    def onint(*a):
        out("sigint")
        os._exit(3)

    signal.signal(signal.SIGINT, onint)
    signal.signal(signal.SIGTSTP, lambda *a: out("sigtstp"))
    out("ready")
    while True:
        b = os.read(0, 1024)
        if not b:
            out("eof")
            sys.exit(5)
        out("line %r" % b)

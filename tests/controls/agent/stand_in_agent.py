#!/usr/bin/env python3
# A stand-in coding agent: reads its config, calls its API host, edits the
# project, runs the tests, then takes commands typed at its terminal.
import errno, fcntl, json, os, signal, subprocess, sys, termios, urllib.request

def say(*a):
    print(*a, flush=True)

def err(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if isinstance(e, OSError) and e.errno else type(e).__name__

home = os.environ["HOME"]
with open(os.path.join(home, ".claude/settings.json")) as f:
    say("config: model=" + json.load(f)["model"])
base = os.environ["ANTHROPIC_BASE_URL"]
req = urllib.request.Request(base + "/v1/messages", data=b'{"prompt":"fix the test"}', method="POST")
with urllib.request.urlopen(req, timeout=60) as r:
    say("api: " + r.read().decode())
with open("notes.txt", "a") as f:
    f.write("agent-edit\n")
say("edited notes.txt")
t = subprocess.run(["sh", "-c", "grep -q agent-edit notes.txt && echo tests-pass"], capture_output=True, text=True)
say("tests: " + t.stdout.strip())
signal.signal(signal.SIGWINCH, lambda *_: say("winch size=%dx%d" % os.get_terminal_size(0)[::-1]))
signal.signal(signal.SIGINT, signal.SIG_DFL)
say("size=%dx%d" % os.get_terminal_size(0)[::-1])
while True:
    say("ready>")
    line = sys.stdin.readline()
    if not line:
        break
    cmd = line.strip()
    if cmd.startswith("echo "):
        say("got " + cmd[5:])
    elif cmd == "ssh":
        try:
            with open(os.path.join(home, ".ssh/id_ed25519")) as f:
                say("ssh: read " + f.read().replace("\n", " "))
        except OSError as e:
            say("ssh: refused " + err(e))
    elif cmd == "inject":
        try:
            for c in b"echo INJECTED\n":
                fcntl.ioctl(0, termios.TIOCSTI, bytes([c]))
            say("tiocsti: ok")
        except OSError as e:
            say("tiocsti: refused " + err(e))

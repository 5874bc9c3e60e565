"""A stand-in coding agent for the tests: what it does is read from the prompt.

prompt words: `echo` prints the prompt and MAM_* env; `stream N` prints N
lines slowly; `gate PATH` then waits (at most 120 s) until PATH exists, so a test
holds the job running for as long as it looks; `flood N` (after the gate) then prints N KiB at once;
`fail N` exits N after writing to stderr; `hang` sleeps until killed; `trap-term` ignores SIGTERM.
"""

import os
import signal
import sys
import time

prompt = sys.stdin.read()
words = prompt.split()
if "trap-term" in words:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if "echo" in words:
    print(f"prompt={prompt.strip()}")
    print(f"env_prompt={os.environ.get('MAM_PROMPT', '').strip()} job={os.environ.get('MAM_JOB_ID')}")
    print(f"workspace={os.environ.get('MAM_WORKSPACE')} root={os.environ.get('WORKSPACE_ROOT')}")
if "stream" in words:
    for i in range(int(words[words.index("stream") + 1])):
        print(f"line {i}", flush=True)
        time.sleep(0.05)
if "gate" in words:
    gate, waited = words[words.index("gate") + 1], 0.0
    while not os.path.exists(gate) and waited < 120:
        time.sleep(0.02)
        waited += 0.02
if "flood" in words:
    line = "x" * 1023 + "\n"
    sys.stdout.write(line * int(words[words.index("flood") + 1]))
    sys.stdout.flush()
if "hang" in words:
    print("hanging", flush=True)
    while True:
        time.sleep(1)
if "fail" in words:
    print("something broke", file=sys.stderr)
    sys.exit(int(words[words.index("fail") + 1]))

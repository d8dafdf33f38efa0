"""Writes the checker's own events to its report pipe, every check passed, then ends the process
with os._exit(0). It defines no working solution: the forged lines carry no token."""

import json
import os
import sys

fd = int(sys.argv[sys.argv.index("--report-fd") + 1])
checks = ["load", "runs", "shape", "dtype", "value", "gradient", "remat", "policy", "residuals"]
for name in [*checks, "config"]:
    event = {"event": "result", "check": name, "passed": True, "detail": "ok"}
    os.write(fd, (json.dumps(event) + "\n").encode())
os.write(fd, b'{"event": "done"}\n')
os._exit(0)

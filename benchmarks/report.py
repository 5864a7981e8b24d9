"""Writes a benchmark's results: DIR/NAME.md (the table a person reads, also printed) and
DIR/NAME.json (the numbers, for scripts)."""
import json
import os


def write(out_dir, name, lines, data):
    text = "\n".join(lines) + "\n"
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, name + ".md"), "w") as f:
        f.write(text)
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(data, f, indent=1)
    print(text)

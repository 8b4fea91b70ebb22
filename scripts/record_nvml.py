#!/usr/bin/env python3
"""Record what NVML says on this machine, in the format tests replay (RecordedNvml).

    python scripts/record_nvml.py > tests/data/nvml/<gpu>-<driver>.json

Add a "source" line (machine, date, who ran it) to the JSON and an entry in tests/data/README.md.
Serial numbers are not read; UUIDs are, replace them if they must stay private.
"""

from __future__ import annotations

import json
import sys

from envkit.detect.nvml import NvmlError, PynvmlApi, record_nvml


def main() -> int:
    try:
        api = PynvmlApi()
    except NvmlError as exc:
        print(f"record_nvml: {exc}", file=sys.stderr)
        return 1
    json.dump(record_nvml(api), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

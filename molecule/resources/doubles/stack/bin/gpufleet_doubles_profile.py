"""Shared helper of the GPU-stack stand-ins: read the hardware profile.

Installed next to the stand-ins as /usr/lib/gpufleet-doubles/<package>/gpufleet_doubles_profile.py.
The profile is written by the test bed's prepare step; a missing one means
"no GPU" (zero devices), never a made-up default.
"""

import glob
import json
import os
import re

PROFILE = os.environ.get("GPUFLEET_DOUBLES_PROFILE", "/etc/gpufleet-doubles/hw-profile.json")
LIBDIR = "/usr/lib/x86_64-linux-gnu"


def profile():
    try:
        with open(PROFILE, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return {}


def gpu_count():
    return int(profile().get("gpu_count", 0))


def installed_driver_version():
    """The driver version of the installed (stand-in) user-space libraries, as the real tools see it."""
    for path in sorted(glob.glob(os.path.join(LIBDIR, "libcuda.so.*.*"))):
        match = re.search(r"libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$", path)
        if match:
            return match.group(1)
    return None

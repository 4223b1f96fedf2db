#!/usr/bin/python3
"""Assembles the cohort wheel (a zip, PEP 427) from the built package and role binaries:
cohort/ (the Python files and libcohort.so), cohort/.libs/ (the shared libraries libcohort.so
links, but the C and C++ runtimes: a system with glibc 2.36 and GCC 12's libstdc++ or newer,
Debian 12's, needs no other package), cohort/bin/ (launch, scheduler, shard, worker: they use
this machine's libraries) and the dist-info with a `cohortrun` entry point. Bazel runs it
(//python:wheel); pip installs the result offline: pip install --no-index bazel-bin/python/cohort-*.whl.

    build_wheel.py OUT.whl VERSION PACKAGE_FILE... -- BINARY...
"""

import base64
import hashlib
import os
import re
import stat
import subprocess
import sys
import zipfile

# Any CPython 3 (libcohort.so is loaded with ctypes); the binaries are x86-64 Linux.
TAG = "py3-none-linux_x86_64"
# The C library's parts and the C++ runtime: the Python that loads libcohort.so has them
# (as manylinux wheels leave them out), and one copy each in a process is the only safe count.
RUNTIME = re.compile(r"^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libutil|"
                     r"libresolv|libstdc\+\+|libgcc_s)\.so")


def linked_libraries(library):
    """(soname, path) of every shared library `library` loads, but the runtime's."""
    out = subprocess.run(["ldd", library], capture_output=True, text=True, check=True).stdout
    libraries = []
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m is None or RUNTIME.match(m.group(1)):
            continue
        if m.group(2) == "not":
            raise SystemExit(f"build_wheel: {library} needs {m.group(1)}, which is not found")
        libraries.append((m.group(1), os.path.realpath(m.group(2))))
    return libraries


def main(argv):
    out, version, rest = argv[0], argv[1], argv[2:]
    split = rest.index("--")
    package, binaries = rest[:split], rest[split + 1:]
    info = f"cohort-{version}.dist-info"
    files = []  # (name in the wheel, bytes, executable)
    for path in package:
        with open(path, "rb") as f:
            files.append((f"cohort/{os.path.basename(path)}", f.read(), False))
        if path.endswith(".so"):
            for soname, library in linked_libraries(path):
                with open(library, "rb") as f:
                    files.append((f"cohort/.libs/{soname}", f.read(), False))
    for path in binaries:
        with open(path, "rb") as f:
            files.append((f"cohort/bin/{os.path.basename(path)}", f.read(), True))
    files.append((f"{info}/METADATA", (
        "Metadata-Version: 2.1\nName: cohort\n"
        f"Version: {version}\n"
        "Summary: Cohort: distributed deep-learning training, parameter servers over gRPC\n"
        "Requires-Python: >=3.8\n").encode(), False))
    files.append((f"{info}/WHEEL", (
        "Wheel-Version: 1.0\nGenerator: cohort build_wheel.py\nRoot-Is-Purelib: false\n"
        f"Tag: {TAG}\n").encode(), False))
    files.append((f"{info}/entry_points.txt",
                  b"[console_scripts]\ncohortrun = cohort.run:main\n", False))
    record = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as whl:
        for name, data, executable in files:
            entry = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            entry.external_attr = (stat.S_IFREG | (0o755 if executable else 0o644)) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(entry, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{name},sha256={digest.decode()},{len(data)}")
        record.append(f"{info}/RECORD,,")
        whl.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(2026, 1, 1, 0, 0, 0)),
                     "\n".join(record) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])

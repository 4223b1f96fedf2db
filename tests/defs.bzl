"""The whole-system tests' rule."""

def system_test(name, args = [], data = []):
    """Runs NAME.py (a Python unittest file) under tools/run_python_test.py, which reports each
    case in JUnit, with args after the file. Every system test runs whole jobs with every core,
    outside Bazel's sandbox (it starts real processes, containers, daemons or network
    namespaces and finds them by its job's marker), one at a time."""
    native.sh_test(
        name = name,
        size = "large",
        srcs = ["//tools:run_python_test.py"],
        args = ["$(location %s.py)" % name] + args,
        data = ["%s.py" % name] + data,
        tags = [
            "exclusive",
            "no-sandbox",
        ],
    )

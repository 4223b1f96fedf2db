"""A libFuzzer target and the regression test of its corpus."""

def fuzz_target(name, srcs, deps):
    """Makes `name` (a libFuzzer binary, built by tools/fuzz.sh with clang and --config=fuzz)
    and `name_corpus_test`, which runs every input in corpus/<name> through the same entry
    point in the regular build: inputs that once crashed stay fixed."""
    native.cc_binary(
        name = name,
        srcs = srcs,
        deps = deps,
        linkopts = ["-fsanitize=fuzzer"],
        tags = ["manual"],
    )
    native.cc_test(
        name = name + "_corpus_test",
        size = "small",
        srcs = srcs + ["corpus_main.cc"],
        deps = deps,
        args = ["fuzz/corpus/" + name],
        data = native.glob(["corpus/" + name + "/*"]),
    )

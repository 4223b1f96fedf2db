"""CUDA rules on the toolkit @local_cuda found (nvcc called by absolute path, nothing downloaded)."""

load("@local_cuda//:defs.bzl", "NVCC", "cuda_compatible", "if_cuda")

# target_compatible_with for CUDA targets: skipped by //... without a toolkit or with
# --define=cuda=off.
CUDA_COMPAT = select({
    "@//bazel:cuda_off": ["@//bazel:incompatible"],
    "//conditions:default": cuda_compatible(),
})

# `targets` where CUDA targets build (a toolkit, and no --define=cuda=off), else none: for the
# data of a program that uses a GPU build when there is one (the launcher's //services:worker_gpu).
def if_cuda_built(targets):
    return select({
        "@//bazel:cuda_off": [],
        "//conditions:default": if_cuda(targets),
    })

# Ampere (A100) and Hopper (H100/H200), plus PTX for newer GPUs.
_ARCH = "-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]"

def cuda_library(name, srcs, hdrs = [], deps = [], **kwargs):
    """Compiles .cu files with nvcc into objects and wraps them as a cc_library."""
    objs = []
    for src in srcs:
        obj = src[:-len(".cu")] + ".o"
        native.genrule(
            name = name + "_" + src[:-len(".cu")].replace("/", "_") + "_nvcc",
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = NVCC + " -std=c++17 -O3 -Xcompiler -fPIC -I. " + _ARCH +
                  " -c $(location " + src + ") -o $@",
            target_compatible_with = CUDA_COMPAT,
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        # cudart is linked statically: a shared object of kernels could not see its symbols.
        linkstatic = True,
        target_compatible_with = CUDA_COMPAT,
        **kwargs
    )

"""C++ code generated from .proto files by Debian's protoc and grpc_cpp_plugin (offline: no
@com_google_protobuf, no downloads)."""

def cc_proto_grpc_library(name, srcs, deps = [], **kwargs):
    """<x>.pb.{h,cc} and <x>.grpc.pb.{h,cc} for each .proto in srcs, as one cc_library.

    srcs: .proto files of this package, imported by their workspace path ("proto/x.proto").
    Well-known types (google/protobuf/*.proto) come from /usr/include.
    """
    hdrs, cc = [], []
    for src in srcs:
        base = src[:-len(".proto")]
        hdrs += [base + ".pb.h", base + ".grpc.pb.h"]
        cc += [base + ".pb.cc", base + ".grpc.pb.cc"]
    native.genrule(
        name = name + "_codegen",
        srcs = srcs,
        outs = hdrs + cc,
        cmd = ("/usr/bin/protoc -I. --cpp_out=$(GENDIR) --grpc_out=$(GENDIR) " +
               "--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin " +
               " ".join(["$(location %s)" % s for s in srcs])),
        message = "protoc %s" % " ".join(srcs),
    )
    native.cc_library(
        name = name,
        srcs = cc,
        hdrs = hdrs,
        deps = deps + ["@system//:grpcpp"],
        **kwargs
    )

def cc_proto_only_library(name, srcs, deps = [], **kwargs):
    """<x>.pb.{h,cc} for each .proto in srcs, as one cc_library on Debian's libprotobuf: for
    messages that travel in files, not over gRPC."""
    hdrs = [src[:-len(".proto")] + ".pb.h" for src in srcs]
    cc = [src[:-len(".proto")] + ".pb.cc" for src in srcs]
    native.genrule(
        name = name + "_codegen",
        srcs = srcs,
        outs = hdrs + cc,
        cmd = ("/usr/bin/protoc -I. --cpp_out=$(GENDIR) " +
               " ".join(["$(location %s)" % s for s in srcs])),
        message = "protoc %s" % " ".join(srcs),
    )
    native.cc_library(
        name = name,
        srcs = cc,
        hdrs = hdrs,
        deps = deps + ["@system//:protobuf"],
        **kwargs
    )

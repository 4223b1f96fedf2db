"""C++ code generated from .proto files by Debian's protoc and grpc_cpp_plugin (offline: no
@com_google_protobuf, no downloads)."""

def _cc_proto(name, srcs, deps, grpc, **kwargs):
    suffixes = [".pb"] + ([".grpc.pb"] if grpc else [])
    bases = [src[:-len(".proto")] for src in srcs]
    hdrs = [b + s + ".h" for b in bases for s in suffixes]
    cc = [b + s + ".cc" for b in bases for s in suffixes]
    plugin = ("--grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin "
              if grpc else "")
    native.genrule(
        name = name + "_codegen",
        srcs = srcs,
        outs = hdrs + cc,
        cmd = ("/usr/bin/protoc -I. --cpp_out=$(GENDIR) " + plugin +
               " ".join(["$(location %s)" % s for s in srcs])),
        message = "protoc %s" % " ".join(srcs),
    )
    native.cc_library(
        name = name,
        srcs = cc,
        hdrs = hdrs,
        deps = deps + ["@system//:grpcpp" if grpc else "@system//:protobuf"],
        **kwargs
    )

def cc_proto_grpc_library(name, srcs, deps = [], **kwargs):
    """<x>.pb.{h,cc} and <x>.grpc.pb.{h,cc} for each .proto in srcs, as one cc_library.

    srcs: .proto files of this package, imported by their workspace path ("proto/x.proto").
    Well-known types (google/protobuf/*.proto) come from /usr/include.
    """
    _cc_proto(name, srcs, deps, grpc = True, **kwargs)

def cc_proto_only_library(name, srcs, deps = [], **kwargs):
    """<x>.pb.{h,cc} for each .proto in srcs, as one cc_library on Debian's libprotobuf: for
    messages that travel in files, not over gRPC."""
    _cc_proto(name, srcs, deps, grpc = False, **kwargs)

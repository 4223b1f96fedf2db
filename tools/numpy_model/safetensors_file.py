"""Strict reading of a .safetensors file: any deviation from the layout the trainer writes is an
error."""

import json
import math

import numpy as np

from .errors import ModelFileError

# Item size in bytes of every dtype accepted in the model file.
DTYPE_SIZES = {"F32": 4, "F16": 2, "BF16": 2}


def decode_tensor(raw, dtype, shape):
    """Decodes little-endian raw bytes of the given dtype into float32."""
    if dtype == "F32":
        values = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    elif dtype == "F16":
        values = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    elif dtype == "BF16":
        # bfloat16 is the upper half of an IEEE float32.
        halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32)
        values = (halves << 16).view(np.float32)
    else:
        raise ModelFileError(f"unsupported dtype {dtype!r}")
    return values.reshape(shape)


def _reject_duplicate_keys(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _reject_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")



def is_int(value):
    # bool is a subclass of int but is not a valid size or offset.
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_header(header_bytes):
    """Parses the JSON header; only trailing spaces may follow the object."""
    try:
        text = header_bytes.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelFileError(f"header is not valid UTF-8: {e}") from None
    decoder = json.JSONDecoder(object_pairs_hook=_reject_duplicate_keys,
                               parse_constant=_reject_constant)
    try:
        # raw_decode does not skip leading whitespace, which keeps this strict.
        header, end = decoder.raw_decode(text)
    except ValueError as e:
        raise ModelFileError(f"header is not valid JSON: {e}") from None
    if text[end:].strip(" "):
        raise ModelFileError(
            f"header has unexpected content after the JSON object at "
            f"character {end}: {text[end:end + 20]!r}")
    if not isinstance(header, dict):
        raise ModelFileError(
            f"header is a JSON {type(header).__name__}, expected an object")
    return header


def _check_metadata(metadata):
    if not isinstance(metadata, dict):
        raise ModelFileError("__metadata__ is not a JSON object")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise ModelFileError(
                f"__metadata__[{key!r}] is {type(value).__name__}, "
                f"expected a string")
    for key in ("model", "input_shape"):
        if key not in metadata:
            raise ModelFileError(f"__metadata__ has no {key!r} entry")


def _read_safetensors_unchecked(path):
    try:
        with open(path, "rb") as f:
            content = f.read()
    except OSError as e:
        raise ModelFileError(f"cannot read file: {e.strerror}") from None

    if len(content) < 8:
        raise ModelFileError(
            f"file is {len(content)} bytes, too short for the 8-byte "
            f"header length")
    header_len = int.from_bytes(content[:8], "little")
    if header_len > len(content) - 8:
        raise ModelFileError(
            f"header length {header_len} exceeds the {len(content) - 8} "
            f"bytes after the length field")
    header = _parse_header(content[8:8 + header_len])
    data = memoryview(content)[8 + header_len:]

    if "__metadata__" not in header:
        raise ModelFileError("header has no __metadata__ entry")
    metadata = header["__metadata__"]
    _check_metadata(metadata)

    tensors = {}
    expected_begin = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        where = f"tensor {name!r}"
        if not isinstance(entry, dict):
            raise ModelFileError(f"{where}: entry is not a JSON object")
        keys = set(entry)
        required = {"dtype", "shape", "data_offsets"}
        if keys != required:
            missing = sorted(required - keys)
            extra = sorted(keys - required)
            raise ModelFileError(
                f"{where}: entry keys are wrong (missing {missing}, "
                f"unexpected {extra})")

        dtype = entry["dtype"]
        if dtype not in DTYPE_SIZES:
            raise ModelFileError(
                f"{where}: unsupported dtype {dtype!r} "
                f"(expected one of {sorted(DTYPE_SIZES)})")

        shape = entry["shape"]
        if not (isinstance(shape, list)
                and all(is_int(d) and d >= 0 for d in shape)):
            raise ModelFileError(
                f"{where}: shape {shape!r} is not a list of non-negative "
                f"integers")

        offsets = entry["data_offsets"]
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(is_int(o) and o >= 0 for o in offsets)):
            raise ModelFileError(
                f"{where}: data_offsets {offsets!r} is not a pair of "
                f"non-negative integers")
        begin, end = offsets
        if end < begin:
            raise ModelFileError(
                f"{where}: data_offsets [{begin}, {end}] ends before it "
                f"begins")
        nbytes = math.prod(shape) * DTYPE_SIZES[dtype]
        if end - begin != nbytes:
            raise ModelFileError(
                f"{where}: size mismatch: data_offsets [{begin}, {end}] span "
                f"{end - begin} bytes but shape {shape} of {dtype} needs "
                f"{nbytes}")
        if begin > expected_begin:
            raise ModelFileError(
                f"{where}: gap in data: begins at {begin} but the previous "
                f"tensor ends at {expected_begin}")
        if begin < expected_begin:
            raise ModelFileError(
                f"{where}: overlapping data: begins at {begin} but the "
                f"previous tensor ends at {expected_begin}")
        if end > len(data):
            raise ModelFileError(
                f"{where}: data_offsets end {end} is beyond the end of the "
                f"data section ({len(data)} bytes)")
        tensors[name] = decode_tensor(bytes(data[begin:end]), dtype, shape)
        expected_begin = end

    if expected_begin != len(data):
        raise ModelFileError(
            f"trailing bytes: the data section is {len(data)} bytes but the "
            f"tensors end at {expected_begin}")
    return tensors, dict(metadata)


def read_safetensors(path):
    """Reads a .safetensors file strictly.

    Returns (tensors, metadata): tensors maps name -> float32 ndarray in the
    header's order, metadata is the __metadata__ dict (str -> str).
    Raises ModelFileError naming the file on any deviation from the format.
    """
    try:
        return _read_safetensors_unchecked(path)
    except ModelFileError as e:
        raise ModelFileError(f"{path}: {e}") from None

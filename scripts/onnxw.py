"""A minimal writer of ONNX protobuf messages (standard library only).

Used by scripts/make_example_model.py and by the tests that build malformed or unusual
models on the fly. Each function returns the encoded bytes of one message or field.
"""
import struct

# ---- protobuf wire format ----------------------------------------------------------------


def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(num, n):
    return varint(num << 3) + varint(n)


def field_bytes(num, data):
    if isinstance(data, str):
        data = data.encode()
    return varint(num << 3 | 2) + varint(len(data)) + data


def field_float(num, f):
    return varint(num << 3 | 5) + struct.pack("<f", f)


# ---- ONNX messages (field numbers from onnx.proto) -------------------------------------------------------------------------
FLOAT = 1


def tensor(name, dims, values, data_type=FLOAT, fmt="f"):
    """A TensorProto with raw_data; `fmt` is the struct code of one element."""
    msg = b"".join(field_varint(1, d) for d in dims)
    msg += field_varint(2, data_type) + field_bytes(8, name)
    msg += field_bytes(9, struct.pack("<%d%s" % (len(values), fmt), *values))
    return msg


def attr_int(name, v):
    return field_bytes(1, name) + field_varint(3, v) + field_varint(20, 2)


def attr_ints(name, vs):
    return field_bytes(1, name) + b"".join(field_varint(8, v) for v in vs) + field_varint(20, 7)


def attr_string(name, v):
    return field_bytes(1, name) + field_bytes(4, v) + field_varint(20, 3)


def attr_float(name, v):
    return field_bytes(1, name) + field_float(2, v) + field_varint(20, 1)


def node(op, inputs, outputs, name, attrs=()):
    msg = b"".join(field_bytes(1, i) for i in inputs)
    msg += b"".join(field_bytes(2, o) for o in outputs)
    msg += field_bytes(3, name) + field_bytes(4, op)
    msg += b"".join(field_bytes(5, a) for a in attrs)
    return msg


def value_info(name, dims, elem_type=FLOAT):
    shape = b""
    for d in dims:
        dim = field_bytes(2, d) if isinstance(d, str) else field_varint(1, d)
        shape += field_bytes(1, dim)
    ttype = field_varint(1, elem_type) + field_bytes(2, shape)
    return field_bytes(1, name) + field_bytes(2, field_bytes(1, ttype))




def graph(nodes, inputs, outputs, initializers=(), name="g"):
    """A GraphProto from encoded nodes, value_infos and tensors."""
    g = b"".join(field_bytes(1, n) for n in nodes) + field_bytes(2, name)
    g += b"".join(field_bytes(5, t) for t in initializers)
    g += b"".join(field_bytes(11, i) for i in inputs)
    return g + b"".join(field_bytes(12, o) for o in outputs)


def attr_graph(name, g):
    """A graph attribute (If's branches, Loop's and Scan's bodies) holding GraphProto `g`."""
    return field_bytes(1, name) + field_bytes(6, g) + field_varint(20, 5)


def model(nodes, inputs, outputs, initializers=(), opset=13, name="g", ir_version=8):
    """A ModelProto from encoded nodes, value_infos and tensors."""
    graph_ = graph(nodes, inputs, outputs, initializers, name)
    m = field_varint(1, ir_version) + field_bytes(2, "nnc onnxw.py")
    return m + field_bytes(7, graph_) + field_bytes(8, field_bytes(1, "") + field_varint(2, opset))

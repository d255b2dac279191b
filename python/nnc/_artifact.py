"""nnc.load: an artifact of `nnc compile --emit=lib` run through libnnc_runtime's C ABI
(include/nnc/runtime/nnc_runtime.h) with ctypes: no compiler in the way, and no copies: inputs
are bound in place (C-contiguous arrays of the artifact's dtype), outputs are written in place
into fresh 64-byte aligned arrays."""
import ctypes
import os

import numpy

from ._nnc import Error

# ONNX TensorProto.DataType codes (NNC_FLOAT32, ...) and their numpy dtypes.
_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
           9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}

_lib = None
_LOAD_PROFILE = 1  # NNC_LOAD_PROFILE


def _runtime():
    """libnnc_runtime.so: $NNC_RUNTIME_LIBRARY, else the one built beside this package, else
    the loader's search path."""
    global _lib
    if _lib is None:
        path = os.environ.get("NNC_RUNTIME_LIBRARY")
        if not path:
            try:
                from ._build import RUNTIME_LIBRARY as path
            except ImportError:
                path = "libnnc_runtime.so"
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise Error(f"cannot load the nnc runtime library {path}: {e}") from None
        P, I, I64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
        sigs = {
            "nnc_load": (P, [ctypes.c_char_p]), "nnc_free": (None, [P]),
            "nnc_load_with": (P, [ctypes.c_char_p, ctypes.c_uint]),
            "nnc_num_kernels": (I, [P]), "nnc_kernel_name": (ctypes.c_char_p, [P, I]),
            "nnc_kernel_ms": (ctypes.c_double, [P, I]), "nnc_profiled_runs": (I64, [P]),
            "nnc_last_error": (ctypes.c_char_p, []), "nnc_describe": (ctypes.c_char_p, [P]),
            "nnc_num_inputs": (I, [P]), "nnc_num_outputs": (I, [P]),
            "nnc_bind_input": (I, [P, I, P, I, ctypes.POINTER(I64)]),
            "nnc_bind_output": (I, [P, I, P, ctypes.c_size_t]), "nnc_run": (I, [P, I]),
        }
        for side in ("input", "output"):
            sigs[f"nnc_{side}_name"] = (ctypes.c_char_p, [P, I])
            sigs[f"nnc_{side}_dtype"] = (I, [P, I])
            sigs[f"nnc_{side}_rank"] = (I, [P, I])
            sigs[f"nnc_{side}_shape"] = (ctypes.POINTER(I64), [P, I])
            sigs[f"nnc_{side}_bytes"] = (I64, [P, I])
        for name, (res, args) in sigs.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        _lib = lib
    return _lib


def _fail(lib):
    raise Error(lib.nnc_last_error().decode())


class ArtifactInfo:
    """An artifact's input or output: name, numpy dtype, shape."""

    def __init__(self, name, dtype, shape):
        self.name, self.dtype, self.shape = name, dtype, shape

    def __repr__(self):
        return f"TensorInfo(name={self.name!r}, dtype={self.dtype!r}, shape={self.shape})"


class Artifact:
    """A model loaded from lib<name>.so; call it like a compiled Model."""

    def __init__(self, path, threads=1, profile=False):
        lib = _runtime()
        self._lib, self._threads = lib, threads
        # nnc_load wants a path, not a bare name the loader would search for.
        self._handle = lib.nnc_load_with(os.path.abspath(os.fspath(path)).encode(),
                                         _LOAD_PROFILE if profile else 0)
        if not self._handle:
            _fail(lib)
        self.inputs = [self._info("input", i) for i in range(lib.nnc_num_inputs(self._handle))]
        self.outputs = [self._info("output", i) for i in range(lib.nnc_num_outputs(self._handle))]

    @property
    def description(self):
        """What the artifact holds and how it was loaded (for OpenCL: the device, and whether
        the program came from the artifact's device binary or was built from source)."""
        return self._lib.nnc_describe(self._handle).decode()

    def profile(self):
        """Each kernel's time per run so far, in launch order: [(name, ms)], for an artifact
        loaded with profile=True (CPU: wall time around each kernel; OpenCL: device time)."""
        lib, h = self._lib, self._handle
        runs = lib.nnc_profiled_runs(h)
        if runs < 0:
            raise Error("the artifact was not loaded with profile=True")
        return [(lib.nnc_kernel_name(h, k).decode(), lib.nnc_kernel_ms(h, k) / max(runs, 1))
                for k in range(lib.nnc_num_kernels(h))]

    def _info(self, side, i):
        lib, h = self._lib, self._handle
        name = getattr(lib, f"nnc_{side}_name")(h, i).decode()
        code = getattr(lib, f"nnc_{side}_dtype")(h, i)
        shape = getattr(lib, f"nnc_{side}_shape")(h, i)
        rank = getattr(lib, f"nnc_{side}_rank")(h, i)
        dtype = numpy.dtype(_DTYPES[code]) if code in _DTYPES else f"onnx dtype {code}"
        return ArtifactInfo(name, dtype, tuple(shape[k] for k in range(rank)))

    def __del__(self):
        if getattr(self, "_handle", None):
            self._lib.nnc_free(self._handle)
            self._handle = None

    def __call__(self, *args):
        if len(args) == 1 and isinstance(args[0], dict):
            missing = [i.name for i in self.inputs if i.name not in args[0]]
            if missing:
                raise KeyError(f"no value for model input '{missing[0]}'")
            args = [args[0][i.name] for i in self.inputs]
        if len(args) != len(self.inputs):
            raise TypeError(f"the model takes {len(self.inputs)} input(s), {len(args)} given")
        lib, h = self._lib, self._handle
        # Kept alive until the run is over: the runtime reads them in place.
        arrays = []
        for i, (info, a) in enumerate(zip(self.inputs, args)):
            a = numpy.asarray(a, order="C")  # keeps a 0-d array 0-d, unlike ascontiguousarray
            if a.dtype != info.dtype:
                raise TypeError(f"input '{info.name}': the model takes {info.dtype}, not {a.dtype}")
            arrays.append(a)
            shape = (ctypes.c_int64 * a.ndim)(*a.shape)
            if lib.nnc_bind_input(h, i, a.ctypes.data, a.ndim, shape) < 0:
                _fail(lib)
        outs = []
        for i, info in enumerate(self.outputs):
            nbytes = lib.nnc_output_bytes(h, i)
            raw = numpy.empty(nbytes + 64, numpy.uint8)
            start = -raw.ctypes.data % 64
            out = raw[start:start + nbytes].view(info.dtype).reshape(info.shape)
            if lib.nnc_bind_output(h, i, out.ctypes.data, nbytes) < 0:
                _fail(lib)
            outs.append(out)
        if lib.nnc_run(h, self._threads) < 0:
            _fail(lib)
        return outs


def load(path, threads=1, profile=False):
    """Loads an artifact (lib<name>.so from `nnc compile --emit=lib`) through libnnc_runtime;
    with profile=True every kernel of every run is timed (Artifact.profile())."""
    return Artifact(path, threads, profile)

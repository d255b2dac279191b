"""nnc: compile ONNX models and run them on numpy arrays.

    import nnc, numpy
    m = nnc.compile("model.onnx", target="cpu", threads=1)
    outputs = m(numpy.zeros(m.inputs[0].shape, m.inputs[0].dtype))  # or m({"name": array})

Errors nnc reports (a bad model, a wrong input shape) raise nnc.Error with nnc's message; an
input of the wrong dtype raises TypeError naming the input. Inputs are copied once into nnc's
aligned buffers; outputs are numpy arrays over nnc's result buffers (no copy).

nnc.load("dir/lib<name>.so") runs an artifact of `nnc compile --emit=lib` through
libnnc_runtime alone, binding the arrays in place.
"""
from ._nnc import Error, Model, TensorInfo, compile, load_tensor
from ._artifact import Artifact, load

__all__ = ["Artifact", "Error", "Model", "TensorInfo", "compile", "load", "load_tensor"]

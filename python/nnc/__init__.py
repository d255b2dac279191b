"""nnc: compile ONNX models and run them on numpy arrays.

    import nnc, numpy
    m = nnc.compile("model.onnx", target="cpu", threads=1)
    outputs = m(numpy.zeros(m.inputs[0].shape, m.inputs[0].dtype))  # or m({"name": array})

Errors nnc reports (a bad model, a wrong input shape) raise nnc.Error with nnc's message; an
input of the wrong dtype raises TypeError naming the input. Inputs are copied once into nnc's
aligned buffers; outputs are numpy arrays over nnc's result buffers (no copy).

m.inspect(after="fuse-elementwise") gives the text IR after a pass of the target's pipeline
(m.passes lists them); m.kernels and m.plan, the generated kernels and the buffer plan.
nnc.tune(path, budget=60) measures the best configs of the model's tunable kernels into the
tuning cache that later compiles use. nnc.Trainer(path, optimizer="adam", lr=1e-3) compiles
one train step over the model's initializers: trainer.step(x, labels) returns the loss,
trainer.save("trained.onnx") writes the trained model.

nnc.load("dir/lib<name>.so") runs an artifact of `nnc compile --emit=lib` through
libnnc_runtime alone, binding the arrays in place.
"""
from ._nnc import Error, Model, TensorInfo, Trainer, compile, load_tensor, tune
from ._artifact import Artifact, load

__all__ = ["Artifact", "Error", "Model", "TensorInfo", "Trainer", "compile", "load",
           "load_tensor", "tune"]

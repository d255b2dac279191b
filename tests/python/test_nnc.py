"""The nnc Python package: compile, run on numpy arrays, errors, the README's session."""
import os
import re
import subprocess
import sys

import numpy
import pytest

import nnc

SHARED = os.environ.get("NNC_SHARED", os.path.join(os.path.dirname(__file__), "../../../shared"))
LENET = os.path.join(SHARED, "models", "lenet_b1")
TINY_CNN = os.path.join(os.path.dirname(__file__), "../../examples/models/tiny_cnn")

needs_lenet = pytest.mark.skipif(not os.path.exists(os.path.join(LENET, "model.onnx")),
                                 reason=f"LeNet not found at {LENET}")


def data_file(model_dir, name):
    return nnc.load_tensor(os.path.join(model_dir, "test_data_set_0", name))


@pytest.fixture(scope="module")
def lenet():
    return nnc.compile(os.path.join(LENET, "model.onnx"), target="cpu", threads=1)


@needs_lenet
def test_lenet_matches_its_data_file(lenet):
    x = data_file(LENET, "input_0.pb")
    want = data_file(LENET, "output_0.pb")
    outs = lenet(x)
    assert isinstance(outs, list) and len(outs) == 1
    numpy.testing.assert_allclose(outs[0], want, rtol=1e-3, atol=1e-7)
    assert outs[0].dtype == want.dtype and outs[0].shape == want.shape


@needs_lenet
def test_inputs_outputs_kernels_plan(lenet):
    (inp,) = lenet.inputs
    assert inp.dtype == numpy.float32
    assert inp.shape == data_file(LENET, "input_0.pb").shape
    assert inp.name in repr(inp)
    assert [o.shape for o in lenet.outputs] == [data_file(LENET, "output_0.pb").shape]
    assert lenet.target == "cpu"
    assert lenet.kernels and all(isinstance(k, str) and k for k in lenet.kernels)
    assert lenet.plan.startswith("buffer plan:") and "arena" in lenet.plan


@needs_lenet
def test_dict_by_input_name(lenet):
    x = data_file(LENET, "input_0.pb")
    (by_position,) = lenet(x)
    (by_name,) = lenet({lenet.inputs[0].name: x})
    numpy.testing.assert_array_equal(by_name, by_position)
    with pytest.raises(KeyError, match="no value for model input"):
        lenet({})
    with pytest.raises(KeyError, match="has no input 'nope'"):
        lenet({lenet.inputs[0].name: x, "nope": x})


@needs_lenet
def test_wrong_shape_raises_nnc_error(lenet):
    x = data_file(LENET, "input_0.pb")
    name = lenet.inputs[0].name
    with pytest.raises(nnc.Error, match=re.escape(f"input '{name}': expected f32[")):
        lenet(numpy.zeros(x.shape[:-1] + (x.shape[-1] + 3,), numpy.float32))
    with pytest.raises(nnc.Error, match=re.escape(f"input '{name}'")):
        lenet(numpy.zeros(x.shape[1:], numpy.float32))


@needs_lenet
def test_wrong_dtype_names_the_input(lenet):
    x = data_file(LENET, "input_0.pb")
    with pytest.raises(TypeError, match=re.escape(f"input '{lenet.inputs[0].name}'")):
        lenet(x.astype(numpy.float64))
    with pytest.raises(TypeError, match="takes 1 input"):
        lenet(x, x)


@needs_lenet
def test_non_contiguous_input_and_bytes_model(lenet):
    x = data_file(LENET, "input_0.pb")
    (want,) = lenet(x)
    # A transposed view of a transposed copy: same values, not C-contiguous.
    view = numpy.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)
    assert not view.flags.c_contiguous
    numpy.testing.assert_array_equal(lenet(view)[0], want)
    with open(os.path.join(LENET, "model.onnx"), "rb") as f:
        from_bytes = nnc.compile(f.read())
    numpy.testing.assert_array_equal(from_bytes(x)[0], want)


def test_bad_models_raise_nnc_error(tmp_path):
    with pytest.raises(nnc.Error, match="missing.onnx"):
        nnc.compile(str(tmp_path / "missing.onnx"))
    with pytest.raises(nnc.Error, match="<onnx bytes>: not a valid ONNX model"):
        nnc.compile(b"not an onnx model")
    with pytest.raises(nnc.Error, match="target"):
        nnc.compile(os.path.join(TINY_CNN, "model.onnx"), target="tpu")


GATHER_MODEL = """graph @g(%x: f32[3,2], %i: i64[2]) -> (f32[2,2]) {
  %y = gather(%x, %i) {axis = 0} : f32[2,2] @lookup
  return %y
}
"""


SCALE_MODEL = """graph @g(%x: f32[2,3], %s: f32[]) -> (f32[2,3]) {
  %y = mul(%x, %s) : f32[2,3] @scale
  return %y
}
"""


def test_scalar_input(tmp_path):
    # A 0-d array is a scalar input (numpy's ascontiguousarray would have made it [1]), as is
    # a Python float; a non-contiguous x beside it is copied.
    path = tmp_path / "scale.nir"
    path.write_text(SCALE_MODEL)
    model = nnc.compile(str(path))
    assert [i.shape for i in model.inputs] == [(2, 3), ()]
    x = numpy.arange(6, dtype=numpy.float32).reshape(3, 2).T
    want = x * numpy.float32(2.5)
    numpy.testing.assert_array_equal(model(x, numpy.array(2.5, numpy.float32))[0], want)
    numpy.testing.assert_array_equal(model({"x": x, "s": numpy.float32(2.5)})[0], want)
    with pytest.raises(nnc.Error, match="input 's'"):
        model(x, numpy.array([2.5], numpy.float32))
    if "NNC_BINARY" in os.environ:  # the same through an artifact (`nnc compile --emit=lib`)
        subprocess.run([os.environ["NNC_BINARY"], "compile", str(path), "-o", str(tmp_path),
                        "--emit=lib"], check=True, capture_output=True)
        art = nnc.load(tmp_path / "libscale.so")
        assert [i.shape for i in art.inputs] == [(2, 3), ()]
        numpy.testing.assert_array_equal(art(x, numpy.array(2.5, numpy.float32))[0], want)


@pytest.mark.parametrize("target", ["interp", "cpu"])
def test_index_out_of_range_raises_nnc_error(tmp_path, target):
    path = tmp_path / "gather.nir"
    path.write_text(GATHER_MODEL)
    model = nnc.compile(str(path), target=target)
    x = numpy.arange(6, dtype=numpy.float32).reshape(3, 2)
    numpy.testing.assert_array_equal(model(x, numpy.array([-1, 0]))[0], [[4, 5], [0, 1]])
    for bad in [3, -4, 1 << 40]:
        with pytest.raises(nnc.Error, match=re.escape(
                f"node 'lookup' (gather): index {bad} is out of range for an axis of size 3")):
            model(x, numpy.array([0, bad]))


def test_bundled_model_on_threads():
    # examples/models/tiny_cnn ships with the repository: this runs on a fresh clone alone.
    m = nnc.compile(os.path.join(TINY_CNN, "model.onnx"), threads=2)
    numpy.testing.assert_allclose(m(data_file(TINY_CNN, "input_0.pb"))[0],
                                  data_file(TINY_CNN, "output_0.pb"), rtol=1e-3, atol=1e-7)


def host_has_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            return "avx512_bf16" in f.read().split()
    except OSError:
        return False


@needs_lenet
def test_precision_bf16_close_to_fp32_or_refused(lenet):
    # LeNet's fully connected layers run with bf16 weights and operands (its convs stay fp32);
    # a host without AVX512-BF16 refuses the option, naming it.
    path = os.path.join(LENET, "model.onnx")
    if not host_has_bf16():
        with pytest.raises(nnc.Error, match="--precision bf16 needs AVX512-BF16"):
            nnc.compile(path, precision="bf16")
        return
    x = data_file(LENET, "input_0.pb")
    want = lenet(x)[0]
    got = nnc.compile(path, threads=1, precision="bf16")(x)[0]
    span = float(want.max() - want.min())
    diff = float(numpy.abs(got - want).max())
    assert 0 < diff <= 2e-2 * span
    assert numpy.argmax(got) == numpy.argmax(want)


@needs_lenet
def test_readme_python_session_runs_as_written(tmp_path):
    readme = os.environ.get("NNC_README", os.path.join(os.path.dirname(__file__), "../../README.md"))
    text = open(readme).read()
    block = re.search(r"<!-- python-example-begin -->\s*```python\n(.*?)```", text, re.S)
    assert block, "README has no python-example block"
    code = block.group(1)
    assert len(code.strip().splitlines()) == 5
    # Run from a folder beside which ../shared is the shared data, as from the repository root.
    os.symlink(os.path.abspath(SHARED), tmp_path / "shared")
    (tmp_path / "repo").mkdir()
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path / "repo", capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("True"), r.stdout


@needs_lenet
def test_calls_from_python_threads(lenet):
    import threading
    x = data_file(LENET, "input_0.pb")
    (want,) = lenet(x)
    got = [None] * 4

    def call(i):
        got[i] = lenet(x)[0]

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g in got:
        numpy.testing.assert_array_equal(g, want)


@needs_lenet
def test_load_artifact_through_the_runtime(tmp_path):
    # `nnc compile --emit=lib`, then nnc.load: libnnc_runtime's C ABI, inputs bound in place.
    if "NNC_BINARY" not in os.environ:
        pytest.skip("NNC_BINARY (the nnc CLI) not set: run through ctest's python_package")
    subprocess.run([os.environ["NNC_BINARY"], "compile", os.path.join(LENET, "model.onnx"),
                    "-o", str(tmp_path), "--emit=lib"], check=True, capture_output=True)
    art = nnc.load(tmp_path / "liblenet_b1.so")
    x = data_file(LENET, "input_0.pb")
    assert [(i.name, i.dtype, i.shape) for i in art.inputs] == [("input", x.dtype, x.shape)]
    (y,) = art(x)
    numpy.testing.assert_allclose(y, data_file(LENET, "output_0.pb"), rtol=1e-3, atol=1e-7)
    numpy.testing.assert_array_equal(art({"input": x})[0], y)
    with pytest.raises(nnc.Error, match="artifact runs 1x1x28x28 only"):
        art(numpy.zeros((1, 1, 28, 20), numpy.float32))
    with pytest.raises(TypeError, match="input 'input'"):
        art(x.astype(numpy.float64))
    with pytest.raises(nnc.Error):
        nnc.load(tmp_path / "missing.so")
    with pytest.raises(nnc.Error, match="profile=True"):
        art.profile()
    prof = nnc.load(tmp_path / "liblenet_b1.so", profile=True)
    prof(x)
    prof(x)
    kernels = prof.profile()
    assert kernels and all(name and ms >= 0 for name, ms in kernels)
    assert len({name for name, _ in kernels}) == len(kernels)


def test_inspect_after_a_pass():
    m = nnc.compile(os.path.join(TINY_CNN, "model.onnx"))
    passes = m.passes
    assert passes and all(isinstance(p, str) for p in passes)
    imported = m.inspect(after="import")
    compiled = m.inspect()
    assert imported != compiled and "graph" in imported
    # After the last pass of the pipeline: what was compiled (which also carries the fusion
    # groups that compiling marks).
    after_all = m.inspect(after=passes[-1])
    assert after_all.count("\n") == compiled.count("\n") and "fusion_group" in compiled
    with pytest.raises(nnc.Error, match="inspect\\(after='no-such-pass'\\): .*not in the pipeline"):
        m.inspect(after="no-such-pass")


def test_tune_then_compile_with_the_cache(tmp_path):
    cache = str(tmp_path / "tuning.db")
    model = os.path.join(TINY_CNN, "model.onnx")
    with pytest.raises(nnc.Error, match="input 'input' has the symbolic shape"):
        nnc.tune(model, budget=5, cache=cache)
    kernels = nnc.tune(model, budget=5, trials=2, cache=cache, shapes={"input": (2, 1, 8, 8)})
    assert kernels, "tiny_cnn has tunable kernels"
    for k in kernels:
        assert k["signature"] and k["uses"] >= 1 and k["best_ms"] > 0 and k["config"]
    assert os.path.getsize(cache) > 0
    m = nnc.compile(model, tuning_cache=cache)
    numpy.testing.assert_allclose(m(data_file(TINY_CNN, "input_0.pb"))[0],
                                  data_file(TINY_CNN, "output_0.pb"), rtol=1e-3, atol=1e-7)
    with pytest.raises(nnc.Error, match="only cpu and opencl kernels"):
        nnc.tune(model, target="interp", cache=cache)


def test_trainer_fits_digits_and_saves(tmp_path):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../scripts"))
    import train_data as td
    if not os.path.exists(td.DIGITS):
        pytest.skip(f"{td.DIGITS} is absent (python3-sklearn)")
    xs, ys = td.load_digits()
    xtr, ytr, xte, yte = td.split(xs, ys)
    xtr, xte = numpy.array(xtr, numpy.float32), numpy.array(xte, numpy.float32)
    ytr, yte = numpy.array(ytr, numpy.int64), numpy.array(yte, numpy.int64)
    sizes = [64, 128, 10]
    onnx_bytes = td.mlp_model(sizes, td.init_mlp(sizes, seed=0))
    t = nnc.Trainer(onnx_bytes, optimizer="adam", lr=0.003, batch=32, threads=1)
    before = {k: v.copy() for k, v in t.parameters.items()}
    assert before and "graph" in t.step_graph
    losses = []
    for epoch in range(8):
        for b in range(len(xtr) // 32):
            losses.append(t.step(xtr[b * 32:(b + 1) * 32], ytr[b * 32:(b + 1) * 32]))
    assert t.steps == len(losses)
    assert numpy.mean(losses[-20:]) < numpy.mean(losses[:20]) / 4, (losses[:20], losses[-20:])
    assert any(not numpy.array_equal(before[k], v) for k, v in t.parameters.items())
    out = tmp_path / "trained.onnx"
    t.save(str(out))
    m = nnc.compile(str(out))
    (logits,) = m(xte)  # the model's batch dim is symbolic: all held-out rows at once
    acc = float(numpy.mean(numpy.argmax(logits, axis=1) == yte))
    assert acc >= 0.9, acc
    with pytest.raises(TypeError, match="labels"):
        t.step(xtr[:32], ytr[:32].astype(numpy.float32))
    with pytest.raises(nnc.Error, match="optimizer"):
        nnc.Trainer(onnx_bytes, optimizer="lion")


def test_trainer_dropout_masks_follow_the_seed():
    """A training-mode Dropout before a MatMul, lr 0 on one batch: only the masks move the
    loss. Each step draws a new mask; the same seed gives the same losses, another others."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../scripts"))
    from onnxw import model, node, tensor, value_info
    rng = numpy.random.default_rng(0)
    w = rng.standard_normal(8 * 3).tolist()
    inits = [tensor("w", [8, 3], w), tensor("ratio", [], [0.5]),
             tensor("training", [], [True], data_type=9, fmt="?")]  # 9: ONNX's BOOL
    onnx_bytes = model([node("Dropout", ["x", "ratio", "training"], ["d"], "drop"),
                        node("MatMul", ["d", "w"], ["y"], "mm")],
                       [value_info("x", ["N", 8])], [value_info("y", ["N", 3])], inits)
    x = rng.standard_normal((4, 8)).astype(numpy.float32)
    labels = numpy.array([0, 1, 2, 0], numpy.int64)

    def losses(seed):
        t = nnc.Trainer(onnx_bytes, optimizer="sgd", lr=0.0, batch=4, threads=1, seed=seed)
        return [t.step(x, labels) for _ in range(5)]

    first = losses(1)
    assert len(set(first)) == len(first), first
    assert losses(1) == first
    assert losses(2) != first

"""NumPy round trips: every dtype, on cpu and sim devices, every shape kind."""

import numpy as np
import pytest

import sluice
from sluice import errors

from conftest import DEVICES, DTYPES, random_array

SHAPES = [(1,), (7,), (3, 4), (2, 3, 5), (0,), (0, 3), (3, 0, 2), (1, 1, 1, 1)]
DTYPE_NAMES = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64",
               "bool": "bool"}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_round_trip(ctx, rng, dtype, device, shape):
    a = random_array(rng, shape, dtype)
    t = sluice.tensor(a, device=device)
    assert t.shape == shape
    assert t.dtype == DTYPE_NAMES[dtype]
    assert t.device == device
    assert t.ndim == len(shape)
    assert t.size == a.size
    for back in (np.asarray(t), t.numpy(), np.array(t)):
        assert back.dtype == a.dtype
        assert back.shape == a.shape
        np.testing.assert_array_equal(back, a)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (0,), (4, 3), (2, 0)], ids=str)
def test_copy_sim0_sim1_cpu(ctx, rng, dtype, shape):
    a = random_array(rng, shape, dtype)
    t0 = sluice.tensor(a, device="sim:0")
    t1 = t0.to("sim:1")
    t2 = t1.to("cpu")
    assert (t0.device, t1.device, t2.device) == ("sim:0", "sim:1", "cpu")
    for t in (t1, t2):
        assert t.dtype == DTYPE_NAMES[dtype]
        np.testing.assert_array_equal(np.asarray(t), a)
    # The source is untouched by the copies.
    np.testing.assert_array_equal(np.asarray(t0), a)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_rank0_array(ctx, rng, dtype, device):
    a = np.asarray(random_array(rng, (), dtype), dtype=dtype)
    assert a.shape == ()
    t = sluice.tensor(a, device=device)
    assert t.shape == ()
    back = np.asarray(t)
    assert back.shape == () and back.dtype == a.dtype
    np.testing.assert_array_equal(back, a)


def test_copy_sim0_sim1_cpu_rank0(ctx):
    t = sluice.tensor(np.array(4.25, np.float32), device="sim:0").to("sim:1").to("cpu")
    assert t.shape == () and t.item() == 4.25


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_rank0_scalar(ctx, rng, dtype, device):
    # A NumPy scalar (not an array) and Python numbers make rank-0 tensors.
    value = np.asarray(random_array(rng, (), dtype), dtype=dtype)[()]
    t = sluice.tensor(value, device=device)
    assert t.shape == ()
    back = np.asarray(t)
    assert back.shape == ()
    assert back.item() == pytest.approx(value.item(), rel=1e-6)
    copied = t.to("sim:1").to("cpu")
    assert copied.shape == () and copied.item() == back.item()


def _non_contiguous(rng, dtype):
    base = random_array(rng, (6, 8), dtype)
    return {
        "transposed": base.T,
        "strided": base[::2, 1::3],
        "reversed": base[::-1, ::-2],
        "fortran": np.asfortranarray(base),
        "column": base[:, 3],
        "broadcast": np.broadcast_to(base[0], (3, 8)),
    }


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous_inputs(ctx, rng, dtype, device):
    for name, a in _non_contiguous(rng, dtype).items():
        t = sluice.tensor(a, device=device)
        assert t.shape == a.shape, name
        np.testing.assert_array_equal(np.asarray(t), a, err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
def test_rank0_item(ctx, device):
    assert sluice.tensor(np.float32(2.5), device=device).item() == 2.5
    assert sluice.tensor(np.int64(-7), device=device).item() == -7
    assert sluice.tensor(np.bool_(True), device=device).item() is True
    assert sluice.tensor(np.array([[3.0]]), device=device).item() == 3.0


def test_python_scalars_and_lists(ctx):
    assert sluice.tensor(1.5).dtype == "f32"          # Python floats become float32
    assert sluice.tensor([1.5, 2.0]).dtype == "f32"
    assert sluice.tensor([1, 2]).dtype == "i64"
    assert sluice.tensor([True, False]).dtype == "bool"
    assert sluice.tensor(np.array([1.5])).dtype == "f64"   # NumPy arrays keep their dtype
    assert sluice.tensor([1, 2], dtype="float64").dtype == "f64"
    assert sluice.tensor([[1, 2]], dtype=np.int32).shape == (1, 2)
    np.testing.assert_array_equal(np.asarray(sluice.tensor([[1, 2], [3, 4]])),
                                  [[1, 2], [3, 4]])


def test_tensor_from_tensor(ctx, rng):
    a = random_array(rng, (3, 2), "float64")
    t = sluice.tensor(sluice.tensor(a, device="sim:0"), device="sim:1")
    assert t.device == "sim:1"
    np.testing.assert_array_equal(np.asarray(t), a)


def test_default_device_of_context():
    context = sluice.Context(sim_devices=2, default_device="sim:1")
    t = sluice.tensor([1.0, 2.0], context=context)
    assert t.device == "sim:1"
    assert context.devices == ["cpu", "sim:0", "sim:1"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_dlpack_is_a_host_copy(ctx, rng, dtype, device):
    a = random_array(rng, (4, 3), dtype)
    t = sluice.tensor(a, device=device)
    assert t.__dlpack_device__() == (1, 0)
    back = np.from_dlpack(t)
    np.testing.assert_array_equal(back, a)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", DTYPES)
def test_astype_matches_numpy(ctx, rng, src, dst, device):
    if np.issubdtype(np.dtype(src), np.floating):
        a = (rng.standard_normal(12) * 5).astype(src)
    else:
        a = random_array(rng, (12,), src)
    t = sluice.tensor(a, device=device).astype(dst)
    assert t.dtype == DTYPE_NAMES[dst]
    assert t.device == device
    np.testing.assert_array_equal(np.asarray(t), a.astype(dst))
    # sluice.cast is the functional form.
    np.testing.assert_array_equal(np.asarray(sluice.cast(sluice.tensor(a), dst)), a.astype(dst))


@pytest.mark.parametrize("dtype", ["float16", "uint8", "int8", "int16", "uint32", "uint64",
                                   "complex64", "complex128"])
def test_unsupported_dtype_raises_invalid_argument(ctx, dtype):
    with pytest.raises(errors.InvalidArgumentError) as info:
        sluice.tensor(np.zeros((2, 2), dtype=dtype))
    assert info.value.code == "INVALID_ARGUMENT"
    assert "float32" in info.value.message  # the message lists what is supported
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("dtype", ["float16", "uint8", "complex64"])
def test_unsupported_dtype_argument_raises_invalid_argument(ctx, dtype):
    with pytest.raises(errors.InvalidArgumentError):
        sluice.tensor([1, 2, 3], dtype=dtype)


def test_unsupported_astype_raises_invalid_argument(ctx):
    with pytest.raises(errors.InvalidArgumentError):
        sluice.tensor([1.0, 2.0]).astype("float16")


def test_string_data_raises_invalid_argument_naming_dtype(ctx):
    with pytest.raises(errors.InvalidArgumentError) as info:
        sluice.tensor(np.array(["a", "bc"]))
    assert "dtype" in str(info.value)


def test_item_and_len(ctx):
    t = sluice.tensor(np.arange(6, dtype=np.int32).reshape(3, 2))
    assert len(t) == 3
    with pytest.raises(TypeError):
        len(sluice.tensor(1.0))


def test_item_of_many_elements_raises(ctx):
    with pytest.raises(errors.InvalidArgumentError):
        sluice.tensor([1.0, 2.0]).item()


def test_repr_names_device_and_values(ctx):
    text = repr(sluice.tensor(np.array([1.5, 2.5], np.float32), device="sim:1"))
    assert "sim:1" in text and "1.5" in text and "2.5" in text

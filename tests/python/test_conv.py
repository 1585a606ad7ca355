"""sluice.conv2d, sluice.max_pool2d and sluice.avg_pool2d (generated from the op table) against
NumPy loops, eagerly on cpu and sim: groups, strides, pads, dilations, ceil_mode and
count_include_pad; and conv2d's gradients (a bias added as [M, 1, 1]) against the closed
forms."""

import numpy as np
import pytest

import sluice

from conftest import DEVICES


def conv_ref(x, w, strides, pads, dilations, groups):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.zeros((n, m, oh, ow), dtype=np.float64)
    mg = m // groups
    for o in range(m):
        g = o // mg
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg,
                           i * dilations[0]:i * dilations[0] + strides[0] * (oh - 1) + 1:strides[0],
                           j * dilations[1]:j * dilations[1] + strides[1] * (ow - 1) + 1:strides[1]]
                out[:, o] += np.einsum("nchw,c->nhw", patch, w[o, :, i, j])
    return out


def pool_ref(x, kernel, strides, pads, ceil_mode, average, count_include_pad):
    n, c, h, w = x.shape

    def size(axis, length):
        span = length + pads[axis] + pads[axis + 2] - kernel[axis]
        out = (-(-span // strides[axis]) if ceil_mode else span // strides[axis]) + 1
        if ceil_mode and (out - 1) * strides[axis] >= length + pads[axis]:
            out -= 1
        return out

    oh, ow = size(0, h), size(1, w)
    out = np.zeros((n, c, oh, ow))
    for y in range(oh):
        for z in range(ow):
            h0, w0 = y * strides[0] - pads[0], z * strides[1] - pads[1]
            hs, ws = slice(max(h0, 0), min(h0 + kernel[0], h)), slice(max(w0, 0), min(w0 + kernel[1], w))
            window = x[:, :, hs, ws]
            if not average:
                out[:, :, y, z] = window.max(axis=(2, 3))
                continue
            if count_include_pad:
                rows = min(h0 + kernel[0], h + pads[2]) - h0
                cols = min(w0 + kernel[1], w + pads[3]) - w0
            else:
                rows, cols = window.shape[2], window.shape[3]
            out[:, :, y, z] = window.sum(axis=(2, 3)) / (rows * cols)
    return out


@pytest.mark.parametrize("device", DEVICES)
def test_conv2d_matches_numpy(ctx, rng, device):
    for strides, pads, dilations, groups in [([1, 1], [0, 0, 0, 0], [1, 1], 1),
                                              ([2, 1], [1, 0, 2, 1], [1, 2], 2)]:
        x = rng.standard_normal((2, 4, 7, 6))
        w = rng.standard_normal((6, 4 // groups, 3, 2))
        got = sluice.conv2d(sluice.tensor(x, device=device), sluice.tensor(w, device=device),
                            strides=strides, pads=pads, dilations=dilations, groups=groups)
        np.testing.assert_allclose(np.asarray(got), conv_ref(x, w, strides, pads, dilations, groups),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_pools_match_numpy(ctx, rng, device):
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    t = sluice.tensor(x, device=device)
    for ceil_mode in (False, True):
        args = dict(kernel=[3, 2], strides=[2, 2], pads=[1, 1, 1, 0], ceil_mode=ceil_mode)
        np.testing.assert_allclose(np.asarray(sluice.max_pool2d(t, **args)),
                                   pool_ref(x, [3, 2], [2, 2], [1, 1, 1, 0], ceil_mode, False, False),
                                   rtol=1e-6)
        for include in (False, True):
            np.testing.assert_allclose(
                np.asarray(sluice.avg_pool2d(t, count_include_pad=include, **args)),
                pool_ref(x, [3, 2], [2, 2], [1, 1, 1, 0], ceil_mode, True, include),
                rtol=1e-5, atol=1e-6)
    # strides default to the kernel, as in Paddle and PyTorch.
    assert sluice.max_pool2d(t, [2, 2]).shape == (2, 3, 3, 3)


@pytest.mark.parametrize("device", DEVICES)
def test_conv2d_gradients(ctx, rng, device):
    x = rng.standard_normal((2, 3, 5, 5))
    w = rng.standard_normal((4, 3, 1, 1))
    b = rng.standard_normal(4)
    xt = sluice.tensor(x, device=device, requires_grad=True)
    wt = sluice.tensor(w, device=device, requires_grad=True)
    bt = sluice.tensor(b, device=device, requires_grad=True)
    out = sluice.conv2d(xt, wt) + sluice.reshape(bt, [4, 1, 1])
    sluice.sum(out).backward()
    # A 1 x 1 convolution: d/dx = sum_m w[m, c]; d/dw[m, c] = sum x[:, c]; d/db = positions.
    np.testing.assert_allclose(np.asarray(xt.grad),
                               np.broadcast_to(w[:, :, 0, 0].sum(0)[None, :, None, None], x.shape),
                               rtol=1e-12)
    np.testing.assert_allclose(np.asarray(wt.grad)[:, :, 0, 0],
                               np.broadcast_to(x.sum(axis=(0, 2, 3)), (4, 3)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(bt.grad), np.full(4, 2 * 5 * 5), rtol=1e-12)

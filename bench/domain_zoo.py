"""The PyTorch models of bench/domain_models.py that no other script builds (issue 50's kinds).

Each constructor returns one export: a dict with
  module     the torch.nn.Module (eval mode, random weights: the caller seeds torch first);
  cases      [(case name, tuple of input tensors)], the first one traced;
  in_names, out_names, opset, dynamic_axes (None for a fixed-shape export);
  kind       "dense" (outputs compared element by element) or "detections" (rows of one set
             of detections: boxes, scores, labels, compared after sorting, as detect_models.py).
Batch norms are calibrated on a random input (detect_models.calibrate_batch_norms) so that
random weights do not shrink the activations to nothing."""

import math

from detect_models import calibrate_batch_norms


def _export(module, cases, in_names, out_names, opset=13, dynamic_axes=None, kind="dense"):
    module.eval()
    return {"module": module, "cases": cases, "in_names": in_names, "out_names": out_names,
            "opset": opset, "dynamic_axes": dynamic_axes, "kind": kind}


# ---- YOLO-style detector ---------------------------------------------------------------------

def _yolo_module(size=320, width=32, classes=80, nms=False, max_det=100, iou=0.45):
    """scripts/make_yolo_head.py's detector in PyTorch: five Conv 3x3 s2 + BN + SiLU stages,
    an FPN neck (nearest x2 upsample, concat, Conv 1x1 + SiLU), three detect-head convs and
    YOLOv5's box decode in the graph, output [1, boxes, 5 + classes]; with nms, the
    postprocess too: score = objectness x best class, boxes to corners, the 1000 best by
    TopK, torchvision's batched_nms (ONNX NonMaxSuppression) per class, the first max_det
    kept; outputs boxes [n, 4], scores [n], labels [n]."""
    import torch
    from torch import nn
    import torchvision

    def cbs(cin, cout, k, s):
        return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, bias=False),
                             nn.BatchNorm2d(cout), nn.SiLU())

    w, no = width, 5 + classes
    anchors = [[(10, 13), (16, 30), (33, 23)], [(30, 61), (62, 45), (59, 119)],
               [(116, 90), (156, 198), (373, 326)]]

    class Yolo(nn.Module):
        def __init__(self):
            super().__init__()
            self.s1, self.s2 = cbs(3, w, 3, 2), cbs(w, w, 3, 2)
            self.p3, self.p4, self.p5 = cbs(w, 2 * w, 3, 2), cbs(2 * w, 2 * w, 3, 2), \
                cbs(2 * w, 4 * w, 3, 2)
            self.n4, self.n3 = cbs(6 * w, 2 * w, 1, 1), cbs(4 * w, 2 * w, 1, 1)
            self.heads = nn.ModuleList(nn.Conv2d(c, 3 * no, 1) for c in (2 * w, 2 * w, 4 * w))
            for i in range(3):
                hw = size // (8 << i)
                gy, gx = torch.meshgrid(torch.arange(hw), torch.arange(hw), indexing="ij")
                self.register_buffer("grid%d" % i, torch.stack([gx, gy], -1).float()
                                     .reshape(1, 1, hw, hw, 2))
                self.register_buffer("anchor%d" % i, torch.tensor(anchors[i]).float()
                                     .reshape(1, 3, 1, 1, 2))

        def decode(self, i, h):
            hw = size // (8 << i)
            y = h.reshape(1, 3, no, hw, hw).permute(0, 1, 3, 4, 2).sigmoid()
            xy = (y[..., 0:2] * 2 - 0.5 + getattr(self, "grid%d" % i)) * (8 << i)
            wh = (y[..., 2:4] * 2) ** 2 * getattr(self, "anchor%d" % i)
            return torch.cat([xy, wh, y[..., 4:]], -1).reshape(1, 3 * hw * hw, no)

        def forward(self, x):
            p3 = self.p3(self.s2(self.s1(x)))
            p4 = self.p4(p3)
            p5 = self.p5(p4)
            up = nn.functional.interpolate
            n4 = self.n4(torch.cat([up(p5, scale_factor=2.0, mode="nearest"), p4], 1))
            n3 = self.n3(torch.cat([up(n4, scale_factor=2.0, mode="nearest"), p3], 1))
            pred = torch.cat([self.decode(i, self.heads[i](f))
                              for i, f in enumerate((n3, n4, p5))], 1)
            if not nms:
                return pred
            p = pred[0]
            cls_score, labels = p[:, 5:].max(1)
            scores = p[:, 4] * cls_score
            scores, top = scores.topk(1000)
            b, labels = p[top, :4], labels[top]
            boxes = torch.cat([b[:, :2] - b[:, 2:] / 2, b[:, :2] + b[:, 2:] / 2], 1)
            keep = torchvision.ops.batched_nms(boxes, scores, labels, iou)[:max_det]
            return boxes[keep], scores[keep], labels[keep]

    return Yolo()


def yolo(nms):
    def make():
        import torch
        m = _yolo_module(nms=nms)
        calibrate_batch_norms(m, torch.rand(1, 3, 320, 320))
        cases = [("image%d" % k, (torch.rand(1, 3, 320, 320),)) for k in (1, 2)]
        if nms:
            return _export(m, cases, ["images"], ["boxes", "scores", "labels"],
                           kind="detections")
        return _export(m, cases, ["images"], ["output"])
    return make


# ---- speech, Conformer ------------------------------------------------------------------------

def speech(lengths=(200, 120), dynamic=True):
    """Conv1d front end (80 mel bins -> 256 channels, kernel 11) + BN + ReLU, a 2-layer
    bidirectional GRU (hidden 256), a Linear to 29 symbols; one case per length, the length
    dynamic in the export or not (then one export per length: call once per length)."""
    def make():
        import torch
        from torch import nn

        class Speech(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Sequential(nn.Conv1d(80, 256, 11, padding=5),
                                          nn.BatchNorm1d(256), nn.ReLU())
                self.gru = nn.GRU(256, 256, num_layers=2, bidirectional=True,
                                  batch_first=True)
                self.fc = nn.Linear(512, 29)

            def forward(self, x):
                y, _ = self.gru(self.conv(x).transpose(1, 2))
                return self.fc(y)
        m = Speech()
        calibrate_batch_norms(m, torch.randn(1, 80, 200))
        cases = [("len%d" % t, (torch.randn(1, 80, t),)) for t in lengths]
        return _export(m, cases, ["features"], ["logits"],
                       dynamic_axes={"features": {2: "T"}, "logits": {1: "T"}} if dynamic
                       else None)
    return make


def conformer():
    """One Conformer block (d 256, 4 heads, FF 1024, conv kernel 31): half FF, self-attention
    (absolute positions: no relative encoding), the conv module (pointwise, GLU, depthwise,
    BN, SiLU, pointwise), half FF, LayerNorm; input [1, T, 256], T dynamic."""
    def make():
        import torch
        from torch import nn
        d, heads, ff, k = 256, 4, 1024, 31

        def ffn():
            return nn.Sequential(nn.LayerNorm(d), nn.Linear(d, ff), nn.SiLU(), nn.Linear(ff, d))

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.ff1, self.ff2 = ffn(), ffn()
                self.ln_att, self.qkv, self.out = nn.LayerNorm(d), nn.Linear(d, 3 * d), \
                    nn.Linear(d, d)
                self.ln_conv = nn.LayerNorm(d)
                self.pw1, self.dw = nn.Conv1d(d, 2 * d, 1), nn.Conv1d(d, d, k, padding=k // 2,
                                                                       groups=d)
                self.bn, self.pw2 = nn.BatchNorm1d(d), nn.Conv1d(d, d, 1)
                self.ln_out = nn.LayerNorm(d)

            def forward(self, x):
                x = x + 0.5 * self.ff1(x)
                q, kk, v = self.qkv(self.ln_att(x)).chunk(3, -1)
                split = lambda t: t.reshape(1, -1, heads, d // heads).transpose(1, 2)  # noqa
                q, kk, v = split(q), split(kk), split(v)
                a = (q @ kk.transpose(-1, -2) / math.sqrt(d // heads)).softmax(-1)
                x = x + self.out((a @ v).transpose(1, 2).reshape(1, -1, d))
                c = nn.functional.glu(self.pw1(self.ln_conv(x).transpose(1, 2)), dim=1)
                c = self.pw2(nn.functional.silu(self.bn(self.dw(c))))
                x = x + c.transpose(1, 2)
                return self.ln_out(x + 0.5 * self.ff2(x))
        m = Block()
        calibrate_batch_norms(m, torch.randn(1, 100, d))
        cases = [("len%d" % t, (torch.randn(1, t, d),)) for t in (100, 64)]
        return _export(m, cases, ["x"], ["y"], dynamic_axes={"x": {1: "T"}, "y": {1: "T"}})
    return make


# ---- BERT-base -------------------------------------------------------------------------------

def bert_base():
    """BERT-base (12 post-LN layers, d 768, 12 heads, FF 3072, GELU, vocab 30522, 512
    positions) with an attention mask (1 = token, 0 = padding: additive -10000 on the keys);
    outputs the last hidden states and the pooled [CLS]; batch and length dynamic."""
    def make():
        import torch
        from torch import nn
        d, heads, ff, layers, vocab = 768, 12, 3072, 12, 30522
        dh = d // heads

        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
                self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
                self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)

            def forward(self, x, bias):
                b = x.shape[0]
                split = lambda t: t.reshape(b, -1, heads, dh).transpose(1, 2)  # noqa: E731
                q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
                a = (q @ k.transpose(-1, -2) / math.sqrt(dh) + bias).softmax(-1)
                x = self.ln1(x + self.o((a @ v).transpose(1, 2).reshape(b, -1, d)))
                return self.ln2(x + self.fc2(nn.functional.gelu(self.fc1(x))))

        class Bert(nn.Module):
            def __init__(self):
                super().__init__()
                self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(512, d)
                self.wtt = nn.Embedding(2, d)
                self.ln = nn.LayerNorm(d, eps=1e-12)
                self.layers = nn.ModuleList(Layer() for _ in range(layers))
                self.pool = nn.Linear(d, d)

            def forward(self, ids, mask):
                pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
                x = self.ln(self.wte(ids) + self.wpe(pos) + self.wtt.weight[0])
                bias = (1.0 - mask[:, None, None, :].float()) * -10000.0
                for layer in self.layers:
                    x = layer(x, bias)
                return x, torch.tanh(self.pool(x[:, 0]))

        def inputs(b, n):
            ids = torch.randint(0, vocab, (b, n))
            mask = torch.ones(b, n, dtype=torch.int64)
            for r in range(1, b):  # every row after the first padded by r * n / (2 b)
                mask[r, n - r * n // (2 * b):] = 0
            return ids, mask
        cases = [("b%d_l%d" % bn, inputs(*bn)) for bn in ((1, 32), (2, 128), (4, 64))]
        return _export(Bert(), cases, ["input_ids", "attention_mask"], ["hidden", "pooled"],
                       dynamic_axes={"input_ids": {0: "B", 1: "L"},
                                     "attention_mask": {0: "B", 1: "L"},
                                     "hidden": {0: "B", 1: "L"}, "pooled": {0: "B"}})
    return make


# ---- dense prediction ------------------------------------------------------------------------

def _segmentation(name, sizes):
    """A torchvision segmentation model (21 classes), its 'out' map; height and width
    dynamic."""
    def make():
        import torch
        import torchvision

        class Seg(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = getattr(torchvision.models.segmentation, name)(
                    weights=None, weights_backbone=None, num_classes=21)

            def forward(self, x):
                return self.m(x)["out"]
        m = Seg()
        calibrate_batch_norms(m, torch.rand(1, 3, *sizes[0]))
        cases = [("%dx%d" % hw, (torch.rand(1, 3, *hw),)) for hw in sizes]
        return _export(m, cases, ["image"], ["out"],
                       dynamic_axes={"image": {2: "H", 3: "W"}, "out": {2: "H", 3: "W"}})
    return make


def fcn_resnet50():
    return _segmentation("fcn_resnet50", [(160, 160), (128, 192)])


def lraspp():
    return _segmentation("lraspp_mobilenet_v3_large", [(224, 224), (160, 256)])


def unet():
    """A UNet: four levels (32, 64, 128, 256 channels; two Conv 3x3 + BN + ReLU each), max
    pooling down, ConvTranspose 2x2 up, skip concats, a 1x1 conv to 2 classes; height and
    width dynamic (multiples of 8)."""
    def make():
        import torch
        from torch import nn

        def double(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout),
                                 nn.ReLU(), nn.Conv2d(cout, cout, 3, padding=1),
                                 nn.BatchNorm2d(cout), nn.ReLU())

        class UNet(nn.Module):
            def __init__(self):
                super().__init__()
                c = [32, 64, 128, 256]
                self.down = nn.ModuleList([double(3, c[0])] + [double(c[i], c[i + 1])
                                                               for i in range(3)])
                self.up = nn.ModuleList(nn.ConvTranspose2d(c[i + 1], c[i], 2, 2)
                                        for i in range(3))
                self.dec = nn.ModuleList(double(2 * c[i], c[i]) for i in range(3))
                self.head = nn.Conv2d(c[0], 2, 1)

            def forward(self, x):
                skips = []
                for i, block in enumerate(self.down):
                    x = block(x if i == 0 else nn.functional.max_pool2d(x, 2))
                    skips.append(x)
                for i in reversed(range(3)):
                    x = self.dec[i](torch.cat([self.up[i](x), skips[i]], 1))
                return self.head(x)
        m = UNet()
        calibrate_batch_norms(m, torch.rand(1, 3, 128, 128))
        cases = [("%dx%d" % hw, (torch.rand(1, 3, *hw),)) for hw in ((128, 128), (96, 160))]
        return _export(m, cases, ["image"], ["mask"],
                       dynamic_axes={"image": {2: "H", 3: "W"}, "mask": {2: "H", 3: "W"}})
    return make


def vae_decoder():
    """A Stable-Diffusion-style VAE decoder, smaller: latent [1, 4, h, w] -> Conv to 128, a
    ResNet block, a single-head spatial self-attention block, a ResNet block; three stages of
    (ResNet block, nearest x2 upsample, Conv) at 128, 128, 64 channels; GroupNorm(32) + SiLU,
    Conv to RGB [1, 3, 8h, 8w]; h and w dynamic."""
    def make():
        import torch
        from torch import nn

        class Res(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.n1, self.c1 = nn.GroupNorm(32, c), nn.Conv2d(c, c, 3, padding=1)
                self.n2, self.c2 = nn.GroupNorm(32, c), nn.Conv2d(c, c, 3, padding=1)

            def forward(self, x):
                h = self.c1(nn.functional.silu(self.n1(x)))
                return x + self.c2(nn.functional.silu(self.n2(h)))

        class Attn(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.norm = nn.GroupNorm(32, c)
                self.q, self.k, self.v, self.o = (nn.Conv2d(c, c, 1) for _ in range(4))
                self.c = c

            def forward(self, x):
                h = self.norm(x)
                q, k, v = (t.flatten(2) for t in (self.q(h), self.k(h), self.v(h)))
                a = (q.transpose(1, 2) @ k / math.sqrt(self.c)).softmax(-1)  # [1, HW, HW]
                y = (v @ a.transpose(1, 2)).reshape(x.shape)
                return x + self.o(y)

        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv_in = nn.Conv2d(4, 128, 3, padding=1)
                self.mid = nn.Sequential(Res(128), Attn(128), Res(128))
                stages = []
                for cin, cout in ((128, 128), (128, 128), (128, 64)):
                    stages += [Res(cin), nn.Upsample(scale_factor=2.0, mode="nearest"),
                               nn.Conv2d(cin, cout, 3, padding=1)]
                self.up = nn.Sequential(*stages)
                self.out = nn.Sequential(nn.GroupNorm(32, 64), nn.SiLU(),
                                         nn.Conv2d(64, 3, 3, padding=1))

            def forward(self, z):
                return self.out(self.up(self.mid(self.conv_in(z))))
        cases = [("%dx%d" % hw, (torch.randn(1, 4, *hw),)) for hw in ((16, 16), (12, 20))]
        return _export(Decoder(), cases, ["latent"], ["image"],
                       dynamic_axes={"latent": {2: "h", 3: "w"}, "image": {2: "H", 3: "W"}})
    return make


# ---- classifiers and recommenders ------------------------------------------------------------

def resnet50_b16():
    def make():
        import torch
        import torchvision
        m = torchvision.models.resnet50(weights=None)
        calibrate_batch_norms(m, torch.rand(4, 3, 224, 224))
        return _export(m, [("b16", (torch.rand(16, 3, 224, 224),))], ["image"], ["logits"])
    return make


def mlp_mixer():
    """MLP-Mixer S/16: 16x16 patches of 224x224 (196 tokens), d 512, 8 layers, token MLP 256,
    channel MLP 2048, GELU, 1000 classes."""
    def make():
        import torch
        from torch import nn
        d, tokens, layers = 512, 196, 8

        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
                self.tok = nn.Sequential(nn.Linear(tokens, 256), nn.GELU(), nn.Linear(256, tokens))
                self.ch = nn.Sequential(nn.Linear(d, 2048), nn.GELU(), nn.Linear(2048, d))

            def forward(self, x):
                x = x + self.tok(self.ln1(x).transpose(1, 2)).transpose(1, 2)
                return x + self.ch(self.ln2(x))

        class Mixer(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Conv2d(3, d, 16, 16)
                self.layers = nn.Sequential(*[Layer() for _ in range(layers)])
                self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, 1000)

            def forward(self, x):
                x = self.layers(self.stem(x).flatten(2).transpose(1, 2))
                return self.head(self.ln(x).mean(1))
        return _export(Mixer(), [("b1", (torch.rand(1, 3, 224, 224),))], ["image"], ["logits"])
    return make


def dlrm():
    """DLRM-style: 13 dense features through a bottom MLP (512, 256, 64), 8 embedding tables
    (10,000 x 64) each summed over 4 indices per sample (Gather + ReduceSum: the pooled
    EmbeddingBag), pairwise dot products of the 9 vectors (the 36 below the diagonal, picked
    by a constant index), a top MLP (512, 256, 1) and a sigmoid; batch dynamic."""
    def make():
        import torch
        from torch import nn
        tables, rows, dim, hot = 8, 10000, 64, 4

        class Dlrm(nn.Module):
            def __init__(self):
                super().__init__()
                self.bottom = nn.Sequential(nn.Linear(13, 512), nn.ReLU(), nn.Linear(512, 256),
                                            nn.ReLU(), nn.Linear(256, dim), nn.ReLU())
                self.emb = nn.ModuleList(nn.Embedding(rows, dim) for _ in range(tables))
                pairs = (tables + 1) * tables // 2
                self.top = nn.Sequential(nn.Linear(dim + pairs, 512), nn.ReLU(),
                                         nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 1))
                li, lj = torch.tril_indices(tables + 1, tables + 1, offset=-1)
                self.register_buffer("pick", li * (tables + 1) + lj)

            def forward(self, dense, sparse):
                x = self.bottom(dense)
                e = [x] + [t(sparse[:, i]).sum(1) for i, t in enumerate(self.emb)]
                t = torch.stack(e, 1)
                z = torch.bmm(t, t.transpose(1, 2)).flatten(1)[:, self.pick]
                return torch.sigmoid(self.top(torch.cat([x, z], 1)))

        def inputs(b):
            return torch.randn(b, 13), torch.randint(0, rows, (b, tables, hot))
        cases = [("b%d" % b, inputs(b)) for b in (32, 128)]
        return _export(Dlrm(), cases, ["dense", "sparse"], ["ctr"],
                       dynamic_axes={"dense": {0: "B"}, "sparse": {0: "B"}, "ctr": {0: "B"}})
    return make

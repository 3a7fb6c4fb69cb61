"""Each matrix-multiply kernel's work per µs from its operator's shapes, as the research fits read
it (flop_rate_power.py, tile_work_fit.py): the FLOPs of the CPU op that launched the kernel
(External id) where the trace has `record_shapes` (mm, addmm, bmm, baddbmm, convolutions forward
and backward, attention forward and backward; cuDNN RNNs are left out here, which emo's own
reader, trace/op_work.h, does count), or the kernel sweep's config name; spread over the op's
matrix-multiply kernels by duration. u = FLOPs / (d x peak), at most 1, with the H200 SXM's
dense peaks (NVIDIA's data sheet): tf32 where the kernel's name says so, fp32 for float inputs
otherwise, 16-bit for the rest."""
import re

PEAK = {"bf16": 989.4e12, "tf32": 494.7e12, "fp32": 66.9e12}


def prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def scalars(s):
    return [int(x) for x in re.findall(r"-?\d+", s or "")]


def conv_flops(inp, weight, stride, padding, dilation, groups):
    n, _, *spatial = inp
    o, cg, *kernel = weight
    out = [(h + 2 * p - d * (k - 1) - 1) // s + 1
           for h, k, s, p, d in zip(spatial, kernel, stride or [1] * 3, padding or [0] * 3, dilation or [1] * 3)]
    return 2 * n * o * prod(out) * cg * prod(kernel)


def op_flops(op):
    """FLOPs of one CPU op from its shapes, or None."""
    n, d, c = op["name"], op["dims"], op["concrete"]
    try:
        if n == "aten::mm":
            (m, k), (_, nn) = d[0], d[1]
            return 2 * m * k * nn
        if n in ("aten::addmm", "aten::_addmm_activation"):
            (m, k), (_, nn) = d[1], d[2]
            return 2 * m * k * nn
        if n == "aten::bmm":
            (b, m, k), (_, _, nn) = d[0], d[1]
            return 2 * b * m * k * nn
        if n == "aten::baddbmm":
            (b, m, k), (_, _, nn) = d[1], d[2]
            return 2 * b * m * k * nn
        if n == "aten::cudnn_convolution":  # (input, weight, padding, stride, dilation, groups, ...)
            return conv_flops(d[0], d[1], scalars(c[3]), scalars(c[2]), scalars(c[4]), scalars(c[5])[0])
        if n == "aten::convolution_backward":  # (grad_out, input, weight, bias_sizes, stride, padding,
            # dilation, transposed, output_padding, groups, output_mask)
            f = conv_flops(d[1], d[2], scalars(c[4]), scalars(c[5]), scalars(c[6]), scalars(c[9])[0])
            mask = re.findall(r"True|False", c[10])
            return f * max(1, sum(m == "True" for m in mask[:2]))
        if "attention" in n:
            four = [x for x in d if isinstance(x, list) and len(x) == 4]
            if len(four) < 2:
                return None
            back = "backward" in n
            q, k = (four[1], four[2]) if back and len(four) >= 3 else (four[0], four[1])
            b, h, sq, dh = q
            f = 4 * b * h * sq * k[2] * dh
            return 2.5 * f if back else f
    except (ValueError, IndexError, TypeError):
        return None
    return None


def sweep_flops(config):
    g = re.match(r"gemm_\w+?_(\d+)x(\d+)x(\d+)$", config)
    if g:
        m, k, nn = map(int, g.groups())
        return 2 * m * k * nn
    g = re.match(r"gemm_\w+?_(\d+)$", config)
    if g:
        return 2 * int(g.group(1)) ** 3
    g = re.match(r"bmm_\w+?_(\d+)x(\d+)$", config)
    if g:
        b, s = map(int, g.groups())
        return 2 * b * s ** 3
    return None


def is_matmul(op, kinds):
    k = kinds.get(op["name"])
    return op["cat"] == "kernel" and k is not None and (
        k["share_kind"] in ("gemm", "conv", "attention", "cuda_core_gemm"))


def peak(op, cpu):
    n = op["name"].lower()
    if "tf32" in n:
        return PEAK["tf32"]
    types = " ".join(cpu["types"]) if cpu else ""
    if "float" in types and "BFloat16" not in types and "Half" not in types:
        return PEAK["fp32"]
    if cpu is None and ("fp32" in n or "sgemm" in n or "f32f32_f32f32_f32" in n):
        return PEAK["fp32"]
    return PEAK["bf16"]


def annotate(loop, kinds):
    """Each matrix-multiply op's share of its dtype's peak, where its work is known."""
    by_ext = {}
    for op in loop["ops"]:
        op["u"] = None
        if is_matmul(op, kinds):
            by_ext.setdefault(op["ext"], []).append(op)
    cfg = loop["config"] and sweep_flops(loop["config"])
    for ext, group in by_ext.items():
        cpu = loop["cpu"].get(ext)
        f = op_flops(cpu) if cpu else cfg
        if not f:
            continue
        total = sum(o["dur"] for o in group)
        for o in group:
            p = PEAK["fp32"] if cpu is None and loop["config"].startswith("gemm_fp32") else peak(o, cpu)
            o["u"] = min(1.0, f * (o["dur"] / total) / (o["dur"] * 1e-6 * p))
            o["simt"] = p == PEAK["fp32"]


def peak_name(op):
    """The peak an annotated op's u is read against: fp32 (CUDA cores), tf32 or bf16."""
    return "fp32" if op["simt"] else ("tf32" if "tf32" in op["name"].lower() else "bf16")

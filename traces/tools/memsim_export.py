#!/usr/bin/env python3
"""memsim_export: record one training iteration of a torch.nn.Module as a memsim Trace (`memsim-trace` v1).

Every aten op of forward, loss, backward and optimizer step is recorded in execution order through a
TorchDispatchMode, with its measured time (CUDA events on a GPU, perf_counter on the CPU), the tensors it reads
and the tensors it creates, byte sizes counted per storage (a view or an in-place result is the tensor it aliases,
never a second allocation), tensor kinds, the op after which PyTorch really released each storage (`free_after`,
observed through weak references to storages), layer indices from the module hierarchy, flops for matmul /
convolution / attention and bytes_accessed. The trace's default-schedule peak and total op time are then compared
with what PyTorch reports for the same iteration. See traces/tools/README.md for the rules.

    /usr/bin/python3 traces/tools/memsim_export.py --model resnet50 --batch 64 --device cuda --out X.trace.json

`--models K` (K > 1) records K independent copies of the model fused horizontally as μ-TWO profiles them:
torch.func.stack_module_state stacks their parameters and buffers to [K, ...], one vmap over functional_call runs
the K forwards and losses on [K, batch, ...] data, the summed loss runs one backward and one optimizer steps the
stacked parameters. K = 1 is the plain, unfused iteration.

Runs on the CPU with torch 1.13 and on CUDA with torch 2.x.
"""

import argparse
import contextlib
import copy
import datetime
import gzip
import inspect
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

TOOL_NAME = "memsim_export.py"
TOOL_VERSION = 1

INITIALLY_RESIDENT = ("input", "weight", "optimizer_state")
ALLOCATOR_ROUNDING = 512  # the CUDA caching allocator rounds every block to this many bytes


# ----------------------------------------------------------------------------------------------------------------
# Models


class TokenEmbedding(nn.Module):
    """Token + learned position embedding, LayerNorm (BERT) or none (GPT), dropout."""

    def __init__(self, vocab, max_len, d_model, dropout, layer_norm):
        super().__init__()
        self.token = nn.Embedding(vocab, d_model)
        self.position = nn.Parameter(torch.randn(1, max_len, d_model) * 0.02)
        self.norm = nn.LayerNorm(d_model) if layer_norm else None
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids):
        x = self.token(ids) + self.position[:, : ids.shape[1]]
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x)


class EncoderBlock(nn.Module):
    """One nn.TransformerEncoderLayer; `causal` makes it a GPT-style decoder block (no cross-attention)."""

    def __init__(self, d_model, heads, d_ff, dropout, causal, norm_first, max_len):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model, heads, d_ff, dropout, activation="gelu", batch_first=True,
                                                norm_first=norm_first)
        self.causal = causal
        self.takes_is_causal = "is_causal" in inspect.signature(self.layer.forward).parameters
        if causal:
            mask = torch.triu(torch.full((max_len, max_len), float("-inf")), diagonal=1)
            self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        if not self.causal:
            return self.layer(x)
        seq = x.shape[1]
        mask = self.mask[:seq, :seq]
        if self.takes_is_causal:
            # torch 2.x: the hint lets scaled_dot_product_attention use its causal kernels.
            return self.layer(x, src_mask=mask, is_causal=True)
        return self.layer(x, src_mask=mask)


class LanguageModelHead(nn.Module):
    def __init__(self, d_model, vocab, bert_style):
        super().__init__()
        if bert_style:  # BERT's MLM head: dense + GELU + LayerNorm + decoder
            self.transform = nn.Sequential(nn.Linear(d_model, d_model), nn.GELU(), nn.LayerNorm(d_model))
            self.decoder = nn.Linear(d_model, vocab)
        else:  # GPT: final LayerNorm + untied decoder without bias
            self.transform = nn.LayerNorm(d_model)
            self.decoder = nn.Linear(d_model, vocab, bias=False)

    def forward(self, x):
        return self.decoder(self.transform(x))


def transformer_model(kind, layers, d_model, heads, d_ff, vocab, seq_len, dropout=0.1):
    bert = kind == "bert"
    blocks = [EncoderBlock(d_model, heads, d_ff, dropout, causal=not bert, norm_first=not bert, max_len=seq_len)
              for _ in range(layers)]
    return nn.Sequential(TokenEmbedding(vocab, seq_len, d_model, dropout, layer_norm=bert), *blocks,
                         LanguageModelHead(d_model, vocab, bert_style=bert))


class TokenLoss(nn.Module):
    """Cross-entropy over every position (an MLM / next-token loss with all positions scored)."""

    def __init__(self):
        super().__init__()
        self.loss = nn.CrossEntropyLoss()

    def forward(self, logits, labels):
        return self.loss(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


TORCHVISION_MODELS = {
    "resnet18": 224, "resnet50": 224, "resnet101": 224, "vgg16": 224, "inception_v3": 299, "densenet121": 224,
}
TRANSFORMER_DEFAULTS = {
    # layers, d_model, heads, d_ff, vocab, seq_len: BERT-base and GPT-2 small shapes
    "bert": (12, 768, 12, 3072, 30522, 512),
    "gpt": (12, 768, 12, 3072, 50257, 1024),
}
MODEL_NAMES = sorted(list(TORCHVISION_MODELS) + list(TRANSFORMER_DEFAULTS) + ["mlp"])


class Workload:
    """A model with its batch, loss and optimizer, ready for training iterations."""

    models = 1
    model_axis = 0  # extent of the leading model axis of batch tensors, weights and their state (0: none)

    def __init__(self, name, model, inputs, target, loss_fn, optimizer, description):
        self.name = name
        self.model = model
        self.inputs = inputs
        self.target = target
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.description = description
        self.optimizer_kind = None

    @property
    def batch(self):
        return int(self.inputs.shape[0])

    def named_parameters(self):
        return list(self.model.named_parameters())

    def named_buffers(self):
        return list(self.model.named_buffers())

    def parameters(self):
        return [param for _, param in self.named_parameters()]

    def loss(self, recorder=None):
        """Forward and loss; the recorder (if any) is told where the loss starts."""
        output = self.model(self.inputs)
        if recorder is not None:
            recorder.set_phase("loss")
        return self.loss_fn(output, self.target)


def functorch_api():
    """(vmap, functional_call, stack_module_state) from torch.func (torch 2.x) or functorch + torch.nn.utils.stateless
    (torch 1.13, which has no stack_module_state: stacked the same way, detached leaves that require grad)."""
    try:
        from torch.func import functional_call, stack_module_state, vmap

        return vmap, functional_call, stack_module_state
    except ImportError:
        from functorch import vmap
        from torch.nn.utils.stateless import functional_call

        def stack_module_state(models):
            params = {name: torch.stack([dict(m.named_parameters())[name].detach() for m in models]).requires_grad_()
                      for name, _ in models[0].named_parameters()}
            buffers = {name: torch.stack([dict(m.named_buffers())[name] for m in models])
                       for name, _ in models[0].named_buffers()}
            return params, buffers

        return vmap, functional_call, stack_module_state


class FusedWorkload(Workload):
    """K copies of one model fused with vmap: stacked parameters and buffers [K, ...], data [K, batch, ...], one
    loss (the sum of the K losses), one optimizer over the stacked parameters. `model` is the stateless base (on the
    meta device): functional_call runs its forward, so its module hooks fire as for K = 1."""

    def __init__(self, singles):
        first = singles[0]
        self.vmap, self.functional_call, stack_module_state = functorch_api()
        params, buffers = stack_module_state([work.model for work in singles])
        base = copy.deepcopy(first.model).to("meta")
        inputs = torch.stack([work.inputs for work in singles])
        target = torch.stack([work.target for work in singles])
        self.models = len(singles)
        self.model_axis = self.models  # K = 1 too: stacked [1, ...] tensors, vmap's own ops
        description = (f"fused {self.models} models with torch.func.vmap (stack_module_state + functional_call, "
                       f"per-model batch {first.batch}, data [K, batch, ...]; attention, if any, through the math SDPA "
                       f"backend): {first.description}")
        super().__init__(first.name, base, inputs, target, first.loss_fn, None, description)
        self.stacked_params = params
        self.stacked_buffers = buffers
        self.optimizer_kind = first.optimizer_kind
        self.optimizer, _ = make_optimizer(self.optimizer_kind, list(params.values()))

    @property
    def batch(self):
        return int(self.inputs.shape[1])

    def named_parameters(self):
        return list(self.stacked_params.items())

    def named_buffers(self):
        return list(self.stacked_buffers.items())

    def loss(self, recorder=None):
        def one_model(params, buffers, inputs, target):
            output = self.functional_call(self.model, {**params, **buffers}, (inputs,))
            if recorder is not None:
                recorder.set_phase("loss")  # vmap traces this function once: the phase switches once
            return self.loss_fn(output, target)

        # randomness="different": each model draws its own dropout masks.
        with math_attention(), flat_linear():
            losses = self.vmap(one_model, randomness="different")(self.stacked_params, self.stacked_buffers,
                                                                  self.inputs, self.target)
        return losses.sum()


@contextlib.contextmanager
def flat_linear():
    """F.linear on a 2-D view of its input while vmap runs. On torch 2.11 the batching rule of a linear with a
    batched (stacked) weight and an input of more than two dimensions broadcasts the weight over the input's leading
    axis: nn.MultiheadAttention's packed in-projection of a [seq, batch, d] input materialized the [K, seq, d, 3d]
    weight (6.75 GiB per layer for BERT b16 at K = 2, 110 GiB in all, an H200, 2026-11-26) and its backward a
    [seq, d, 3d] weight gradient. A fused kernel (HFTA's, μ-TWO's) folds the leading axes into the rows, as this
    does: for a contiguous input the reshape is a view."""
    original = torch.nn.functional.linear

    def linear(input, weight, bias=None):
        if input.dim() <= 2:
            return original(input, weight, bias)
        rows = original(input.reshape(-1, input.shape[-1]), weight, bias)
        return rows.reshape(*input.shape[:-1], rows.shape[-1])

    torch.nn.functional.linear = linear  # nn.Linear and multi_head_attention_forward look it up at each call
    try:
        yield
    finally:
        torch.nn.functional.linear = original


def math_attention():
    """Attention through the math SDPA backend (matmul + softmax) while vmap runs: on torch 2.11 with CUDA the
    memory-efficient kernel's backward refuses the layout vmap hands it ("LSE is not correctly aligned (strideH)",
    BERT and GPT at K = 2 on an H200, 2026-11-26). The backward follows the forward's choice, so the forward is
    enough. A no-op on a torch without backend selection (1.13)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.MATH])


def make_optimizer(kind, params):
    """(optimizer, description suffix). foreach=False: one update op per parameter, so each update op names the
    weight it changes."""
    if kind == "sgd":
        return (torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4, foreach=False),
                "; SGD momentum 0.9, weight decay 1e-4")
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, foreach=False), "; AdamW"
    raise SystemExit(f"memsim_export: unknown optimizer '{kind}' (valid: sgd, adamw)")


def build_fused_workload(args, device):
    """K single-model workloads with seeds seed, seed + 1, ... (model 0 is the K = 1 model with its data), fused."""
    singles = []
    for index in range(args.models):
        single_args = copy.copy(args)
        single_args.seed = args.seed + index
        singles.append(build_workload(single_args, device))
    fused = FusedWorkload(singles)
    del singles
    return fused


def build_workload(args, device):
    torch.manual_seed(args.seed)
    name = args.model
    batch = args.batch
    if name == "mlp":
        width = args.d_model or 128
        model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                              nn.Linear(width, 10))
        inputs = torch.randn(batch, 64)
        target = torch.randint(0, 10, (batch,))
        loss_fn = nn.CrossEntropyLoss()
        description = f"MLP 64-{width}-{width}-10"
        optimizer_kind = args.optimizer or "sgd"
    elif name in TORCHVISION_MODELS:
        import torchvision

        image = args.image_size or TORCHVISION_MODELS[name]
        classes = args.classes or 1000
        extra = {"aux_logits": False, "init_weights": False} if name == "inception_v3" else {}
        model = getattr(torchvision.models, name)(weights=None, num_classes=classes, **extra)
        inputs = torch.randn(batch, 3, image, image)
        target = torch.randint(0, classes, (batch,))
        loss_fn = nn.CrossEntropyLoss()
        description = f"torchvision {torchvision.__version__} {name}, {image}x{image} images, {classes} classes" + (
            ", aux_logits=False" if name == "inception_v3" else "")
        optimizer_kind = args.optimizer or "sgd"
    elif name in TRANSFORMER_DEFAULTS:
        layers, d_model, heads, d_ff, vocab, seq_len = TRANSFORMER_DEFAULTS[name]
        layers = args.layers or layers
        d_model = args.d_model or d_model
        heads = args.heads or heads
        d_ff = args.d_ff or (4 * d_model if args.d_model else d_ff)
        vocab = args.vocab or vocab
        seq_len = args.seq_len or seq_len
        model = transformer_model(name, layers, d_model, heads, d_ff, vocab, seq_len)
        inputs = torch.randint(0, vocab, (batch, seq_len))
        target = torch.randint(0, vocab, (batch, seq_len))
        loss_fn = TokenLoss()
        style = "BERT-style encoder (post-norm)" if name == "bert" else "GPT-style decoder (pre-norm, causal mask)"
        description = (f"{style} from nn.TransformerEncoderLayer: {layers} layers, d_model {d_model}, {heads} heads, "
                       f"d_ff {d_ff}, vocab {vocab}, seq_len {seq_len}, GELU, dropout 0.1, loss on every position")
        optimizer_kind = args.optimizer or "adamw"
    else:
        raise SystemExit(f"memsim_export: unknown model '{name}' (valid: {', '.join(MODEL_NAMES)})")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    model = model.to(device=device, dtype=dtype)
    model.train()
    inputs = inputs.to(device=device, dtype=dtype if inputs.is_floating_point() else inputs.dtype)
    target = target.to(device)
    optimizer, suffix = make_optimizer(optimizer_kind, model.parameters())
    description += suffix + " (foreach=False)"
    work = Workload(name, model, inputs, target, loss_fn, optimizer, description)
    work.optimizer_kind = optimizer_kind
    return work


def layer_units(model):
    """The modules whose order makes the layers: top-level children, with nn.Sequential / nn.ModuleList opened."""
    units = []

    def expand(module, prefix):
        for child_name, child in module.named_children():
            name = f"{prefix}{child_name}"
            if isinstance(child, (nn.Sequential, nn.ModuleList)):
                expand(child, name + ".")
            else:
                units.append((name, child))

    expand(model, "")
    return units or [("model", model)]


# ----------------------------------------------------------------------------------------------------------------
# Recording


def storage_of(tensor):
    return tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else tensor._storage()


def round_up(value, step):
    return (value + step - 1) // step * step


# Op.split: the dimensions each aten op may be split along (TSPLIT's sample- and parameter-wise splits). An op not
# listed (views, losses, optimizer steps, reductions over the batch) is not split. Batch norm is split only by
# channel: a batch split would change its statistics.
ELEMENTWISE = {"relu", "relu_", "threshold_backward", "add", "add_", "mul", "mul_", "div", "sub", "gelu",
               "gelu_backward", "native_dropout", "native_dropout_backward", "clone", "copy_", "tanh",
               "tanh_backward", "sigmoid", "sigmoid_backward", "hardtanh", "hardtanh_backward", "cat", "fill_",
               "zero_", "masked_fill", "where", "silu", "silu_backward", "pow", "neg", "rsub"}
SPLIT_TABLE = {
    **{name: ["batch"] for name in ELEMENTWISE},
    **{name: ["batch", "channel"] for name in ("convolution", "convolution_backward", "cudnn_convolution",
                                               "cudnn_convolution_backward", "_convolution")},
    **{name: ["channel"] for name in ("native_batch_norm", "native_batch_norm_backward", "cudnn_batch_norm",
                                      "cudnn_batch_norm_backward", "_native_batch_norm_legit",
                                      "_native_batch_norm_legit_functional")},
    **{name: ["batch", "channel"] for name in ("max_pool2d_with_indices", "max_pool2d_with_indices_backward",
                                               "avg_pool2d", "avg_pool2d_backward", "_adaptive_avg_pool2d",
                                               "_adaptive_avg_pool2d_backward", "mean")},
    **{name: ["batch"] for name in ("native_layer_norm", "native_layer_norm_backward", "_softmax",
                                    "_softmax_backward_data", "_log_softmax", "_log_softmax_backward_data",
                                    "embedding", "embedding_dense_backward")},
    **{name: ["batch", "channel"] for name in ("mm", "addmm", "bmm", "baddbmm")},
    **{name: ["batch", "head"] for name in ("_scaled_dot_product_efficient_attention",
                                            "_scaled_dot_product_efficient_attention_backward",
                                            "_scaled_dot_product_flash_attention",
                                            "_scaled_dot_product_flash_attention_backward")},
}


def tensor_layout(tensor, batch_extents, kind, weight_shapes=frozenset(), model_axis=0):
    """shape and batch_axis of a storage: the tensor's shape when it covers the storage, else the storage as a
    flat vector. For kinds that grow with the batch, the batch axis is the first of the two leading axes whose
    extent is the batch (or batch x sequence for token inputs: a flattened [batch * seq, d] activation), else the
    first axis whose extent is a multiple of the batch ([batch * heads, seq, d] in attention); a tensor shaped like
    a weight (or its transpose: a weight gradient before accumulation) has none. With K fused models
    (model_axis = K), a leading axis of extent K is the model axis: the batch axis is looked for after it."""
    element = tensor.element_size()
    nbytes = int(storage_of(tensor).nbytes())
    shape = list(tensor.shape) or [1]  # a scalar as [1]: an empty shape would read as "no shape"
    batch_axis = None
    if kind in ("input", "activation", "gradient") and tuple(shape) not in weight_shapes:
        first = 1 if model_axis and len(shape) > 1 and shape[0] == model_axis else 0
        batch_axis = next((axis for axis, extent in enumerate(shape[:first + 2]) if axis >= first and
                           extent in batch_extents), None)
        if batch_axis is None:
            batch = min(batch_extents, default=0)
            batch_axis = next((axis for axis, extent in enumerate(shape) if axis >= first and batch and extent and
                               extent % batch == 0), None)
    if math.prod(shape) * element != nbytes:
        shape = [nbytes // element] if nbytes % element == 0 else [nbytes]
        batch_axis = 0 if batch_axis is not None else None
    layout = {"shape": shape}
    if batch_axis is not None:
        layout["batch_axis"] = batch_axis
    return layout


def op_flops(name, in_tensors, out_tensors, args):
    """Multiply-add counted as 2 flops; None where unknown (elementwise, reductions...)."""
    try:
        shape = lambda t: list(t.shape)  # noqa: E731
        if name in ("mm", "addmm") and len(in_tensors) >= 2:
            a, b = (args[0], args[1]) if name == "mm" else (args[1], args[2])
            return 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
        if name in ("bmm", "baddbmm"):
            a, b = (args[0], args[1]) if name == "bmm" else (args[1], args[2])
            return 2.0 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
        if name == "convolution":
            weight, out = args[1], out_tensors[0]
            # weight is [out_channels, in_channels / groups, *kernel]
            return 2.0 * out.numel() * weight.shape[1] * math.prod(shape(weight)[2:])
        if name == "convolution_backward":
            grad_out, weight = args[0], args[2]
            mask = args[10] if len(args) > 10 else [True, True, True]
            forward = 2.0 * grad_out.numel() * weight.shape[1] * math.prod(shape(weight)[2:])
            return forward * (int(bool(mask[0])) + int(bool(mask[1])))
        if name.startswith("_scaled_dot_product") or name.startswith("_efficient_attention") or name.startswith(
                "_flash_attention"):
            q, k = args[0], args[1]
            if name.endswith("_backward"):
                q, k = args[1], args[2]  # (grad_out, query, key, value, ...)
            batch_heads = math.prod(shape(q)[:-2])
            forward = 4.0 * batch_heads * q.shape[-2] * k.shape[-2] * q.shape[-1]
            return forward * 2.5 if name.endswith("_backward") else forward
    except (AttributeError, IndexError, TypeError):
        return None
    return None


class Recorder:
    """What the dispatch mode sees: tensors by storage, ops, phases, layers, release points."""

    def __init__(self, device, units, model_axis=0):
        self.device = torch.device(device)
        self.model_axis = model_axis  # K fused models: tensors of the batch lead with a model axis of extent K
        # vmap refuses saved-tensor hooks, so a fused workload ties a backward op to the forward op that produced the latest
        # (in forward order) forward tensor it reads: op id -> (unit, module label) of forward ops.
        self.attribute_backward_by_inputs = model_axis > 0
        self.forward_origin = {}
        self.cuda = self.device.type == "cuda"
        self.tensors = []  # dicts: id, name, bytes, kind, (free_after)
        self.ops = []  # dicts as written, plus private fields starting with '_'
        self.key_to_tid = {}  # StorageImpl address -> tensor id, for storages alive (we hold weak refs)
        self.weakrefs = {}  # tensor id -> StorageWeakRef (non-resident, still alive)
        self.resident_refs = []  # weak refs that keep resident StorageImpl addresses unique
        self.producer = {}  # tensor id -> op id
        self.freed_before_op = {}  # tensor id -> op index at whose start its storage was found released
        self.saved_tids = set()
        self.external_tids = []
        self.skipped_host_ops = 0
        self.phase = "forward"
        self.unit_of_module = {}  # id(module) -> raw unit index (order of first execution)
        self.unit_names = []
        self.unit_depth = 0
        self.forward_unit = -1
        self.backward_unit = -1
        self.module_stack = []
        self.backward_module = ""
        self.weight_unit = {}  # tensor id of a weight -> raw unit that first read it
        self.weight_names = {}
        self.last_update_unit = 0
        self.events = []  # (op id, start event, end event) on CUDA
        self.allocated_after_last_op = None
        self.units = units
        self.unpack_detaches = 0  # detach ops that autograd runs after our unpack hook (tracing artifacts)
        self.state_param = {}  # optimizer state tensor id -> its parameter's tensor id
        self.view_ops = set()
        # ~0.2 ms at 2 GHz: longer than the CPU takes to launch one op
        self.busy_cycles = 400_000 if self.cuda and hasattr(torch.cuda, "_sleep") else 0
        self.batch_extents = set()  # batch (and batch x sequence for token inputs): how tensor_layout finds the axis
        self.weight_shapes = set()  # shapes of the weights and their transposes: never batch-proportional

    # -- pre-existing tensors ------------------------------------------------------------------------------------
    def register_resident(self, tensor, name, kind):
        if not self.on_device(tensor):
            return None
        storage = storage_of(tensor)
        key = storage._cdata
        if key in self.key_to_tid:
            return self.key_to_tid[key]
        tid = len(self.tensors)
        self.tensors.append({"id": tid, "name": name, "bytes": int(storage.nbytes()), "kind": kind,
                             **tensor_layout(tensor, self.batch_extents, kind, model_axis=self.model_axis)})
        self.key_to_tid[key] = tid
        self.resident_refs.append(StorageWeakRef(storage))
        if kind == "weight":
            self.weight_names[tid] = name
        return tid

    def on_device(self, tensor):
        if not isinstance(tensor, torch.Tensor) or tensor.device.type != self.device.type:
            return False
        if tensor.layout != torch.strided or tensor.device.type == "meta":
            return False
        return True

    # -- module hooks ----------------------------------------------------------------------------------------------
    def install_module_hooks(self, model):
        handles = []
        unit_ids = {id(module) for _, module in self.units}
        names = {id(module): name for name, module in self.units}

        def unit_pre(module, _inputs):
            if self.unit_depth == 0:
                key = id(module)
                if key not in self.unit_of_module:
                    self.unit_of_module[key] = len(self.unit_names)
                    self.unit_names.append(names[key])
                self.forward_unit = self.unit_of_module[key]
            self.unit_depth += 1

        def unit_post(_module, _inputs, _outputs):
            self.unit_depth -= 1

        for name, module in model.named_modules():
            label = name or "model"

            def pre(_module, _inputs, label=label):
                self.module_stack.append(label)

            def post(_module, _inputs, _outputs):
                if self.module_stack:
                    self.module_stack.pop()

            if id(module) in unit_ids:
                handles.append(module.register_forward_pre_hook(unit_pre))
            handles.append(module.register_forward_pre_hook(pre))
            handles.append(module.register_forward_hook(post))
            if id(module) in unit_ids:
                handles.append(module.register_forward_hook(unit_post))
        return handles

    # -- saved tensor hooks: tie backward nodes to the forward layer that saved their tensors ----------------------
    def pack(self, tensor):
        tid = self.key_to_tid.get(storage_of(tensor)._cdata) if self.on_device(tensor) else None
        if tid is not None:
            self.saved_tids.add(tid)
        module = self.module_stack[-1] if self.module_stack else ("loss" if self.phase == "loss" else "model")
        return (tensor, self.forward_unit, module)

    def unpack(self, packed):
        tensor, unit, module = packed
        if self.phase == "backward":
            self.backward_unit = unit
            self.backward_module = module
        self.unpack_detaches += 1
        return tensor

    def attribute_backward(self, input_ids):
        """Without saved-tensor hooks: the layer and module of a backward op are those of the latest forward op
        whose output it reads (the forward tensors a backward op reads are the ones autograd saved)."""
        origins = [self.producer[tid] for tid in input_ids if self.producer.get(tid) in self.forward_origin]
        if origins:
            self.saved_tids.update(tid for tid in input_ids if self.producer.get(tid) in self.forward_origin)
            self.backward_unit, self.backward_module = self.forward_origin[max(origins)]

    def set_phase(self, phase):
        self.phase = phase
        if phase == "backward":
            self.backward_unit = self.forward_unit
            self.backward_module = "loss"

    # -- release tracking -------------------------------------------------------------------------------------------
    def poll_releases(self, next_op):
        """Storages found released now were released after op next_op - 1."""
        if self.cuda:
            allocated = torch.cuda.memory_allocated(self.device)
            if allocated == self.allocated_after_last_op:
                return  # nothing was released since the last op (every allocation happens inside an op)
        dead = [tid for tid, ref in self.weakrefs.items() if ref.expired()]
        for tid in dead:
            ref = self.weakrefs.pop(tid)
            self.key_to_tid.pop(ref.cdata, None)
            self.freed_before_op[tid] = next_op

    # -- ops ------------------------------------------------------------------------------------------------------
    def tensor_id_for_read(self, tensor, op_id, func_name):
        storage = storage_of(tensor)
        key = storage._cdata
        tid = self.key_to_tid.get(key)
        if tid is None:
            # Created outside every recorded op (should not happen): it becomes a resident input, reported.
            tid = self.register_resident(tensor, f"external:{func_name}@op{op_id}", "input")
            self.external_tids.append(tid)
        else:
            grown = int(storage.nbytes())
            if grown > self.tensors[tid]["bytes"]:
                self.tensors[tid]["bytes"] = grown  # resized in place: account the largest size
                self.tensors[tid].update(
                    tensor_layout(tensor, self.batch_extents, self.tensors[tid]["kind"], self.weight_shapes,
                                  self.model_axis))
        return tid

    def current_unit(self):
        if self.phase in ("forward", "loss"):
            return self.forward_unit
        if self.phase == "backward":
            return self.backward_unit
        return self.last_update_unit

    def op_label(self, func_name):
        if self.phase == "forward":
            return f"{self.module_stack[-1] if self.module_stack else 'model'}:{func_name}"
        if self.phase == "loss":
            return f"loss:{func_name}"
        if self.phase == "backward":
            return f"{self.backward_module}:{func_name}"
        return f"optimizer:{func_name}"


class RecordingMode(TorchDispatchMode):
    def __init__(self, recorder):
        super().__init__()
        self.rec = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = self.dispatch(func, args, kwargs)
        if isinstance(out, (int, float, bool)) and len(func._schema.returns) == 1 and str(
                func._schema.returns[0].type) == "Tensor":
            # torch 1.13 hands a wrapped Python number (a scalar autograd saved) back as a Python number; the
            # dispatcher wants the tensor: detach of a scalar is the scalar.
            return args[0] if func.overloadpacket.__name__ == "detach" else torch.tensor(out)
        return out

    def dispatch(self, func, args, kwargs):
        kwargs = kwargs or {}
        rec = self.rec
        func_name = func.overloadpacket.__name__
        if func._schema.name.startswith("profiler::"):
            return func(*args, **kwargs)  # record_function bookkeeping, not part of the model
        if rec.unpack_detaches:
            rec.unpack_detaches -= 1
            if func_name == "detach":
                return func(*args, **kwargs)  # the detach autograd adds after a saved-tensor unpack hook
            rec.unpack_detaches = 0
        flat_args = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        device_args = [a for a in flat_args if rec.on_device(a)]
        op_id = len(rec.ops)
        rec.poll_releases(op_id)
        input_ids = []
        for tensor in device_args:
            tid = rec.tensor_id_for_read(tensor, op_id, func_name)
            if tid not in input_ids:
                input_ids.append(tid)
        schema_returns = func._schema.returns
        is_view = bool(schema_returns) and all(r.alias_info is not None and not r.alias_info.is_write
                                               for r in schema_returns)
        if rec.cuda:
            torch.cuda.reset_peak_memory_stats(rec.device)
            allocated_before = torch.cuda.memory_allocated(rec.device)
            if is_view:
                out = func(*args, **kwargs)  # metadata only: launches no kernel
            else:
                if rec.busy_cycles:
                    # Keep the GPU busy while the CPU launches the op, so that the events time the op's kernels
                    # back to back, as in an untraced iteration where the GPU runs ahead of Python.
                    torch.cuda._sleep(rec.busy_cycles)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                out = func(*args, **kwargs)
                end.record()
            peak_during = torch.cuda.max_memory_allocated(rec.device)
        else:
            begin = time.perf_counter()
            out = func(*args, **kwargs)
            elapsed = time.perf_counter() - begin
        flat_out = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        device_out = [o for o in flat_out if rec.on_device(o)]
        if not device_args and not device_out:
            rec.skipped_host_ops += 1  # host-side bookkeeping of a GPU run (e.g. AdamW's CPU step counter)
            return out
        output_ids = []
        new_bytes = 0
        for tensor in device_out:
            storage = storage_of(tensor)
            key = storage._cdata
            tid = rec.key_to_tid.get(key)
            if tid is not None:
                if tid not in input_ids and tid not in output_ids:
                    input_ids.append(tid)  # writes into an existing storage (out=, resize): it touches it
                continue
            tid = len(rec.tensors)
            kind = {"forward": "activation", "loss": "activation", "backward": "gradient", "update": "other"}[
                rec.phase]
            nbytes = int(storage.nbytes())
            rec.tensors.append({"id": tid, "name": f"{rec.op_label(func_name)}#{op_id}.out{len(output_ids)}",
                                "bytes": nbytes, "kind": kind,
                                **tensor_layout(tensor, rec.batch_extents, kind, rec.weight_shapes, rec.model_axis)})
            rec.key_to_tid[key] = tid
            rec.weakrefs[tid] = StorageWeakRef(storage)
            rec.producer[tid] = op_id
            output_ids.append(tid)
            new_bytes += round_up(nbytes, ALLOCATOR_ROUNDING)
        if rec.phase == "forward":
            for tid in input_ids:
                if rec.tensors[tid]["kind"] == "weight" and tid not in rec.weight_unit:
                    rec.weight_unit[tid] = rec.forward_unit
        if rec.phase == "backward" and rec.attribute_backward_by_inputs:
            rec.attribute_backward(input_ids)
        if rec.phase == "update":
            params = [rec.state_param.get(t, t) for t in input_ids]
            units = [rec.weight_unit[t] for t in params if t in rec.weight_unit]
            if units:
                rec.last_update_unit = max(units)
        op = {"id": op_id, "name": rec.op_label(func_name), "type": func_name, "phase": rec.phase,
              "_unit": rec.current_unit(), "inputs": input_ids, "outputs": output_ids, "workspace_bytes": 0,
              "time_s": 0.0}
        if rec.phase == "update":
            touched = [rec.weight_names[rec.state_param.get(t, t)] for t in input_ids
                       if rec.state_param.get(t, t) in rec.weight_names]
            if touched:
                op["name"] = f"optimizer[{touched[0]}]:{func_name}"
        flops = None if is_view else op_flops(func_name, device_args, device_out, args)
        if flops is not None:
            op["flops"] = float(flops)
        if rec.phase in ("forward", "backward") and func_name in SPLIT_TABLE:
            op["split"] = SPLIT_TABLE[func_name]
        op["bytes_accessed"] = 0.0 if is_view else float(
            sum(t.numel() * t.element_size() for t in device_args) +
            sum(t.numel() * t.element_size() for t in device_out))
        if rec.cuda:
            op["workspace_bytes"] = max(0, int(peak_during - allocated_before - new_bytes))
            if is_view:
                rec.view_ops.add(op_id)  # launches no kernel: no GPU time
            else:
                rec.events.append((op_id, start, end))
            rec.allocated_after_last_op = torch.cuda.memory_allocated(rec.device)
        else:
            op["time_s"] = elapsed
        if rec.attribute_backward_by_inputs and rec.phase in ("forward", "loss"):
            rec.forward_origin[op_id] = (op["_unit"], op["name"].rsplit(":", 1)[0])
        rec.ops.append(op)
        return out


# ----------------------------------------------------------------------------------------------------------------
# One iteration


def train_iteration(work, recorder=None):
    """zero_grad, forward, loss, backward, step. Locals die on return, as in a training loop."""
    work.optimizer.zero_grad(set_to_none=True)
    if recorder is None:
        loss = work.loss()
        loss.backward()
        work.optimizer.step()
        return
    # vmap refuses saved-tensor hooks: the recorder then attributes backward ops by the tensors they read.
    hooks = (contextlib.nullcontext() if recorder.attribute_backward_by_inputs else
             torch.autograd.graph.saved_tensors_hooks(recorder.pack, recorder.unpack))
    with hooks:
        recorder.set_phase("forward")
        loss = work.loss(recorder)
    recorder.set_phase("backward")
    loss.backward()
    del loss
    recorder.set_phase("update")
    work.optimizer.step()


def synchronize(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def measure_iterations(work, device, repeat):
    """Median wall time of `repeat` untraced iterations and the framework's own peak for one of them."""
    cuda = torch.device(device).type == "cuda"
    times = []
    report = {}
    for i in range(repeat):
        work.optimizer.zero_grad(set_to_none=True)
        synchronize(device)
        if cuda:
            if i == 0:
                torch.cuda.reset_peak_memory_stats(device)
                report["allocated_at_start_bytes"] = torch.cuda.memory_allocated(device)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            train_iteration(work)
            end.record()
            torch.cuda.synchronize(device)
            times.append(start.elapsed_time(end) / 1e3)
            if i == 0:
                report["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
        else:
            begin = time.perf_counter()
            train_iteration(work)
            times.append(time.perf_counter() - begin)
    report["iteration_time_s"] = statistics.median(times)
    report["iteration_times_s"] = times
    return report


def cpu_allocator_peak(work):
    """Peak bytes above the iteration start, summed from the CPU allocator's own reports (the legacy profiler's
    memory records, in the order they happened). None where this torch has no legacy profiler."""
    try:
        from torch.autograd import _disable_profiler_legacy, _enable_profiler_legacy
        from torch.autograd.profiler_legacy import profile as legacy_profile
    except ImportError:
        return None
    work.optimizer.zero_grad(set_to_none=True)
    _enable_profiler_legacy(legacy_profile(profile_memory=True).config())
    try:
        train_iteration(work)
    finally:
        records = _disable_profiler_legacy()
    # A CPU iteration runs forward and backward on the calling thread: one ordered list of records.
    # (Memory records carry no usable timestamp, so their order is what we have.)
    threads_with_memory = [thread for thread in records if any(r.kind() == "memory_alloc" for r in thread)]
    if len(threads_with_memory) != 1:
        return None
    in_use = peak = 0
    for entry in threads_with_memory[0]:
        if entry.kind() == "memory_alloc":
            in_use += entry.cpu_memory_usage()
            peak = max(peak, in_use)
    return peak


def record(work, device, warmup=1, repeat=3):
    """Warm up, measure untraced iterations, then record one traced iteration. Returns (trace dict, report)."""
    for _ in range(warmup):
        train_iteration(work)
    synchronize(device)
    measured = measure_iterations(work, device, repeat)
    if torch.device(device).type == "cpu":
        measured["allocator_peak_above_start_bytes"] = cpu_allocator_peak(work)

    units = layer_units(work.model)
    recorder = Recorder(device, units, work.model_axis)
    per_model_inputs = work.inputs.shape[1:] if work.model_axis else work.inputs.shape
    recorder.batch_extents = {work.batch}
    if not work.inputs.is_floating_point() and len(per_model_inputs) == 2:  # token ids [batch, seq]
        recorder.batch_extents.add(int(per_model_inputs[0] * per_model_inputs[1]))
    work.optimizer.zero_grad(set_to_none=True)
    names = {}
    for param in work.parameters():
        recorder.weight_shapes.update({tuple(param.shape), tuple(reversed(param.shape))})
        if work.model_axis:  # a per-model weight gradient may come transposed behind the model axis
            recorder.weight_shapes.add((param.shape[0], *reversed(param.shape[1:])))
    for name, param in work.named_parameters():
        names[id(param)] = name
        recorder.register_resident(param, name, "weight")
    for name, buffer in work.named_buffers():
        recorder.register_resident(buffer, f"buffer:{name}", "weight")
    param_tids = {id(p): recorder.key_to_tid.get(storage_of(p)._cdata) for p in work.parameters()}
    for param, state in work.optimizer.state.items():
        for key, value in sorted(state.items()):
            if isinstance(value, torch.Tensor):
                tid = recorder.register_resident(value, f"optimizer.{key}[{names.get(id(param), '?')}]",
                                                 "optimizer_state")
                if tid is not None and param_tids.get(id(param)) is not None:
                    recorder.state_param[tid] = param_tids[id(param)]
    recorder.register_resident(work.inputs, "input", "input")
    recorder.register_resident(work.target, "target", "input")
    resident_tids = len(recorder.tensors)

    handles = recorder.install_module_hooks(work.model)
    synchronize(device)
    if recorder.cuda:
        recorder.allocated_after_last_op = torch.cuda.memory_allocated(device)
    try:
        with RecordingMode(recorder):
            train_iteration(work, recorder)
            recorder.poll_releases(len(recorder.ops))  # releases after the last op (locals of the step)
    finally:
        for handle in handles:
            handle.remove()
    synchronize(device)
    if recorder.cuda:
        for op_id, start, end in recorder.events:
            recorder.ops[op_id]["time_s"] = start.elapsed_time(end) / 1e3
    recorder.allocated_after_last_op = None
    recorder.poll_releases(len(recorder.ops))
    trace = finish_trace(work, recorder, device)
    report = validate(trace, measured, recorder, resident_tids)
    return trace, report


def finish_trace(work, recorder, device):
    ops = recorder.ops
    last_op = len(ops) - 1
    # Kinds: the parameters' .grad storages are weight gradients.
    for param in work.parameters():
        if param.grad is not None and recorder.on_device(param.grad):
            tid = recorder.key_to_tid.get(storage_of(param.grad)._cdata)
            if tid is not None and recorder.tensors[tid]["kind"] == "gradient":
                recorder.tensors[tid]["kind"] = "weight_grad"
                recorder.tensors[tid].pop("batch_axis", None)
    # Release points: found released at the start of op k => released after op k - 1; alive at the end => last op.
    for tensor in recorder.tensors:
        if tensor["kind"] in INITIALLY_RESIDENT:
            continue
        tid = tensor["id"]
        before = recorder.freed_before_op.get(tid, last_op + 1)
        tensor["free_after"] = max(recorder.producer[tid], min(before - 1, last_op))
    # Layers: raw units in order of first execution; a unit that creates no tensor in the forward pass (an
    # in-place ReLU, say) joins the unit before it, so that each layer hands one tensor to the next.
    created = {}
    for op in ops:
        if op["phase"] == "forward" and op["outputs"]:
            created[op["_unit"]] = True
    layer_of_unit = {}
    layer = 0
    for unit in range(len(recorder.unit_names)):
        if unit > 0 and created.get(unit):
            layer += 1
        layer_of_unit[unit] = layer
    layer_of_unit[-1] = 0
    for op in ops:
        op["layer"] = layer_of_unit.get(op.pop("_unit"), 0)
    layer_names = {}
    for unit, name in enumerate(recorder.unit_names):
        layer_names.setdefault(layer_of_unit[unit], []).append(name)
    ordered_ops = []
    for op in ops:
        entry = {key: op[key] for key in ("id", "name", "type", "phase", "layer", "inputs", "outputs",
                                          "workspace_bytes", "time_s")}
        for key in ("flops", "bytes_accessed", "split"):
            if key in op:
                entry[key] = op[key]
        ordered_ops.append(entry)
    dtype = str(work.parameters()[0].dtype).replace("torch.", "")
    dtype = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(dtype, dtype)
    notes = "layers: " + "; ".join(f"{layer}={'+'.join(names)}" for layer, names in sorted(layer_names.items()))
    if work.model_axis:
        notes = (f"fused {work.models} models with torch.func.vmap: every tensor of the batch is [K={work.models}, "
                 f"batch, ...] (batch_axis is the per-model batch axis), weights, weight gradients and optimizer "
                 f"state are stacked [K, ...]; " + notes)
    trace = {
        "format": "memsim-trace",
        "version": 1,
        "name": f"{work.name}-b{work.batch}" + (f"-k{work.models}" if work.model_axis else ""),
        "source": {
            "tool": f"{TOOL_NAME} v{TOOL_VERSION} (torch {torch.__version__})",
            "device": device_description(device),
            "dtype": dtype,
            "batch": work.batch,
            "date": datetime.date.today().isoformat(),
            "model": work.description,
        },
        "tensors": recorder.tensors,
        "ops": ordered_ops,
        "notes": notes,
    }
    if work.models > 1:  # samples per iteration count every model (memsim reads it; written only when > 1)
        trace["source"]["models"] = work.models
    return trace


def device_description(device):
    device = torch.device(device)
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return f"{props.name} ({props.total_memory / 2**30:.1f} GiB, CUDA {torch.version.cuda})"
    return f"cpu ({platform_processor()}, {torch.get_num_threads()} threads)"


def platform_processor():
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


# ----------------------------------------------------------------------------------------------------------------
# Default schedule (the same rules as memsim's traces/src/views.cpp)


def default_schedule(trace):
    """Peak bytes under the default schedule: outputs allocated when produced, released after
    max(free_after, last use) (or the last use, or right away if never read; weight gradients stay), inputs /
    weights / optimizer state resident throughout; workspace counted while its op runs."""
    tensors, ops = trace["tensors"], trace["ops"]
    produced_by = [None] * len(tensors)
    last_use = [None] * len(tensors)
    for op in ops:
        for tid in op["inputs"]:
            last_use[tid] = op["id"]
        for tid in op["outputs"]:
            produced_by[tid] = op["id"]
    released_after_op = [[] for _ in ops]
    resident = 0
    for tensor in tensors:
        tid = tensor["id"]
        if tensor["kind"] in INITIALLY_RESIDENT:
            resident += tensor["bytes"]
            continue
        if "free_after" in tensor:
            release = max(tensor["free_after"], last_use[tid] if last_use[tid] is not None else tensor["free_after"])
        elif last_use[tid] is not None:
            release = last_use[tid]
        elif tensor["kind"] != "weight_grad" and produced_by[tid] is not None:
            release = produced_by[tid]
        else:
            release = None
        if release is not None and produced_by[tid] is not None:
            released_after_op[release].append(tid)
    in_use = peak = resident
    peak_op = 0
    for op in ops:
        in_use += sum(tensors[tid]["bytes"] for tid in op["outputs"])
        during = in_use + op["workspace_bytes"]
        if during > peak:
            peak, peak_op = during, op["id"]
        in_use -= sum(tensors[tid]["bytes"] for tid in released_after_op[op["id"]])
    return {"resident_bytes": resident, "peak_bytes": peak, "peak_op": peak_op,
            "total_time_s": sum(op["time_s"] for op in ops)}


def validate(trace, measured, recorder, resident_count):
    schedule = default_schedule(trace)
    kinds = {}
    for tensor in trace["tensors"]:
        kinds[tensor["kind"]] = kinds.get(tensor["kind"], 0) + tensor["bytes"]
    report = {
        "model": trace["name"],
        "ops": len(trace["ops"]),
        "tensors": len(trace["tensors"]),
        "layers": 1 + max((op["layer"] for op in trace["ops"]), default=0),
        "bytes_by_kind": kinds,
        "saved_for_backward_bytes": sum(trace["tensors"][t]["bytes"] for t in recorder.saved_tids
                                        if trace["tensors"][t]["kind"] not in INITIALLY_RESIDENT),
        "trace_resident_bytes": schedule["resident_bytes"],
        "trace_peak_bytes": schedule["peak_bytes"],
        "trace_peak_op": schedule["peak_op"],
        "trace_peak_op_name": trace["ops"][schedule["peak_op"]]["name"] if trace["ops"] else "",
        "sum_op_time_s": schedule["total_time_s"],
        "external_tensors": len(recorder.external_tids),
        "skipped_host_ops": recorder.skipped_host_ops,
    }
    report.update(measured)
    report["time_ratio"] = report["sum_op_time_s"] / report["iteration_time_s"] if report["iteration_time_s"] else 0
    if "max_memory_allocated_bytes" in measured:
        report["reference"] = "torch.cuda.max_memory_allocated"
        report["reference_peak_bytes"] = measured["max_memory_allocated_bytes"]
        report["untraced_at_start_bytes"] = measured["allocated_at_start_bytes"] - schedule["resident_bytes"]
    elif measured.get("allocator_peak_above_start_bytes") is not None:
        report["reference"] = "resident tensors + CPU allocator reports (legacy profiler)"
        report["reference_peak_bytes"] = schedule["resident_bytes"] + measured["allocator_peak_above_start_bytes"]
        report["untraced_at_start_bytes"] = 0
    else:
        report["reference"] = "none available"
        report["reference_peak_bytes"] = 0
        report["untraced_at_start_bytes"] = 0
    report["peak_ratio"] = (report["trace_peak_bytes"] / report["reference_peak_bytes"]
                            if report["reference_peak_bytes"] else 0.0)
    return report


def human_bytes(value):
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= size:
            return f"{value / size:.3f} {unit}"
    return f"{value} B"


def format_report(report):
    lines = [
        f"{report['model']}: {report['ops']} ops, {report['tensors']} tensors, {report['layers']} layers",
        "  bytes by kind: " + ", ".join(f"{k} {human_bytes(v)}" for k, v in sorted(report["bytes_by_kind"].items())),
        f"  saved for backward (autograd hooks): {human_bytes(report['saved_for_backward_bytes'])}",
        f"  peak: trace default schedule {report['trace_peak_bytes']} B = {human_bytes(report['trace_peak_bytes'])} "
        f"at op {report['trace_peak_op']} '{report['trace_peak_op_name']}' (resident "
        f"{human_bytes(report['trace_resident_bytes'])}) vs {report['reference']} {report['reference_peak_bytes']} B "
        f"= {human_bytes(report['reference_peak_bytes'])}: ratio {report['peak_ratio']:.4f}",
    ]
    if report["untraced_at_start_bytes"]:
        lines.append(f"  allocated at iteration start but in no traced tensor: "
                     f"{human_bytes(report['untraced_at_start_bytes'])}")
    lines.append(f"  time: sum of op times {report['sum_op_time_s'] * 1e3:.2f} ms vs measured iteration "
                 f"{report['iteration_time_s'] * 1e3:.2f} ms (median of {len(report['iteration_times_s'])}): "
                 f"ratio {report['time_ratio']:.4f}")
    if report["external_tensors"] or report["skipped_host_ops"]:
        lines.append(f"  {report['external_tensors']} tensors came from outside any op; "
                     f"{report['skipped_host_ops']} host-only ops skipped")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------------
# Output


def trace_json_text(trace):
    """Compact, deterministic JSON: one tensor / op per line."""
    head = {k: v for k, v in trace.items() if k not in ("tensors", "ops")}
    dump = lambda v: json.dumps(v, separators=(",", ":"), sort_keys=False)  # noqa: E731
    parts = ["{" + dump(head)[1:-1] + ',"tensors":[\n']
    parts.append(",\n".join(dump(t) for t in trace["tensors"]))
    parts.append('\n],"ops":[\n')
    parts.append(",\n".join(dump(op) for op in trace["ops"]))
    parts.append("\n]}\n")
    return "".join(parts)


def round_times(trace, digits=6):
    """Keep 6 significant digits of times: CUDA events resolve about half a microsecond."""
    for op in trace["ops"]:
        op["time_s"] = float(f"{op['time_s']:.{digits}g}")
    return trace


def write_trace(trace, path):
    text = trace_json_text(trace).encode()
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    if path.endswith(".gz"):
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as out:
            out.write(text)
    else:
        with open(path, "wb") as out:
            out.write(text)


def set_device_model(trace, model):
    """Name the device as memsim's machine presets do; keep what torch reported in source.notes."""
    if model:
        source = trace["source"]
        source["notes"] = (f"recorded on {source['device']}; device set to the matching machine preset's GPU model")
        source["device"] = model


def check_note(report):
    """The exporter's agreement figures, appended to the trace's notes."""
    return (f"; checked: default-schedule peak {report['trace_peak_bytes']} B vs {report['reference']} "
            f"{report['reference_peak_bytes']} B (ratio {report['peak_ratio']:.4f}); sum of op times "
            f"{report['sum_op_time_s']:.6f} s vs untraced iteration {report['iteration_time_s']:.6f} s "
            f"(ratio {report['time_ratio']:.4f})")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model", required=True, help="one of: " + ", ".join(MODEL_NAMES))
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    parser.add_argument("--out", required=True, help="trace path (.trace.json, or .trace.json.gz to gzip)")
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"])
    parser.add_argument("--optimizer", choices=["sgd", "adamw"], help="default: sgd for CNNs, adamw for transformers")
    parser.add_argument("--warmup", type=int, default=None, help="untraced iterations first (default 1 CPU, 2 GPU)")
    parser.add_argument("--repeat", type=int, default=3, help="untraced iterations timed for the comparison")
    parser.add_argument("--image-size", type=int, help="torchvision models: input height and width")
    parser.add_argument("--classes", type=int, help="torchvision models: classes")
    parser.add_argument("--layers", type=int, help="bert/gpt: blocks")
    parser.add_argument("--d-model", type=int, help="bert/gpt: width (mlp: hidden width)")
    parser.add_argument("--heads", type=int)
    parser.add_argument("--d-ff", type=int)
    parser.add_argument("--vocab", type=int)
    parser.add_argument("--seq-len", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", type=int, default=1, help="K: record K copies of the model fused with vmap "
                        "(stacked parameters, data [K, batch, ...]; model i seeded seed + i); 1: no fusion")
    parser.add_argument("--date", help="source.date (default: today)")
    parser.add_argument("--device-model", help="source.device: the GPU model of the machine preset this device is "
                        "(e.g. H100-80GB-SXM), so memsim uses the measured times there; the full name goes to "
                        "source.notes")
    parser.add_argument("--report", help="also write the comparison as JSON here")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    device = args.device
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("memsim_export: --device cuda but torch sees no GPU")
    if args.models < 1:
        raise SystemExit("memsim_export: --models must be at least 1")
    work = build_workload(args, device) if args.models == 1 else build_fused_workload(args, device)
    warmup = args.warmup if args.warmup is not None else (2 if torch.device(device).type == "cuda" else 1)
    trace, report = record(work, device, warmup=warmup, repeat=args.repeat)
    if args.date:
        trace["source"]["date"] = args.date
    set_device_model(trace, args.device_model)
    round_times(trace)
    trace["notes"] += check_note(report)
    write_trace(trace, args.out)
    print(format_report(report))
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")
    if args.report:
        with open(args.report, "w") as out:
            json.dump(report, out, indent=1, sort_keys=True)
    return trace, report


if __name__ == "__main__":
    main()

"""Block-sparse attention for PyTorch: AttnLayout (which key blocks each query block attends to),
block_sparse_attention (FlashAttention-style forward over a layout, a torch.library custom op with a fake
kernel so that torch.compile traces it) and topk_block_layout (the top-k block gate, also a custom op).

Layouts follow libbsk's bsk_attn_layout (include/bsk.h), which keeps tiles as FlexAttention's BlockMask
does: per (batch, head, query block) two sorted lists of key blocks, FULL tiles (nothing inside masked)
and PARTIAL tiles (the element mask applies: the causal rule and the key length). The arrays are int32
torch tensors, counts [batch, heads, mq] and indices [batch, heads, mq, capacity]; batch and heads are 1
when the layout is shared. Calls run on the caller's current CUDA stream without host synchronisation.
"""
import functools
from typing import Optional, Tuple

import torch

from . import _bsk
from . import _dlpack
from .ops import _launch, _pair, _same_device, _to_int32

_ORDERS = {"bshd": 0, "bhsd": 1}
# Raised when something differentiates through the attention backward itself (double backward).
BACKWARD_MESSAGE = ("bsk.block_sparse_attention: the attention backward (bsk_attention_backward) is not itself "
                    "differentiable: double backward / create_graph=True through it is not implemented")


def _order(layout_order):
    try:
        return _ORDERS[layout_order]
    except (KeyError, TypeError):
        raise ValueError(f"layout_order must be 'bshd' ([batch, seq, heads, dim]) or 'bhsd' ([batch, heads, seq, "
                         f"dim]), got {layout_order!r}") from None


def _dims(t, bhsd):
    """(batch, seq, heads, dim) of a 4-D attention tensor in the given order."""
    if t.dim() != 4:
        names = "batch, heads, seq, dim" if bhsd else "batch, seq, heads, dim"
        raise _dlpack.error("BSK_ERR_SHAPE_MISMATCH",
                            f"attention tensors are 4-D [{names}], got shape {tuple(t.shape)}")
    b, x, y, d = t.shape
    return (b, y, x, d) if bhsd else (b, x, y, d)


def _cdiv(a, b):
    return -(-a // b)


def _attn_blocks(block_size):
    """(block_q, block_k) of an attention block size, each in the kernels' range 1..1024 (BSKError otherwise)."""
    bq, bk = _pair(block_size)
    if not (1 <= bq <= 1024 and 1 <= bk <= 1024):
        raise _dlpack.error("BSK_ERR_INVALID_ARGUMENT", f"block size {bq}x{bk} is out of range (1..1024)")
    return bq, bk


def _device_index(device):
    if device.type != "cuda":
        return -1
    return device.index if device.index is not None else torch.cuda.current_device()


def _list_mask(count, idx, nb):
    """Bool [..., nb]: the key blocks a (count, idx) list holds. Indices >= nb (keys past the end) drop out."""
    cap = idx.shape[-1]
    valid = torch.arange(cap, device=idx.device) < count[..., None].long()
    target = torch.where(valid, idx.long().clamp(0, nb), nb)  # invalid slots go to a spare column
    m = torch.zeros((*count.shape, nb + 1), dtype=torch.bool, device=idx.device)
    m.scatter_(-1, target, True)
    return m[..., :nb]


def _lists_from_mask(m):
    """(count int32 [...], idx int32 [..., nb]) of a bool [..., nb] mask, indices ascending (a stable sort of
    the kept blocks first; the slots past the count hold the others and are never read)."""
    count = m.sum(-1, dtype=torch.int32)
    idx = torch.argsort(m.to(torch.int8), dim=-1, descending=True, stable=True).to(torch.int32)
    return count.contiguous(), idx.contiguous()


class AttnLayout:
    """Which (query block, key block) tiles block_sparse_attention computes: libbsk's bsk_attn_layout over
    torch int32 tensors.

    full_count / part_count: [batch, heads, mq]; full_idx / part_idx: [batch, heads, mq, capacity] (sorted
    key block numbers; slots past a count are ignored). batch / heads are 1 for a layout shared by every
    batch entry / head. `is_causal` and `causal_offset` are the element mask block_sparse_attention applies
    by default with this layout (the builders record what they were given).

    Builders: dense, causal, local (sliding window + global blocks), from_mask (a bool block mask),
    from_block_mask (a FlexAttention BlockMask), topk_block_layout / nn.TopKBlockGate (data-dependent).
    Layouts from the C builders live in memory libbsk allocated (moved to a GPU with bsk_attn_layout_clone);
    the tensors here view it without copies and keep it alive.
    """

    def __init__(self, full_count, full_idx, part_count, part_idx, seq_q, seq_k, block_size, *, causal=False,
                 causal_offset=0, validate=True, _handle=None):
        for name, t, nd in (("full_count", full_count, 3), ("full_idx", full_idx, 4), ("part_count", part_count, 3),
                            ("part_idx", part_idx, 4)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"AttnLayout: {name} must be a torch.Tensor, got {type(t).__name__}")
            if t.dim() != nd:
                dims = "[batch, heads, mq]" if nd == 3 else "[batch, heads, mq, capacity]"
                raise _dlpack.error("BSK_ERR_SHAPE_MISMATCH",
                                    f"AttnLayout: {name} must be {nd}-D {dims}, got shape {tuple(t.shape)}")
        self.full_count = _to_int32(full_count, "full_count")
        self.full_idx = _to_int32(full_idx, "full_idx")
        self.part_count = _to_int32(part_count, "part_count")
        self.part_idx = _to_int32(part_idx, "part_idx")
        _same_device("AttnLayout", full_count=self.full_count, full_idx=self.full_idx, part_count=self.part_count,
                     part_idx=self.part_idx)
        self.seq_q, self.seq_k = int(seq_q), int(seq_k)
        self.block_q, self.block_k = _pair(block_size)
        self.is_causal, self.causal_offset = bool(causal), int(causal_offset)
        self._handle = _handle
        shape = tuple(self.full_count.shape)
        if tuple(self.part_count.shape) != shape or tuple(self.full_idx.shape[:3]) != shape or \
                tuple(self.part_idx.shape) != tuple(self.full_idx.shape):
            shapes = ", ".join(str(tuple(t.shape)) for t in (self.full_count, self.full_idx, self.part_count,
                                                             self.part_idx))
            raise _dlpack.error("BSK_ERR_SHAPE_MISMATCH", "AttnLayout: counts must be [batch, heads, mq] and indices "
                                f"[batch, heads, mq, capacity] alike; got {shapes}")
        if self.block_q >= 1 and shape[2] != _cdiv(self.seq_q, self.block_q):
            raise _dlpack.error("BSK_ERR_SHAPE_MISMATCH", f"AttnLayout: {shape[2]} query blocks, but seq_q "
                                f"{self.seq_q} in blocks of {self.block_q} makes {_cdiv(self.seq_q, self.block_q)}")
        if validate:
            self.validate()

    # ---- facts
    @property
    def batch(self):
        return int(self.full_count.shape[0])

    @property
    def heads(self):
        return int(self.full_count.shape[1])

    @property
    def mq(self):
        return int(self.full_count.shape[2])

    @property
    def nb(self):
        return _cdiv(self.seq_k, self.block_k)

    @property
    def capacity(self):
        return int(self.full_idx.shape[3])

    @property
    def block_size(self):
        return self.block_q, self.block_k

    @property
    def device(self):
        return self.full_count.device

    def _tuple(self):
        return (self.seq_q, self.seq_k, self.block_q, self.block_k, self.batch, self.heads, self.capacity,
                self.full_count.detach(), self.full_idx.detach(), self.part_count.detach(), self.part_idx.detach())

    def __repr__(self):
        return (f"AttnLayout(seq_q={self.seq_q}, seq_k={self.seq_k}, block_size={self.block_size}, batch={self.batch}, "
                f"heads={self.heads}, capacity={self.capacity}, is_causal={self.is_causal}, device={self.device})")

    # ---- checks and counts (these copy device arrays to the host: they synchronize)
    def _host_call(self, fn):
        if self.device.type == "cuda":
            with torch.cuda.device(self.device):
                # The library copies with a synchronous copy on the legacy stream: finish pending writes first.
                torch.cuda.current_stream().synchronize()
                return fn(self._tuple(), dlpack_stream=-1)
        return fn(self._tuple())

    def validate(self):
        """Full structural check (bsk_attn_layout_validate): counts in 0..capacity, indices in range, sorted,
        no tile in both lists. Raises BSKError (BSK_ERR_INVALID_BSR for malformed lists)."""
        self._host_call(_bsk.attn_layout_validate)
        return self

    def tiles(self):
        """(full, partial): numbers of tiles over every layout and query block."""
        return self._host_call(_bsk.attn_layout_tiles)

    @property
    def density(self):
        """Kept tiles / all tiles."""
        full, part = self.tiles()
        total = self.batch * self.heads * self.mq * self.nb
        return (full + part) / total if total else 0.0

    def to_mask(self):
        """Bool [batch, heads, mq, nb]: the kept tiles (either list)."""
        nb = self.nb
        return _list_mask(self.full_count, self.full_idx, nb) | _list_mask(self.part_count, self.part_idx, nb)

    # ---- moves
    def to(self, device):
        """This layout on `device`. A layout in libbsk-allocated memory moves with bsk_attn_layout_clone
        (synchronous); one over torch tensors moves as the tensors do."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device == self.device:
            return self
        if self._handle is not None and device.type in ("cpu", "cuda"):
            return AttnLayout._from_handle(self._handle.clone(device=_device_index(device)), self.is_causal,
                                           self.causal_offset)
        return AttnLayout(*(t.to(device) for t in (self.full_count, self.full_idx, self.part_count, self.part_idx)),
                          self.seq_q, self.seq_k, self.block_size, causal=self.is_causal,
                          causal_offset=self.causal_offset, validate=False)

    def cuda(self, device=None):
        return self.to(torch.device("cuda") if device is None else torch.device("cuda", device)
                       if isinstance(device, int) else device)

    def cpu(self):
        return self.to("cpu")

    # ---- builders
    @classmethod
    def _from_handle(cls, handle, causal, causal_offset, device=None):
        if device is not None:
            device = torch.device(device)
            if device.type == "cuda":
                handle = handle.clone(device=_device_index(device))
            elif device.type != "cpu":
                raise _dlpack.error("BSK_ERR_UNSUPPORTED", f"AttnLayout: device {device} is not supported")
        arrays = [torch.from_dlpack(handle.export(i)) for i in range(4)]
        return cls(*arrays, handle.seq_q, handle.seq_k, (handle.block_q, handle.block_k), causal=causal,
                   causal_offset=causal_offset, validate=False, _handle=handle)

    @classmethod
    def dense(cls, seq_q, seq_k, block_size, *, device=None):
        """Every tile (the last key block is partial when seq_k is not a multiple of the block size)."""
        bq, bk = _pair(block_size)
        return cls._from_handle(_bsk.attn_layout_dense(int(seq_q), int(seq_k), bq, bk), False, 0, device)

    @classmethod
    def causal(cls, seq_q, seq_k, block_size, causal_offset=0, *, device=None):
        """The tiles on or below the diagonal k <= q + causal_offset (0: top-left aligned; seq_k - seq_q:
        bottom-right, as for a KV cache); block_sparse_attention then applies the causal mask by default."""
        bq, bk = _pair(block_size)
        return cls._from_handle(_bsk.attn_layout_causal(int(seq_q), int(seq_k), bq, bk, int(causal_offset)), True,
                                int(causal_offset), device)

    @classmethod
    def local(cls, seq_q, seq_k, block_size, window_left, window_right=0, global_blocks=0, *, causal=False,
              causal_offset=0, device=None):
        """Sliding window: query block i keeps key blocks i'-window_left .. i'+window_right around its
        diagonal key block i', plus `global_blocks` global blocks (every query block keeps key blocks
        0..global_blocks-1, and query blocks 0..global_blocks-1 keep every key block: BigBird / Longformer
        global tokens). With causal, only the causal tiles, and the causal mask applies by default."""
        bq, bk = _pair(block_size)
        h = _bsk.attn_layout_local(int(seq_q), int(seq_k), bq, bk, int(window_left), int(window_right),
                                   int(global_blocks), bool(causal), int(causal_offset))
        return cls._from_handle(h, bool(causal), int(causal_offset), device)

    @classmethod
    def from_mask(cls, mask, seq_q, seq_k, block_size, *, causal=False, causal_offset=0, batch=None, heads=None,
                  device=None):
        """The tiles where a bool block mask is set: mask [mq, nb], [batch*heads or 1, mq, nb] (with batch= or
        heads= to split a first dimension > 1; alone it is taken as heads) or [batch, heads, mq, nb]. Tiles
        with no element the causal rule allows are dropped. The result goes to `device` (default: the
        mask's)."""
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"AttnLayout.from_mask: mask must be a torch.Tensor, got {type(mask).__name__}")
        if device is None:
            device = mask.device
        bq, bk = _attn_blocks(block_size)  # before the block counts below divide by them
        if mask.dim() == 2:
            b, h = 1, 1
        elif mask.dim() == 3:
            n = int(mask.shape[0])
            if batch is None and heads is None:
                b, h = 1, n
            elif heads is not None:
                h = int(heads)
                b = n // h if h > 0 and n % h == 0 else -1
            else:
                b = int(batch)
                h = n // b if b > 0 and n % b == 0 else -1
            if b < 1 or h < 1 or (batch is not None and b != int(batch)) or (heads is not None and h != int(heads)):
                raise _dlpack.error("BSK_ERR_SHAPE_MISMATCH", f"AttnLayout.from_mask: a first dimension of {n} does "
                                    f"not split into batch={batch} x heads={heads}")
        elif mask.dim() == 4:
            b, h = int(mask.shape[0]), int(mask.shape[1])
        else:
            raise _dlpack.error("BSK_ERR_SHAPE_MISMATCH", f"AttnLayout.from_mask: mask must be 2-D to 4-D, got shape "
                                f"{tuple(mask.shape)}")
        mq, nb = _cdiv(int(seq_q), bq), _cdiv(int(seq_k), bk)
        if tuple(mask.shape[-2:]) != (mq, nb):
            raise _dlpack.error("BSK_ERR_SHAPE_MISMATCH", f"AttnLayout.from_mask: mask's last dimensions are "
                                f"{tuple(mask.shape[-2:])}; seq {seq_q} x {seq_k} in {bq}x{bk} blocks needs "
                                f"({mq}, {nb})")
        host = mask.detach().to("cpu", torch.bool).contiguous()
        handle = _bsk.attn_layout_from_mask(int(seq_q), int(seq_k), bq, bk, b, h, host, bool(causal),
                                            int(causal_offset))
        return cls._from_handle(handle, bool(causal), int(causal_offset), device)

    @classmethod
    def from_block_mask(cls, block_mask, seq_q=None, seq_k=None):
        """A FlexAttention BlockMask's tiles, as they are: kv_num_blocks / kv_indices become the partial tiles,
        full_kv_num_blocks / full_kv_indices the full ones; its BLOCK_SIZE (default 128) becomes ours.
        Indices are re-sorted (libbsk wants ascending lists); key blocks past seq_k are dropped; a tile in both
        lists counts as full.

        libbsk cannot run the BlockMask's mask_mod: inside partial tiles it applies its own element mask, the
        key length and (with causal=True in block_sparse_attention) k <= q + causal_offset. That reproduces a
        causal mask_mod (q_idx >= kv_idx: causal_offset 0; causal=True is your statement that the mask_mod is
        that) and any mask whose partial tiles are partial only because they cross the end of the sequence.
        Without causal, block_sparse_attention checks the latter (partial tiles only on the last query / key
        block, and mask_mod allowing every element inside the sequences there, evaluated on those rows and
        columns) and raises BSKError otherwise, rather than give a different result."""
        bq, bk = (int(x) for x in block_mask.BLOCK_SIZE)
        lengths = getattr(block_mask, "seq_lengths", None)
        if seq_q is None or seq_k is None:
            if lengths is None:
                raise ValueError("AttnLayout.from_block_mask: this BlockMask has no seq_lengths; pass seq_q and seq_k")
            seq_q = lengths[0] if seq_q is None else seq_q
            seq_k = lengths[1] if seq_k is None else seq_k
        seq_q, seq_k = int(seq_q), int(seq_k)
        mq, nb = _cdiv(seq_q, bq), _cdiv(seq_k, bk)
        kv_num, kv_idx = block_mask.kv_num_blocks, block_mask.kv_indices
        if kv_num.dim() != 3 or kv_idx.dim() != 4 or kv_num.shape[-1] < mq:
            raise _dlpack.error("BSK_ERR_SHAPE_MISMATCH", f"AttnLayout.from_block_mask: kv_num_blocks "
                                f"{tuple(kv_num.shape)} does not cover {mq} query blocks of {bq} (seq_q {seq_q})")
        part = _list_mask(kv_num[..., :mq], kv_idx[..., :mq, :], nb)
        if block_mask.full_kv_num_blocks is not None:
            full = _list_mask(block_mask.full_kv_num_blocks[..., :mq], block_mask.full_kv_indices[..., :mq, :], nb)
            part = part & ~full
        else:
            full = torch.zeros_like(part)
        fc, fi = _lists_from_mask(full)
        pc, pi = _lists_from_mask(part)
        return cls(fc, fi, pc, pi, seq_q, seq_k, (bq, bk), validate=False)

    def _partials_match_key_length(self, mask_mod):
        """Whether the element mask without the causal rule (the key length alone) is exact for every partial
        tile: only tiles crossing the end of seq_q or seq_k may be partial, and mask_mod must allow every
        element inside the sequences there (evaluated on those boundary rows and columns only). Reads the
        arrays: synchronizes on CUDA."""
        nb, mq, bq, bk = self.nb, self.mq, self.block_q, self.block_k
        part = _list_mask(self.part_count, self.part_idx, nb)  # [Lb, Lh, mq, nb]
        interior = part.clone()
        if self.seq_k % bk:
            interior[..., -1] = False
        if self.seq_q % bq:
            interior[..., -1, :] = False
        if bool(interior.any()):
            return False
        if not bool(part.any()) or mask_mod is None or mask_mod is _noop_mask():
            return True
        Lb, Lh = part.shape[:2]
        if Lb * Lh * (bq * self.seq_k + self.seq_q * bk) > 1 << 26:
            return False  # too large to check here: refused rather than trusted
        dev = part.device
        b = torch.arange(Lb, device=dev)[:, None, None, None]
        h = torch.arange(Lh, device=dev)[None, :, None, None]

        def allowed(q0, q1, k0, k1):
            qi = torch.arange(q0, q1, device=dev)[None, None, :, None]
            ki = torch.arange(k0, k1, device=dev)[None, None, None, :]
            try:
                m = mask_mod(b, h, qi, ki)
                return torch.as_tensor(m, device=dev).to(torch.bool).expand(Lb, Lh, q1 - q0, k1 - k0)
            except Exception:  # noqa: BLE001 - a mask_mod that does not broadcast: cannot check, so refuse
                return None

        if self.seq_q % bq:  # last query block: its rows against every key, per key block
            m = allowed((mq - 1) * bq, self.seq_q, 0, self.seq_k)
            if m is None:
                return False
            m = torch.nn.functional.pad(m, (0, nb * bk - self.seq_k), value=True)
            ok = m.reshape(Lb, Lh, m.shape[2], nb, bk).all(-1).all(2)  # [Lb, Lh, nb]
            if bool((part[:, :, -1, :] & ~ok).any()):
                return False
        if self.seq_k % bk:  # last key block: every query row against its keys, per query block
            m = allowed(0, self.seq_q, (nb - 1) * bk, self.seq_k)
            if m is None:
                return False
            m = torch.nn.functional.pad(m, (0, 0, 0, mq * bq - self.seq_q), value=True)
            ok = m.reshape(Lb, Lh, mq, bq, m.shape[3]).all(-1).all(-1)  # [Lb, Lh, mq]
            if bool((part[..., -1] & ~ok).any()):
                return False
        return True


def _noop_mask():
    try:
        from torch.nn.attention.flex_attention import noop_mask
    except ImportError:
        return None
    return noop_mask


def _is_block_mask(obj):
    try:
        from torch.nn.attention.flex_attention import BlockMask
    except ImportError:  # torch without FlexAttention
        return False
    return isinstance(obj, BlockMask)


# ---------------------------------------------------------------- raw calls (no autograd)

def _attention_into(q, k, v, out, lse, layout_tuple, kv_lens, scale, causal, causal_offset, bhsd):
    fn = functools.partial(_bsk.attention_forward, lse=None if lse is None else lse.detach(),
                           kv_lens=None if kv_lens is None else kv_lens.detach(), scale=float(scale),
                           causal=bool(causal), causal_offset=int(causal_offset), order=int(bhsd))
    _launch(fn, q.device, q.detach(), k.detach(), v.detach(), out.detach(), layout_tuple)


def _attention_backward_into(d_out, q, k, v, out, lse, d_lse, dq, dk, dv, layout_tuple, kv_lens, scale, causal,
                             causal_offset, bhsd):
    fn = functools.partial(_bsk.attention_backward, d_lse=None if d_lse is None else d_lse.detach(),
                           kv_lens=None if kv_lens is None else kv_lens.detach(), scale=float(scale),
                           causal=bool(causal), causal_offset=int(causal_offset), order=int(bhsd))
    _launch(fn, q.device, q.detach(), k.detach(), v.detach(), out.detach(), d_out.detach(), lse.detach(), dq.detach(),
            dk.detach(), dv.detach(), layout_tuple)


def _topk_into(q, k, out_tuple, top_k, kv_lens, causal, causal_offset, keep_first, keep_diagonal, proj_q, proj_k, bhsd,
               pooled=False):
    fn = functools.partial(_bsk.topk_block_layout, kv_lens=None if kv_lens is None else kv_lens.detach(),
                           causal=bool(causal), causal_offset=int(causal_offset), keep_first=bool(keep_first),
                           keep_diagonal=bool(keep_diagonal), w_q=None if proj_q is None else proj_q.detach(),
                           w_k=None if proj_k is None else proj_k.detach(), order=int(bhsd), pooled=bool(pooled))
    _launch(fn, q.device, q.detach(), k.detach(), out_tuple, int(top_k))


# ---------------------------------------------------------------- custom ops

@torch.library.custom_op("bsk::block_sparse_attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, full_count: torch.Tensor, full_idx: torch.Tensor,
                  part_count: torch.Tensor, part_idx: torch.Tensor, kv_lens: Optional[torch.Tensor], seq_q: int,
                  seq_k: int, block_q: int, block_k: int, scale: float, causal: bool, causal_offset: int,
                  bhsd: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    b, s, h, _ = _dims(q, bhsd)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((b, h, s), dtype=torch.float32, device=q.device)
    lay = (seq_q, seq_k, block_q, block_k, full_count.shape[0], full_count.shape[1], full_idx.shape[3], full_count,
           full_idx, part_count, part_idx)
    _attention_into(q, k, v, out, lse, lay, kv_lens, scale, causal, causal_offset, bhsd)
    return out, lse


@_attention_op.register_fake
def _attention_fake(q, k, v, full_count, full_idx, part_count, part_idx, kv_lens, seq_q, seq_k, block_q, block_k,
                    scale, causal, causal_offset, bhsd):
    torch._check(q.dim() == 4 and k.dim() == 4 and v.dim() == 4, lambda: "attention tensors must be 4-D")
    b, s, h, _ = _dims(q, bhsd)
    return q.new_empty(q.shape), q.new_empty((b, h, s), dtype=torch.float32)


@torch.library.custom_op("bsk::block_sparse_attention_backward", mutates_args=())
def _attention_backward_op(d_out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                           lse: torch.Tensor, d_lse: Optional[torch.Tensor], full_count: torch.Tensor,
                           full_idx: torch.Tensor, part_count: torch.Tensor, part_idx: torch.Tensor,
                           kv_lens: Optional[torch.Tensor], seq_q: int, seq_k: int, block_q: int, block_k: int,
                           scale: float, causal: bool, causal_offset: int,
                           bhsd: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) of block_sparse_attention (bsk_attention_backward): fresh tensors of q's / k's / v's shape
    and dtype, every element written."""
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    lay = (seq_q, seq_k, block_q, block_k, full_count.shape[0], full_count.shape[1], full_idx.shape[3], full_count,
           full_idx, part_count, part_idx)
    _attention_backward_into(d_out, q, k, v, out, lse, d_lse, dq, dk, dv, lay, kv_lens, scale, causal, causal_offset,
                             bhsd)
    return dq, dk, dv


@_attention_backward_op.register_fake
def _attention_backward_fake(d_out, q, k, v, out, lse, d_lse, full_count, full_idx, part_count, part_idx, kv_lens,
                             seq_q, seq_k, block_q, block_k, scale, causal, causal_offset, bhsd):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _no_double_backward(ctx, *grads):
    raise NotImplementedError(BACKWARD_MESSAGE)


_attention_backward_op.register_autograd(_no_double_backward, setup_context=lambda ctx, inputs, output: None)


def _attention_setup(ctx, inputs, output):
    (q, k, v, full_count, full_idx, part_count, part_idx, kv_lens, seq_q, seq_k, block_q, block_k, scale, causal,
     causal_offset, bhsd) = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, full_count, full_idx, part_count, part_idx, kv_lens)
    ctx.bsk_args = (seq_q, seq_k, block_q, block_k, scale, causal, causal_offset, bhsd)


def _attention_backward(ctx, d_out, d_lse):
    """Gradients for q, k and v (libbsk's deterministic backward); None for the layout, kv_lens and the
    scalars. A gradient reaching lse (return_lse=True and a loss that uses it) is passed on as d_lse."""
    q, k, v, out, lse, full_count, full_idx, part_count, part_idx, kv_lens = ctx.saved_tensors
    none = (None,) * 13
    if not any(ctx.needs_input_grad[:3]):
        return (None, None, None) + none
    if d_out is None:
        d_out = torch.zeros_like(out)
    # libbsk reads each head vector as contiguous memory; grads of .sum() and friends arrive as stride-0 expands
    if d_out.dtype != out.dtype:
        d_out = d_out.to(out.dtype)
    if d_out.dim() == 4 and d_out.shape[3] > 1 and d_out.stride(3) != 1:
        d_out = d_out.contiguous()
    if d_lse is not None:
        d_lse = d_lse.to(torch.float32).contiguous()
    dq, dk, dv = _attention_backward_op(d_out, q, k, v, out, lse, d_lse, full_count, full_idx, part_count, part_idx,
                                        kv_lens, *ctx.bsk_args)
    return (dq if ctx.needs_input_grad[0] else None, dk if ctx.needs_input_grad[1] else None,
            dv if ctx.needs_input_grad[2] else None) + none


_attention_op.register_autograd(_attention_backward, setup_context=_attention_setup)


@torch.library.custom_op("bsk::topk_block_layout", mutates_args=())
def _topk_op(q: torch.Tensor, k: torch.Tensor, kv_lens: Optional[torch.Tensor], proj_q: Optional[torch.Tensor],
             proj_k: Optional[torch.Tensor], block_q: int, block_k: int, top_k: int, causal: bool, causal_offset: int,
             keep_first: bool, keep_diagonal: bool, bhsd: bool, pooled: bool = False, seq_q: int = -1,
             seq_k: int = -1) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    b, sq, h, _ = _dims(q, bhsd)
    sk = _dims(k, bhsd)[1]
    if pooled:  # one row per block: the real lengths come from the caller
        sq, sk = seq_q, seq_k
    mq, nb = _cdiv(sq, block_q), _cdiv(sk, block_k)
    cap = min(top_k, nb)
    counts = [torch.zeros((b, h, mq), dtype=torch.int32, device=q.device) for _ in range(2)]
    idx = [torch.zeros((b, h, mq, cap), dtype=torch.int32, device=q.device) for _ in range(2)]
    lay = (sq, sk, block_q, block_k, b, h, cap, counts[0], idx[0], counts[1], idx[1])
    _topk_into(q, k, lay, top_k, kv_lens, causal, causal_offset, keep_first, keep_diagonal, proj_q, proj_k, bhsd, pooled)
    return counts[0], idx[0], counts[1], idx[1]


@_topk_op.register_fake
def _topk_fake(q, k, kv_lens, proj_q, proj_k, block_q, block_k, top_k, causal, causal_offset, keep_first,
               keep_diagonal, bhsd, pooled=False, seq_q=-1, seq_k=-1):
    b, sq, h, _ = _dims(q, bhsd)
    sk = _dims(k, bhsd)[1]
    if pooled:
        sq, sk = seq_q, seq_k
    mq, nb = _cdiv(sq, block_q), _cdiv(sk, block_k)
    cap = min(top_k, nb)
    c = q.new_empty((b, h, mq), dtype=torch.int32)
    i = q.new_empty((b, h, mq, cap), dtype=torch.int32)
    return c, i, c.clone(), i.clone()


# ---------------------------------------------------------------- public operations

def _check_tensor(name, t):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"block_sparse_attention: {name} must be a torch.Tensor, got {type(t).__name__}")


def block_sparse_attention(q, k, v, layout, causal=None, scale=None, layout_order="bshd", return_lse=False, *,
                           causal_offset=None, kv_lens=None, out=None):
    """softmax(scale · Q·Kᵀ + mask) · V over the tiles `layout` keeps (FlashAttention-style forward).

    q: [batch, seq_q, heads, dim] (layout_order "bshd") or [batch, heads, seq_q, dim] ("bhsd"); k, v: the same
    with seq_k and kv_heads, where kv_heads divides heads (GQA / MQA: consecutive query heads share a key/value
    head). Any strides with a contiguous head dimension (slices of a packed QKV tensor work as they are).
    fp16 / bf16 (fp32 too: CPU and the GPU's CUDA-core kernel); accumulation in fp32; dim 1..512 (the GPU's
    tensor-core kernels: dim 64 / 128, and 256 on the mma.sync kernel of an H100 / H200 (an A100: block_q 64),
    block_q 64 / 128, block_k a multiple of 64).

    layout: an AttnLayout (its batch / heads 1 or q's), or a FlexAttention BlockMask (converted with
    AttnLayout.from_block_mask; see there what of its mask_mod is honoured).
    causal: apply k <= q + causal_offset inside the tiles; None takes the layout's own setting (True for
    AttnLayout.causal); causal_offset likewise (0: top-left aligned, seq_k - seq_q: bottom-right).
    scale: None for 1/sqrt(dim). kv_lens: int32 [batch] key lengths (keys past them are masked), or None.
    A query row with nothing to attend to gets 0 (and LSE -inf).
    Returns out (q's shape and order, q's dtype), or (out, lse) with return_lse: lse float32 [batch, heads,
    seq_q], the natural-log sum of exp of the kept scores.
    out=: write into this tensor instead (no autograd); nothing is written when the call is refused.

    Differentiable in q, k and v (libbsk's bsk_attention_backward: FlashAttention backward over the same
    tiles, GQA gradients summed over the shared heads, bitwise deterministic; a loss on the returned lse is
    honoured too). Not twice differentiable.
    """
    bhsd = bool(_order(layout_order))
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, t)
    if _is_block_mask(layout):
        block_mask = layout
        layout = AttnLayout.from_block_mask(block_mask, _dims(q, bhsd)[1], _dims(k, bhsd)[1])
        if not causal and not layout._partials_match_key_length(getattr(block_mask, "mask_mod", None)):
            raise _dlpack.error("BSK_ERR_INVALID_ARGUMENT", "block_sparse_attention: the BlockMask has partial tiles "
                                "whose mask_mod bsk cannot apply (inside partial tiles it applies only the key length "
                                "and, with causal=True, the causal rule); pass causal=True if the mask_mod is causal, "
                                "or build the BlockMask so that those tiles are full or absent")
    if not isinstance(layout, AttnLayout):
        raise TypeError(f"block_sparse_attention: layout must be a bsk.AttnLayout or a FlexAttention BlockMask, got "
                        f"{type(layout).__name__}")
    if causal is None:
        causal = layout.is_causal
    if causal_offset is None:
        causal_offset = layout.causal_offset
    if scale is None:
        scale = 0.0  # libbsk: 0 means 1/sqrt(dim)
    elif float(scale) == 0.0:
        raise _dlpack.error("BSK_ERR_INVALID_ARGUMENT", "block_sparse_attention: scale=0 would be read as "
                            "1/sqrt(dim) by libbsk; pass scale=None for that")
    tensors = dict(q=q, k=k, v=v, layout=layout.full_count)
    if kv_lens is not None:
        _check_tensor("kv_lens", kv_lens)
        tensors["kv_lens"] = kv_lens
    if out is not None:
        _check_tensor("out", out)
        tensors["out"] = out
    _same_device("block_sparse_attention", **tensors)
    if out is not None:
        if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
            raise RuntimeError("block_sparse_attention(): functions with out=... arguments don't support automatic "
                               "differentiation, but one of the arguments requires grad")
        lse = None
        if return_lse:
            b, s, h, _ = _dims(q, bhsd)
            lse = torch.empty((b, h, s), dtype=torch.float32, device=q.device)
        _attention_into(q, k, v, out, lse, layout._tuple(), kv_lens, scale, causal, causal_offset, bhsd)
        return (out, lse) if return_lse else out
    o, lse = _attention_op(q, k, v, layout.full_count, layout.full_idx, layout.part_count, layout.part_idx, kv_lens,
                           layout.seq_q, layout.seq_k, layout.block_q, layout.block_k, float(scale), bool(causal),
                           int(causal_offset), bhsd)
    return (o, lse) if return_lse else o


def _detach(t):
    return None if t is None else t.detach()  # the gate is not differentiable


def topk_block_layout(q, k, block_size, k_blocks, keep_first=True, keep_diagonal=True, causal=False, proj_q=None,
                      proj_k=None, *, causal_offset=0, kv_lens=None, layout_order="bshd", pooled=False, seq_q=None,
                      seq_k=None):
    """The top-k block gate (libbsk's bsk_topk_block_layout): for each (batch, head, query block i) keep the
    k_blocks key blocks j with the largest score

        s(i, j) = (mean of the query block's rows of Q · proj_q) · (mean of the key block's rows of K · proj_k)

    (rows past seq_q / the key length left out of the means; the key/value head for GQA; proj_q / proj_k
    dim x proj_dim, both or neither). Candidates are the key blocks with at least one key the mask allows
    (k < kv_len, and with causal some k <= q + causal_offset). keep_first forces key block 0 and
    keep_diagonal the block on the query block's diagonal; both count toward k_blocks. Ties go to the lower
    block. The CPU and GPU gates choose the same tiles.

    q, k as for block_sparse_attention (same layout_order). block_size: int or (block_q, block_k).
    Returns an AttnLayout with q's batch and heads, capacity min(k_blocks, nb), and causal / causal_offset
    recorded so block_sparse_attention applies the same mask by default. The selection is not
    differentiable (no gradient reaches q, k or the projections through it).

    pooled=True: q and k already hold one row per block, the block means the caller computed (e.g. fused into
    its projection: the mean of a block's rows commutes with a linear map), so the gate reads no full-length
    tensor — q has ceil(seq_q / block_q) rows, k ceil(seq_k / block_k) — and seq_q / seq_k give the real
    sequence lengths (default: whole blocks, rows * block size). kv_lens and causal still decide the candidates.
    """
    bhsd = bool(_order(layout_order))
    for name, t in (("q", q), ("k", k)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"topk_block_layout: {name} must be a torch.Tensor, got {type(t).__name__}")
    bq, bk = _attn_blocks(block_size)
    k_blocks = int(k_blocks)
    if k_blocks < 1 or k_blocks < int(bool(keep_first)) + int(bool(keep_diagonal)):
        raise _dlpack.error("BSK_ERR_INVALID_ARGUMENT", f"topk_block_layout: k_blocks = {k_blocks} must be >= 1 and "
                            "cover the forced blocks (keep_first + keep_diagonal)")
    if (proj_q is None) != (proj_k is None):
        raise _dlpack.error("BSK_ERR_NULL_POINTER", "topk_block_layout: give both projections proj_q and proj_k, or "
                            "neither")
    tensors = dict(q=q, k=k)
    if proj_q is not None:
        tensors.update(proj_q=proj_q, proj_k=proj_k)
    if kv_lens is not None:
        tensors["kv_lens"] = kv_lens
    _same_device("topk_block_layout", **tensors)
    sq, sk = _dims(q, bhsd)[1], _dims(k, bhsd)[1]
    if pooled:
        sq = sq * bq if seq_q is None else int(seq_q)
        sk = sk * bk if seq_k is None else int(seq_k)
        rq, rk = _dims(q, bhsd)[1], _dims(k, bhsd)[1]
        if sq < 0 or sk < 0 or _cdiv(sq, bq) != rq or _cdiv(sk, bk) != rk:
            raise _dlpack.error("BSK_ERR_SHAPE_MISMATCH", f"topk_block_layout(pooled=True): q has {rq} rows and k {rk}; "
                                f"seq_q = {sq}, seq_k = {sk} with blocks {bq}x{bk} need {_cdiv(sq, bq)} and "
                                f"{_cdiv(sk, bk)} (one row per block)")
    elif (seq_q is not None and int(seq_q) != sq) or (seq_k is not None and int(seq_k) != sk):
        raise _dlpack.error("BSK_ERR_SHAPE_MISMATCH", f"topk_block_layout: seq_q / seq_k ({seq_q}, {seq_k}) differ "
                            f"from q's and k's lengths ({sq}, {sk}); they are for pooled=True")
    fc, fi, pc, pi = _topk_op(_detach(q), _detach(k), _detach(kv_lens), _detach(proj_q), _detach(proj_k), bq, bk,
                              k_blocks, bool(causal), int(causal_offset), bool(keep_first), bool(keep_diagonal), bhsd,
                              bool(pooled), int(sq), int(sk))
    return AttnLayout(fc, fi, pc, pi, sq, sk, (bq, bk), causal=bool(causal), causal_offset=int(causal_offset),
                      validate=False)


def block_scores(q, k, block_size, proj_q=None, proj_k=None, *, kv_lens=None, causal=False, causal_offset=0,
                 layout_order="bshd"):
    """The gate's scores s(i, j) computed with torch ops (differentiable, fp32): [batch, heads, mq, nb], -inf
    where key block j is not a candidate for query block i. topk_block_layout keeps the k largest of each
    row (libbsk pools and projects in its own fixed order, so near-ties may be resolved differently).
    Use it to train a gate's projections with an auxiliary loss."""
    bhsd = bool(_order(layout_order))
    bq, bk = _pair(block_size)
    qh = (q if bhsd else q.transpose(1, 2)).float()  # [B, H, S, D]
    kh = (k if bhsd else k.transpose(1, 2)).float()
    B, H, sq, D = qh.shape
    HK, sk = kh.shape[1], kh.shape[2]
    mq, nb = _cdiv(sq, bq), _cdiv(sk, bk)
    dev = qh.device
    qp = torch.nn.functional.pad(qh, (0, 0, 0, mq * bq - sq)).reshape(B, H, mq, bq, D).sum(3)
    q_rows = (torch.clamp(sq - torch.arange(mq, device=dev) * bq, max=bq)).float()
    qm = qp / q_rows[:, None]
    lens = (torch.full((B,), sk, device=dev) if kv_lens is None else kv_lens.to(dev).long())
    key_pos = torch.arange(sk, device=dev)
    kmask = (key_pos[None, :] < lens[:, None]).float()  # [B, sk]
    kz = kh * kmask[:, None, :, None]
    kp = torch.nn.functional.pad(kz, (0, 0, 0, nb * bk - sk)).reshape(B, HK, nb, bk, D).sum(3)
    k_rows = torch.clamp(lens[:, None] - torch.arange(nb, device=dev)[None, :] * bk, min=0, max=bk).float()  # [B, nb]
    km = kp / torch.clamp(k_rows, min=1)[:, None, :, None]
    if proj_q is not None:
        qm, km = qm @ proj_q.float(), km @ proj_k.float()
    km = km.repeat_interleave(H // HK, dim=1)
    s = qm @ km.transpose(-1, -2)  # [B, H, mq, nb]
    j0 = torch.arange(nb, device=dev) * bk
    q1 = torch.clamp((torch.arange(mq, device=dev) + 1) * bq, max=sq)
    cand = (j0[None, None, :] < lens[:, None, None])  # [B, 1, nb]
    if causal:
        cand = cand & (j0[None, None, :] <= (q1 - 1 + causal_offset)[None, :, None])  # [B, mq, nb]
    return s.masked_fill(~cand[:, None], float("-inf"))


__all__ = ["AttnLayout", "block_sparse_attention", "topk_block_layout", "block_scores", "BACKWARD_MESSAGE"]

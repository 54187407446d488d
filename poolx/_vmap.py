"""vmap rules of the torch.ops.poolx operators: the vmapped dimension joins the
batch dimension, so torch.func.vmap makes one kernel call rather than one per
sample (functorch's fallback, which also warns of the slowdown)."""

import torch

from poolx._library import ops

# op name -> how many of its leading arguments are tensors (the rest: sizes
# and pooling arguments, never batched)
TENSOR_ARGS = {
    "max_pool2d_argmax": 1,
    "max_pool2d_indices": 1,
    "max_pool2d_values": 1,
    "max_pool2d_backward": 2,
    "gather_by_argmax": 2,
    "argmax_to_indices": 1,
    "argmax_to_mask": 1,
    "max_unpool2d_argmax": 2,
    "max_unpool2d": 2,
    "max_pool3d_argmax": 1,
    "max_pool3d_indices": 1,
    "max_pool3d_values": 1,
    "max_pool3d_backward": 2,
    "gather_by_argmax3d": 2,
    "argmax_to_indices3d": 1,
    "argmax_to_mask3d": 1,
    "max_unpool3d_argmax": 2,
    "adaptive_max_pool2d_argmax": 1,
    "adaptive_max_pool2d_indices": 1,
    "adaptive_max_pool2d_values": 1,
    "adaptive_max_pool2d_backward": 2,
    "adaptive_gather_by_argmax": 2,
    "adaptive_max_pool3d_argmax": 1,
    "adaptive_max_pool3d_indices": 1,
    "adaptive_max_pool3d_values": 1,
    "adaptive_max_pool3d_backward": 2,
    "adaptive_gather_by_argmax3d": 2,
}


def _vmapped_first(tensor, dim, size):
    return tensor.expand(size, *tensor.shape) if dim is None else tensor.movedim(dim, 0)


def _batched_rule(op, num_tensors, spatial):
    def rule(info, in_dims, *args):
        size = info.batch_size
        tensors = [_vmapped_first(t, d, size) for t, d in zip(args, in_dims[:num_tensors])]
        rest = args[num_tensors:]
        ranks = {t.dim() - 1 for t in tensors}
        dims = lambda out: (0,) * len(out) if isinstance(out, tuple) else 0  # noqa: E731
        if ranks == {spatial + 1}:  # unbatched samples (C, H, W): the vmapped dim is the batch
            out = op(*tensors, *rest)
            return out, dims(out)
        if ranks == {spatial + 2}:  # batched samples (N, C, H, W): vmapped dim and N merge
            batch = tensors[0].shape[1]
            out = op(*[t.flatten(0, 1) for t in tensors], *rest)
            split = lambda o: o.unflatten(0, (size, batch))  # noqa: E731
            return (tuple(map(split, out)) if isinstance(out, tuple) else split(out)), dims(out)
        # Any other rank: the op's own error, from a call on one sample's shapes.
        op(*[t.new_empty(t.shape[1:]) for t in tensors], *rest)
        raise AssertionError(f"{op} accepted samples of ranks {sorted(ranks)}")

    return rule


for _name, _num_tensors in TENSOR_ARGS.items():
    torch.library.register_vmap(
        f"poolx::{_name}",
        _batched_rule(getattr(ops, _name), _num_tensors, 3 if "3d" in _name else 2),
    )

"""poolx benchmark: poolx against torch.nn.functional and the copy-bandwidth floor.

Run ``python -m bench --help``.
"""

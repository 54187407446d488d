"""nn.Modules: drop-in replacements with the constructors of torch's."""

from torch import nn

from poolx import functional


class MaxPool2d(nn.MaxPool2d):
    """nn.MaxPool2d computed by poolx; same constructor, attributes and repr."""

    def forward(self, input):
        return functional.max_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )

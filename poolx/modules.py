"""nn.Modules: drop-in replacements with the constructors of torch's. Their
repr names poolx (poolx.MaxPool2d(kernel_size=2, ...)) so that a converted
model shows what it runs; everything else (attributes, state_dict keys,
pickling) is torch's."""

from torch import nn

from poolx import functional, functional_1d, functional_3d, functional_adaptive


class _NamedPoolx:
    def _get_name(self):
        return f"poolx.{type(self).__name__}"


class _SaveChoice:
    """The keyword-only `save` ("argmax" or "recompute") of poolx's pooling
    modules: what backward keeps; see poolx.max_pool2d."""

    # Class default, so modules pickled before `save` existed load unchanged.
    save = "argmax"

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False, *, save="argmax"):
        super().__init__(kernel_size, stride, padding, dilation, return_indices, ceil_mode)
        functional.check_save(save, return_indices)
        self.save = save

    def extra_repr(self):
        save = "" if self.save == _SaveChoice.save else f", save={self.save}"
        return super().extra_repr() + save

    def forward(self, input):
        return self._pool(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          ceil_mode=self.ceil_mode, return_indices=self.return_indices,
                          save=self.save)


class MaxPool2d(_NamedPoolx, _SaveChoice, nn.MaxPool2d):
    """nn.MaxPool2d computed by poolx; same constructor and attributes, and
    the keyword-only `save`."""

    _pool = staticmethod(functional.max_pool2d)


class MaxPool1d(_NamedPoolx, _SaveChoice, nn.MaxPool1d):
    """nn.MaxPool1d computed by poolx; same constructor and attributes, and
    the keyword-only `save`."""

    _pool = staticmethod(functional_1d.max_pool1d)


class MaxPool3d(_NamedPoolx, _SaveChoice, nn.MaxPool3d):
    """nn.MaxPool3d computed by poolx; same constructor and attributes, and
    the keyword-only `save`."""

    _pool = staticmethod(functional_3d.max_pool3d)


class MaxUnpool2d(_NamedPoolx, nn.MaxUnpool2d):
    """nn.MaxUnpool2d computed by poolx (deterministic); same constructor and
    attributes."""

    def forward(self, input, indices, output_size=None):
        return functional.max_unpool2d(
            input, indices, self.kernel_size, self.stride, self.padding, output_size
        )


class MaxUnpool1d(_NamedPoolx, nn.MaxUnpool1d):
    """nn.MaxUnpool1d computed by poolx (deterministic); same constructor and
    attributes."""

    def forward(self, input, indices, output_size=None):
        return functional_1d.max_unpool1d(
            input, indices, self.kernel_size, self.stride, self.padding, output_size
        )


class MaxUnpool3d(_NamedPoolx, nn.MaxUnpool3d):
    """nn.MaxUnpool3d computed by poolx (deterministic); same constructor and
    attributes."""

    def forward(self, input, indices, output_size=None):
        return functional_3d.max_unpool3d(
            input, indices, self.kernel_size, self.stride, self.padding, output_size
        )


class _AdaptiveSaveChoice:
    """The keyword-only `save` of poolx's adaptive pooling modules."""

    save = "argmax"

    def __init__(self, output_size, return_indices=False, *, save="argmax"):
        super().__init__(output_size, return_indices)
        functional.check_save(save, return_indices)
        self.save = save

    def extra_repr(self):
        save = "" if self.save == _AdaptiveSaveChoice.save else f", save={self.save}"
        return super().extra_repr() + save

    def forward(self, input):
        return self._pool(input, self.output_size, self.return_indices, save=self.save)


class AdaptiveMaxPool1d(_NamedPoolx, _AdaptiveSaveChoice, nn.AdaptiveMaxPool1d):
    """nn.AdaptiveMaxPool1d computed by poolx; same constructor and
    attributes, and the keyword-only `save`."""

    _pool = staticmethod(functional_adaptive.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_NamedPoolx, _AdaptiveSaveChoice, nn.AdaptiveMaxPool2d):
    """nn.AdaptiveMaxPool2d computed by poolx; same constructor and
    attributes, and the keyword-only `save`."""

    _pool = staticmethod(functional_adaptive.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_NamedPoolx, _AdaptiveSaveChoice, nn.AdaptiveMaxPool3d):
    """nn.AdaptiveMaxPool3d computed by poolx; same constructor and
    attributes, and the keyword-only `save`."""

    _pool = staticmethod(functional_adaptive.adaptive_max_pool3d)

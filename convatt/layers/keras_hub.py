"""0.1.0's name of `convatt.layers.keras_hub_blocks` (KerasHub's blocks with convatt's attention).

Kept so that `from convatt.layers.keras_hub import ...` still works, with a warning; the
module was renamed because its name read as KerasHub itself.
"""

import warnings

from convatt.layers.keras_hub_blocks import TransformerDecoder, TransformerEncoder

warnings.warn(
    "convatt.layers.keras_hub is now convatt.layers.keras_hub_blocks; the old name will be removed.",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["TransformerDecoder", "TransformerEncoder"]

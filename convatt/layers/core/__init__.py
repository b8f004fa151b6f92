"""The attention core: one definition per modification, its forms chosen once, run over rows.

- `modifications`: the table `MODIFICATIONS`, where each modification acts (its row: options,
  sublayer, stages, identity start, example);
- `forms`: which form each modification, the softmax and the score biases compute
  (`AttentionForms`), and the one place under `convatt.layers` that asks for the backend,
  XLA compilation or the device;
- `rows`: the facts of one call that the modifications read (`AttentionContext`);
- `modified_attention`: the mixin that runs the table; `multi_head_attention` (the drop-in
  for Keras') and `self_attention` (the tagger's layer) inherit it;
- `blocked_attention`, `attention_cache`: the same computation on blocks of queries and on a
  cached decoding step.

The paper's standalone layers (the sublayers the table makes) live one level up, in
`convatt.layers`; this package imports them, they import nothing of it but `forms` (their
default form). `convatt.layers.conversion` and `keras_hub_blocks` use the core from outside.
Importing this package loads nothing: import its modules.
"""

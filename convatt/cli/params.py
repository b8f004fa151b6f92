"""`convatt params`: Table 1c, every variant's parameter count."""

from __future__ import annotations

from convatt.cli._common import load_backend
from convatt.rundir.run_config import check_at_least


def cmd_params(args) -> None:
    """Table 1c: every variant's parameter count and its difference to SAN."""
    from convatt.data.formats import data_format
    from convatt.model.variants import VARIANTS, make_config

    fmt = data_format(args.preset)  # a misspelt preset fails here, with a suggestion
    for flag in ("n_words", "n_chars", "n_labels"):
        check_at_least(f"--{flag.replace('_', '-')}", getattr(args, flag), minimum=3)
    load_backend(args.debug)
    from convatt.model.parameters import count_parameters
    from convatt.model.tagger import build_tagger

    sizes = [args.n_words, args.n_chars, args.n_labels]
    if None in sizes:
        if args.data is None and fmt.paper_sizes and sizes == [None] * 3:
            sizes = list(fmt.paper_sizes)
        else:
            from convatt.data import build_vocabularies, load_corpus

            vocab = build_vocabularies(load_corpus(args.preset, args.data or fmt.default_data), args.preset)
            found = [len(vocab.words), len(vocab.chars), len(vocab.tags)]
            sizes = [s if s is not None else f for s, f in zip(sizes, found)]
    n_words, n_chars, n_labels = sizes
    print(f"Table 1c, preset {args.preset}: {n_words:,} words, {n_chars:,} chars, {n_labels:,} labels")
    counts = {}
    for name in VARIANTS:
        model = build_tagger(make_config(args.preset, name), n_words, n_chars, n_labels, jit_compile=False)
        counts[name] = count_parameters(model)
    # "extension": what a modification adds to the model it modifies (SAN+PE[add]+X: to SAN+PE[add])
    base = lambda name: "san-pe-add" if name.startswith("san-pe-add-") else "san"
    print(f"{'variant':<22}{'label':<26}{'parameters':>12}{'vs SAN':>12}{'extension':>12}")
    for name, n in counts.items():
        ext = f"{n - counts[base(name)]:+,}" if name != "san" else ""
        print(f"{name:<22}{VARIANTS[name].label:<26}{n:>12,}{n - counts['san']:>+12,}{ext:>12}")


def add_command(sub) -> None:
    p = sub.add_parser("params", help="parameter counts of every variant (Table 1c)")
    p.add_argument("--preset", default="ptb", help="the data format whose model sizes are counted: ptb or ud")
    p.add_argument("--data", help="corpus to take vocabulary sizes from")
    p.add_argument("--n-words", type=int, help="word vocabulary size, <PAD> and <OOV> included (PTB: 20,002)")
    p.add_argument("--n-chars", type=int, help="character vocabulary size (PTB: 84)")
    p.add_argument("--n-labels", type=int, help="tag vocabulary size (PTB: 47); sizes not given come from --data")
    p.set_defaults(func=cmd_params)

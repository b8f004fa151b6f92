"""`convatt params | train | evaluate | tag | inspect | tables | plot | bench` (also `python -m convatt`)."""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from pathlib import Path

from convatt import interrupt
from convatt.errors import ConvattError

EMBEDDED_DATA = Path(__file__).resolve().parent / "embedded"  # = convatt.data.EMBEDDED_DATA_DIR, without importing it
DEFAULT_DATA = {"ptb": EMBEDDED_DATA / "ptb-sample.tar.gz", "ud": EMBEDDED_DATA / "ud-2.2" / "UD_English-LinES"}


def _quiet_backend() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    if os.environ["KERAS_BACKEND"] == "tensorflow":
        # TensorFlow's TFLite imports JAX whenever it is installed: 0.6 s and a second XLA
        # runtime in the process, which the tensorflow backend never uses.
        sys.modules.setdefault("jax", None)


@contextlib.contextmanager
def _stderr_silenced():
    """Send file descriptor 2 to /dev/null: C++ libraries write there directly."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _load_backend(debug: bool) -> None:
    """Import Keras and start its backend with the C++ start-up lines (TensorFlow's
    oneDNN notice, absl's preamble, a cuInit error on a machine without a GPU) hidden:
    they are noise around the lines that matter. `--debug` shows them."""
    if debug or "keras" in sys.modules:
        return
    with _stderr_silenced():
        import keras

        keras.ops.convert_to_tensor(0)  # the backend finds its devices now, quietly


def cmd_params(args) -> None:
    """Table 1c: every variant's parameter count and its difference to SAN."""
    from convatt.variants import VARIANTS, make_config

    make_config(args.preset, "san")  # a misspelt preset fails here, with a suggestion
    for flag in ("n_words", "n_chars", "n_labels"):
        _check_at_least(f"--{flag.replace('_', '-')}", getattr(args, flag), minimum=3)
    _load_backend(args.debug)
    from convatt.model import build_tagger, count_parameters

    sizes = [args.n_words, args.n_chars, args.n_labels]
    if None in sizes:
        if args.data is None and args.preset == "ptb" and sizes == [None] * 3:
            sizes = [20_002, 84, 47]  # the paper's PTB sizes (REFERENCE.md)
        else:
            from convatt.data import build_vocabularies, load_corpus

            vocab = build_vocabularies(load_corpus(args.preset, args.data or DEFAULT_DATA[args.preset]), args.preset)
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


def _check_at_least(flag: str, value: int | None, minimum: int = 1) -> None:
    if value is not None and value < minimum:
        raise ConvattError(f"{flag} must be at least {minimum}, not {value}")


MAX_SEED = 2**32 - 1  # NumPy's and Keras' seeds are unsigned 32-bit integers


def _check_seed(seed: int) -> None:
    if not 0 <= seed <= MAX_SEED:
        raise ConvattError(f"--seed must be between 0 and {MAX_SEED:,} (2**32 - 1), not {seed}")


def cmd_train(args) -> None:
    from convatt.variants import make_config

    config = make_config(args.preset, args.variant)  # bad arguments fail before Keras is loaded
    data = args.data or DEFAULT_DATA[args.preset]
    _check_at_least("--epochs", args.epochs)
    _check_at_least("--limit", args.limit)
    _check_at_least("--curve-every", args.curve_every, minimum=0)
    _check_at_least("--embeddings-limit", args.embeddings_limit, minimum=0)
    _check_seed(args.seed)
    if args.curve_until < -1:
        raise ConvattError(f"--curve-until must be -1 (always) or at least 0, not {args.curve_until}")
    if args.embeddings and not config.pretrained_words:
        raise ConvattError(f"--embeddings applies to the ptb preset (frozen pretrained vectors); the "
                           f"{args.preset} preset trains its word embeddings from random, as the paper")
    from convatt.runs import RunConfig

    run = RunConfig(
        preset=args.preset, variant=args.variant, seed=args.seed, data=_resolved(data), out=str(args.out),
        embeddings=_resolved(args.embeddings), embeddings_limit=args.embeddings_limit or None, epochs=args.epochs,
        limit=args.limit, mask_padding=args.mask_padding, curve_every=args.curve_every,
        curve_until=args.curve_until, jit_compile={"auto": "auto", "on": True, "off": False}[args.jit_compile],
        protocol=_protocol(args), precision=args.precision,
    )
    _load_backend(args.debug)
    from convatt.training import train_run

    train_run(run)


def _resolved(path) -> str | None:
    """An absolute path, so that the run can be evaluated and resumed from anywhere."""
    return None if path is None else str(Path(path).expanduser().resolve())


def _protocol(args):
    """--protocol, then the per-item options that override it."""
    from convatt.protocol import Protocol

    items = {f.name: getattr(args, f.name) for f in Protocol.items()}
    return Protocol.named(args.protocol).with_overrides(**items)


def _add_protocol_options(p: argparse.ArgumentParser) -> None:
    from convatt.protocol import ORIGINAL, PROTOCOL_NAMES, Protocol

    p.add_argument("--protocol", choices=PROTOCOL_NAMES, default=ORIGINAL,
                   help="train as the paper's code (original, Keras 2.2.4) or with Keras 3's defaults "
                        "(keras3); the options below change one item of it (ablations)")
    group = p.add_argument_group("protocol items (default: the --protocol's)")
    for item in Protocol.items():
        choices = list(dict.fromkeys(item.metadata["choices"].values()))
        group.add_argument("--" + item.name.replace("_", "-"), choices=choices, help=item.metadata["help"])


def cmd_evaluate(args) -> None:
    import json

    _load_backend(args.debug)
    from convatt.evaluation import evaluate_run

    warn = lambda line: print(f"convatt: {line}", file=sys.stderr)
    print(json.dumps(evaluate_run(args.run, args.data, args.split, warn=warn), indent=2))


def cmd_tag(args) -> None:
    from convatt.data.untagged import read_untagged
    from convatt.trained import check_run_dir

    check_run_dir(args.run)  # bad arguments and bad input fail before Keras is loaded
    stdin = sys.stdin.buffer.read() if args.input in (None, "-") else None
    blocks = read_untagged(None if stdin is not None else args.input, args.format, stdin)
    from convatt.rundir import write_text
    _load_backend(args.debug)
    from convatt.tagging import tag_run

    text = tag_run(args.run, blocks, log=lambda line: print(line, file=sys.stderr))
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        write_text(Path(args.output), text)


def cmd_inspect(args) -> None:
    from convatt.trained import check_run_dir

    check_run_dir(args.run)
    _check_at_least("--dev-index", args.dev_index, minimum=0)
    if args.sentence is not None and not args.sentence.split():
        raise ConvattError("--sentence has no words")
    _load_backend(args.debug)
    from convatt.inspection import inspect_run

    out = Path(args.out) if args.out else Path(args.run) / "inspect"
    for path in inspect_run(args.run, out, sentence=args.sentence, dev_index=args.dev_index, log=print):
        print(f"wrote {path}")


def cmd_tables(args) -> None:
    from convatt.tables import write_tables

    _report(_warning_runs(write_tables, Path(args.runs), Path(args.out), args.settings))


def cmd_plot(args) -> None:
    from convatt.plots import write_plots

    _report(_warning_runs(write_plots, Path(args.runs), Path(args.out), "minmax", args.settings))


def _warning_runs(write, *args):
    """`write(*args)`, printing each run it left out (damaged, repeated) as one line on stderr."""
    import warnings

    from convatt.run_files import RunWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RunWarning)
        written = write(*args)
    for w in caught:
        if issubclass(w.category, RunWarning):
            print(f"convatt: warning: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return written


def _report(written) -> None:
    """The notes of `make tables`/`make plots` (what is not comparable, not written), then the files."""
    for note in written.notes:
        print(f"note: {note}")
    for path in written.paths:
        print(f"wrote {path}")


def cmd_bench(args) -> None:
    _load_backend(args.debug)
    from convatt.bench import run_benchmark

    run_benchmark(preset=args.preset, variant=args.variant, quick=args.quick, precision=args.precision,
                  memory=args.memory, reference=args.reference)


def _precisions() -> tuple[str, ...]:
    from convatt.variants import PRECISIONS

    return PRECISIONS


def _default(option: str):
    """The default of a `convatt train` option: `RunConfig`'s, the one source of them."""
    from convatt.runs import RunConfig

    return RunConfig.__dataclass_fields__[option].default


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="convatt", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_params_command(sub)
    _add_train_command(sub)
    _add_evaluate_command(sub)
    _add_tag_command(sub)
    _add_inspect_command(sub)
    _add_tables_command(sub)
    _add_plot_command(sub)
    _add_bench_command(sub)
    return parser


def _add_params_command(sub) -> None:
    p = sub.add_parser("params", help="parameter counts of every variant (Table 1c)")
    p.add_argument("--preset", default="ptb")
    p.add_argument("--data", help="corpus to take vocabulary sizes from")
    p.add_argument("--n-words", type=int)
    p.add_argument("--n-chars", type=int)
    p.add_argument("--n-labels", type=int)
    p.set_defaults(func=cmd_params)


def _add_train_command(sub) -> None:
    p = sub.add_parser("train", help="train and evaluate one run (resumes an interrupted one)")
    p.add_argument("--preset", required=True, help="ptb or ud")
    p.add_argument("--variant", required=True, help="e.g. san-pe-add (see `convatt params`)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", help="PTB: directory of .mrg files; UD: one treebank directory "
                                  "(default: the embedded PTB sample / UD_English-LinES)")
    p.add_argument("--embeddings", help="fastText vectors, .vec or .bin (PTB preset)")
    p.add_argument("--embeddings-limit", type=int, default=_default("embeddings_limit"),
                   help="read the first N vectors of a .vec file, as the paper (0: all)")
    p.add_argument("--epochs", type=int, default=_default("epochs"),
                   help=f"maximum epochs (early stopping, patience {_default('patience')})")
    p.add_argument("--limit", type=int, help="use at most N sentences per split (smoke runs)")
    p.add_argument("--mask-padding", action="store_true", help="mask PAD keys in attention (not in the paper)")
    p.add_argument("--curve-every", type=int, default=_default("curve_every"),
                   help="dev accuracy every N batches (Figure 2)")
    p.add_argument("--curve-until", type=int, default=_default("curve_until"),
                   help="... up to this global batch (-1: always)")
    p.add_argument("--jit-compile", choices=["auto", "on", "off"], default="auto")
    p.add_argument("--precision", choices=_precisions(), default=_default("precision"),
                   help="Keras dtype policy (float32: the paper's; mixed_bfloat16 is ~2x faster on CPUs with "
                        "AVX512-BF16 and on GPUs); weights and the optimizer stay float32")
    p.add_argument("--out", required=True, help="run directory")
    _add_protocol_options(p)
    p.set_defaults(func=cmd_train)


def _add_evaluate_command(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate a finished run's model on a corpus split")
    p.add_argument("run", help="run directory")
    p.add_argument("--data", help="corpus (default: the run's own)")
    p.add_argument("--split", default="test", choices=["train", "dev", "test"])
    p.set_defaults(func=cmd_evaluate)


def _add_tag_command(sub) -> None:
    p = sub.add_parser("tag", help="tag CoNLL-U or plain text with a finished run's model; CoNLL-U out")
    p.add_argument("run", help="run directory")
    p.add_argument("--input", help="file to tag (default, or -: standard input)")
    p.add_argument("--output", help="CoNLL-U file to write (default, or -: standard output)")
    p.add_argument("--format", choices=["conllu", "text"], default="conllu",
                   help="input format: CoNLL-U (FORM is read) or text (a sentence per line, "
                        "tokens split on whitespace); default conllu")
    p.set_defaults(func=cmd_tag)


def _add_inspect_command(sub) -> None:
    p = sub.add_parser("inspect", help="figures and a CSV of what a finished run's attention learned")
    p.add_argument("run", help="run directory")
    p.add_argument("--out", help="where the figures and CSV go (default: RUN/inspect)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--sentence", help="the sentence whose attention maps are drawn (tokens split "
                                          "on whitespace)")
    which.add_argument("--dev-index", type=int, default=0,
                       help="... or the N-th sentence of the run's dev split (from 0; default 0)")
    p.set_defaults(func=cmd_inspect)


def _add_tables_command(sub) -> None:
    p = sub.add_parser("tables", help="Tables 2b-2d from run directories, beside the paper's")
    p.add_argument("--runs", default="runs")
    p.add_argument("--out", default="results")
    _add_setting_option(p)
    p.set_defaults(func=cmd_tables)


def _add_setting_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--setting", action="append", dest="settings", metavar="SETTING",
                   help="only the runs of this setting, as the tables mark them (e.g. keras3, mixed_bfloat16; "
                        "paper: the paper's own); repeat for several; default: all")


def _add_plot_command(sub) -> None:
    p = sub.add_parser("plot", help="learning curves (Table 2a, Figure 2) as PNG and PDF")
    p.add_argument("--runs", default="runs")
    p.add_argument("--out", default="results")
    _add_setting_option(p)
    p.set_defaults(func=cmd_plot)


def _add_bench_command(sub) -> None:
    p = sub.add_parser("bench", help="training throughput against a straightforward port")
    p.add_argument("--preset", default="ptb")
    p.add_argument("--variant", default="san-pe-add")
    p.add_argument("--quick", action="store_true", help="a short run (under 5 minutes on 2 cores)")
    p.add_argument("--precision", choices=_precisions(), default="float32",
                   help="float32: the tagger against the port; mixed_*: the tagger in that dtype policy "
                        "against the tagger in float32 (speedup of mixed precision)")
    p.add_argument("--memory", action="store_true",
                   help="also the peak memory of each model, each trained in a process of its own (Linux)")
    p.add_argument("--reference", default="auto",
                   help="what to time against: 'auto' (the straightforward port where it has the variant, "
                        "else san-pe-add built the same way) or a variant name, e.g. san-pe-add")
    p.set_defaults(func=cmd_bench)


def _interrupt(signum, frame):
    interrupt.request_stop()  # seen by the training loop even if the exception below is swallowed
    raise KeyboardInterrupt


def _os_error_message(e: OSError) -> str:
    """One line naming the path: "PATH: No space left on device"."""
    from convatt.rundir import os_error_reason

    where = f"{e.filename}: " if e.filename else ""
    if e.filename2:
        where = f"{e.filename} -> {e.filename2}: "
    return f"{where}{os_error_reason(e)}"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _quiet_backend()
    for signum in (signal.SIGINT, signal.SIGTERM):  # one stop path for Ctrl-C, kill and preemption
        signal.signal(signum, _interrupt)
    try:
        args.func(args)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("\nconvatt: interrupted; finished epochs are kept: rerun the same command to resume",
              file=sys.stderr)
        return 130
    except Exception as e:  # every error ends in one line; --debug shows the traceback
        if args.debug:
            raise
        print(f"convatt: error: {' '.join(_error_message(e).split())}", file=sys.stderr)  # one line
        return 2 if isinstance(e, (ConvattError, OSError)) else 1
    return 0


def _error_message(e: Exception) -> str:
    if isinstance(e, ConvattError):
        return str(e)
    if isinstance(e, OSError):
        return _os_error_message(e)
    return (f"unexpected {type(e).__name__}: {str(e)[:300]} (a bug in convatt: rerun with --debug for the "
            "traceback and report it)")


if __name__ == "__main__":
    sys.exit(main())

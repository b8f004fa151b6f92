"""What `convatt train` says about a run directory it will not write into, and what to do instead.

Advice never asks to delete what convatt may not have made: a directory holding another
run is answered with the options that would resume that run, a `config.json` that is
not convatt's with "choose another --out".
"""

from __future__ import annotations

import shlex
from pathlib import Path

from convatt.errors import ConvattError
from convatt.rundir.run_config import RunConfig
from convatt.rundir.schema import CONFIG_FILE

# RunConfig fields without a `convatt train` option (set through the Python API only)
_NO_OPTION = ("patience", "batch_size")
_FLAGS = {"start_from": "--from"}  # fields whose option is not named after them


def _option(name: str, value) -> list[str]:
    """The `convatt train` words that give field `name` the value `value`."""
    flag = _FLAGS.get(name, "--" + name.replace("_", "-"))
    if name == "mask_padding":
        return [flag] if value else ["(without --mask-padding)"]
    if name == "embeddings_limit":
        return [flag, str(value or 0)]
    if value is None:
        return [f"(without {flag})"]
    return [flag, str(value)]


def resume_options(saved: RunConfig, given: RunConfig, finished: bool = False) -> list[str]:
    """The `convatt train` options, beyond those given, that make `given` the run `saved` holds
    (each that differs, with the value in config.json; protocol items one by one)."""
    words: list[str] = []
    for name in _differing(saved, given, finished):
        if name == "protocol":
            for item in type(saved.protocol).items():
                old = getattr(saved.protocol, item.name)
                if old != getattr(given.protocol, item.name):
                    words += _option(item.name, old)
        elif name in _NO_OPTION:
            words.append(f"({name} {getattr(saved, name)!r}, through the Python API)")
        else:
            words += _option(name, getattr(saved, name))
    return words


def _differing(saved: RunConfig, given: RunConfig, finished: bool) -> list[str]:
    """The field names `RunConfig.differences` reports, in field order."""
    reported = {line.split(":", 1)[0] for line in saved.differences(given, finished)}
    return [f for f in RunConfig.__dataclass_fields__ if f in reported]


def _shown(words: list[str]) -> str:
    return " ".join(w if w.startswith("(") else shlex.quote(w) for w in words)


def saved_run_config(out: Path, given: RunConfig, finished: bool = False) -> RunConfig:
    """The run `out/config.json` holds, which `given` must match to resume it (`finished`: to
    stand for it, its epochs included); a ConvattError that says what to do when it is not
    convatt's or holds another run."""
    try:
        saved = RunConfig.load(out)
    except ConvattError as e:
        if not e.message.startswith("not a convatt run"):
            raise
        raise ConvattError(
            f"{e.message}: {out} is not a convatt run directory and convatt does not write into it; "
            "choose another --out",
            e.path,
        ) from None
    differ = saved.differences(given, finished)
    if differ:
        held, use = (
            ("a finished run with other options", "to use it")
            if finished
            else ("a different run", "to resume that run")
        )
        raise ConvattError(
            f"this directory holds {held} ({', '.join(differ)}): {use}, give "
            f"`{_shown(resume_options(saved, given, finished))}` instead; to train this one, choose another --out",
            out / CONFIG_FILE,
        )
    return saved

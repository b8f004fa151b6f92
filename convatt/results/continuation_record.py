"""Runs recorded but not present: an earlier page's per-run CSV (`runs_frame`'s rows) as the record
of the runs whose directories are gone. A run the record has finished stands in for an expected
run whose directory is absent; a directory that is present always wins. The record keeps each
run's numbers and provenance, not its dev curves: the figure has only the runs present.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from convatt.results.continuation import RECORD

TEXT_COLUMNS = ["task", "role", "variant", "setting", "treebank", "where", "target", "status", "note"]
TEXT_COLUMNS += ["commit", "machine", "backend", "source_commit", "origin"]
# What a run's row takes from the record; who the run is (task, role, variant, seed, where) comes
# from the expected runs, so a record of another layout cannot stand in for the wrong run.
RECORDED_COLUMNS = ["status", "epochs", "max_epochs", "batches", "start_step", "dev_start", "dev_best", "test"]
RECORDED_COLUMNS += ["commit", "machine", "backend", "source_commit"]
RECORDED_RUNNING = "the record has it running"
NUMBER_COLUMNS = ["epochs", "max_epochs", "batches", "start_step", "dev_start", "dev_best", "test"]


def read_record(path: Path) -> pd.DataFrame:
    """The record's rows (a page's .csv), its text columns as text ('' where empty: a commit such as
    "1234e56" must not read as a number), the last row of a run where it is there twice."""
    frame = pd.read_csv(path, dtype={c: str for c in TEXT_COLUMNS})
    frame = frame.assign(**{c: frame[c].fillna("") for c in TEXT_COLUMNS if c in frame})
    return frame.drop_duplicates(["task", "where"], keep="last")


def record_treebanks(record: pd.DataFrame) -> set[str]:
    """The tagger's treebanks the record holds runs of (the page expects their runs too)."""
    return set(record.loc[record["task"] == "ud", "treebank"])


def with_record(frame: pd.DataFrame, record: pd.DataFrame) -> pd.DataFrame:
    """`frame` (`runs_frame`) with each run whose directory is absent (origin "") taken from the
    record where the record has it finished (origin RECORD); one the record has unfinished stays
    missing, the note saying how far it was then."""
    recorded = record.set_index(["task", "where"])
    out = frame.copy()
    for i, row in frame[frame["origin"] == ""].iterrows():
        if (row["task"], row["where"]) not in recorded.index:
            continue
        then = recorded.loc[(row["task"], row["where"])]
        if then["status"] == "finished":
            for column in RECORDED_COLUMNS:
                out.at[i, column] = then[column]
            out.at[i, "origin"], out.at[i, "note"] = RECORD, ""
        elif then["status"] == "running":
            done = f"epoch {int(then['epochs'])} of {int(then['max_epochs'])} done"
            out.at[i, "note"] = f"{RECORDED_RUNNING}, {done}; its directory is not here"
        elif then["note"].startswith(RECORDED_RUNNING):  # an earlier record's word, kept for the next
            out.at[i, "note"] = then["note"]
    # numbers as numbers (a frame of missing runs only holds None), for the tables and the CSV
    return out.assign(**{c: pd.to_numeric(out[c]) for c in NUMBER_COLUMNS})


def origin_note(frame: pd.DataFrame, record: Path | None) -> str:
    """Where the finished runs come from, when some come from the record."""
    finished = frame[frame["status"] == "finished"]
    recorded = int((finished["origin"] == RECORD).sum())
    if not recorded:
        return ""
    share = (
        f"All {recorded} finished runs come"
        if recorded == len(finished)
        else f"Of the {len(finished)} finished runs, {len(finished) - recorded} are read from their run "
        f"directories and {recorded}"
    )
    return (
        f"{share} from the record `{Path(record).name}` (an earlier page's per-run CSV), their directories "
        "not being here: marked \"from the record\" below. The record holds "
        "each run's test and dev scores, epochs and provenance, not its dev curves, and its scores to four "
        "decimals: a last digit shown here can differ by one from the page it was written with, where a "
        "score lay halfway."
    )

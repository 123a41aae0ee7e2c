"""Reading format 1 recordings: one SQLite row per record, one SQL column per schema column (what brrrtui
wrote before the columnar layout of brrrtui.recording.columns). Reading a table builds a Python tuple per row
(1 M kernels and 3 M ops: ~8 s), which is why format 2 stores typed arrays instead."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

import numpy as np

from brrrtui.contract.model import Table
from brrrtui.recording import columns
from brrrtui.recording.checks import check_column, column_matrix


def total_rows(db: sqlite3.Connection, table: str) -> int:
    """The table's row count: rows are only ever appended, so rowids run 1..n."""
    return int(db.execute(f"SELECT coalesce(max(rowid), 0) FROM {table}").fetchone()[0])


def read_table(
    db: sqlite3.Connection,
    path: str,
    table: str,
    schema: Mapping[str, Any],
    lo: int = 0,
    hi: int | None = None,
) -> Table:
    """Rows [lo, hi) in append order. One query per column kind: numpy builds an int64 (or float64) matrix
    from the row tuples in C, 1.5x faster than splitting tuples in Python. A cell that is no number in its
    column's range (a damaged file) ends in one RecordingError line."""
    where = f"WHERE rowid > {int(lo)}" + ("" if hi is None else f" AND rowid <= {int(hi)}")
    groups = (
        [k for k, t in schema.items() if np.dtype(t).kind != "f"],
        [k for k, t in schema.items() if np.dtype(t).kind == "f"],
    )
    columns: dict[str, np.ndarray] = {}
    # a column added in a later version (spans.module, spans.lib_line) reads as unknown from older files
    present = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
    for names, dtype in zip(groups, (np.int64, np.float64), strict=True):
        if not names:
            continue
        exprs = [n if n in present else ("-1" if dtype is np.int64 else "NULL") for n in names]
        rows = db.execute(f"SELECT {', '.join(exprs)} FROM {table} {where}").fetchall()
        matrix = column_matrix(path, table, names, rows, dtype)
        for j, name in enumerate(names):
            check_column(path, table, name, matrix[:, j], schema[name])
            columns[name] = matrix[:, j].astype(schema[name])
    return Table({k: columns[k] for k in schema})


def upgrade(db: sqlite3.Connection, path: str, tables: Mapping[str, Mapping[str, Any]]) -> None:
    """Rewrite a format 1 file's tables in the columnar layout, in one transaction (a writer that appends to
    an older recording): each table becomes one batch."""
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    with db:
        db.execute("BEGIN")
        for table, schema in tables.items():
            if table not in names:
                continue
            rows = read_table(db, path, table, schema)
            db.execute(f"DROP TABLE {table}")
            db.execute(columns.create_sql(table, schema))
            columns.insert(db, table, schema, rows)

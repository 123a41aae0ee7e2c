"""What a loader checks before it hands a Trace on: a damaged but parseable file ends in one RecordingError
line, never in a traceback deep inside an analysis pass.

Meta values are JSON of known types (keys a newer writer added are ignored, so an older reader keeps
working); table cells are numbers in their column's range; names and source lines are ids into the tables
that hold them; codes (`kind`, `mode`) are codes that exist.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sqlite3
import stat
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from brrrtui.contract.errors import InputError
from brrrtui.contract.model import Device, Peaks, Table
from brrrtui.contract.safe import safe_text
from brrrtui.contract.schema import GpuKind, WindowMode

TIME_LIMIT = 2**62
"""Largest time or duration in ns a column may hold (year 2116): sums of two never overflow int64."""
STRING_COLUMNS = ("name", "grid", "block", "shapes", "dtypes", "module")
LINE_COLUMNS = {"spans": ("line", "lib_line"), "line_samples": ("line",)}
CODES = {"kind": {int(k) for k in GpuKind}, "mode": {int(m) for m in WindowMode}}
_DEVICE_TYPES: dict[str, type] = {
    "name": str,
    "num_sms": int,
    "compute_capability": str,
    "total_memory_bytes": int,
    "l2_bytes": int,
    "driver": str,
    "cuda": str,
}
_INFO_TYPES: dict[str, tuple[type, ...]] = {  # meta keys the readers use; a damaged one is dropped, not fatal
    "argv": (list,),
    "cwd": (str,),
    "status": (str,),
    "notes": (list,),
    "exit_code": (int,),
    "started_at_ns": (int,),
    "ended_at_ns": (int,),
    "last_batch_ns": (int,),
}


class RecordingError(InputError):
    """A file that is not, or no longer, a readable recording. The message is one line for the user."""


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


_META_DEPTH = 64
"""The deepest a meta value may nest (brrrtui's own nest a few levels): deeper is damage."""


def _shallow(value: Any) -> bool:
    """`value` (parsed JSON) nests at most _META_DEPTH lists or dicts deep; walked without recursion."""
    level: list[Any] = [value]
    for _ in range(_META_DEPTH + 1):
        level = [
            v for x in level if isinstance(x, list | dict) for v in (x.values() if isinstance(x, dict) else x)
        ]
        if not level:
            return True
    return False


def parse_meta(path: str, rows: list[tuple[Any, Any]]) -> dict[str, Any]:
    """The meta table's (key, JSON text) rows as a dict; values of known keys with the wrong type dropped."""
    meta: dict[str, Any] = {}
    for key, text in rows:
        if not isinstance(key, str):
            continue
        try:
            meta[key] = json.loads(text)
        except (TypeError, ValueError, RecursionError):
            raise RecordingError(f"{path} is damaged: its meta value {key!r:.40} is not JSON") from None
        if not _shallow(meta[key]):  # the readers walk meta values recursively (contract.safe.safe_value)
            raise RecordingError(
                f"{path} is damaged: its meta value {key!r:.40} nests deeper than {_META_DEPTH}"
            )
    for key, types in _INFO_TYPES.items():
        if key in meta and not (isinstance(meta[key], types) and not isinstance(meta[key], bool)):
            del meta[key]
    return meta


def check_format(path: str, meta: Mapping[str, Any], fmt: str, version: int) -> None:
    if meta.get("format") != fmt:
        raise RecordingError(f"{path} is an SQLite file but not a brrrtui recording")
    found = meta.get("format_version", 0)
    if not _is_int(found):
        raise RecordingError(f"{path} is damaged: unknown format version {found!r:.40}")
    if found > version:
        raise RecordingError(f"{path} was written by a newer brrrtui (format {found})")


def device_from_meta(path: str, value: object) -> Device:
    """The `device` meta value as a Device: unknown keys ignored, a field of the wrong type unknown."""
    if value is None:
        return Device()
    if not isinstance(value, dict):
        raise RecordingError(f"{path} is damaged: its device facts are {type(value).__name__}, not an object")
    fields: dict[str, Any] = {}
    for k, t in _DEVICE_TYPES.items():
        v = value.get(k)
        fields[k] = v if isinstance(v, t) and not isinstance(v, bool) else None
    return Device(**fields)


def peaks_from_meta(path: str, value: object) -> Peaks | None:
    """The `peaks` meta value as Peaks: unknown keys ignored; ceilings must be positive numbers or null."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RecordingError(f"{path} is damaged: its peaks are {type(value).__name__}, not an object")
    fields: dict[str, Any] = {}
    for k in ("tensor_flops_per_s", "fp32_flops_per_s", "bytes_per_s", "l2_bytes"):
        v = value.get(k)
        if v is not None and not (_is_number(v) and v > 0):
            raise RecordingError(f"{path} is damaged: peaks {k} is {v!r:.40}")
        fields[k] = int(v) if k == "l2_bytes" and v is not None else v
    source = value.get("source", "measured")
    fields["source"] = source if isinstance(source, str) else "measured"
    return Peaks(**fields)


def column_matrix(path: str, table: str, names: list[str], rows: list[Any], dtype: type) -> np.ndarray:
    """Rows of one column kind (int64 or float64) as a matrix; NULL is -1 (or NaN); any other cell that is no
    number in range ends in one RecordingError line."""
    try:
        return np.array(rows, dtype=dtype).reshape(-1, len(names))
    except (TypeError, ValueError, OverflowError):  # a NULL, or a damaged cell: the slow, exact way
        pass
    out: np.ndarray = np.empty((len(rows), len(names)), dtype=dtype)
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            if v is None:
                out[i, j] = -1 if dtype is np.int64 else np.nan
            elif _is_number(v) and (dtype is np.float64 or abs(v) < 2**63):
                out[i, j] = v
            else:
                raise RecordingError(f"{path} is damaged: {table}.{names[j]} holds {v!r:.40}")
    return out


def check_column(
    path: str, table: str, name: str, values: np.ndarray, dtype: Any, bounds: tuple[int, int] | None = None
) -> None:
    """A column's values fit its dtype, its codes exist, its times are times. `bounds`: the values' (min, max)
    when the caller knows them already."""
    dt = np.dtype(dtype)
    if dt.kind != "i" or not len(values):
        return
    lo, hi = (int(values.min()), int(values.max())) if bounds is None else bounds
    info = np.iinfo(dt)
    if lo < info.min or hi > info.max:
        raise RecordingError(f"{path} is damaged: {table}.{name} holds {lo if lo < info.min else hi}")
    if name in CODES and not set(np.unique(values).tolist()) <= CODES[name]:
        bad = sorted(set(np.unique(values).tolist()) - CODES[name])[0]
        raise RecordingError(f"{path} is damaged: {table}.{name} holds the unknown code {bad}")
    if name.endswith("_ns") and (lo < -1 or hi > TIME_LIMIT):
        raise RecordingError(f"{path} is damaged: {table}.{name} holds {lo if lo < -1 else hi}")


def check_ids(path: str, tables: Mapping[str, Table], strings: int, lines: int) -> None:
    """Every name is an id into the string table and every line an id into the line table (or -1)."""
    for table_name, table in tables.items():
        if not len(table):
            continue
        for col, limit, what in [(c, strings, "string") for c in STRING_COLUMNS] + [
            (c, lines, "line") for c in LINE_COLUMNS.get(table_name, ())
        ]:
            values = table.columns.get(col)
            if values is None:
                continue
            lo, hi = int(values.min()), int(values.max())
            if lo < -1 or hi >= limit:
                bad = lo if lo < -1 else hi
                raise RecordingError(
                    f"{path} is damaged: {table_name}.{col} names {what} {bad}, but it holds {limit} {what}s"
                )


READ_BUDGET_OPS = 20_000_000
"""SQLite VM instructions any connection of a reader may spend, beyond READ_OPS_PER_BYTE per byte of the file:
reading a recording is scans of its tables, so a file that asks for more (a looping b-tree, an expression that
grows without end) is crafted or damaged, and its read stops with one line instead of running forever."""
READ_OPS_PER_BYTE = 32
_PROGRESS_EVERY = 1000
READ_LENGTH_FLOOR = 256 << 20
"""The longest string or blob a reader accepts: its file's size (a live one grows while read: four times it),
at least this. A longer value can only come from a crafted file (an overflow chain that loops)."""
SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema"})
_READ_PRAGMAS = frozenset({"table_info", "table_xinfo"})
_INTERRUPTED = "interrupted"


class _Reader(sqlite3.Connection):
    """A reader's connection: it says whether its work budget stopped it (`stopped`)."""

    stopped = False
    budget = 0

    def _progress(self) -> int:
        self.budget -= _PROGRESS_EVERY
        if self.budget < 0:
            self.stopped = True
            return 1
        return 0


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _authorizer(
    read_tables: frozenset[str],
) -> Callable[[int, str | None, str | None, str | None, str | None], int]:
    """Reads of `read_tables` (the schema's among them), the functions and table pragmas the readers use;
    every write, schema change, ATTACH, recursive query or other pragma is refused."""

    def authorize(
        action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None
    ) -> int:
        del arg2, db, trigger
        if action == sqlite3.SQLITE_READ:
            return sqlite3.SQLITE_OK if arg1 in read_tables else sqlite3.SQLITE_DENY
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_TRANSACTION):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and arg1 in _READ_PRAGMAS:
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY

    return authorize


def _refuse_unexpected_schema(db: sqlite3.Connection, path: str, read_tables: frozenset[str]) -> None:
    """A recording holds tables and their automatic indexes, nothing else: a view or a trigger (SQL that runs
    when a table is read or written) is refused, as is a table the readers read that is virtual or has
    computed columns (an expression evaluated at every read)."""
    for kind, name, sql in db.execute("SELECT type, name, sql FROM sqlite_master"):
        if kind in ("view", "trigger"):
            raise RecordingError(
                f"{path} holds an SQL {kind} ({safe_text(name)!r:.40}), which no recording has: "
                "not read (a crafted file?)"
            )
        if (
            kind == "table"
            and name in read_tables
            and str(sql or "").lstrip()[:14].upper() == "CREATE VIRTUAL"
        ):
            raise RecordingError(
                f"{path} holds a virtual table {name!r:.40}, which no recording has: not read"
            )
    computed = db.execute(
        "SELECT m.name FROM sqlite_master AS m, pragma_table_xinfo(m.name) AS x "
        "WHERE m.type = 'table' AND x.hidden IN (2, 3) LIMIT 1"
    ).fetchone()
    if computed is not None and computed[0] in read_tables:
        raise RecordingError(
            f"{path} holds a table with computed columns ({computed[0]!r:.40}), which no recording has: not read"
        )


def _open_file(path: str) -> os.stat_result:
    """The file's status once it is known to be a regular file (a FIFO or a device is never opened)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise RecordingError(f"{path}: no such file") from None
    except OSError as e:
        raise RecordingError(f"{path}: cannot read ({e.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise RecordingError(f"{path} is a directory, not a recording")
    if not stat.S_ISREG(st.st_mode):
        raise RecordingError(f"{path} is not a regular file (a FIFO, socket or device), not a recording")
    return st


def connect_untrusted(path: str, shown: str | None, read_tables: frozenset[str]) -> sqlite3.Connection:
    """A connection that only reads `path`, as untrusted input (SQLite's advice for files from elsewhere):
    `trusted_schema` off, defensive mode where this Python has it (3.12+) and its equivalent here: the
    connection is query-only and an authorizer lets it read only `read_tables`; a view,
    a trigger, a virtual table or computed columns are refused with one RecordingError line
    (_refuse_unexpected_schema); its work is bounded by the file's size (READ_BUDGET_OPS) and so is the
    longest value it reads (READ_LENGTH_FLOOR).

    The file is opened read-only, unless a rollback journal lies beside it and we may write both: SQLite then
    rolls back the transaction a killed writer left half done (it cannot from a read-only connection).
    `shown`: the file as the user named it, for messages (`path` may be an unpacked copy)."""
    st = _open_file(path)
    journal = os.path.exists(path + "-journal")
    mode = (
        "rw"
        if journal and os.access(path, os.W_OK) and os.access(os.path.dirname(os.path.abspath(path)), os.W_OK)
        else "ro"
    )
    uri = "file:" + os.path.abspath(path).replace("?", "%3f").replace("#", "%23") + f"?mode={mode}"
    db = sqlite3.connect(uri, uri=True, check_same_thread=False, factory=_Reader)
    db.text_factory = _text  # text that is not UTF-8 (a damaged file) is read, never raised from
    try:
        setconfig = getattr(db, "setconfig", None)  # Python 3.12+
        if setconfig is not None:
            setconfig(sqlite3.SQLITE_DBCONFIG_DEFENSIVE, True)  # type: ignore[attr-defined]
            setconfig(sqlite3.SQLITE_DBCONFIG_TRUSTED_SCHEMA, False)  # type: ignore[attr-defined]
        db.execute("PRAGMA trusted_schema = OFF")
        db.execute("PRAGMA query_only = ON")
        db.execute("PRAGMA cell_size_check = ON")
        db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(4 * st.st_size, READ_LENGTH_FLOOR))
        db.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        db.budget = READ_BUDGET_OPS + READ_OPS_PER_BYTE * st.st_size
        db.set_progress_handler(db._progress, _PROGRESS_EVERY)
        try:
            _refuse_unexpected_schema(db, shown or path, read_tables)
        except UnicodeDecodeError:  # SQLite's message quotes the schema's bytes, which are not UTF-8
            raise RecordingError(
                f"{shown or path} is damaged or not a recording (malformed database schema)"
            ) from None
        db.set_authorizer(_authorizer(read_tables))
    except BaseException:
        db.close()
        raise
    return db


def database_error(path: str, db: sqlite3.Connection | None, e: sqlite3.Error) -> RecordingError:
    """The one line for an SQLite error met reading `path` through `db` (a connect_untrusted connection)."""
    if isinstance(db, _Reader) and db.stopped or str(e) == _INTERRUPTED:
        return RecordingError(
            f"{path} is damaged or crafted: reading it needs far more work than a recording of its size "
            "(stopped)"
        )
    return RecordingError(f"{path} is damaged or not a recording ({e})")


@functools.cache
def memory_bytes() -> int | None:
    """This machine's memory, or the container's limit where one is set lower (cgroup v2); None unknown.
    Read once: a live view asks at every table it reads, every poll."""
    try:
        found = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        return min(found, int(limit)) if limit.isdigit() else found
    except OSError:
        return found


def memory_note() -> str:
    """ " (this machine has N GB)" for an out-of-memory error, "" when unknown."""
    have = memory_bytes()
    return f" (this machine has {have / 1e9:,.1f} GB)" if have else ""


def check_fits_in_memory(path: str, table: str, rows: int, row_bytes: int) -> None:
    """`rows` rows of `table` fit this machine's memory as columns, else one RecordingError line, before any
    is allocated: numpy's allocation of more than memory can succeed (the kernel overcommits), and filling
    the columns then gets the process killed instead of ending in an error."""
    need, have = rows * row_bytes, memory_bytes()
    if have is not None and need > have:
        raise RecordingError(
            f"{path} is damaged or too big to open here: its {table} table claims {rows:,} rows "
            f"({need / 1e9:,.1f} GB as columns), more than this machine's {have / 1e9:,.1f} GB of memory"
        )

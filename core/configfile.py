"""The settings file (TOML) beside the environment: reading, merging, where each value came from.

`load(environ, config=path)` reads the file named by `--config` or PULSAR_LENS_CONFIG (none by
default), lays the environment over it (the environment wins), validates the result with
pydantic-settings and remembers, for every key, whether it came from the file (and its line),
the environment (and the variable) or the default. Errors name the key where it was set:
`lens.toml line 7, clusters[1].admin_url: ...` or `PULSAR_LENS_RETENTION must be ...`.

Clusters: every `[[clusters]]` table of the file is one cluster. Without one, the single
cluster comes from the environment (PULSAR_ADMIN_URL, ...); with exactly one, the environment's
connection variables override its keys; with several, they apply to none (`ignored_env`).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from pulsar_lens.core.config import CLUSTER_ENV, CLUSTER_KEYS, CONFIG_ENV, GLOBAL_ENV, LensConfig
from pulsar_lens.core.errors import RuleBroken, SettingProblem, SettingsError
from pulsar_lens.core.values import DEFAULT_RETENTION

MAX_FILE_BYTES = 1024 * 1024  # settings files are a few KiB; this leaves room for comments
MAX_DEPTH = 16  # the deepest real key is clusters[i].oauth2.<key>: 4
_KEY_PART = r"""(?:[A-Za-z0-9_-]++|"[^"\n]*+"|'[^'\n]*+')"""  # possessive: linear on any text
_DEEP_KEY = re.compile(
    rf"""(?<![A-Za-z0-9_\-"']){_KEY_PART}(?:[ \t]*+\.[ \t]*+{_KEY_PART}){{{MAX_DEPTH},}}"""
)


@dataclass(frozen=True, slots=True)
class Origin:
    """Where one value came from: `source` file / env / default, `where` the line or variable."""

    source: Literal["file", "env", "default"]
    where: str = ""
    line: int | None = field(default=None, compare=False)  # the file's, when known: in `where`

    def text(self) -> str:
        return f"{self.source} {self.where}".strip()


@dataclass(frozen=True)
class Loaded:
    """The validated settings, the file they came from, and each key's origin."""

    config: LensConfig
    file: Path | None
    origins: Mapping[str, Origin]  # "poll_interval", "clusters[0].tls.verify"
    ignored_env: tuple[str, ...] = ()  # connection variables no cluster took (several clusters)

    def origin(self, path: str) -> Origin:
        return self.origins.get(path, Origin("default"))


def load(environ: Mapping[str, str], *, config: str | Path | None = None) -> Loaded:
    """The settings from `config` (else the file in PULSAR_LENS_CONFIG, else none) and `environ`
    (`core.settings.process_environ()` for the process's; empty variables count as unset).
    SettingsError names every problem."""
    env = {k: v.strip() for k, v in environ.items()}
    env = {k: v for k, v in env.items() if v}
    given = config if config is not None else env.get(CONFIG_ENV)
    path = Path(given) if given else None
    data, lines = _read_file(path, "--config" if config is not None else CONFIG_ENV)
    origins = _file_origins(data, lines, path.name) if path else {}
    raw = dict(data)
    for key, name in GLOBAL_ENV.items():
        if name in env:
            raw[key] = env[name]
            origins[key] = Origin("env", name)
    raw.setdefault("retention", DEFAULT_RETENTION)  # checked against the poll interval
    raw["clusters"], ignored = _merge_clusters(data.get("clusters"), env, origins)
    problems = _missing_admin_urls(data.get("clusters"), path, origins)
    try:
        loaded = LensConfig(**raw)
    except ValidationError as exc:
        problems = _describe(exc, origins, path, problems)
        raise SettingsError(_lines(problems), problems=problems) from None
    if problems:
        raise SettingsError(_lines(problems), problems=problems)
    return Loaded(loaded, path, origins, ignored)


def _read_file(path: Path | None, how: str) -> tuple[dict[str, Any], dict[str, int]]:
    if path is None:
        return {}, {}
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)  # a huge file is refused unread
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        unread = f"cannot read the settings file {path}: {why}"
        raise SettingsError(f"{how}: {unread}", setting=how, file=path, problem=unread) from None
    if len(raw) > MAX_FILE_BYTES:
        large = f"larger than {MAX_FILE_BYTES // 1024} KiB, too large for a settings file"
        raise SettingsError(f"{path}: {large}", file=path, problem=large)
    deep = f"values nested more than {MAX_DEPTH} deep, too deep for a settings file"
    too_deep = SettingsError(f"{path}: {deep}", file=path, problem=deep)
    if _DEEP_KEY.search(text):  # tomllib takes time quadratic in a dotted key's length
        raise too_deep
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        bad = f"not valid TOML: {exc}"
        raise SettingsError(f"{path}: {bad}", file=path, problem=bad) from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise too_deep from None
    if _depth(data) > MAX_DEPTH:  # what tomllib took would still exhaust the checks below
        raise too_deep
    return data, key_lines(text)


def _depth(value: Any) -> int:
    """How deeply tables and arrays nest in `value` (a scalar is 0), without recursion."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            pending.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            pending.extend((v, depth + 1) for v in item)
    return deepest


def _file_origins(
    data: Mapping[str, Any], lines: Mapping[str, int], name: str
) -> dict[str, Origin]:
    """The origin of every table and value the file holds, at its line (else its table's)."""
    origins: dict[str, Origin] = {}

    def visit(value: Any, loc: tuple[Any, ...]) -> None:
        path = key_path(loc)
        line = next(
            (lines[p] for d in range(len(loc), 0, -1) if (p := key_path(loc[:d])) in lines), None
        )
        origins[path] = Origin("file", f"{name} line {line}" if line else name, line)
        if isinstance(value, dict):
            for key, item in value.items():
                visit(item, (*loc, key))
        elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
            for i, item in enumerate(value):
                visit(item, (*loc, i))

    for key, value in data.items():
        visit(value, (key,))
    return origins


def _merge_clusters(
    found: Any, env: Mapping[str, str], origins: dict[str, Origin]
) -> tuple[Any, tuple[str, ...]]:
    """The clusters with the environment's connection variables laid over the only one."""
    if found is not None and not isinstance(found, list):
        return found, ()  # validation says what is wrong with it
    clusters = [dict(c) if isinstance(c, dict) else c for c in (found or [{}])]
    set_vars = {key: name for key, name in CLUSTER_ENV.items() if name in env}
    if len(clusters) > 1:
        return clusters, tuple(set_vars.values())
    only = clusters[0]
    if not isinstance(only, dict):
        return clusters, ()
    for key, name in set_vars.items():
        table, _, leaf = key.rpartition(".")
        target = only
        if table:
            sub = only.get(table)
            target = dict(sub) if isinstance(sub, dict) else {}
            only[table] = target
        target[leaf] = env[name]
        origins[f"clusters[0].{key}"] = Origin("env", name)
    return clusters, ()


def _missing_admin_urls(
    found: Any, path: Path | None, origins: Mapping[str, Origin]
) -> list[SettingProblem]:
    """A `[[clusters]]` table of the file must say where its admin API is."""
    problems = []
    for i, table in enumerate(found if isinstance(found, list) else []):
        if isinstance(table, dict) and not table.get("admin_url"):
            if f"clusters[{i}].admin_url" in origins:
                continue  # the environment gave it
            missing = 'admin_url is missing, e.g. admin_url = "http://pulsar:8080"'
            problems.append(_place(("clusters", i), origins, path, missing))
    return problems


def _describe(
    exc: ValidationError,
    origins: Mapping[str, Origin],
    path: Path | None,
    problems: Sequence[SettingProblem],
) -> list[SettingProblem]:
    """Every problem, each with where the value was set; `_lines` says them."""
    found = list(problems)
    seen: set[tuple[Any, ...]] = set()
    for error in exc.errors(include_input=False, include_url=False):
        extra = error["type"] == "extra_forbidden"
        loc = tuple(error["loc"]) if extra else _field_loc(error["loc"])
        if loc in seen:
            continue  # the other members of a union (`str | None`) say nothing new
        seen.add(loc)
        if extra:
            found.append(_place(loc, origins, path, f"unknown key; expected one of {_known(loc)}"))
            continue
        found.append(_place(loc, origins, path, *_said(error)))
    return list({_line(p): p for p in found}.values())


def _said(error: Mapping[str, Any]) -> tuple[str, bool]:
    """What one pydantic error says, and whether it is a broken rule (`RuleBroken`).

    For a validator's ValueError pydantic keeps the exception in `ctx["error"]`: its own text,
    without the "Value error, " pydantic's message puts in front. Other errors (a string
    where a number was due, ...) are pydantic's message."""
    raised = error.get("ctx", {}).get("error") if error["type"] == "value_error" else None
    if isinstance(raised, ValueError):
        return str(raised), isinstance(raised, RuleBroken)
    return str(error["msg"]), False


def _lines(problems: Sequence[SettingProblem]) -> str:
    """One line per problem, each naming where the value was set."""
    return "\n".join(_line(p) for p in problems)


def _line(problem: SettingProblem) -> str:
    """`WHERE must be ...` for a broken rule, `WHERE: what is wrong` for anything else."""
    where = _where_text(problem)
    return f"{where} {problem.problem}" if problem.rule else f"{where}: {problem.problem}"


def _field_loc(loc: Sequence[Any]) -> tuple[Any, ...]:
    """The location up to its last key or index (pydantic appends union members)."""
    fields = {*GLOBAL_ENV, "clusters", *(p for k in CLUSTER_KEYS for p in k.split("."))}
    kept: list[Any] = []
    for part in loc:
        if not (isinstance(part, int) or part in fields):
            break
        kept.append(part)
    return tuple(kept)


def _known(loc: tuple[Any, ...]) -> str:
    if loc and loc[0] == "clusters":
        prefix = ".".join(str(p) for p in loc[2:-1])
        keys = (
            [k for k in CLUSTER_KEYS if "." not in k]
            if not prefix
            else [k.partition(".")[2] for k in CLUSTER_KEYS if k.startswith(prefix + ".")]
        )
        if not prefix:
            keys += ["tls", "oauth2"]
        return ", ".join(keys)
    return ", ".join([*GLOBAL_ENV, "clusters"])


def key_path(loc: Sequence[Any]) -> str:
    """("clusters", 1, "tls", "verify") -> "clusters[1].tls.verify"."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _place(
    loc: tuple[Any, ...],
    origins: Mapping[str, Origin],
    path: Path | None,
    problem: str,
    rule: bool = False,
) -> SettingProblem:
    """`problem` of the value at `loc` (a broken rule when `rule`), with the variable that set
    it, or the file, its line (the nearest known) and the key."""
    key = key_path(loc)
    for depth in range(len(loc), 0, -1):
        origin = origins.get(key_path(loc[:depth]))
        if origin is None:
            continue
        if origin.source == "env":
            return SettingProblem(problem, setting=origin.where, rule=rule)
        name = path.name if path is not None else None
        return SettingProblem(problem, file=name, line=origin.line, key=key, rule=rule)
    if path is not None:
        return SettingProblem(problem, file=path.name, key=key, rule=rule)
    variable = _env_name(loc)
    return SettingProblem(problem, setting=variable, key=None if variable else key, rule=rule)


def _where_text(problem: SettingProblem) -> str:
    """The variable that set the value, or `file line N, key.path`."""
    if problem.setting is not None:
        return problem.setting
    if problem.file is not None:
        at = f"{problem.file} line {problem.line}" if problem.line else problem.file
        return f"{at}, {problem.key}"
    return problem.key or ""


def _env_name(loc: tuple[Any, ...]) -> str | None:
    """The variable of a key when no file is read (a default that another value contradicts)."""
    if loc[:2] == ("clusters", 0):
        return CLUSTER_ENV.get(".".join(str(p) for p in loc[2:]))
    return GLOBAL_ENV.get(str(loc[0])) if len(loc) == 1 else None


# -- line numbers -----------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\" ]+?)\s*\]\]?\s*(#.*)?$")
_ASSIGN = re.compile(r"^\s*([A-Za-z0-9_\-]+(?:\s*\.\s*[A-Za-z0-9_\-]+)*)\s*=")


def key_lines(text: str) -> dict[str, int]:
    """The line (1-based) of each key path the file sets (`clusters[1].tls.verify`), and of
    each `[[clusters]]` header (`clusters[1]`). Line-based: a key inside a multi-line string
    may be missed, which only costs the line number in an error."""
    lines: dict[str, int] = {}
    prefix = ""
    counts: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            name = header.group(2).replace(" ", "").replace('"', "")
            if header.group(1) == "[[":
                counts[name] = counts.get(name, -1) + 1
                lines.setdefault(name, number)
                prefix = f"{name}[{counts[name]}]"
                lines[prefix] = number
            else:
                head, _, rest = name.partition(".")
                prefix = f"{head}[{counts[head]}].{rest}" if head in counts and rest else name
                lines.setdefault(prefix, number)
            continue
        assign = _ASSIGN.match(line)
        if assign:
            key = re.sub(r"\s+", "", assign.group(1))
            lines.setdefault(f"{prefix}.{key}" if prefix else key, number)
    return lines

"""Topic names read as the broker reads them (`org.apache.pulsar.common.naming.TopicName`).

One parser for the CLI, the collectors and the plugins, so a name means the same thing
everywhere, and the same thing it means to the broker:

- a short name is completed: `x` -> `persistent://public/default/x`, `t/ns/x` ->
  `persistent://t/ns/x` (split on `/` with empty parts dropped, as commons-lang does);
- the domain is matched ignoring case and written lower-case (`PERSISTENT://...` is
  `persistent://...`), and only `persistent` and `non-persistent` exist;
- `tenant/namespace/local` is a v2 name, `tenant/cluster/namespace/local` a v1 name (the
  local name keeps any further `/`); tenant, cluster and namespace must be non-empty and
  made of `A-Z a-z 0-9 _ - = : .` only; the local name must not be blank (4.0.7 refuses
  whitespace-only local names too) and may hold anything else; a 3.0 broker (`pulsar="3.0"`,
  read from 3.0.7's class) refuses only an empty local name and takes a whitespace-only one;
- `-partition-N` ends a partition's name when N is a plain non-negative int.

A 4.2 broker (`pulsar="4.2"`, read from 4.2.4's class and driven in tests/jvm) reads names
otherwise: v1 names (`tenant/cluster/namespace/local`, and so any `/` in a v2 local name) are
refused; an empty part (`a//b`, a leading or trailing `/`) is refused; the domain is still
matched ignoring case, but a full name is kept as written (`PERSISTENT://t/ns/x` stays so, and
hashes so for its bundle); the name's parts are split before the domain is checked.
`topic_name_line` says which reading a broker's version gets. The names a broker lists are
written alike by all three (`persistent://tenant/ns/local`), so the collector reads them with
the default.

`TopicName.topic` is the broker's `toString()`: the name it hashes to place a topic in a
bundle. Names the broker refuses raise `TopicNameError` with the broker's own message.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from pulsar_lens.core.names import NAMED_ENTITY, namespace_path, segment

TopicNameLine = Literal["4.0", "3.0", "4.2"]
"""The readings of topic names: the broker lines' ("4.0", "3.0") and 4.2's."""

DOMAINS = ("persistent", "non-persistent")
PARTITION_SUFFIX = "-partition-"
INT_MAX = 2**31 - 1


class TopicNameError(ValueError):
    """The broker would refuse this topic name (IllegalArgumentException); `name` is the name
    (or the part of it) refused, when known."""

    def __init__(self, message: str = "", *, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


@dataclass(frozen=True, slots=True)
class TopicName:
    """A topic name split as the broker splits it; `topic` is its normalised full name."""

    topic: str
    domain: str
    tenant: str
    namespace: str  # "tenant/ns", or "tenant/cluster/ns" for a v1 name
    local: str
    partitioned_topic: str | None  # the parent's full name for a partition, else None
    partition_index: int  # -1 when not a partition

    @property
    def persistent(self) -> bool:
        return self.domain == "persistent"

    @property
    def v2(self) -> bool:
        return self.namespace.count("/") == 1

    @property
    def admin_path(self) -> str:
        """The admin REST prefix of this topic, e.g. /admin/v2/persistent/t/ns/x, every part
        a `pulsar_lens.core.names.segment`; NameRefused for a part no path can carry (e.g. `..`)."""
        version = "v2/" if self.v2 else ""
        space, local = namespace_path(self.namespace), segment(self.local)
        return f"/admin/{version}{self.domain}/{space}/{local}"


def topic_name_line(version: str) -> TopicNameLine:
    """How a broker reporting `version` reads topic names: "3.0" for 3.0.x, "4.2" for 4.2.x and
    later lines, "4.0" for any other (4.0.x, or a version not known)."""
    if version == "3.0" or version.startswith("3.0."):
        return "3.0"
    head = version.split(".")[:2]
    known = len(head) == 2 and all(p.isdigit() for p in head)
    return "4.2" if known and (int(head[0]), int(head[1])) >= (4, 2) else "4.0"


NAMES_CACHED = 262_144
"""Names `parse_topic_name` remembers: more than the topics of a poll of 100,000 (a poll reads
each name in several passes; a cache smaller than the names misses on every one of them)."""


@lru_cache(maxsize=NAMES_CACHED)
def parse_topic_name(name: str, *, pulsar: TopicNameLine = "4.0") -> TopicName:
    """`name` read as the `TopicName.get(name)` of a broker of line `pulsar`; TopicNameError
    when it refuses it.

    A name holding a lone surrogate (bytes that were not UTF-8) is refused too: the broker's
    class would take it, but no request can carry it to a broker."""
    if not name.isascii() and any("\ud800" <= c <= "\udfff" for c in name):
        raise TopicNameError(
            f"{name.encode('utf-8', 'backslashreplace')!r} is not valid text", name=name
        )
    if pulsar == "4.2":
        return _parse_4_2(name)
    complete = _completed(name)
    domain_text, _, rest = complete.partition("://")
    domain = _domain(domain_text)
    parts = rest.split("/", 3)
    if len(parts) == 3:
        tenant, cluster, namespace, local = parts[0], None, parts[1], parts[2]
    elif len(parts) == 4:
        tenant, cluster, namespace, local = parts
    else:
        raise TopicNameError(f"Invalid topic name: {complete}", name=complete)
    _check_namespace(tenant, cluster, namespace)
    if pulsar == "3.0" and not local:
        raise TopicNameError(f"Invalid topic name: {complete}", name=complete)
    if pulsar != "3.0" and _blank(local):
        raise TopicNameError(
            f"Invalid topic name: {complete}. Topic local name must not be blank.", name=complete
        )
    space = f"{tenant}/{namespace}" if cluster is None else f"{tenant}/{cluster}/{namespace}"
    full = f"{domain}://{space}/{local}"
    index = partition_index(complete)
    parent = full[: full.rfind(PARTITION_SUFFIX)] if index >= 0 else None
    return TopicName(full, domain, tenant, space, local, parent, index)


def _parse_4_2(name: str) -> TopicName:
    """`TopicName.get(name)` as 4.2.4 reads it (see the module docstring)."""
    cut = name.find("://")
    if cut < 0:
        parts = _split_by_slash(name, 0)
        if len(parts) == 1:
            parts = ["public", "default", parts[0]]
        elif len(parts) != 3:
            raise _short_name_error(name)
        domain, full = "persistent", "persistent://" + "/".join(parts)
    else:
        parts = _split_by_slash(name[cut + 3 :], 4)
        if len(parts) == 4:
            raise TopicNameError(
                "V1 topic names (with cluster component) are no longer supported. Please use "
                f"the V2 format: '<domain>://tenant/namespace/topic'. Got: {name}",
                name=name,
            )
        if len(parts) != 3:
            raise TopicNameError(f"Invalid topic name {name}", name=name)
        domain, full = _domain(name[:cut]), name
    tenant, namespace, local = parts
    if _blank(local):
        raise TopicNameError(
            f"Invalid topic name: {name}. Topic local name must not be blank.", name=name
        )
    index = partition_index(local)
    _check_namespace(tenant, None, namespace)
    parent = full[: full.rfind(PARTITION_SUFFIX)] if index >= 0 else None
    return TopicName(full, domain, tenant, f"{tenant}/{namespace}", local, parent, index)


def _split_by_slash(text: str, limit: int) -> list[str]:
    """4.2.4's `TopicName.splitBySlash`: at most `limit` parts (any number when 0), the last
    one keeping any further `/`; an empty part is refused."""
    parts: list[str] = []
    start = 0
    for _ in range(limit - 1 if limit > 0 else len(text) + 1):
        cut = text.find("/", start)
        if cut < 0:
            parts.append(text[start:])
            return parts
        if cut == start:
            raise TopicNameError(f"Invalid topic name {text}", name=text)
        parts.append(text[start:cut])
        start = cut + 1
    if start >= len(text):
        raise TopicNameError(f"Invalid topic name {text}", name=text)
    parts.append(text[start:])
    return parts


def normalized(name: str) -> str:
    """The broker's full name of `name` (what it hashes for the bundle)."""
    return parse_topic_name(name).topic


def partition_index(name: str) -> int:
    """`TopicName.getPartitionIndex`: N of a trailing `-partition-N`, else -1."""
    if PARTITION_SUFFIX not in name:
        return -1
    text = name[name.rfind(PARTITION_SUFFIX) + len(PARTITION_SUFFIX) :]
    value = _java_parse_int(text)
    if value is None or value < 0 or len(text) != len(str(value)):
        return -1
    return value


def _completed(name: str) -> str:
    if "://" in name:
        return name
    parts = [p for p in name.split("/") if p]
    if len(parts) == 3:
        return f"persistent://{name}"
    if len(parts) == 1:
        return f"persistent://public/default/{parts[0]}"
    raise _short_name_error(name)


def _short_name_error(name: str) -> TopicNameError:
    return TopicNameError(
        f"Invalid short topic name '{name}', it should be in the format of "
        "<tenant>/<namespace>/<topic> or <topic>",
        name=name,
    )


def _domain(text: str) -> str:
    if text in DOMAINS:  # as written, which nearly every name is: equal ignoring case, too
        return text
    for domain in DOMAINS:
        if _equals_ignore_case(domain, text):
            return domain
    raise TopicNameError(f"Invalid topic domain: '{text}'", name=text)


def _equals_ignore_case(a: str, b: str) -> bool:
    """Java's String.equalsIgnoreCase: char by char, upper then lower case compared."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        ux, uy = _upper(x), _upper(y)
        if ux == uy or _lower(ux) == _lower(uy):
            continue
        return False
    return True


def _upper(char: str) -> str:
    upper = char.upper()
    return upper if len(upper) == 1 else char  # Java maps a char to one char or keeps it


def _blank(text: str) -> bool:
    """commons-lang `StringUtils.isBlank`: empty, or only Java whitespace (which, unlike
    Python's, leaves out the no-break spaces and U+0085)."""
    if text and not text[0].isspace():  # the usual name: its first character decides
        return False
    return all(c.isspace() and c not in "\u00a0\u2007\u202f\u0085" for c in text)


def _lower(char: str) -> str:
    lower = char.lower()
    if len(lower) == 1:
        return lower
    return "i" if char == "\u0130" else char  # Java lower-cases dotted capital I to plain i


_VALID_NAMESPACES: set[tuple[str, str | None, str]] = set()
"""Namespaces `_check_namespace` passed, so the topics of one namespace check it once (at most
`_KEPT_NAMESPACES` of them; the set starts again when full)."""
_KEPT_NAMESPACES = 4096


def _check_namespace(tenant: str, cluster: str | None, namespace: str) -> None:
    key = (tenant, cluster, namespace)
    if key in _VALID_NAMESPACES:
        return
    _check_namespace_parts(tenant, cluster, namespace)
    if len(_VALID_NAMESPACES) >= _KEPT_NAMESPACES:
        _VALID_NAMESPACES.clear()
    _VALID_NAMESPACES.add(key)


def _check_namespace_parts(tenant: str, cluster: str | None, namespace: str) -> None:
    parts = [tenant, namespace] if cluster is None else [tenant, cluster, namespace]
    if not all(parts):
        raise TopicNameError(
            f"Invalid namespace format. namespace: {'/'.join(parts)}", name="/".join(parts)
        )
    for part in parts:
        if not NAMED_ENTITY.fullmatch(part):
            raise TopicNameError(f"Invalid named entity: {part}", name=part)


def _java_parse_int(text: str) -> int | None:
    """Integer.parseInt: an optional sign, then decimal digits (any script), within int."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    # Java reads one UTF-16 unit at a time: a digit outside the BMP is two units, no digit
    if not digits or not all(c.isdecimal() and ord(c) < 0x10000 for c in digits):
        return None
    lead = next((i for i, c in enumerate(digits) if unicodedata.decimal(c)), len(digits))
    if len(digits) - lead > len(str(INT_MAX)):
        return None  # beyond int, and Python's int() refuses thousands of digits
    value = int(digits[lead:] or "0") * (-1 if text[0] == "-" else 1)
    return value if -INT_MAX - 1 <= value <= INT_MAX else None

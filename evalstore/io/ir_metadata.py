"""A run file's ir_metadata block (https://www.ir-metadata.org; Breuer et al., SIGIR 2022): YAML in
comment lines at the top of a TREC run, between ``# ir_metadata.start`` and ``# ir_metadata.end``,
recording how the run was made (PRIMAD: platform, research goal, implementation, method, actor,
data). trec_eval and evalstore's run reader skip comment lines; this module reads the block.

The block is kept as the exact bytes of those lines (the markers included), so that ``runs
export`` writes it back byte for byte; its YAML is parsed (PyYAML's safe loader) to validate it,
to search runs by its keys and to show it. Each content line loses its ``#`` and one space after
it, which reads both ``#key: value`` and repro_eval's ``# key: value `` (its metadata writer).
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalstore.errors import InputFormatError

START = "# ir_metadata.start"
END = "# ir_metadata.end"
METADATA_KEY = "ir_metadata"  # the key of the block in a run's metadata


@dataclass(frozen=True)
class IrMetadata:
    block: str  # the block's lines as in the file (line endings included), markers included
    data: dict[str, Any]  # the parsed YAML
    line: int  # the 1-based line of the start marker

    def flat(self) -> dict[str, str]:
        """Dotted keys to scalar texts (``platform.software.libraries`` -> ``numpy, scipy``):
        what `runs list --meta KEY=VALUE` matches and run pages show."""
        return dict(_flatten(self.data, ""))


def _flatten(value: Any, prefix: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _flatten(inner, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and all(not isinstance(v, (Mapping, list)) for v in value):
        yield prefix, ", ".join(_scalar(v) for v in value)
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _flatten(inner, f"{prefix}.{i}")
    else:
        yield prefix, _scalar(value)


def _scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _head_lines(path: Path) -> list[str]:
    """The file's leading lines (endings kept) while they are comments or blank: the block is in
    the header, and the rows after it are not read."""
    lines: list[str] = []
    try:
        with path.open("rb") as raw:
            compressed = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            source = gzip.GzipFile(fileobj=raw) if compressed else raw
            with io.TextIOWrapper(source, encoding="utf-8", errors="surrogateescape", newline="") as text:
                for line in text:
                    if line.strip() and not line.lstrip().startswith("#"):
                        break
                    lines.append(line)
    except (OSError, EOFError):
        pass  # an unreadable file: the run reader reports it
    return lines


def read_ir_metadata(path: str | Path) -> IrMetadata | None:
    """The ir_metadata block among the file's leading comment lines, parsed; None when there is
    none. A block with no end marker, or whose YAML does not parse or is not a mapping, raises
    :class:`InputFormatError` at ``path:line``."""
    import yaml

    path = Path(path)
    lines: list[str] = []
    start = 0
    for number, line in enumerate(_head_lines(path), start=1):
        if not lines:
            if line.rstrip() == START:
                lines, start = [line], number
            continue
        lines.append(line)
        if line.rstrip() == END:
            break
    else:
        if lines:
            raise InputFormatError(
                str(path), start, f"the ir_metadata block has no '{END}' line; close it before the first run line"
            )
        return None
    block = "".join(lines)
    try:
        block.encode("utf-8")
    except UnicodeEncodeError:
        raise InputFormatError(str(path), start, "the ir_metadata block is not UTF-8 text; save it as UTF-8") from None
    try:
        data = yaml.safe_load(_yaml_text(lines))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = start + 1 + mark.line if mark is not None else start
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputFormatError(
            str(path), where, f"the ir_metadata block is not valid YAML: {problem}; fix the block or remove it"
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputFormatError(
            str(path),
            start + 1,
            f"the ir_metadata block must be a YAML mapping (key: value), not a {type(data).__name__}",
        )
    return IrMetadata(block, _plain(data), start)


def _yaml_text(lines: list[str]) -> str:
    """The YAML between the markers: each line without its '#' and one space after it."""
    content = []
    for line in lines[1:-1]:
        text = line.lstrip()[1:] if line.lstrip().startswith("#") else line
        content.append(text[1:] if text.startswith(" ") else text)
    return "".join(content)


def _plain(value: Any) -> Any:
    """The YAML's values as JSON can store them: dates and other scalars as text, keys as text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def parse_block(block: str) -> IrMetadata:
    """A stored block parsed again (its YAML was validated when the run was registered)."""
    import yaml

    data = yaml.safe_load(_yaml_text(block.splitlines(keepends=True))) or {}
    return IrMetadata(block, _plain(data) if isinstance(data, dict) else {}, 1)


def matches(data: Mapping[str, Any], key: str, value: str) -> bool:
    """Whether the block holds ``value`` at the dotted ``key`` (``ir_metadata.`` in front is
    optional); a list matches when one of its items equals ``value``."""
    key = key.removeprefix(f"{METADATA_KEY}.")
    found: Any = data
    for part in key.split("."):
        if isinstance(found, Mapping) and part in found:
            found = found[part]
        elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
            found = found[int(part)]
        else:
            return False
    if isinstance(found, list):
        return any(_scalar(item) == value for item in found if not isinstance(item, (Mapping, list)))
    return not isinstance(found, Mapping) and _scalar(found) == value

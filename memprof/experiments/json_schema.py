"""The published contract of a saved Result: a JSON Schema made from the structures the loader
decodes with (msgspec), one variant per command; memprof/result.schema.json ships it (the loader
checks more: base.check_result). Written again after a change to the structures:
python -m memprof.experiments.json_schema
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import msgspec

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "result.schema.json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def result_schema() -> dict[str, Any]:
    """The JSON Schema of a Result as today's memprof saves it (--json)."""
    from memprof.experiments import COMMANDS, shape_of
    from memprof.model.results import RUN_SET_FORMAT, RUN_SET_VERSION, SCHEMA_VERSION, Result

    variants = []
    for line in COMMANDS:
        shape = shape_of(line.name)
        fields: list[tuple] = []
        for field in msgspec.structs.fields(Result):
            kind = {
                "command": Literal[line.name],
                "parameters": shape.params,
                "extra": shape.extra,
                "schema_version": Literal[SCHEMA_VERSION],
            }.get(field.name, field.type)
            if field.default_factory in (list, dict):  # as the loader takes it: empty
                fields.append((field.name, kind, field.default_factory()))
            elif field.default is msgspec.NODEFAULT or field.name == "extra":
                fields.append((field.name, kind))  # a file holds its own: made for each run
            else:
                fields.append((field.name, kind, field.default))
        name = "".join(part.title() for part in line.name.replace("-", "_").split("_"))
        variants.append(
            msgspec.defstruct(f"{name}Result", fields, kw_only=True, module=Result.__module__)
        )
    schemas, components = msgspec.json.schema_components(variants, ref_template="#/$defs/{name}")
    for name in _dataclasses(variants):  # the loader refuses a key they do not declare
        components[name]["additionalProperties"] = False
    components["AnyResult"] = {"description": "A Result of any command.", "oneOf": schemas}
    components["RunSet"] = {
        "description": (
            "Several Results in one file: what --json saves for a run of --device all (each "
            "GPU's Result of one command, then at most one run over every GPU at once)."
        ),
        "type": "object",
        "properties": {
            "format": {"const": RUN_SET_FORMAT},
            "format_version": {"const": RUN_SET_VERSION},
            "results": {"type": "array", "items": {"$ref": "#/$defs/AnyResult"}, "minItems": 1},
        },
        "required": ["format", "format_version", "results"],
        "additionalProperties": False,
    }
    return {
        "$schema": DIALECT,
        "title": "memprof result",
        "description": (
            f"A Result saved by memprof --json, schema version {SCHEMA_VERSION}: one variant "
            "per command (its parameters and extra), or several in one file (RunSet). Units "
            "are in the names: _ms milliseconds, _s seconds, bytes, _gb_per_s 10^9 bytes per "
            "second (docs/formats.md)."
        ),
        "oneOf": [*schemas, {"$ref": "#/$defs/RunSet"}],
        "$defs": components,
    }


def _dataclasses(types: list[type]) -> set[str]:
    """The names of the dataclasses these types hold, at any depth (msgspec's Structs say
    additionalProperties themselves)."""
    import msgspec.inspect

    names: set[str] = set()
    seen: set[int] = set()

    def walk(node: Any) -> None:
        if isinstance(node, tuple | list):
            for item in node:
                walk(item)
        elif isinstance(node, msgspec.inspect.Type | msgspec.inspect.Field):
            if id(node) in seen:
                return
            seen.add(id(node))
            if isinstance(node, msgspec.inspect.DataclassType):
                names.add(node.cls.__name__)
            for value in msgspec.structs.astuple(node):
                walk(value)

    walk(msgspec.inspect.multi_type_info(types))
    return names


def schema_text() -> str:
    """The schema as memprof/result.schema.json holds it."""
    return json.dumps(result_schema(), indent=1, sort_keys=True) + "\n"


# A field's unit from its name (the house names units): the longest matching ending first.
UNITS = (
    ("_gb_per_s", "GB/s (10^9 bytes/s)"),
    ("_mb_per_s", "MB/s (10^6 bytes/s)"),
    ("_ms_each", "ms, each"),
    ("_ms", "ms"),
    ("_s", "s"),
    ("_pct", "%"),
    ("_khz", "kHz"),
    ("_mhz", "MHz"),
    ("_bits", "bits"),
    ("_bytes", "bytes"),
)


def unit_of(name: str) -> str:
    """The unit a field's name gives, or '' (a count, a name, a flag: no unit)."""
    if name in ("bytes", "elements"):
        return name
    return next((unit for ending, unit in UNITS if name.endswith(ending)), "")


def _kind(schema: dict[str, Any]) -> str:
    """A field's JSON type in a few words: `integer`, `array of Measurement`, `"a" | "b"`."""
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return " \\| ".join(json.dumps(value) for value in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_kind(option) for option in schema["anyOf"])
    if schema.get("type") == "array":
        items = schema.get("items") or schema.get("prefixItems")
        inner = _kind(items) if isinstance(items, dict) else "values"
        return f"array of {inner}"
    return schema.get("type", "any value")


def _limits(schema: dict[str, Any]) -> str:
    """A field's bounds as the schema states them, for the table."""
    for option in schema.get("anyOf", ()):
        if _limits(option):
            return _limits(option)
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        return _limits(schema["items"])
    signs = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
    words = [f"{sign} {_number(schema[key])}" for key, sign in signs.items() if key in schema]
    return ", ".join(words)


def _number(value: float) -> str:
    """A bound as people write it: 2^53 rather than 9.0072e+15."""
    if float(value).is_integer():
        whole = int(value)
        power = whole.bit_length() - 1
        return f"2^{power}" if whole >= 1 << 20 and whole == 1 << power else str(whole)
    return f"{value:g}"


def fields_markdown(schema: dict[str, Any] | None = None) -> str:
    """Every field of every structure with its type, unit and bounds (docs/formats.md's block)."""
    schema = schema or result_schema()
    lines = []
    for name, structure in sorted(schema["$defs"].items()):
        lines += ["", f"### {name}", ""]
        if structure.get("description"):
            lines += [" ".join(structure["description"].split()), ""]
        required = set(structure.get("required", ()))
        lines += ["| Field | Type | Unit | Bounds | Required |", "| --- | --- | --- | --- | --- |"]
        for field, value in structure.get("properties", {}).items():
            lines.append(
                f"| `{field}` | {_kind(value)} | {unit_of(field)} | {_limits(value)} | "
                f"{'yes' if field in required else ''} |"
            )
    return "\n".join(lines[1:]) + "\n"


DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "formats.md"
BEGIN = "<!-- every JSON field: python -m memprof.experiments.json_schema writes this block -->"
END = "<!-- end of every JSON field -->"


def with_fields(doc: str, block: str) -> str:
    """docs/formats.md with its generated block replaced by `block`."""
    head, _, rest = doc.partition(BEGIN + "\n")
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{block}{END}{tail}"


if __name__ == "__main__":
    SCHEMA_FILE.write_text(schema_text())
    DOC.write_text(with_fields(DOC.read_text(), fields_markdown()))
    print(f"wrote {SCHEMA_FILE} and the fields of {DOC}")

"""A small JSON Schema checker for the keywords the shipped schemas use (``jsonschema`` is not a
dependency): type, const, enum, required, properties, additionalProperties, items, minItems,
maxItems, minimum. It returns every violation as ``path: problem``."""

from __future__ import annotations

from typing import Any

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
KNOWN = {"$schema", "$id", "title", "description", "type", "const", "enum", "required", "properties",
         "additionalProperties", "items", "minItems", "maxItems", "minimum"}


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[kind])


def violations(value: Any, schema: dict, path: str = "$") -> list[str]:
    unknown = set(schema) - KNOWN
    if unknown:
        return [f"{path}: the checker does not know {sorted(unknown)}"]
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, k) for k in kinds):
            return [f"{path}: {value!r} is not of type {kinds}"]
    found = []
    if "const" in schema and value != schema["const"]:
        found.append(f"{path}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if "minimum" in schema and _is(value, "number") and value < schema["minimum"]:
        found.append(f"{path}: {value} is below {schema['minimum']}")
    if isinstance(value, dict):
        found += [f"{path}: {key!r} is required" for key in schema.get("required", []) if key not in value]
        properties = schema.get("properties", {})
        for key, item in value.items():
            if key in properties:
                found += violations(item, properties[key], f"{path}.{key}")
            elif schema.get("additionalProperties", True) is False:
                found.append(f"{path}: {key!r} is not allowed")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            found.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            found.append(f"{path}: more than {schema['maxItems']} items")
        if "items" in schema:
            for i, item in enumerate(value):
                found += violations(item, schema["items"], f"{path}[{i}]")
    return found

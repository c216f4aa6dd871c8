"""Python: run a user function over batches of rows (our transform; not in SeaTunnel).

``module`` + ``function`` (or ``function = "module:function"``) name a Python
callable. With ``api = pandas`` it receives and returns a pandas DataFrame per
batch, with ``api = arrow`` a pyarrow RecordBatch. The output schema is the input
schema, with the columns in ``output_schema`` (name = type) replacing same-named
columns in place or appended at the end. The module is not imported at plan time
(it may only exist on the workers); names are checked for syntax only.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from sources._schema_options import spark_type
from streaming_engine.plugins.base import PluginOptions, Transform
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Column, TableSchema
from transforms._common import MultiTableTransformOptions

_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_FUNCTION = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")  # attribute path allowed


class PythonOptions(MultiTableTransformOptions):
    module: str | None = Field(None, description='Python module with the function, e.g. "my_pkg.udfs".')
    function: str = Field(min_length=1, description='Function name, or "module:function" when module is not set.')
    api: Literal["pandas", "arrow"] = Field("pandas", description="Batch type passed to the function: pandas or arrow.")
    output_schema: dict[str, Any] | None = Field(
        None,
        description="Columns the function adds or changes: name = type (also accepted wrapped in fields { }).",
    )

    @model_validator(mode="before")
    @classmethod
    def _lower_api(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("api"), str):
            data = {**data, "api": data["api"].strip().lower()}
        return data

    @model_validator(mode="after")
    def _check(self) -> "PythonOptions":
        module, function = self.target()
        if not module:
            raise ValueError('set module (or write function = "module:function")')
        if not _MODULE.match(module):
            raise ValueError(f"module {module!r} is not a valid dotted module name")
        if not _FUNCTION.match(function):
            raise ValueError(f"function {function!r} is not a valid Python name")
        fields = self.fields()
        if fields is not None:
            if not fields:
                raise ValueError("output_schema is empty; declare the columns the function adds or changes, or remove it")
            for name, spec in fields.items():
                try:
                    spark_type(spec)
                except ValueError as e:
                    raise ValueError(f"output_schema column {name!r}: {e}") from None
        return self

    def target(self) -> tuple[str | None, str]:
        """(module, function) of the callable."""
        if ":" in self.function:
            if self.module is not None:
                raise ValueError('function is written as "module:function" but module is also set; keep one')
            module, _, function = self.function.partition(":")
            return module.strip(), function.strip()
        return self.module, self.function

    def fields(self) -> dict[str, Any] | None:
        s = self.output_schema
        if s is not None and len(s) == 1 and isinstance(s.get("fields"), dict):
            return s["fields"]
        return s


@register
class Python(Transform):
    name: ClassVar[str] = "Python"
    Options = PythonOptions
    description = "Runs a Python function over pandas or Arrow batches."
    execution = "python"
    chainable = True
    max_inputs = 1

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        assert isinstance(options, PythonOptions)
        declared = {name: spark_type(spec) for name, spec in (options.fields() or {}).items()}
        columns = [replace(c, type=declared.pop(c.name), nullable=True) if c.name in declared else c for c in table.columns]
        columns += [Column(name, t) for name, t in declared.items()]
        return replace(table, columns=tuple(columns))

    def describe(self) -> str:
        module, function = self.options.target()  # type: ignore[attr-defined]
        return f"Python ({module}:{function}, {self.options.api})"  # type: ignore[attr-defined]

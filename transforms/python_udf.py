"""Python: run a user function over batches of rows (our transform; not in SeaTunnel).

``module`` + ``function`` (or ``function = "module:function"``) name a Python
callable. With ``api = pandas`` it receives and returns a pandas DataFrame per
batch, with ``api = arrow`` a pyarrow RecordBatch. The output schema is the input
schema, with the columns in ``output_schema`` (name = type) replacing same-named
columns in place or appended at the end. The module is not imported at plan time
(it may only exist on the workers); names are checked for syntax only.

At run time the module is imported inside each Python worker (it must be
importable there: installed, or shipped with the job). The function sees the
whole batch, including the metadata columns ``__table``, ``__kind`` and
``__seq`` (keep them; it may drop rows), and its result is brought to the
output schema: columns by name, cast to their types, extra columns dropped.
Consecutive Python transforms run in one fused mapInArrow pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from sources._schema_options import spark_type
from streaming_engine.plugins.base import PluginOptions, Transform
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Column, TableSchema
from transforms._common import MultiTableTransformOptions
from transforms._runtime import arrow_schema

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

    def capabilities(self) -> dict[str, str]:
        functions = sorted({"{}:{}".format(*o.target()) for o in self.all_options()})  # type: ignore[attr-defined]
        return {"runs_code": f"it imports and runs the Python function {', '.join(functions)} (option function)"}

    def describe(self) -> str:
        module, function = self.options.target()  # type: ignore[attr-defined]
        return f"Python ({module}:{function}, {self.options.api})"  # type: ignore[attr-defined]

    def arrow_function(self, ctx, table, options):
        """The user's function wrapped to the engine's contract (built on the driver, run in workers).

        The function sees the whole batch, metadata columns included, and may
        drop rows (filter) or change values; its result is brought to the
        plan-time schema: columns taken by name and cast to their declared
        types, extra columns dropped. If it returns as many rows as it got, missing
        metadata columns are taken from the input; None or no rows drops the batch.
        """
        assert isinstance(options, PythonOptions)
        out = self.transform_table(table, options)
        module, function = options.target()
        assert module is not None
        return PythonFunction(ctx.vertex_id, table.table_id, module, function, options.api, arrow_schema(out, ctx))


_LOADED: dict[tuple[str, str], Any] = {}


def load_function(module: str, function: str) -> Any:
    """Import ``module`` and resolve the attribute path ``function`` (cached per worker process)."""
    key = (module, function)
    if key not in _LOADED:
        import importlib

        obj: Any = importlib.import_module(module)
        for part in function.split("."):
            obj = getattr(obj, part)
        if not callable(obj):
            raise TypeError(f"{module}:{function} is a {type(obj).__name__}, not a function")
        _LOADED[key] = obj
    return _LOADED[key]


@dataclass(frozen=True)
class PythonFunction:
    vertex_id: str
    table_id: str
    module: str
    function: str
    api: str
    schema: Any  # output pyarrow Schema

    def __call__(self, batch):
        import pyarrow as pa

        from streaming_engine.runtime import rows
        from transforms._runtime import TransformFailure, failure, to_schema

        name = f"{self.module}:{self.function}"
        try:
            fn = load_function(self.module, self.function)
        except Exception as e:  # the module is missing or broken on this worker: a restart will not help
            raise failure(self.vertex_id, self.table_id, f"cannot load {name}: {type(e).__name__}: {e}") from None
        try:
            result = fn(batch if self.api == "arrow" else batch.to_pandas())
        except Exception as e:
            raise TransformFailure(
                f"{self.vertex_id} on table {self.table_id}: {name} raised {type(e).__name__}: {e}"
            ) from e
        if result is None:
            return None
        columns: dict[str, Any] = {}
        if self.api == "arrow":
            if isinstance(result, pa.Table):
                result = result.combine_chunks().to_batches()[0] if result.num_rows else None
                if result is None:
                    return None
            if not isinstance(result, pa.RecordBatch):
                raise failure(self.vertex_id, self.table_id, f"{name} returned {type(result).__name__}, expected a pyarrow.RecordBatch")
            n = result.num_rows
            for i, field in enumerate(result.schema):
                columns[field.name] = result.column(i)
        else:
            import pandas as pd

            if not isinstance(result, pd.DataFrame):
                raise failure(self.vertex_id, self.table_id, f"{name} returned {type(result).__name__}, expected a pandas.DataFrame")
            n = len(result)
            for field in self.schema:
                if field.name in result.columns:
                    try:
                        columns[field.name] = pa.array(result[field.name], type=field.type, from_pandas=True)
                    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
                        raise failure(
                            self.vertex_id, self.table_id, f"{name}: column {field.name!r} cannot be read as {field.type}: {e}"
                        ) from None  # fmt: skip
        if n == 0:
            return None
        for m in rows.META:
            if m not in columns:
                if n != batch.num_rows:
                    raise failure(
                        self.vertex_id, self.table_id,
                        f"{name} dropped the metadata column {m!r} and changed the number of rows; keep {', '.join(rows.META)}",
                    )  # fmt: skip
                columns[m] = batch.column(batch.schema.get_field_index(m))
        missing = [f.name for f in self.schema if f.name not in columns]
        if missing:
            raise failure(
                self.vertex_id, self.table_id,
                f"{name} returned no column {', '.join(map(repr, missing))}; expected {', '.join(self.schema.names[3:])}",
            )  # fmt: skip
        try:
            return to_schema(columns, self.schema, name)
        except TypeError as e:
            raise failure(self.vertex_id, self.table_id, str(e)) from None

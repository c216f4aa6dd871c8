"""Python transform: function reference, api, output_schema."""

import pytest
from pydantic import ValidationError

from streaming_engine.plugins.registry import TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms.python_udf import Python, PythonOptions

T = TableSchema("t", (Column("id", "bigint", False), Column("score", "int")), ("id",))


def run(options, table=T):
    return Python(PythonOptions.model_validate(options)).output([Dataset((table,))]).tables[0]


def test_traits():
    assert TRANSFORMS.find("python") is Python
    assert (Python.execution, Python.chainable, Python.max_inputs) == ("python", True, 1)


def test_module_and_function_forms():
    a = PythonOptions.model_validate({"module": "my_pkg.udfs", "function": "enrich"})
    b = PythonOptions.model_validate({"function": "my_pkg.udfs:enrich", "api": "ARROW"})
    assert a.target() == b.target() == ("my_pkg.udfs", "enrich")
    assert (a.api, b.api) == ("pandas", "arrow")
    assert Python(b).describe() == "Python (my_pkg.udfs:enrich, arrow)"


def test_without_output_schema_the_schema_is_unchanged():
    assert run({"module": "m", "function": "f"}) == T


def test_output_schema_replaces_in_place_and_appends():
    out = run({"module": "m", "function": "f", "output_schema": {"score": "double", "label": "string"}})
    assert [(c.name, c.type) for c in out.columns] == [("id", "bigint"), ("score", "double"), ("label", "string")]
    assert out.primary_key == ("id",)
    wrapped = run({"module": "m", "function": "f", "output_schema": {"fields": {"label": "string"}}})
    assert wrapped.names == ("id", "score", "label")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"function": "f"}, 'set module \\(or write function = "module:function"\\)'),
        ({"module": "m", "function": "m2:f"}, "module is also set"),
        ({"module": "my-pkg", "function": "f"}, "not a valid dotted module name"),
        ({"module": "m", "function": "f(x)"}, "not a valid Python name"),
        ({"module": "m", "function": "f", "api": "polars"}, "api"),
        ({"module": "m", "function": "f", "output_schema": {"x": "strng"}}, "output_schema column 'x': unknown type"),
        ({"module": "m", "function": "f", "output_schema": {}}, "output_schema is empty"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(ValidationError, match=message):
        PythonOptions.model_validate(options)

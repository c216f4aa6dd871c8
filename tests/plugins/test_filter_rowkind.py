"""FilterRowKind: include_kinds / exclude_kinds."""

import pytest
from pydantic import ValidationError

from streaming_engine.plugins.registry import TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms.filter_rowkind import FilterRowKind, FilterRowKindOptions


def test_doc_example_and_schema_unchanged():
    opts = FilterRowKindOptions.model_validate({"source_table_name": "fake", "result_table_name": "fake1", "exclude_kinds": ["INSERT"]})
    ds = Dataset((TableSchema("fake", (Column("id", "int"),), ("id",)),))
    assert FilterRowKind(opts).output([ds]) == ds
    assert opts.kept_kinds() == ("UPDATE_BEFORE", "UPDATE_AFTER", "DELETE")
    assert TRANSFORMS.find("FilterRowKind") is FilterRowKind


def test_include_lowercase_kinds():
    opts = FilterRowKindOptions.model_validate({"include_kinds": ["delete", "insert"]})
    assert opts.kept_kinds() == ("INSERT", "DELETE")


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "exactly one of include_kinds or exclude_kinds"),
        ({"include_kinds": ["INSERT"], "exclude_kinds": ["DELETE"]}, "exactly one"),
        ({"include_kinds": []}, "include_kinds is empty"),
        ({"include_kinds": ["UPSERT"]}, "include_kinds"),
        ({"exclude_kinds": ["DELETE", "delete"]}, "lists 'DELETE' twice"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(ValidationError, match=message):
        FilterRowKindOptions.model_validate(options)

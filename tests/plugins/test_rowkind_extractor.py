"""RowKindExtractor: appends the row-kind column."""

import pytest
from pydantic import ValidationError

from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms.rowkind_extractor import RowKindExtractor, RowKindExtractorOptions

T = TableSchema("fake", (Column("pk_id", "bigint"), Column("name", "string"), Column("score", "int")), ("pk_id",))


def run(options, table=T):
    return RowKindExtractor(RowKindExtractorOptions.model_validate(options)).output([Dataset((table,))]).tables[0]


def test_defaults():
    out = run({})
    assert out.names[-1] == "row_kind"
    assert out.column("row_kind").type == "string" and out.column("row_kind").nullable is False
    assert out.primary_key == ("pk_id",)
    assert TRANSFORMS.find("rowkindextractor") is RowKindExtractor


def test_doc_example():
    opts = {"custom_field_name": "custom_name", "transform_type": "FULL", "result_table_name": "trans_result"}
    assert run(opts).names == ("pk_id", "name", "score", "custom_name")
    assert RowKindExtractorOptions.model_validate({"transform_type": "full"}).transform_type == "FULL"


def test_bad_transform_type():
    with pytest.raises(ValidationError, match="transform_type"):
        RowKindExtractorOptions.model_validate({"transform_type": "MEDIUM"})


def test_clash_with_existing_column():
    with pytest.raises(SchemaError) as e:
        run({"custom_field_name": "name"})
    assert e.value.condition == "SCHEMA.DUPLICATE_COLUMN" and e.value.params == {"column": "name", "table": "fake"}

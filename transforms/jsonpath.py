"""JsonPath: extract values from JSON fields with JSONPath (SeaTunnel JsonPath transform).

Each entry of ``columns`` reads ``src_field`` (a JSON string, bytes, or an
array / map / row, which is first serialised as SeaTunnel does: a row becomes
the JSON array of its field values, so ``$[0]`` is its first field), evaluates
``path`` and appends ``dest_field`` of type ``dest_type`` (default string).

Runs as Spark column expressions (execution "expression": a Catalyst segment,
no Python at run time; :mod:`transforms._jsonpath_catalyst`). Paths use
Jayway's syntax; the definite ones (``$``, ``.name``, ``['name']``, ``[n]``,
``[-n]``) are evaluated with Jayway's result, anything else (wildcards, deep
scan, slices, unions, filters, functions) is refused at plan time
(:mod:`transforms._jsonpath`).

Documents are read as SeaTunnel's Jayway reads them, with json-smart in its
permissive mode: a document strict JSON refuses (unquoted keys and string
values, single quotes, a trailing comma, ``True``, which is a string there)
is turned into strict JSON by json-smart itself
(``jvm/PermissiveJson.java``, a Java function run in the JVM, called only on
the rows where get_json_object found nothing and the text is not JSON), then
read as any other; bare text is a JSON string to it.

At run time, as SeaTunnel: a null source gives null, a JSON null gives null;
text that is not JSON, a path that matches nothing, or a value that does not
convert to ``dest_type`` is a bad value, handled by the column's
``column_error_handle_way`` (SKIP: null in that column, SKIP_ROW: drop the
row, FAIL) or else by ``row_error_handle_way`` (SKIP: drop the row, FAIL:
fail the job naming the transform, table, column, path and value). The first
bad column of a row (in ``columns`` order) that does not SKIP decides. A
string destination receives text as is and other JSON as compact JSON text.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from sources._schema_options import spark_type
from streaming_engine.plugins.base import PluginOptions, Transform, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Column, TableSchema
from transforms._common import MultiTableTransformOptions, append_columns, invalid, upper
from transforms._jsonpath import UnsupportedJsonPath, compile_path
from transforms._jsonpath_catalyst import unsupported_member

_JSON_SOURCE_TYPES = ("string", "binary")
_JSON_SOURCE_PREFIXES = ("array<", "map<", "struct<")
_GROUP = 4  # columns per group of selects (see JsonPath._stages)


class JsonPathColumn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    src_field: str = Field(min_length=1, description="Field holding the JSON (string, bytes, array, map or row).")
    dest_field: str = Field(min_length=1, description="Name of the new field.")
    path: str = Field(min_length=1, description='JSONPath expression, starting with "$".')
    dest_type: str = Field("string", description="Type of the new field (SeaTunnel type name), default string.")
    column_error_handle_way: Literal["FAIL", "SKIP", "SKIP_ROW"] | None = Field(
        None, description="On a bad value in this column: FAIL, SKIP (null) or SKIP_ROW; overrides row_error_handle_way."
    )
    _time: bool = PrivateAttr(False)  # dest_type "time": carried as a string, checked as HH:mm:ss[.fraction]

    _upper = field_validator("column_error_handle_way", mode="before")(lambda cls, v: upper(v))

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not v.startswith("$"):
            raise ValueError(f'path {v!r} must start with "$" (the document root), e.g. "$.data.id"')
        path = compile_path(v)  # syntax errors and refused features are config errors
        name = unsupported_member(path)
        if name is not None:
            raise UnsupportedJsonPath(
                f"path {v!r}: the member name {name!r} cannot be written in Spark's JSON path syntax "
                "(empty, a leading blank or '*', or both a quote and '.' or '[')"
            )
        return v

    @field_validator("dest_type", mode="before")
    @classmethod
    def _type(cls, v: Any) -> str:
        return spark_type(v)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_time(cls, data: Any, handler: Any) -> "JsonPathColumn":
        column = handler(data)
        raw = data.get("dest_type") if isinstance(data, dict) else None
        column._time = isinstance(raw, str) and raw.strip().lower() == "time"
        return column

    @property
    def time(self) -> bool:
        return self._time


class JsonPathOptions(MultiTableTransformOptions):
    columns: list[JsonPathColumn] = Field(description="Fields to extract: {src_field, path, dest_field, dest_type}.")
    row_error_handle_way: Literal["FAIL", "SKIP"] = Field(
        "FAIL", description="On a bad value: FAIL the job or SKIP the row."
    )

    _upper = field_validator("row_error_handle_way", mode="before")(lambda cls, v: upper(v))

    @model_validator(mode="after")
    def _check(self) -> "JsonPathOptions":
        if not self.columns:
            raise ValueError("columns is empty; add at least one {src_field, path, dest_field}")
        dests = [c.dest_field for c in self.columns]
        for d in dests:
            if dests.count(d) > 1:
                raise ValueError(f"two columns write dest_field {d!r}; dest fields must be unique")
        return self

    def disposition(self, column: JsonPathColumn) -> str:
        """What a bad value in ``column`` does: "null" (column SKIP), "drop" (the row) or "fail"."""
        if column.column_error_handle_way == "SKIP":
            return "null"
        if column.column_error_handle_way == "SKIP_ROW":
            return "drop"
        if column.column_error_handle_way == "FAIL" or self.row_error_handle_way == "FAIL":
            return "fail"
        return "drop"


@register
class JsonPath(Transform):
    name: ClassVar[str] = "JsonPath"
    seatunnel_page = "transform-v2/jsonpath.md"
    Options = JsonPathOptions
    description = "Extracts values from JSON fields into new fields with JSONPath."
    execution = "expression"
    chainable = True
    max_inputs = 1

    @classmethod
    def seatunnel_notes(cls) -> list[str]:
        from transforms._jsonpath import _FEATURE

        refused = ", ".join(sorted(_FEATURE.values())) + ", unions of members or indexes"
        return [
            "Paths: every `path` compiles to Spark expressions (`get_json_object`, VARIANT; a Catalyst segment, no "
            "Python pass). Definite paths (`$`, `.name`, `['name']`, `[n]`, `[-n]`; all of the page's examples) are "
            f"evaluated with Jayway's result. Refused at plan time, with the path named: {refused}; extract the "
            "enclosing object or array and process it downstream.",
            "",
        ]

    def reads_metadata(self) -> frozenset[str]:
        return frozenset()  # reads its source fields only; metadata passes through

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        assert isinstance(options, JsonPathOptions)
        by_name = {c.name: c for c in table.columns}
        for col in options.columns:
            src = by_name.get(col.src_field)
            if src is None:
                raise missing_column(table, col.src_field)
            if src.type not in _JSON_SOURCE_TYPES and not src.type.startswith(_JSON_SOURCE_PREFIXES):
                raise invalid(
                    f"JsonPath reads JSON from string, bytes, array, map or row fields; "
                    f"{src.name!r} of table {table.table_id!r} is {src.type}"
                )
        return append_columns(table, [Column(c.dest_field, c.dest_type) for c in options.columns])

    def apply(self, ctx, df, table, options):
        """A few selects, each computing its expressions once (Catalyst keeps a select apart when its
        expensive columns are read several times): the sources as JSON text; then per group of
        columns get_json_object, a full parse only where it found nothing, the texts and path
        errors, the values, their errors, and when a bad value can drop the row or fail the job, a
        generator that keeps the row (or raises), all in the same stage. The expressions are built
        once per table (a chain is applied every epoch)."""
        from pyspark import SparkContext

        from transforms._jsonpath_catalyst import register_permissive

        assert isinstance(options, JsonPathOptions)
        register_permissive(df.sparkSession)  # the micro-batch's session (a streaming query's clone), not ctx.spark
        sc = SparkContext._active_spark_context
        key = (id(sc._gateway) if sc is not None else 0, ctx.vertex_id, table, options.model_dump_json())
        cache = self.__dict__.setdefault("_stage_cache", {})
        stages = cache.get(key)
        if stages is None:
            if len(cache) > 256:
                cache.clear()
            stages = cache[key] = self._stages(ctx, table, options)
        for columns in stages:
            df = df.select(*columns)
        return df

    def _stages(self, ctx, table: TableSchema, options: JsonPathOptions) -> list[list[Any]]:
        """The selects ``apply`` runs, in order, each a list of column expressions."""
        from streaming_engine.runtime import rows
        from transforms._jsonpath_catalyst import source_json

        out = self.transform_table(table, options)
        types = {c.name: c.type for c in table.columns}
        dtypes = {f.name: f.dataType for f in rows.table_struct(out, meta=False).fields}
        names = [*rows.META, *table.names]  # the columns every select passes on, then its own
        taken = set(names)

        def free(base: str) -> str:
            name, n = base, 0
            while name in taken:
                n += 1
                name = f"{base}_{n}"
            taken.add(name)
            return name

        def ref(name: str) -> Any:
            return rows.column(name)

        stages: list[list[Any]] = []

        def select(new: list[tuple[str, Any]]) -> None:
            stages.append([*[ref(n) for n in names], *[c.alias(n) for n, c in new]])
            names.extend(n for n, _ in new)

        # 1. every source field as JSON text, once
        docs: dict[str, Any] = {}
        first = []
        for c in options.columns:
            if c.src_field in docs:
                continue
            if types[c.src_field] == "string":
                docs[c.src_field] = ref(c.src_field)
            else:
                name = free("__jsonpath_doc")
                first.append((name, source_json(ref(c.src_field), types[c.src_field])))
                docs[c.src_field] = ref(name)
        if first:
            select(first)
        # 2-7 per group of columns: each group ends in a generator when it has more than SKIP to do or
        # another group follows, and Spark generates a method of its own for what comes after a
        # generator; so the generated code stays under the JIT's limit however many columns there
        # are (HotSpot does not compile a method past 8000 bytes of bytecode: it runs interpreted).
        # A row a group drops or fails never reaches the next: the first bad column still decides.
        cols = [(c, compile_path(c.path)) for c in options.columns]
        groups = [cols[i : i + _GROUP] for i in range(0, len(cols), _GROUP)]
        values: list[tuple[JsonPathColumn, str]] = []
        for g, group in enumerate(groups):
            values += self._group(ctx, table, options, group, docs, dtypes, ref, free, select, last=g == len(groups) - 1)
        # a value is null when its column has an error (convert's contract): a column that SKIPs
        # needs no error at all
        outputs = [*[ref(n) for n in (*rows.META, *table.names)], *[ref(v).alias(c.dest_field) for c, v in values]]
        stages.append(outputs)
        return stages

    def _group(self, ctx, table, options, group, docs, dtypes, ref, free, select, last: bool):
        """The selects of one group of columns; returns (column, name of its value)."""
        from pyspark.sql import functions as F

        from transforms._jsonpath_catalyst import (
            Node, convert, extract, leaf_variant, needs_kind, permissive, probe, raw_text,
        )

        # 2. get_json_object per column; where it found nothing in a document that is not strict JSON,
        #    the document as SeaTunnel's Jayway (json-smart, permissive) reads it, and the path in that
        strict = [free("__jsonpath_raw") for _ in group]
        select([(r, raw_text(docs[c.src_field], p)) for (c, p), r in zip(group, strict)])
        fixes = [free("__jsonpath_permissive") for _ in group]
        select([(f, permissive(docs[c.src_field], ref(r))) for (c, p), r, f in zip(group, strict, fixes)])
        raws = [free("__jsonpath_raw") for _ in group]
        select([(r, F.when(ref(f).isNotNull(), raw_text(ref(f), p)).otherwise(ref(s)))
                for (c, p), s, f, r in zip(group, strict, fixes, raws)])
        group_docs = [F.coalesce(ref(f), docs[c.src_field]) for (c, p), f in zip(group, fixes)]
        # 3. where get_json_object found nothing (or "null"): what a full parse finds there; and the
        #    value's VARIANT where the conversion looks at the JSON type of every value
        third, founds, leaves = [], [], []
        for (c, p), raw, doc in zip(group, raws, group_docs):
            founds.append(free("__jsonpath_found"))
            third.append((founds[-1], probe(doc, ref(raw), p)))
            leaves.append(free("__jsonpath_leaf") if needs_kind(dtypes[c.dest_field]) else None)
            if leaves[-1]:
                third.append((leaves[-1], F.when(ref(raw).isNotNull(), leaf_variant(doc, p))))
        select(third)
        # 4. the text (null for a JSON null) and the path's error
        fourth, texts, path_errors = [], [], []
        for (c, p), raw, found, doc in zip(group, raws, founds, group_docs):
            extracted = extract(doc, ref(raw), ref(found), p)
            texts.append(free("__jsonpath_text"))
            path_errors.append(free("__jsonpath_path_error"))
            fourth += [(texts[-1], extracted.node.text), (path_errors[-1], extracted.error)]
        select(fourth)
        # 5. the values; 6. their errors (from the values computed before: no conversion twice)
        fifth, converted, values = [], [], []
        for (c, p), text, leaf, doc in zip(group, texts, leaves, group_docs):
            if leaf is None:  # the VARIANT, parsed only on the rows that need the JSON type
                node = Node(ref(text), leaf_variant(doc, p))
            else:
                node = Node(ref(text), ref(leaf), F.schema_of_variant(ref(leaf)))
            converted.append(convert(node, dtypes[c.dest_field], time=c.time))
            values.append(free("__jsonpath_value"))
            fifth.append((values[-1], converted[-1].value))
        select(fifth)
        checked = [
            (c, F.coalesce(ref(perr), conv.error_of(ref(v))))
            for (c, p), conv, perr, v in zip(group, converted, path_errors, values)
            if options.disposition(c) != "null"
        ]
        fate = None
        if checked:
            errors = [(c, free("__jsonpath_error")) for c, e in checked]
            select([(name, e) for (c, name), (_, e) in zip(errors, checked)])
            # 7. the row's fate: the first bad column (in order) that does not SKIP decides
            for c, e in errors:
                if options.disposition(c) == "fail":
                    message = self._message(ctx, table, c, ref(e), docs[c.src_field])
                    outcome = F.raise_error(message).cast("array<boolean>")
                else:
                    outcome = F.array().cast("array<boolean>")
                fate = F.when(ref(e).isNotNull(), outcome) if fate is None else fate.when(ref(e).isNotNull(), outcome)
            fate = fate.otherwise(F.array(F.lit(True)))  # type: ignore[union-attr]
        elif not last:
            fate = F.array(F.lit(True))
        if fate is not None:
            # explode: a row goes on once, or not at all (a generator: Catalyst computes what it reads
            # once, before it, where a filter would get the expressions copied into its condition)
            select([(free("__jsonpath_keep"), F.explode(fate))])
        return [(c, v) for (c, p), v in zip(group, values)]

    @staticmethod
    def _message(ctx, table: TableSchema, c: JsonPathColumn, error, doc):
        from pyspark.sql import functions as F

        from transforms._runtime import TERMINAL

        # on a line of its own, shaped "<Name>Failure: message", so the pipeline's error summary reports it
        head = (
            f"\nJsonPathFailure: {TERMINAL} {ctx.vertex_id} on table {table.table_id}: "
            f"column {c.dest_field!r} (path {c.path!r} of field {c.src_field!r}): "
        )
        value = F.when(F.length(doc) > 256, F.concat(doc.substr(1, 253), F.lit("..."))).otherwise(doc)
        return F.concat(F.lit(head), error, F.lit("; value: "), value)


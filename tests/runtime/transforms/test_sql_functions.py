"""SeaTunnel's SQL functions (docs/seatunnel/transform-v2/sql-functions.md) and the syntax of sql.md,
run through the Sql transform: ONE job selects every case below from a FakeSource with a row of
values and a row of NULLs, and each function section is a test reading its columns back.

Cases are the page's own examples (with the values the page gives or SeaTunnel computes) plus NULL
arguments, omitted optional arguments, format strings and edge cases. Each case names the
expected value on the row of values and on the row of NULLs, and optionally the plan-time type
(the Delta table's column type, which is the transform's output schema).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal

import pytest

from streaming_engine.job import compile_text
from streaming_engine.runtime.runner import execute

SAME = object()  # the NULL row gives the same value (the case reads no column)
D, TS = dt.date, dt.datetime

# (section, expression, value on the row of values, value on the row of NULLs, plan-time type or None)
CASES: list[tuple[str, str, object, object, str | None]] = [
    # -- String Functions --
    ("ASCII", "ASCII('Hi')", 72, SAME, "int"),
    ("ASCII", "ASCII(name)", 74, None, "int"),
    ("BIT_LENGTH", "BIT_LENGTH(name)", 64, None, "bigint"),
    ("BIT_LENGTH", "BIT_LENGTH(bin)", 16, None, "bigint"),
    ("CHAR_LENGTH / LENGTH", "CHAR_LENGTH(name)", 8, None, "bigint"),
    ("CHAR_LENGTH / LENGTH", "LENGTH('abc')", 3, SAME, "bigint"),
    ("OCTET_LENGTH", "OCTET_LENGTH(name)", 8, None, "bigint"),
    ("OCTET_LENGTH", "OCTET_LENGTH('é')", 2, SAME, "bigint"),
    ("CHAR / CHR", "CHAR(65)", "A", SAME, "string"),
    ("CHAR / CHR", "CHR(321)", "\u0141", SAME, "string"),  # Java's (char) 321, not 321 mod 256
    ("CHAR / CHR", "CHAR(i + 58)", "A", None, "string"),
    ("CONCAT", "CONCAT(name, '_')", "Joy Ding_", "_", "string"),  # NULLs are ignored
    ("CONCAT", "CONCAT(NULL, NULL)", "", SAME, "string"),
    ("CONCAT", "CONCAT(name, i, d)", "Joy Ding72.5", "", "string"),
    ("CONCAT", "CONCAT(bin, '!')", "Hi!", "!", "string"),
    ("CONCAT_WS", "CONCAT_WS(',', name, '_')", "Joy Ding,_", "_", "string"),
    ("CONCAT_WS", "CONCAT_WS(NULL, 'a', 'b')", "ab", SAME, "string"),
    ("CONCAT_WS", "CONCAT_WS(',', NULL)", "", SAME, "string"),
    ("HEXTORAW", "HEXTORAW('00480069')", "Hi", SAME, "string"),
    ("HEXTORAW", "HEXTORAW(CAST(NULL AS STRING))", None, SAME, "string"),
    ("RAWTOHEX", "RAWTOHEX('Hi')", "00480069", SAME, "string"),
    ("RAWTOHEX", "RAWTOHEX(bin)", "4869", None, "string"),
    ("INSERT", "INSERT(name, 1, 1, ' ')", " oy Ding", " ", "string"),  # a NULL original gives the added string
    ("INSERT", "INSERT('Hello', 6, 1, '!')", "Hello!", SAME, None),
    ("INSERT", "INSERT('Hello', 2, 10, 'i')", "Hi", SAME, None),
    ("INSERT", "INSERT('Hello', 7, 1, 'x')", "Hello", SAME, None),
    ("INSERT", "INSERT('Hello', 1, 1, NULL)", "Hello", SAME, None),
    ("LOWER / LCASE", "LOWER(name)", "joy ding", None, "string"),
    ("LOWER / LCASE", "LCASE('AB')", "ab", SAME, None),
    ("UPPER / UCASE", "UPPER(name)", "JOY DING", None, "string"),
    ("UPPER / UCASE", "UCASE('ab')", "AB", SAME, None),
    ("LEFT", "LEFT(name, 3)", "Joy", None, "string"),
    ("LEFT", "LEFT('ab', 5)", "ab", SAME, None),
    ("RIGHT", "RIGHT(name, 3)", "ing", None, "string"),
    ("LOCATE / INSTR / POSITION", "LOCATE('.', 'a.b.c')", 2, SAME, "int"),
    ("LOCATE / INSTR / POSITION", "LOCATE('o', name)", 2, 0, "int"),  # a NULL string gives 0
    ("LOCATE / INSTR / POSITION", "LOCATE('a', 'banana', 3)", 4, SAME, None),
    ("LOCATE / INSTR / POSITION", "LOCATE('a', 'banana', 0)", 2, SAME, None),
    ("LOCATE / INSTR / POSITION", "LOCATE('a', 'banana', -1)", 6, SAME, None),  # negative: the rightmost
    ("LOCATE / INSTR / POSITION", "LOCATE('x', 'banana')", 0, SAME, None),
    ("LOCATE / INSTR / POSITION", "INSTR('banana', 'a', -2)", 4, SAME, "int"),
    ("LOCATE / INSTR / POSITION", "INSTR(name, 'D')", 5, 0, None),
    ("LOCATE / INSTR / POSITION", "POSITION('n', 'banana')", 3, SAME, "int"),
    ("LOCATE / INSTR / POSITION", "POSITION('n' IN 'banana')", 3, SAME, None),
    ("LPAD", "LPAD(i, 4, '*')", "***7", None, "string"),
    ("LPAD", "LPAD('hello', 2)", "he", SAME, None),  # truncated at the end
    ("LPAD", "LPAD('ab', 4)", "  ab", SAME, None),  # spaces by default
    ("LPAD", "LPAD('ab', 5, 'xy')", "xxxab", SAME, None),  # the first character of the padding
    ("RPAD", "RPAD('TEXT', 10, '-')", "TEXT------", SAME, "string"),
    ("RPAD", "RPAD(name, 3)", "Joy", None, None),
    ("LTRIM", "LTRIM('  a ')", "a ", SAME, "string"),
    ("LTRIM", "LTRIM('xxa', 'xy')", "a", SAME, None),
    ("LTRIM", "LTRIM(name)", "Joy Ding", None, None),
    ("RTRIM", "RTRIM(' a  ')", " a", SAME, "string"),
    ("RTRIM", "RTRIM('a--', '-')", "a", SAME, None),
    ("TRIM", "TRIM('  a  ')", "a", SAME, "string"),
    ("TRIM", "TRIM('xax', 'x')", "a", SAME, None),
    ("TRIM", "TRIM(BOTH 'xy' FROM 'xyaxy')", "a", SAME, None),  # the standard form: Spark's
    ("REGEXP_REPLACE", "REGEXP_REPLACE('Hello    World', ' +', ' ')", "Hello World", SAME, "string"),
    ("REGEXP_REPLACE", "REGEXP_REPLACE('Hello WWWWorld', 'w+', 'W', 'i')", "Hello World", SAME, None),
    ("REGEXP_REPLACE", "REGEXP_REPLACE(name, 'D\\w+', 'X')", "Joy X", None, None),  # a backslash is a backslash
    ("REGEXP_REPLACE", "REGEXP_REPLACE('abc', 'B', 'x', 'ic')", "abc", SAME, None),  # later flags win
    ("REGEXP_LIKE", "REGEXP_LIKE('Hello    World', '[A-Z ]*', 'i')", True, SAME, "boolean"),
    ("REGEXP_LIKE", "REGEXP_LIKE(name, '^joy', 'i')", True, None, None),
    ("REGEXP_LIKE", "REGEXP_LIKE(name, '^joy')", False, None, None),
    ("REGEXP_LIKE", "REGEXP_LIKE('a\nb', 'a.b', 'n')", True, SAME, None),
    ("REGEXP_SUBSTR", "REGEXP_SUBSTR('2020-10-01', '\\d{4}')", "2020", SAME, "string"),
    ("REGEXP_SUBSTR", "REGEXP_SUBSTR('2020-10-01', '(\\d{4})-(\\d{2})-(\\d{2})', 1, 1, NULL, 2)", "10", SAME, None),
    ("REGEXP_SUBSTR", "REGEXP_SUBSTR('a1b2c3', '\\d', 1, 2, NULL, 0)", "2", SAME, None),
    ("REGEXP_SUBSTR", "REGEXP_SUBSTR('a1b2c3', '\\d', 4, 1, NULL, NULL)", "2", SAME, None),
    ("REGEXP_SUBSTR", "REGEXP_SUBSTR('abc', '\\d')", None, SAME, None),
    ("REGEXP_SUBSTR", "REGEXP_SUBSTR(name, 'd', 1, 1, 'i', 0)", "D", None, None),
    ("REPEAT", "REPEAT(name || ' ', 2)", "Joy Ding Joy Ding ", None, "string"),
    ("REPEAT", "REPEAT('ab', 0)", "", SAME, None),
    ("REPLACE", "REPLACE(name, ' ')", "JoyDing", None, "string"),
    ("REPLACE", "REPLACE('abc', 'b', 'x')", "axc", SAME, None),
    ("REPLACE", "REPLACE('abc', 'b', NULL)", None, SAME, None),
    ("SOUNDEX", "SOUNDEX('Robert')", "R163", SAME, "string"),
    ("SOUNDEX", "SOUNDEX(name)", "J352", None, None),
    ("SOUNDEX", "SOUNDEX('1Rob-ert')", "R163", SAME, None),
    ("SOUNDEX", "SOUNDEX('')", "0000", SAME, None),
    ("SPACE", "SPACE(3)", "   ", SAME, "string"),
    ("SPACE", "SPACE(i)", " " * 7, None, None),
    ("SPACE", "SPACE(-1)", "", SAME, None),
    ("SUBSTRING / SUBSTR", "SUBSTRING('[Hello]', 2)", "Hello]", SAME, "string"),
    ("SUBSTRING / SUBSTR", "SUBSTRING('hour', 3, 2)", "ur", SAME, None),
    ("SUBSTRING / SUBSTR", "SUBSTR(name, -4)", "Ding", None, None),
    ("SUBSTRING / SUBSTR", "SUBSTRING('abc', 5)", None, SAME, None),  # empty: NULL (H2)
    ("SUBSTRING / SUBSTR", "SUBSTRING('abc', 0, 2)", "ab", SAME, None),
    ("SUBSTRING / SUBSTR", "SUBSTRING('abc' FROM 2 FOR 1)", "b", SAME, None),
    ("SUBSTRING / SUBSTR", "SUBSTRING('hour', 2, CAST(NULL AS INT))", "our", SAME, None),  # a NULL length: none
    ("TO_CHAR", "TO_CHAR(ts, 'yyyy-MM-dd HH:mm:ss')", "2021-04-08 13:34:45", None, "string"),
    ("TO_CHAR", "TO_CHAR(dt, 'uuuu/MM/dd')", "2021/04/08", None, None),
    ("TO_CHAR", "TO_CHAR(b)", "true", None, None),  # the page's CASE WHEN example
    ("TO_CHAR", "TO_CHAR(i)", "7", None, None),
    ("TO_CHAR", "TO_CHAR(d)", "2.5", None, None),
    ("TO_CHAR", "TO_CHAR(dec, '9,999.99')", "   12.35", None, None),
    ("TO_CHAR", "TO_CHAR('x', 'yyyy')", "x", SAME, None),
    ("TRANSLATE", "TRANSLATE('Hello world', 'eo', 'EO')", "HEllO wOrld", SAME, "string"),
    ("TRANSLATE", "TRANSLATE(name, 'J', 'j')", "joy Ding", None, None),
    # -- Numeric Functions --
    ("ABS", "ABS(-7)", 7, SAME, "int"),
    ("ABS", "ABS(d - 5)", 2.5, None, "double"),
    ("ABS", "ABS(dec - 20)", Decimal("7.65"), None, None),
    ("ACOS", "ACOS(1)", 0.0, SAME, "double"),
    ("ASIN", "ASIN(0)", 0.0, SAME, "double"),
    ("ATAN", "ATAN(1)", math.atan(1), SAME, "double"),
    ("COS", "COS(0)", 1.0, SAME, "double"),
    ("COS", "COS(d)", math.cos(2.5), None, None),
    ("COSH", "COSH(0)", 1.0, SAME, "double"),
    ("COT", "COT(1)", 1 / math.tan(1), SAME, "double"),
    ("SIN", "SIN(0)", 0.0, SAME, "double"),
    ("SINH", "SINH(1)", math.sinh(1), SAME, "double"),
    ("TAN", "TAN(1)", math.tan(1), SAME, "double"),
    ("TANH", "TANH(1)", math.tanh(1), SAME, "double"),
    ("MOD", "MOD(7, 2)", 1, SAME, "int"),
    ("MOD", "MOD(-7, 2)", -1, SAME, None),  # the dividend's sign
    ("MOD", "MOD(7.5, 2)", 1, SAME, "int"),  # the divisor's type
    ("MOD", "MOD(i, 2.0D)", 1.0, None, "double"),
    ("CEIL / CEILING", "CEIL(d)", 3.0, None, "double"),  # the argument's type
    ("CEIL / CEILING", "CEILING(-2.5D)", -2.0, SAME, "double"),
    ("CEIL / CEILING", "CEIL(i)", 7, None, "int"),
    ("CEIL / CEILING", "CEIL(dec)", Decimal("13"), None, "decimal(9,0)"),
    ("EXP", "EXP(0)", 1.0, SAME, "double"),
    ("FLOOR", "FLOOR(d)", 2.0, None, "double"),
    ("FLOOR", "FLOOR(-2.5D)", -3.0, SAME, None),
    ("FLOOR", "FLOOR(dec)", Decimal("12"), None, "decimal(9,0)"),
    ("LN", "LN(1)", 0.0, SAME, "double"),
    ("LN", "LN(d)", math.log(2.5), None, None),
    ("LOG", "LOG(2, 8)", 3.0, SAME, "double"),
    ("LOG", "LOG(10, 1000)", 3.0, SAME, None),
    ("LOG", "LOG(1)", 0.0, SAME, None),  # one argument: natural logarithm
    ("LOG", "LOG(2, d)", math.log(2.5, 2), None, None),
    ("LOG10", "LOG10(1000)", 3.0, SAME, "double"),
    ("RADIANS", "RADIANS(180)", math.pi, SAME, "double"),
    ("SQRT", "SQRT(16)", 4.0, SAME, "double"),
    ("SQRT", "SQRT(d * 10)", 5.0, None, None),
    ("PI", "PI()", math.pi, SAME, "double"),
    ("POWER", "POWER(2, 10)", 1024.0, SAME, "double"),
    ("POWER", "POWER(i, 2)", 49.0, None, None),
    ("RAND / RANDOM", "RAND(1)", 0.7308781907032909, SAME, "double"),  # java.util.Random(1).nextDouble()
    ("RAND / RANDOM", "RANDOM(42)", 0.7275636800328681, SAME, "double"),
    ("RAND / RANDOM", "CASE WHEN id = 1 THEN RAND(i - 12) END", 0.26930095796932485, None, None),  # seed -5
    ("RAND / RANDOM", "RAND(NULL) BETWEEN 0 AND 1", True, SAME, None),  # a NULL seed: unseeded
    ("RAND / RANDOM", "RAND() >= 0 AND RAND() < 1", True, SAME, "boolean"),
    ("ROUND", "ROUND(d)", 3.0, None, "double"),  # HALF_UP
    ("ROUND", "ROUND(-2.5D)", -3.0, SAME, None),
    ("ROUND", "ROUND(1.005D, 2)", 1.01, SAME, None),
    ("ROUND", "ROUND(dec, 1)", Decimal("12.4"), None, "decimal(10,1)"),
    ("ROUND", "ROUND(i, -1)", 10, None, "int"),
    ("SIGN", "SIGN(-2.5D)", -1, SAME, "int"),
    ("SIGN", "SIGN(0)", 0, SAME, None),
    ("SIGN", "SIGN(d)", 1, 0, None),  # NULL gives 0, as SeaTunnel
    ("SIGN", "SIGN(CAST('NaN' AS DOUBLE))", 0, SAME, None),
    ("TRUNC", "TRUNC(d)", 2.0, None, "double"),
    ("TRUNC", "TRUNCATE(-2.57D, 1)", -2.5, SAME, "double"),
    ("TRUNC", "TRUNC(dec, 1)", Decimal("12.30"), None, "decimal(10,2)"),
    ("TRUNC", "TRUNC(i)", 7, None, "int"),
    ("TRUNC", "TRUNC(1234, -2)", 1200, SAME, "int"),
    # -- Time and Date Functions --
    ("CURRENT_DATE", "CURRENT_DATE >= DATE '2024-01-01'", True, SAME, "boolean"),
    ("CURRENT_DATE", "CURRENT_DATE() = CURRENT_DATE", True, SAME, None),
    ("CURRENT_TIME", "CURRENT_TIME RLIKE '^[0-2][0-9]:[0-5][0-9]:[0-5][0-9]'", True, SAME, None),
    ("CURRENT_TIME", "LENGTH(CURRENT_TIME()) >= 8", True, SAME, None),
    ("CURRENT_TIMESTAMP / NOW", "NOW() >= TIMESTAMP '2024-01-01 00:00:00'", True, SAME, None),
    ("CURRENT_TIMESTAMP / NOW", "CAST(CURRENT_TIMESTAMP AS DATE) = CURRENT_DATE", True, SAME, None),
    ("CURRENT_TIMESTAMP / NOW", "CURRENT_TIMESTAMP() IS NOT NULL", True, SAME, None),
    ("DATEADD / TIMESTAMPADD", "DATEADD(dt, 1, 'MONTH')", D(2021, 5, 8), None, "date"),
    ("DATEADD / TIMESTAMPADD", "DATEADD(DATE '2021-01-31', 1, 'MONTH')", D(2021, 2, 28), SAME, "date"),
    ("DATEADD / TIMESTAMPADD", "DATEADD(ts, -2, 'HOUR')", TS(2021, 4, 8, 11, 34, 45, 123000), None, "timestamp"),
    ("DATEADD / TIMESTAMPADD", "DATEADD(dt, 3, 'HOUR')", TS(2021, 4, 8, 3), None, "timestamp"),  # a date + hours
    ("DATEADD / TIMESTAMPADD", "TIMESTAMPADD(ts, 1, 'WEEK')", TS(2021, 4, 15, 13, 34, 45, 123000), None, "timestamp"),
    ("DATEADD / TIMESTAMPADD", "DATEADD(dt, 2)", D(2021, 4, 10), None, "date"),  # DAY by default
    ("DATEADD / TIMESTAMPADD", "DATEADD(ts, 877, 'MILLISECOND')", TS(2021, 4, 8, 13, 34, 46), None, None),
    ("DATEADD / TIMESTAMPADD", "TIMESTAMPADD(DAY, 1, ts)", TS(2021, 4, 9, 13, 34, 45, 123000), None, "timestamp"),
    ("DATEDIFF", "DATEDIFF(DATE '2020-12-31', DATE '2021-01-01', 'YEAR')", 1, SAME, "bigint"),  # boundaries crossed
    ("DATEDIFF", "DATEDIFF(dt, DATE '2021-06-01', 'MONTH')", 2, None, "bigint"),
    ("DATEDIFF", "DATEDIFF(ts, TIMESTAMP '2021-04-08 15:00:00', 'HOUR')", 2, None, None),
    ("DATEDIFF", "DATEDIFF(DATE '2021-04-04', DATE '2021-04-05', 'WEEK')", 1, SAME, None),
    ("DATEDIFF", "DATEDIFF(dt, DATE '2021-04-10')", 2, None, None),  # DAY by default
    ("DATEDIFF", "DATEDIFF(ts, TIMESTAMP '2021-04-08 13:34:44', 'SECOND')", -1, None, None),
    ("DATE_TRUNC", "DATE_TRUNC(ts, 'DAY')", TS(2021, 4, 8), None, "timestamp"),
    ("DATE_TRUNC", "DATE_TRUNC(ts, 'MONTH')", TS(2021, 4, 1), None, None),
    ("DATE_TRUNC", "DATE_TRUNC(dt, 'YEAR')", TS(2021, 1, 1), None, None),
    ("DATE_TRUNC", "DATE_TRUNC('HOUR', ts)", TS(2021, 4, 8, 13), None, None),  # Spark's argument order
    ("DAYNAME", "DAYNAME(dt)", "Thursday", None, "string"),
    ("DAY_OF_MONTH", "DAY_OF_MONTH(ts)", 8, None, "int"),
    ("DAY_OF_WEEK", "DAY_OF_WEEK(dt)", 4, None, "int"),  # Monday = 1
    ("DAY_OF_WEEK", "DAY_OF_WEEK(DATE '2021-04-11')", 7, SAME, None),
    ("DAY_OF_YEAR", "DAY_OF_YEAR(dt)", 98, None, "int"),
    ("EXTRACT", "EXTRACT(SECOND FROM ts)", 45, None, "int"),
    ("EXTRACT", "EXTRACT(YEAR FROM dt)", 2021, None, "int"),
    ("EXTRACT", "EXTRACT(MILLISECOND FROM ts)", 123, None, "int"),
    ("EXTRACT", "EXTRACT(DAYOFWEEK FROM dt)", 4, None, "int"),
    ("EXTRACT", "EXTRACT(EPOCH FROM TIMESTAMP '1970-01-02 00:00:00.5')", Decimal("86400.500000"), SAME, "decimal(18,6)"),
    ("FORMATDATETIME", "FORMATDATETIME(ts, 'yyyy-MM-dd HH:mm:ss')", "2021-04-08 13:34:45", None, "string"),
    ("FORMATDATETIME", "FORMATDATETIME(ts, 'EEE, d MMM yyyy')", "Thu, 8 Apr 2021", None, None),
    ("HOUR", "HOUR(ts)", 13, None, "int"),
    ("MINUTE", "MINUTE(ts)", 34, None, "int"),
    ("MONTH", "MONTH(dt)", 4, None, "int"),
    ("MONTHNAME", "MONTHNAME(dt)", "April", None, "string"),
    ("IS_DATE", "IS_DATE('2021-04-08 13:34:45', 'yyyy-MM-dd HH:mm:ss')", True, SAME, "boolean"),
    ("IS_DATE", "IS_DATE('2021-02-30', 'yyyy-MM-dd')", False, SAME, None),
    ("IS_DATE", "IS_DATE('2021-4-8', 'yyyy-MM-dd')", False, SAME, None),
    ("IS_DATE", "IS_DATE(name, 'yyyy-MM-dd')", False, True, None),  # NULL parses to NULL: true, as SeaTunnel
    ("PARSEDATETIME / TO_DATE", "PARSEDATETIME('2021-04-08 13:34:45', 'yyyy-MM-dd HH:mm:ss')",
     TS(2021, 4, 8, 13, 34, 45), SAME, "timestamp"),
    ("PARSEDATETIME / TO_DATE", "TO_DATE(CASE WHEN id = 1 THEN '2021-04-08' END, 'yyyy-MM-dd')", D(2021, 4, 8), None,
     "date"),
    ("PARSEDATETIME / TO_DATE", "PARSEDATETIME('13:34', 'HH:mm')", "13:34:00", SAME, "string"),  # a time
    ("QUARTER", "QUARTER(dt)", 2, None, "int"),
    ("SECOND", "SECOND(ts)", 45, None, "int"),
    ("WEEK", "WEEK(dt)", 15, None, "int"),  # ISO week-of-year 14, + 1 as SeaTunnel
    ("WEEK", "WEEK(DATE '2021-01-01')", 1, SAME, None),
    ("YEAR", "YEAR(ts)", 2021, None, "int"),
    ("FROM_UNIXTIME", "FROM_UNIXTIME(1672502400, 'yyyy-MM-dd HH:mm:ss')", "2022-12-31 16:00:00", SAME, "string"),
    ("FROM_UNIXTIME", "FROM_UNIXTIME(1672502400, 'yyyy-MM-dd HH:mm:ss', 'UTC+6')", "2022-12-31 22:00:00", SAME, None),
    ("FROM_UNIXTIME", "FROM_UNIXTIME(1672502400, 'yyyy-MM-dd HH:mm:ss', 'UTC+8')", "2023-01-01 00:00:00", SAME, None),
    ("FROM_UNIXTIME", "FROM_UNIXTIME(l, 'yyyy')", "2286", None, None),
    # -- System Functions --
    ("CAST", "CAST(i AS STRING)", "7", None, "string"),
    ("CAST", "CAST(i AS VARCHAR)", "7", None, "string"),
    ("CAST", "CAST('12' AS INTEGER)", 12, SAME, "int"),
    ("CAST", "CAST(i AS LONG)", 7, None, "bigint"),
    ("CAST", "CAST(i AS BYTE)", 7, None, "tinyint"),
    ("CAST", "CAST('1.5' AS DOUBLE)", 1.5, SAME, "double"),
    ("CAST", "CAST('1.5' AS FLOAT)", 1.5, SAME, "float"),
    ("CAST", "CAST(dec AS DECIMAL(5,1))", Decimal("12.4"), None, "decimal(5,1)"),
    ("CAST", "CAST(ts AS DATE)", D(2021, 4, 8), None, "date"),
    ("CAST", "CAST(dt AS TIMESTAMP)", TS(2021, 4, 8), None, "timestamp"),
    ("CAST", "CAST(1617888885123 AS TIMESTAMP)", TS(2021, 4, 8, 13, 34, 45, 123000), SAME, "timestamp"),  # millis
    ("CAST", "CAST(20210408 AS DATE)", D(2021, 4, 8), SAME, "date"),  # yyyymmdd
    ("CAST", "CAST(ts AS TIME)", "13:34:45", None, "string"),
    ("CAST", "CAST('Hi' AS BYTES)", b"Hi", SAME, "binary"),
    ("CAST", "CONVERT('42' AS INT)", 42, SAME, "int"),  # the page's example form
    ("CAST", "i::bigint", 7, None, "bigint"),
    ("COALESCE", "COALESCE(name, 'x')", "Joy Ding", "x", "string"),
    ("COALESCE", "COALESCE(NULL, i, 0)", 7, 0, "int"),
    ("IFNULL", "IFNULL(name, 'none')", "Joy Ding", "none", "string"),
    ("NULLIF", "NULLIF(i, 7)", None, None, "int"),
    ("NULLIF", "NULLIF(i, 8)", 7, None, "int"),
    ("CASE WHEN", "case when name in ('Joy Ding') then 1 else 0 end", 1, 0, "int"),
    ("CASE WHEN", "case when name not in ('Joy Ding') then 1 else 0 end", 0, 0, None),
    ("CASE WHEN", "case when i = 7 and TO_CHAR(b) = 'true' then 1 else 0 end", 1, 0, None),
    ("CASE WHEN", "case when i != 7 or TO_CHAR(b) = 'true' then 1 else 0 end", 1, 0, None),
    ("CASE WHEN", "case when i > 1 and l > 1 and f > 1 and d > 1 and dec > 1 then 1 else 0 end", 1, 0, None),
    ("CASE WHEN", "case when i <> 7 then 1 else 0 end", 0, 0, None),
    ("CASE WHEN", "case i when 7 then 'seven' else 'other' end", "seven", "other", "string"),
    ("CASE WHEN", "case when i > 1 then 1 else 2.5D end", 1.0, 2.5, "double"),
    ("UUID", "LENGTH(UUID())", 36, SAME, "bigint"),
    ("UUID", "UUID() RLIKE '^[0-9a-f-]{36}$'", True, SAME, "boolean"),
    # -- sql.md: expressions, operators and struct access --
    ("sql.md syntax", "name LIKE 'Joy%'", True, None, "boolean"),
    ("sql.md syntax", "name NOT LIKE '%x'", True, None, None),
    ("sql.md syntax", "i IN (1, 7)", True, None, None),
    ("sql.md syntax", "i BETWEEN 5 AND 10", True, None, None),
    ("sql.md syntax", "name IS NULL", False, True, None),
    ("sql.md syntax", "name IS NOT NULL", True, False, None),
    ("sql.md syntax", "i + 1", 8, None, "int"),
    ("sql.md syntax", "i / 2", 3, None, "int"),  # int / int is an int, as SeaTunnel
    ("sql.md syntax", "d / 2", 1.25, None, "double"),
    ("sql.md syntax", "l * 2", 20000000000, None, "bigint"),
    ("sql.md syntax", "i % 4", 3, None, "int"),
    ("sql.md syntax", "-i", -7, None, "int"),
    ("sql.md syntax", "f * 2", 3.0, None, "double"),
    ("sql.md syntax", "i * 1.5", Decimal("10.5"), None, "decimal(13,1)"),
    ("sql.md syntax", "name || '!'", "Joy Ding!", None, "string"),  # || is NULL when a part is (unlike CONCAT)
    ("sql.md syntax", "r.inner.x", 5, None, "int"),
    ("sql.md syntax", "r.m.k", "v", None, "string"),
    ("sql.md syntax", "fake.i", 7, None, "int"),
]

FIELDS = {
    "id": "int", "name": "string", "i": "int", "l": "bigint", "d": "double", "f": "float", "dec": "decimal(10,2)",
    "dt": "date", "ts": "timestamp", "b": "boolean", "bin": "bytes",
    "r": {"inner": {"x": "int"}, "m": "map<string, string>"},
}  # fmt: skip
VALUES = [1, "Joy Ding", 7, 10000000000, 2.5, 1.5, "12.35", "2021-04-08", "2021-04-08 13:34:45.123", True, "SGk=",
          [[5], {"k": "v"}]]  # fmt: skip
NULLS = [2, *([None] * (len(VALUES) - 1))]


def _job(work: str, query: str, name: str) -> str:
    return json.dumps({
        "env": {"job.name": name, "checkpoint.dir": f"{work}/checkpoints", "job.retry.times": 0},
        "source": [{"plugin_name": "FakeSource", "plugin_output": "fake", "schema": {"fields": FIELDS},
                    "rows": [{"kind": "INSERT", "fields": VALUES}, {"kind": "INSERT", "fields": NULLS}]}],
        "transform": [{"plugin_name": "Sql", "plugin_input": "fake", "plugin_output": "out", "query": query}],
        "sink": [{"plugin_name": "Delta", "plugin_input": "out", "path": f"{work}/out"}],
    })  # fmt: skip


QUERY = "select id, " + ", ".join(f"{expr} as c{n}" for n, (_, expr, *_rest) in enumerate(CASES)) + " from fake where id > 0"


@pytest.fixture(scope="module")
def results(spark, tmp_path_factory):
    work = tmp_path_factory.mktemp("sql_functions")
    job = compile_text(_job(str(work), QUERY, "sql_functions"), fmt="json")
    result = execute(job, spark=spark)
    assert result.status == "FINISHED", result.error
    df = spark.read.format("delta").load(str(work / "out"))
    rows = [r.asDict() for r in df.orderBy("id").collect()]
    return {f.name: f.dataType.simpleString() for f in df.schema.fields}, rows


SECTIONS = list(dict.fromkeys(section for section, *_ in CASES))


def _same(actual: object, expected: object) -> bool:
    if isinstance(expected, float) and isinstance(actual, float):
        return actual == pytest.approx(expected, rel=1e-12, abs=1e-12)
    if isinstance(expected, bytes) and isinstance(actual, (bytes, bytearray)):
        return bytes(actual) == expected
    return type(actual) is type(expected) and actual == expected or (actual is None and expected is None)


@pytest.mark.parametrize("section", SECTIONS)
def test_function_section(section, results):
    types, (values, nulls) = results
    wrong = []
    for n, (sec, expr, on_values, on_nulls, type_) in enumerate(CASES):
        if sec != section:
            continue
        col = f"c{n}"
        expected_nulls = on_values if on_nulls is SAME else on_nulls
        if not _same(values[col], on_values):
            wrong.append(f"{expr}: {values[col]!r}, expected {on_values!r}")
        if not _same(nulls[col], expected_nulls):
            wrong.append(f"{expr} on the NULL row: {nulls[col]!r}, expected {expected_nulls!r}")
        if type_ is not None and types[col] != type_:
            wrong.append(f"{expr}: type {types[col]}, expected {type_}")
    assert not wrong, "\n".join(wrong)


def test_every_section_of_the_page_has_cases():
    from transforms._sql_functions import FUNCTIONS

    assert {f.section for f in FUNCTIONS.values()} <= set(SECTIONS)


def test_week_is_java_times_iso_week_of_year_plus_one(spark):
    """WEEK's Spark arithmetic against java.time itself (SeaTunnel: date.get(WeekFields.ISO.weekOfYear()) + 1)."""
    from streaming_engine.schema import Column, TableSchema
    from transforms._sql_compile import compile_query, parse_query

    (item,) = compile_query(parse_query("select WEEK(d) as w from t"), TableSchema("t", (Column("d", "date"),))).items
    start = dt.date(2019, 12, 1)
    got = spark.sql(f"SELECT d, {item} FROM (SELECT date_add(DATE '{start}', CAST(id AS INT)) AS d FROM range(0, 800, 3))")
    jvm = spark._jvm
    week_of_year = jvm.java.time.temporal.WeekFields.ISO.weekOfYear()
    wrong = [(r.d, r.w) for r in got.collect() if r.w != jvm.java.time.LocalDate.of(r.d.year, r.d.month, r.d.day).get(week_of_year) + 1]
    assert not wrong


def test_run_time_errors_name_the_function(spark, tmp_path):
    job = compile_text(_job(str(tmp_path), "select HEXTORAW('abc') as h from fake", "sql_error"), fmt="json")
    result = execute(job, spark=spark)
    assert result.status == "FAILED"
    assert "HEXTORAW(): the length of the hex string must be a multiple of 4: abc" in result.error


def test_spark_function_names_are_the_running_sessions(spark):
    from transforms._sql_spark import GENERATORS, PER_GROUP, SCALAR

    functions = spark._jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.builtin().listFunction().iterator()
    names = set()
    while functions.hasNext():
        name = functions.next().funcName()
        if name.replace("_", "a").isalnum():
            names.add(name)
    assert SCALAR | PER_GROUP | GENERATORS == names
